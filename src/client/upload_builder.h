// Builds what a client uploads for a set of files — xorbs (footer-less, as the stock client sends them) and
// the shard describing the files — exactly as the stock client's formats require. Used by tests, benchmarks
// and load generation; a real `cairn put` streams instead of holding files in memory.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "xet/shard.h"
#include "xet/xorb.h"

namespace cairn::client {

struct BuiltXorb {
  xet::XorbHash hash;
  std::vector<uint8_t> body;  // chunk region only
  xet::XorbLayout layout;
};

struct BuiltUpload {
  std::vector<BuiltXorb> xorbs;
  xet::Shard shard;                        // files (with verification and SHA-256) and xorb listings
  std::vector<uint8_t> shard_bytes;        // the upload form: header, sections and bookends, no footer
  std::vector<xet::FileHash> file_hashes;  // in the order of the input files
};

struct BuildOptions {
  xet::CompressionPolicy policy = xet::CompressionPolicy::kLz4;
  uint64_t max_xorb_bytes = xet::kMaxXorbUnpacked;  // cut xorbs at this much uncompressed data
  bool dedup_within_upload = true;                  // reuse chunks already placed in an earlier xorb
  // Non-zero: chunks of this many bytes (the last one shorter) instead of content-defined ones, as a
  // fixed-size chunker would cut them (at most xet::kMaxChunkUnpacked; benchmarks only: such files dedup
  // with nothing the stock client uploads).
  uint64_t fixed_chunk_bytes = 0;
};

BuiltUpload BuildUpload(std::span<const std::span<const uint8_t>> files, const BuildOptions& options = {});

// A file's chunk as an upload places it: its hash and size, and the xorb and index it is stored at.
struct PlacedChunk {
  xet::ChunkHash hash;
  uint64_t size = 0;
  xet::XorbHash xorb;
  uint32_t chunk = 0;
};

// The shard's record of a file made of `chunks`, in order: terms of consecutive chunks of one xorb with their
// verification hashes, and the file hash. The SHA-256 is left for the caller.
xet::FileRecord FileRecordOf(std::span<const PlacedChunk> chunks);

// A SHA-256 digest as shards store it (the stock client's order: each 8-byte group reversed).
xet::Hash ShardSha256(const uint8_t (&digest)[32]);

// The stock client's form of a shard upload: SerializeShard's output cut before the lookup tables, with the
// header's footer size set to 0.
std::vector<uint8_t> ShardUploadForm(const xet::Shard& shard);

}  // namespace cairn::client
