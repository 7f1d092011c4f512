// Shards (protocol §4): the metadata a client uploads after its xorbs — how each file is rebuilt from xorb
// chunk ranges, and which chunks each new xorb holds — and the body of a global-dedup answer.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "common/error.h"
#include "xet/hash.h"

namespace cairn::xet {

inline constexpr size_t kShardHeaderSize = 48;
inline constexpr size_t kShardEntrySize = 48;
inline constexpr size_t kShardFooterSize = 200;
inline constexpr uint64_t kShardVersion = 2;
inline constexpr uint64_t kShardFooterVersion = 1;
inline constexpr uint64_t kMaxShardBytes = 64ULL * 1024 * 1024;  // the stock client's MDB_SHARD_TARGET_SIZE
// What SerializeShard (lookup tables included) writes for a shard with no files and no xorbs, and for each
// xorb listing: its header and lookup entry, and per chunk an entry and a lookup entry.
inline constexpr size_t kEmptyShardBytes = kShardHeaderSize + 2 * kShardEntrySize + kShardFooterSize;
constexpr size_t XorbListingBytes(size_t chunks) {
  return kShardEntrySize + 12 + chunks * (kShardEntrySize + 16);
}

inline constexpr uint32_t kFileFlagVerification = 0x80000000;
inline constexpr uint32_t kFileFlagMetadataExt = 0x40000000;
inline constexpr uint32_t kChunkFlagGlobalDedup = 0x80000000;
inline constexpr uint64_t kGlobalDedupModulus = 1024;

// One term of a file: chunks [chunk_start, chunk_end) of a xorb.
struct FileTerm {
  XorbHash xorb;
  uint32_t xorb_flags = 0;
  uint32_t unpacked_bytes = 0;
  uint32_t chunk_start = 0;
  uint32_t chunk_end = 0;  // exclusive
};

struct FileRecord {
  FileHash hash;
  std::vector<FileTerm> terms;
  std::vector<RangeHash> verification;  // empty, or one per term
  // SHA-256 as the client stored it: each 8-byte group reversed, so Hash::hex() prints the usual digest
  // string.
  std::optional<Hash> sha256;

  uint64_t size() const;
};

struct XorbChunkRecord {
  ChunkHash hash;
  uint32_t byte_start = 0;  // cumulative uncompressed offset of the chunk in its xorb
  uint32_t size = 0;        // uncompressed bytes
  uint32_t flags = 0;       // kChunkFlagGlobalDedup
};

struct XorbRecord {
  XorbHash hash;
  uint32_t flags = 0;
  uint32_t bytes_in_xorb = 0;  // Σ uncompressed chunk sizes
  uint32_t bytes_on_disk = 0;  // serialized length; the stock client writes 0
  std::vector<XorbChunkRecord> chunks;
};

struct ShardFooter {
  uint64_t file_info_offset = 0;
  uint64_t xorb_info_offset = 0;
  uint64_t file_lookup_offset = 0;
  uint64_t file_lookup_num_entry = 0;
  uint64_t xorb_lookup_offset = 0;
  uint64_t xorb_lookup_num_entry = 0;
  uint64_t chunk_lookup_offset = 0;
  uint64_t chunk_lookup_num_entry = 0;
  HmacKey chunk_hash_hmac_key;
  uint64_t creation_timestamp = 0;
  uint64_t key_expiry = 0;
  uint64_t stored_bytes_on_disk = 0;
  uint64_t materialized_bytes = 0;
  uint64_t stored_bytes = 0;
  uint64_t footer_offset = 0;
};

struct Shard {
  std::vector<FileRecord> files;  // in shard order; a repeated file hash is kept (the first one wins on use)
  std::vector<XorbRecord> xorbs;
  std::optional<ShardFooter> footer;
};

// Parses a shard (at most kMaxShardBytes) sequentially through the second bookend. The footer is optional
// (the stock client omits it); when the header announces one it must be present and of version 1; lookup
// tables are skipped. Allocation is bounded by the bytes present: every count is checked against the
// remaining input before anything is reserved.
Result<Shard> ParseShard(std::span<const uint8_t> bytes);

struct ShardWriteOptions {
  HmacKey hmac_key;  // non-zero: chunk hashes in the xorb section and chunk lookup are keyed
  uint64_t creation_timestamp = 0;
  uint64_t key_expiry = 0;  // unix seconds; UINT64_MAX = never
  bool lookup_tables = true;
};

// Serializes a complete shard with lookup tables and the 200-byte footer.
std::vector<uint8_t> SerializeShard(const Shard& shard, const ShardWriteOptions& options = {});

}  // namespace cairn::xet
