#include "ingest/shard_records.h"

#include <cstring>

namespace cairn::ingest {

xet::Hash ShardSha256(const uint8_t (&digest)[32]) {
  xet::Hash h;
  for (size_t g = 0; g < 4; ++g) {
    for (size_t i = 0; i < 8; ++i) h.bytes[g * 8 + i] = digest[g * 8 + 7 - i];
  }
  return h;
}

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) {
  EVP_DigestInit_ex(ctx_, EVP_sha256(), nullptr);
}

Sha256::~Sha256() {
  EVP_MD_CTX_free(ctx_);
}

void Sha256::Update(std::span<const uint8_t> data) {
  EVP_DigestUpdate(ctx_, data.data(), data.size());
}

xet::Hash Sha256::Final() {
  uint8_t digest[32];
  unsigned n = 0;
  EVP_DigestFinal_ex(ctx_, digest, &n);
  return ShardSha256(digest);
}

xet::Hash ShardSha256Of(std::span<const uint8_t> data) {
  Sha256 sha;
  sha.Update(data);
  return sha.Final();
}

xet::FileRecord FileRecordOf(std::span<const PlacedChunk> chunks) {
  xet::FileRecord record;
  std::vector<xet::HashedChunk> leaves;
  leaves.reserve(chunks.size());
  for (size_t i = 0; i < chunks.size();) {
    size_t j = i + 1;
    while (j < chunks.size() && chunks[j].xorb == chunks[i].xorb &&
           chunks[j].chunk == chunks[j - 1].chunk + 1)
      ++j;
    xet::FileTerm term{chunks[i].xorb, 0, 0, chunks[i].chunk,
                       static_cast<uint32_t>(chunks[i].chunk + (j - i))};
    std::vector<xet::ChunkHash> hashes;
    for (size_t k = i; k < j; ++k) {
      term.unpacked_bytes += static_cast<uint32_t>(chunks[k].size);
      hashes.push_back(chunks[k].hash);
      leaves.push_back({chunks[k].hash, chunks[k].size});
    }
    record.terms.push_back(term);
    record.verification.push_back(xet::RangeHashOf(std::span<const xet::ChunkHash>(hashes)));
    i = j;
  }
  record.hash = xet::FileHashOf(leaves);
  return record;
}

xet::XorbRecord XorbRecordOf(const xet::XorbHash& hash, std::span<const xet::HashedChunk> chunks,
                             bool mark_global_dedup) {
  xet::XorbRecord r{hash, 0, 0, 0, {}};
  r.chunks.reserve(chunks.size());
  uint32_t offset = 0;
  for (const auto& c : chunks) {
    const uint32_t flags =
        mark_global_dedup && c.hash.mod(xet::kGlobalDedupModulus) == 0 ? xet::kChunkFlagGlobalDedup : 0;
    r.chunks.push_back({c.hash, offset, static_cast<uint32_t>(c.size), flags});
    offset += static_cast<uint32_t>(c.size);
  }
  r.bytes_in_xorb = offset;
  return r;
}

std::vector<uint8_t> ShardUploadForm(const xet::Shard& shard) {
  xet::ShardWriteOptions w;
  w.lookup_tables = false;
  std::vector<uint8_t> bytes = xet::SerializeShard(shard, w);
  bytes.resize(bytes.size() - xet::kShardFooterSize);
  std::memset(bytes.data() + 40, 0, 8);
  return bytes;
}

}  // namespace cairn::ingest
