#include "ingest/upload_builder.h"

#include <map>

#include "xet/chunker.h"
#include "xet/hashing.h"

namespace cairn::ingest {
namespace {

struct Placement {
  size_t xorb;
  uint32_t chunk;
};

}  // namespace

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
    record.sha256 = ShardSha256Of(files[f]);
    up.file_hashes.push_back(record.hash);
    up.shard.files.push_back(std::move(record));
  }
  for (const auto& x : up.xorbs) {
    std::vector<xet::HashedChunk> chunks;
    chunks.reserve(x.layout.chunks.size());
    for (const auto& c : x.layout.chunks) chunks.push_back({c.hash, c.unpacked_size});
    up.shard.xorbs.push_back(XorbRecordOf(x.hash, chunks, /*mark_global_dedup=*/false));
  }
  up.shard_bytes = ShardUploadForm(up.shard);
  return up;
}

}  // namespace cairn::ingest
