#include "client/upload_builder.h"

#include <openssl/sha.h>

#include <cstring>
#include <map>

#include "xet/chunker.h"
#include "xet/hashing.h"

namespace cairn::client {
namespace {

struct Placement {
  size_t xorb;
  uint32_t chunk;
};

}  // namespace

xet::Hash ShardSha256(const uint8_t (&digest)[32]) {
  xet::Hash h;
  for (size_t g = 0; g < 4; ++g) {
    for (size_t i = 0; i < 8; ++i) h.bytes[g * 8 + i] = digest[g * 8 + 7 - i];
  }
  return h;
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

std::vector<uint8_t> ShardUploadForm(const xet::Shard& shard) {
  xet::ShardWriteOptions w;
  w.lookup_tables = false;
  std::vector<uint8_t> bytes = xet::SerializeShard(shard, w);
  bytes.resize(bytes.size() - xet::kShardFooterSize);
  std::memset(bytes.data() + 40, 0, 8);
  return bytes;
}

BuiltUpload BuildUpload(std::span<const std::span<const uint8_t>> files, const BuildOptions& options) {
  BuiltUpload up;
  std::map<xet::ChunkHash, Placement> placed;
  // Chunks of the xorb being filled.
  std::vector<std::span<const uint8_t>> pending;
  uint64_t pending_bytes = 0;
  const auto flush = [&] {
    if (pending.empty()) return;
    auto encoded = xet::EncodeXorb(pending, options.policy);
    up.xorbs.push_back({encoded.hash, std::move(encoded.bytes), std::move(encoded.layout)});
    pending.clear();
    pending_bytes = 0;
  };

  struct Chunk {
    xet::ChunkHash hash;
    Placement at;
  };
  std::vector<std::vector<Chunk>> file_chunks(files.size());
  for (size_t f = 0; f < files.size(); ++f) {
    uint64_t start = 0;
    std::vector<uint64_t> lengths;
    if (options.fixed_chunk_bytes == 0) {
      lengths = xet::ChunkLengths(files[f]);
    } else {
      for (uint64_t at = 0; at < files[f].size(); at += options.fixed_chunk_bytes)
        lengths.push_back(std::min<uint64_t>(options.fixed_chunk_bytes, files[f].size() - at));
    }
    for (uint64_t len : lengths) {
      const auto data = files[f].subspan(start, len);
      start += len;
      const xet::ChunkHash h = xet::ChunkHashOf(data);
      if (auto it = placed.find(h); options.dedup_within_upload && it != placed.end()) {
        file_chunks[f].push_back({h, it->second});
        continue;
      }
      if (pending_bytes + len > options.max_xorb_bytes || pending.size() == xet::kMaxXorbChunks) flush();
      const Placement p{up.xorbs.size(), static_cast<uint32_t>(pending.size())};
      pending.push_back(data);
      pending_bytes += len;
      placed.emplace(h, p);
      file_chunks[f].push_back({h, p});
    }
  }
  flush();

  for (size_t f = 0; f < files.size(); ++f) {
    std::vector<PlacedChunk> placed_chunks;
    placed_chunks.reserve(file_chunks[f].size());
    for (const Chunk& c : file_chunks[f]) {
      const auto& x = up.xorbs[c.at.xorb];
      placed_chunks.push_back({c.hash, x.layout.chunks[c.at.chunk].unpacked_size, x.hash, c.at.chunk});
    }
    xet::FileRecord record = FileRecordOf(placed_chunks);
    uint8_t digest[32];
    SHA256(files[f].data(), files[f].size(), digest);
    record.sha256 = ShardSha256(digest);
    up.file_hashes.push_back(record.hash);
    up.shard.files.push_back(std::move(record));
  }
  for (const auto& x : up.xorbs) {
    xet::XorbRecord r{x.hash, 0, static_cast<uint32_t>(x.layout.unpacked_size()), 0, {}};
    uint32_t offset = 0;
    for (const auto& c : x.layout.chunks) {
      r.chunks.push_back({c.hash, offset, c.unpacked_size, 0});
      offset += c.unpacked_size;
    }
    up.shard.xorbs.push_back(std::move(r));
  }
  up.shard_bytes = ShardUploadForm(up.shard);
  return up;
}

}  // namespace cairn::client
