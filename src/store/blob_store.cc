#include "store/blob_store.h"

namespace cairn::store {

std::string_view BlobKindName(BlobKind kind) {
  switch (kind) {
    case BlobKind::kXorb:
      return "xorb";
    case BlobKind::kShard:
      return "shard";
    case BlobKind::kGrant:
      return "grant";
    case BlobKind::kRevocation:
      return "revocation";
  }
  return "blob";
}

std::string_view BlobKindFolder(BlobKind kind) {
  switch (kind) {
    case BlobKind::kXorb:
      return "xorbs";
    case BlobKind::kShard:
      return "shards";
    case BlobKind::kGrant:
      return "grants";
    case BlobKind::kRevocation:
      return "revocations";
  }
  return "blobs";
}

Result<PutOutcome> BlobStore::Put(BlobKind kind, const xet::Hash& hash,
                                  std::span<const std::span<const uint8_t>> pieces,
                                  const PutOptions& options) {
  auto writer = BeginPut(kind, hash);
  if (!writer.ok()) return writer.error();
  for (const auto& piece : pieces) {
    if (auto st = (*writer)->AppendStable(piece); !st.ok()) return st.error();  // alive until we return
  }
  return (*writer)->Commit(options);
}

Result<PutOutcome> BlobStore::Put(BlobKind kind, const xet::Hash& hash, std::span<const uint8_t> bytes,
                                  const PutOptions& options) {
  const std::span<const uint8_t> pieces[] = {bytes};
  return Put(kind, hash, pieces, options);
}

Result<std::vector<uint8_t>> BlobStore::ReadWhole(BlobKind kind, const xet::Hash& hash) {
  auto stat = Stat(kind, hash);
  if (!stat.ok()) return stat.error();
  if (!stat->exists) return NotFound("no " + std::string(BlobKindName(kind)) + " " + hash.hex());
  std::vector<uint8_t> bytes(stat->size);
  if (auto st = ReadRange(kind, hash, 0, bytes); !st.ok()) return st.error();
  return bytes;
}

namespace {

class RangeReader final : public BlobReader {
 public:
  RangeReader(BlobStore& store, BlobKind kind, const xet::Hash& hash, uint64_t offset, uint64_t length)
      : store_(store), kind_(kind), hash_(hash), next_(offset), left_(length) {}
  Status Read(std::span<uint8_t> out) override {
    if (out.size() > left_) return Inconsistent("read past the end of the range");
    auto st = store_.ReadRange(kind_, hash_, next_, out);
    if (!st.ok()) return st;
    next_ += out.size();
    left_ -= out.size();
    return Ok{};
  }

 private:
  BlobStore& store_;
  const BlobKind kind_;
  const xet::Hash hash_;
  uint64_t next_;
  uint64_t left_;
};

}  // namespace

std::unique_ptr<BlobReader> BlobStore::OpenRange(BlobKind kind, const xet::Hash& hash, uint64_t offset,
                                                 uint64_t length) {
  return ReaderThroughReadRange(kind, hash, offset, length);
}

std::unique_ptr<BlobReader> BlobStore::ReaderThroughReadRange(BlobKind kind, const xet::Hash& hash,
                                                              uint64_t offset, uint64_t length) {
  return std::make_unique<RangeReader>(*this, kind, hash, offset, length);
}

Status BlobStore::DeleteMany(BlobKind kind, std::span<const xet::Hash> hashes) {
  for (const xet::Hash& h : hashes) {
    if (auto r = Delete(kind, h); !r) return r.error();
  }
  return Ok{};
}

}  // namespace cairn::store
