#include "ingest/chunk_stream.h"

namespace cairn::ingest {

Status ChunkStream::Feed(std::span<const uint8_t> block, const OnChunk& on_chunk) {
  bytes_ += block.size();
  while (!block.empty()) {
    bool boundary = false;
    const size_t used = chunker_.Consume(block, &boundary);
    const auto consumed = block.first(used);
    block = block.subspan(used);
    if (!boundary) {
      carry_.insert(carry_.end(), consumed.begin(), consumed.end());
      continue;
    }
    if (carry_.empty()) {
      if (auto st = on_chunk(consumed); !st) return st;
      continue;
    }
    carry_.insert(carry_.end(), consumed.begin(), consumed.end());
    Status st = on_chunk(carry_);
    carry_.clear();
    if (!st) return st;
  }
  return Ok{};
}

Status ChunkStream::Finish(const OnChunk& on_chunk) {
  if (carry_.empty()) return Ok{};
  Status st = on_chunk(carry_);
  carry_.clear();
  return st;
}

}  // namespace cairn::ingest
