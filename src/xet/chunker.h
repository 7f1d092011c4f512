// Content-defined chunking with Xet's gear hash (protocol §1). The server never re-chunks uploads; it needs
// the chunker for `cairn hash`, the benchmarks, the client side of `cairn put`, and to test against the stock
// client.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace cairn::xet {

inline constexpr uint64_t kTargetChunk = 64 * 1024;
inline constexpr uint64_t kMinChunk = kTargetChunk / 8;
inline constexpr uint64_t kMaxChunk = kTargetChunk * 2;

// Streaming boundary finder. It never copies data: feed bytes in blocks of any size, and it reports where
// chunks end. Feeding the same bytes in different block sizes yields identical boundaries.
//
//   Chunker c; bool boundary;
//   size_t used = c.Consume(block, &boundary);   // bytes of `block` consumed
//   if (boundary) { chunk ends after those bytes; c.last_chunk_length() is its length }
//   ... at end of input, a non-zero c.pending() is the final chunk.
class Chunker {
 public:
  // Consumes bytes up to and including the next boundary, or all of `data`. Sets *boundary when the consumed
  // bytes complete a chunk.
  size_t Consume(std::span<const uint8_t> data, bool* boundary);
  // Length of the chunk completed by the last Consume that reported a boundary.
  uint64_t last_chunk_length() const { return last_len_; }
  // Bytes of the chunk in progress.
  uint64_t pending() const { return len_; }

 private:
  uint64_t hash_ = 0;
  uint64_t len_ = 0;
  uint64_t last_len_ = 0;
};

// Chunk lengths of a whole buffer (the empty input has no chunks).
std::vector<uint64_t> ChunkLengths(std::span<const uint8_t> data);

}  // namespace cairn::xet
