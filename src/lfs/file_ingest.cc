#include "lfs/file_ingest.h"

#include <utility>
#include <vector>

#include "xet/shard.h"
#include "xet/xorb.h"

namespace cairn::lfs {

xet::Result<std::unique_ptr<FileIngest>> FileIngest::Begin(cas::CasService& cas, std::string scope,
                                                           std::string_view sha256, uint64_t size) {
  if (sha256.size() != 64) return xet::Malformed("an object id is a SHA-256: 64 hex digits");
  auto expected = xet::Hash::FromHex(sha256);  // a Xet hash's hex form is the shard order of SHA-256 hex
  if (!expected) return xet::Malformed("an object id is a SHA-256: 64 hex digits");
  return std::unique_ptr<FileIngest>(new FileIngest(cas, std::move(scope), *expected, size));
}

FileIngest::FileIngest(cas::CasService& cas, std::string scope, const xet::Hash& sha256, uint64_t size)
    : cas_(cas),
      scope_(std::move(scope)),
      expected_sha256_(sha256),
      size_(size),
      placer_({.ask = [this](const xet::ChunkHash& h) -> std::optional<std::vector<uint8_t>> {
                 auto answer = cas_.DedupShard(h, scope_);
                 if (!answer) return std::nullopt;  // none, or a failed query: a miss, as in hf_xet
                 return std::move(*answer);
               },
               .on_seal = [this](ingest::SealedXorb&& x) { return Store(std::move(x)); },
               .new_buffer = nullptr}) {}

xet::Status FileIngest::Store(ingest::SealedXorb&& x) {
  // The chunks were hashed as they were placed; PutXorb validates the encoded xorb (decoded and hashed
  // again) like any client's before it stores it.
  const auto encoded = xet::EncodeXorb(x.Spans(), xet::CompressionPolicy::kAuto, x.Hashes());
  auto put = cas_.PutXorb(x.hash, encoded.bytes);
  if (!put) return put.error();
  return xet::Ok{};
}

xet::Status FileIngest::Feed(std::span<const uint8_t> block) {
  if (!failed_) return failed_;
  if (block.size() > size_ - chunks_.bytes()) {
    failed_ = xet::Malformed("the object is larger than the " + std::to_string(size_) + " bytes announced");
    return failed_;
  }
  sha_.Update(block);
  failed_ =
      chunks_.Feed(block, [this](std::span<const uint8_t> chunk) { return placer_.Place(file_, chunk); });
  return failed_;
}

xet::Result<Ingested> FileIngest::Finish() {
  if (!failed_) return failed_.error();
  if (chunks_.bytes() != size_) {
    return xet::Malformed("the object ended after " + std::to_string(chunks_.bytes()) + " of the " +
                          std::to_string(size_) + " bytes announced");
  }
  if (auto st =
          chunks_.Finish([this](std::span<const uint8_t> chunk) { return placer_.Place(file_, chunk); });
      !st)
    return st.error();
  if (sha_.Final() != expected_sha256_)
    return xet::HashMismatch("the bytes received do not have the SHA-256 the object is named by");
  if (auto st = placer_.Flush(); !st) return st.error();

  xet::Shard shard;
  xet::FileRecord record = placer_.RecordOf(file_);
  record.sha256 = expected_sha256_;
  const xet::FileHash file = record.hash;
  shard.files.push_back(std::move(record));
  shard.xorbs = placer_.Listings();
  const std::vector<uint8_t> body = ingest::ShardUploadForm(shard);
  if (body.size() > xet::kMaxShardBytes)
    return xet::LimitExceeded("the object's shard would pass the protocol's 64 MiB");
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
