// A file's bytes, given in blocks of any size, cut into exactly the content-defined chunks xet::ChunkLengths
// cuts the whole file into. For `cairn put` (which reads files in blocks) and for the server (which will
// chunk what arrives without Xet: LFS uploads, mirrored files).
//
// Each completed chunk reaches `on_chunk` as one contiguous span, valid only during that call: a span into
// the block given to Feed when the chunk lies inside it (no copy), else into the stream's own carry buffer. A
// failure `on_chunk` returns stops the stream and is returned; the stream is then spent.
// Thread-safety: none (one stream, one thread at a time). Memory: at most one chunk (xet::kMaxChunkUnpacked).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "common/error.h"
#include "xet/chunker.h"

namespace cairn::ingest {

class ChunkStream {
 public:
  using OnChunk = std::function<Status(std::span<const uint8_t> chunk)>;

  // Consumes all of `block`, handing on every chunk it completes.
  Status Feed(std::span<const uint8_t> block, const OnChunk& on_chunk);
  // Hands on the final chunk (shorter, ended by the end of the file), if any bytes remain.
  Status Finish(const OnChunk& on_chunk);

  uint64_t bytes() const { return bytes_; }  // fed so far

 private:
  xet::Chunker chunker_;
  std::vector<uint8_t> carry_;  // the chunk in progress, when it began in an earlier block
  uint64_t bytes_ = 0;
};

}  // namespace cairn::ingest
