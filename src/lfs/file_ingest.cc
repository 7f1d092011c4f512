#include "lfs/file_ingest.h"

#include <utility>
#include <vector>

#include "xet/shard.h"
#include "xet/xorb.h"

namespace cairn::lfs {

Result<std::unique_ptr<FileIngest>> FileIngest::Begin(cas::CasService& cas, std::string scope,
                                                      std::string_view sha256, uint64_t size) {
  if (sha256.size() != 64) return Malformed("an object id is a SHA-256: 64 hex digits");
  auto expected = xet::Hash::FromHex(sha256);  // a Xet hash's hex form is the shard order of SHA-256 hex
  if (!expected) return Malformed("an object id is a SHA-256: 64 hex digits");
  return std::unique_ptr<FileIngest>(new FileIngest(cas, std::move(scope), *expected, size));
}

FileIngest::FileIngest(cas::CasService& cas, std::string scope, const xet::Hash& sha256, uint64_t size)
    : cas_(cas),
      scope_(std::move(scope)),
      expected_sha256_(sha256),
      size_(size),
      placer_({.ask = [this](const xet::ChunkHash& h) -> std::optional<std::vector<uint8_t>> {
                 // Every scope's chunks: the answer stays in the server (no client learns from it).
                 auto answer = cas_.DedupShard(h, scope_, /*any_scope=*/true);
                 if (!answer) return std::nullopt;  // none, or a failed query: a miss, as in hf_xet
                 return std::move(*answer);
               },
               .on_seal = [this](ingest::SealedXorb&& x) { return Queue(std::move(x)); },
               .new_buffer = [this] { return TakeBuffer(); }}) {}

FileIngest::~FileIngest() {
  {
    std::lock_guard lock(mu_);
    closed_ = true;
    queue_.clear();
  }
  cv_.notify_all();
  for (auto& t : storers_) t.join();
  FinishDigest();
}

void FileIngest::HashLoop() {
  std::unique_lock lock(hash_mu_);
  for (;;) {
    hash_cv_.wait(lock, [&] { return hashing_ || hash_closed_; });
    if (!hashing_) return;
    const std::span<const uint8_t> block = to_hash_;
    lock.unlock();
    sha_.Update(block);
    lock.lock();
    hashing_ = false;
    hash_cv_.notify_all();
  }
}

// Stops the digest's thread; the digest of everything fed (once).
xet::Hash FileIngest::FinishDigest() {
  {
    std::lock_guard lock(hash_mu_);
    hash_closed_ = true;
  }
  hash_cv_.notify_all();
  if (hasher_.joinable()) hasher_.join();
  if (digest_taken_) return xet::Hash{};
  digest_taken_ = true;
  return sha_.Final();
}

std::vector<uint8_t> FileIngest::TakeBuffer() {
  std::vector<uint8_t> b;
  {
    std::lock_guard lock(mu_);
    if (!spare_.empty()) {
      b = std::move(spare_.back());
      spare_.pop_back();
    }
  }
  b.clear();
  b.reserve(xet::kMaxXorbUnpacked);  // filled without reallocation
  return b;
}

Status FileIngest::Queue(ingest::SealedXorb&& x) {
  // Two storing threads: one xorb's write and sync wait on the disk while the other's is encoded.
  while (storers_.size() < 2) storers_.emplace_back([this] { StoreLoop(); });
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return queue_.empty() || !store_error_; });
  if (!store_error_) return store_error_;
  queue_.push_back(std::move(x));
  cv_.notify_all();
  return Ok{};
}

void FileIngest::StoreLoop() {
  xet::EncodedXorb encoded;  // this thread's: its buffers serve every xorb it stores
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return !queue_.empty() || closed_; });
    if (queue_.empty()) return;
    ingest::SealedXorb x = std::move(queue_.front());
    queue_.pop_front();
    ++storing_;
    lock.unlock();
    Status st = Ok{};
    if (x.encoded) {
      // Records as they arrived, their chunks hashed by the caller from these bytes: not decoded again, and
      // not written again where the caller filled a put with them as they arrived.
      auto put =
          cas_.PutHashedXorb(x.hash, x.data, x.Prehashed(), take_filled_ ? take_filled_(x.hash) : nullptr);
      if (!put) st = put.error();
    } else {
      // The chunks were hashed as they were placed; PutXorb validates the encoded xorb (decoded and hashed
      // again) like any client's before it stores it.
      xet::EncodeXorb(x.Spans(), xet::CompressionPolicy::kAutoSampled, x.Hashes(), encoded);
      auto put = cas_.PutXorb(x.hash, encoded.bytes);
      if (!put) st = put.error();
    }
    lock.lock();
    --storing_;
    if (!st && store_error_) store_error_ = st;
    spare_.push_back(std::move(x.data));
    cv_.notify_all();
  }
}

Status FileIngest::Drain() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return (queue_.empty() && storing_ == 0) || !store_error_; });
  return store_error_;
}

bool FileIngest::Admit(uint64_t n, Fed how) {
  if (!failed_) return false;
  if (fed_ != Fed::kNothing && fed_ != how) {
    failed_ = Inconsistent("a file is fed as bytes or as chunks, not both");
    return false;
  }
  fed_ = how;
  if (n > size_ - received_) {
    failed_ = Malformed("the object is larger than the " + std::to_string(size_) + " bytes announced");
    return false;
  }
  received_ += n;
  return true;
}

Status FileIngest::Feed(std::span<const uint8_t> block) {
  if (!Admit(block.size(), Fed::kBytes)) return failed_;
  // The digest of the block on its thread while this one chunks it; both done before the caller reuses it.
  if (!hasher_.joinable()) hasher_ = std::thread([this] { HashLoop(); });
  {
    std::lock_guard lock(hash_mu_);
    to_hash_ = block;
    hashing_ = true;
  }
  hash_cv_.notify_all();
  failed_ =
      chunks_.Feed(block, [this](std::span<const uint8_t> chunk) { return placer_.Place(file_, chunk); });
  std::unique_lock lock(hash_mu_);
  hash_cv_.wait(lock, [&] { return !hashing_; });
  return failed_;
}

Status FileIngest::FeedChunk(const xet::ChunkHash& hash, std::span<const uint8_t> decoded,
                             std::span<const uint8_t> record, const std::optional<xet::XorbHash>& whole) {
  if (!Admit(decoded.size(), Fed::kChunks)) return failed_;
  sha_.Update(decoded);
  failed_ = placer_.PlaceEncoded(file_, hash, static_cast<uint32_t>(decoded.size()), record, whole);
  return failed_;
}

Result<Ingested> FileIngest::Finish() {
  if (!failed_) return failed_.error();
  if (received_ != size_) {
    return Malformed("the object ended after " + std::to_string(received_) + " of the " +
                     std::to_string(size_) + " bytes announced");
  }
  if (auto st =
          chunks_.Finish([this](std::span<const uint8_t> chunk) { return placer_.Place(file_, chunk); });
      !st)
    return st.error();
  if (FinishDigest() != expected_sha256_)
    return HashMismatch("the bytes received do not have the SHA-256 the object is named by");
  if (auto st = placer_.Flush(); !st) return st.error();
  if (auto st = Drain(); !st) return st.error();  // every xorb stored before the shard names it

  xet::Shard shard;
  xet::FileRecord record = placer_.RecordOf(file_);
  record.sha256 = expected_sha256_;
  const xet::FileHash file = record.hash;
  shard.files.push_back(std::move(record));
  shard.xorbs = placer_.Listings();
  const std::vector<uint8_t> body = ingest::ShardUploadForm(shard);
  if (body.size() > xet::kMaxShardBytes)
    return LimitExceeded("the object's shard would pass the protocol's 64 MiB");
  auto outcome = cas_.PutShard(body, scope_);
  if (!outcome) return outcome.error();
  const auto& s = placer_.stats();
  return Ingested{.file = file,
                  .size = size_,
                  .chunks = s.chunks,
                  .chunks_deduped = s.chunks_deduped,
                  .new_bytes = s.new_bytes,
                  .xorbs = s.xorbs_sealed,
                  .registered = outcome->registered};
}

}  // namespace cairn::lfs
