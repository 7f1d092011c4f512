#include "store/memory_store.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include "common/posix_io.h"

namespace cairn::store {

namespace {

std::string BlobName(BlobKind kind, const xet::Hash& hash) {
  return std::string(BlobKindName(kind)) + " " + hash.hex();
}

}  // namespace

class MemoryStore::Writer final : public BlobWriter {
 public:
  Writer(MemoryStore* store, BlobKind kind, const xet::Hash& hash)
      : store_(store), kind_(kind), hash_(hash) {}

  Status Append(std::span<const uint8_t> data) override {
    if (done_) return IoError("append after commit");
    bytes_.insert(bytes_.end(), data.begin(), data.end());
    return Ok{};
  }

  Result<PutOutcome> Commit(const PutOptions& options) override {
    if (done_) return IoError("commit called twice");
    done_ = true;
    return store_->Commit(kind_, hash_, std::move(bytes_), options);
  }

  uint64_t bytes_appended() const override { return bytes_.size(); }

 private:
  MemoryStore* store_;
  BlobKind kind_;
  xet::Hash hash_;
  std::vector<uint8_t> bytes_;
  bool done_ = false;
};

Result<std::unique_ptr<BlobWriter>> MemoryStore::BeginPut(BlobKind kind, const xet::Hash& hash) {
  return std::unique_ptr<BlobWriter>(std::make_unique<Writer>(this, kind, hash));
}

Result<PutOutcome> MemoryStore::Commit(BlobKind kind, const xet::Hash& hash, std::vector<uint8_t> bytes,
                                       const PutOptions& options) {
  auto fresh = std::make_shared<const std::vector<uint8_t>>(std::move(bytes));
  // Verify outside the lock (it may be slow); a racing put of the same hash stores equal bytes anyway.
  if (Bytes existing = Find(kind, hash)) {
    bool intact = existing->size() == fresh->size();
    if (intact) intact = options.verify_existing ? options.verify_existing(*existing) : *existing == *fresh;
    if (intact) return PutOutcome{.already_present = true};
    std::lock_guard lock(mu_);
    blobs_[{kind, hash}] = std::move(fresh);
    return PutOutcome{.replaced_corrupt = true};
  }
  std::lock_guard lock(mu_);
  blobs_[{kind, hash}] = std::move(fresh);
  return PutOutcome{};
}

MemoryStore::Bytes MemoryStore::Find(BlobKind kind, const xet::Hash& hash) {
  std::lock_guard lock(mu_);
  auto it = blobs_.find({kind, hash});
  return it == blobs_.end() ? nullptr : it->second;
}

Result<BlobStat> MemoryStore::Stat(BlobKind kind, const xet::Hash& hash) {
  Bytes b = Find(kind, hash);
  if (!b) return BlobStat{};
  return BlobStat{.exists = true, .size = b->size()};
}

Status MemoryStore::ReadRange(BlobKind kind, const xet::Hash& hash, uint64_t offset, std::span<uint8_t> out) {
  Bytes b = Find(kind, hash);
  if (!b) return NotFound("no " + BlobName(kind, hash));
  if (offset > b->size() || out.size() > b->size() - offset) {
    return Inconsistent("range [" + std::to_string(offset) + ", +" + std::to_string(out.size()) +
                        ") is outside " + BlobName(kind, hash) + " of " + std::to_string(b->size()) +
                        " bytes");
  }
  std::copy_n(b->begin() + static_cast<std::ptrdiff_t>(offset), out.size(), out.begin());
  return Ok{};
}

Result<OpenBlob> MemoryStore::OpenForRead(BlobKind kind, const xet::Hash& hash) {
  Bytes b = Find(kind, hash);
  if (!b) return NotFound("no " + BlobName(kind, hash));
  UniqueFd fd(::memfd_create("cairn-blob", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!fd.valid()) return IoError(std::string("memfd_create: ") + ErrnoText(errno));
  if (const int err = WriteFull(fd.get(), *b); err != 0)
    return IoError(std::string("memfd write: ") + ErrnoText(err));
  // Sealed so the caller sees what a read-only file gives: the bytes cannot change under it.
  if (::fcntl(fd.get(), F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL) != 0) {
    return IoError(std::string("memfd seal: ") + ErrnoText(errno));
  }
  return OpenBlob{.fd = std::move(fd), .size = b->size()};
}

Status MemoryStore::List(BlobKind kind, const std::function<void(const xet::Hash&)>& fn) {
  std::vector<xet::Hash> hashes;
  {
    std::lock_guard lock(mu_);
    for (const auto& [key, bytes] : blobs_) {
      if (key.first == kind) hashes.push_back(key.second);
    }
  }
  for (const auto& h : hashes) fn(h);  // outside the lock: fn may call back into the store
  return Ok{};
}

Result<bool> MemoryStore::Delete(BlobKind kind, const xet::Hash& hash) {
  std::lock_guard lock(mu_);
  return blobs_.erase({kind, hash}) > 0;
}

void MemoryStore::OverwriteForTest(BlobKind kind, const xet::Hash& hash, std::vector<uint8_t> bytes) {
  std::lock_guard lock(mu_);
  blobs_[{kind, hash}] = std::make_shared<const std::vector<uint8_t>>(std::move(bytes));
}

}  // namespace cairn::store
