// Builds what a client uploads for a set of files held in memory — xorbs (footer-less, as the stock client
// sends them) and the shard describing the files — exactly as the stock client's formats require. Used by
// tests, benchmarks and load generation of every layer; `cairn put` streams the same pieces (chunk_stream.h,
// shard_records.h) instead of holding files in memory. A pure function; safe from any thread.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "ingest/shard_records.h"
#include "xet/shard.h"
#include "xet/xorb.h"

namespace cairn::ingest {

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

}  // namespace cairn::ingest
