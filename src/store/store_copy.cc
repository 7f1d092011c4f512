#include "store/store_copy.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "common/worker_pool.h"

namespace cairn::store {
namespace {

enum class Outcome { kCopied, kPresent };

// Buffers kept for the copies of one CopyBlobs call: reading a blob into a buffer that held the last one
// skips what a fresh one costs (zeroing it, and faulting in its pages: with 64 MiB xorbs, as much as hashing
// them).
class Buffers {
 public:
  std::unique_ptr<std::vector<uint8_t>> Take() {
    std::lock_guard lock(mu_);
    if (free_.empty()) return std::make_unique<std::vector<uint8_t>>();
    auto b = std::move(free_.back());
    free_.pop_back();
    return b;
  }
  void Give(std::unique_ptr<std::vector<uint8_t>> b) {
    std::lock_guard lock(mu_);
    free_.push_back(std::move(b));
  }

 private:
  std::mutex mu_;
  std::vector<std::unique_ptr<std::vector<uint8_t>>> free_;
};

// The whole blob, read into `buf` (grown as needed, never shrunk): a span of it.
Result<std::span<const uint8_t>> ReadInto(BlobStore& from, BlobKind kind, const xet::Hash& hash,
                                          std::vector<uint8_t>& buf) {
  auto stat = from.Stat(kind, hash);
  if (!stat.ok()) return stat.error();
  if (!stat->exists) return NotFound("no " + std::string(BlobKindName(kind)) + " " + hash.hex());
  if (buf.size() < stat->size) buf.resize(stat->size);
  const std::span<uint8_t> out(buf.data(), stat->size);
  if (auto st = from.ReadRange(kind, hash, 0, out); !st.ok()) return st.error();
  return std::span<const uint8_t>(out);
}

Result<Outcome> CopyOne(BlobStore& from, BlobStore& to, BlobKind kind, const xet::Hash& hash,
                        const BlobVerifier& verify, bool read_back, std::vector<uint8_t>& buf,
                        uint64_t* size) {
  // Resuming: an intact blob at the destination is not copied again.
  if (auto there = ReadInto(to, kind, hash, buf); there.ok() && verify(kind, hash, *there)) {
    *size = there->size();
    return Outcome::kPresent;
  } else if (!there.ok() && there.error().code != ErrorCode::kNotFound) {
    return there.error();
  }
  auto bytes = ReadInto(from, kind, hash, buf);
  if (!bytes) return Error{bytes.error().code, "reading the source: " + bytes.error().message};
  *size = bytes->size();
  if (!verify(kind, hash, *bytes)) return HashMismatch("the source's bytes do not verify: not copied");
  PutOptions put;
  put.verify_existing = [&](std::span<const uint8_t> existing) { return verify(kind, hash, existing); };
  if (auto p = to.Put(kind, hash, *bytes, put); !p)
    return Error{p.error().code, "writing: " + p.error().message};
  if (!read_back) return Outcome::kCopied;
  auto back = ReadInto(to, kind, hash, buf);
  if (!back) return Error{back.error().code, "reading back: " + back.error().message};
  if (!verify(kind, hash, *back)) return HashMismatch("read back from the destination, it does not verify");
  return Outcome::kCopied;
}

}  // namespace

bool StoreCopyReport::ok() const {
  return std::all_of(kinds.begin(), kinds.end(), [](const KindCopyReport& k) { return k.failed.empty(); });
}

KindCopyReport CopyBlobs(BlobStore& from, BlobStore& to, BlobKind kind, std::span<const xet::Hash> hashes,
                         const StoreCopyOptions& options) {
  WorkerPool pool(std::max<size_t>(options.threads, 1) - 1);  // and the calling thread
  KindCopyReport k;
  k.kind = kind;
  k.listed = hashes.size();
  std::mutex mu;
  std::atomic<uint64_t> done{0};
  Buffers buffers;
  pool.ParallelFor(hashes.size(), [&](size_t i) {
    uint64_t size = 0;
    auto buf = buffers.Take();
    auto r = CopyOne(from, to, kind, hashes[i], options.verify, options.read_back, *buf, &size);
    buffers.Give(std::move(buf));
    {
      std::lock_guard lock(mu);
      k.bytes += size;
      if (!r) {
        k.failed.push_back(hashes[i].hex() + ": " + r.error().message);
      } else if (*r == Outcome::kCopied) {
        ++k.copied;
        k.copied_bytes += size;
      } else {
        ++k.present;
      }
    }
    const uint64_t d = ++done;
    if (options.progress) options.progress(kind, d, hashes.size());
  });
  std::sort(k.failed.begin(), k.failed.end());
  return k;
}

Result<StoreCopyReport> CopyStore(BlobStore& from, BlobStore& to, const StoreCopyOptions& options) {
  StoreCopyReport report;
  for (const BlobKind kind : kBlobKinds) {
    std::vector<xet::Hash> hashes;
    if (auto st = from.List(kind, [&](const xet::Hash& h) { hashes.push_back(h); }); !st)
      return Error{st.error().code, "listing " + from.Describe() + ": " + st.error().message};
    std::sort(hashes.begin(), hashes.end());
    report.kinds.push_back(CopyBlobs(from, to, kind, hashes, options));
  }
  return report;
}

}  // namespace cairn::store
