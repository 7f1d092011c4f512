// Xet's hash functions (protocol §2). All are BLAKE3 in keyed mode with one of three fixed keys.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "xet/hash.h"

namespace cairn::xet {

// A chunk's hash and its uncompressed length: a leaf of the aggregated hash tree.
struct HashedChunk {
  ChunkHash hash;
  uint64_t size = 0;
};

// BLAKE3 keyed with DATA_KEY over the uncompressed chunk bytes. Also names shards.
ChunkHash ChunkHashOf(std::span<const uint8_t> data);

// Generic keyed BLAKE3 (32-byte key, 32-byte output).
Hash KeyedHash(const Hash& key, std::span<const uint8_t> data);

// An internal node of the aggregated tree: keyed over "<hex> : <size>\n" lines.
Hash InternalNodeHash(std::span<const HashedChunk> children);

// The aggregated ("merkle") hash with Xet's variable fan-out; a single leaf passes through unchanged and an
// empty list gives the zero hash. This is the xorb hash of a xorb's chunks.
Hash AggregateHash(std::span<const HashedChunk> leaves);
inline XorbHash XorbHashOf(std::span<const HashedChunk> chunks) {
  return AggregateHash(chunks);
}

// File hash: keyed(salt, aggregate(chunks)); the empty file hashes to zero with no keyed step.
FileHash FileHashOf(std::span<const HashedChunk> chunks, const Hash& salt = Hash{});

// Term verification hash over the raw chunk hashes of a chunk range (protocol §2.6).
RangeHash RangeHashOf(std::span<const ChunkHash> chunk_hashes);
// Same, over the hashes inside HashedChunk records (avoids a copy when a layout is at hand).
RangeHash RangeHashOf(std::span<const HashedChunk> chunks);

// The chunk hash as shown in a keyed dedup answer; a zero key means no keying.
ChunkHash HmacChunkHash(const HmacKey& key, const ChunkHash& chunk);

// HmacChunkHash with the key prepared once, for answers that key every chunk they list. A 32-byte message
// under a key is one BLAKE3 compression (a single block that is the first and last of the only chunk, and
// the root), done here without the hasher's set-up and output machinery: 2-3x faster. Thread-safe (const).
class ChunkHashKeyer {
 public:
  explicit ChunkHashKeyer(const HmacKey& key);
  ChunkHash operator()(const ChunkHash& chunk) const;

 private:
  bool identity_;
  uint32_t key_words_[8];
};

}  // namespace cairn::xet
