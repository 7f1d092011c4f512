// Byte ranges (RFC 9110 §14): parsing a Range header and building 206 answers, single-part or
// multipart/byteranges, whose bodies are FileSegments sent with sendfile(2).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>
#include <vector>

#include "http/handler.h"
#include "http/result.h"

namespace cairn::http {

struct ByteRange {
  uint64_t first = 0;  // inclusive
  uint64_t last = 0;   // inclusive
  uint64_t length() const { return last - first + 1; }
};

// Parses `bytes=a-b,c-,-n` against a representation of `size` bytes: ranges are clamped to the size, in the
// order given. Errors: 416 when no range is satisfiable; 400 when the header is malformed or has more than
// `max_ranges` ranges.
Result<std::vector<ByteRange>> ParseRange(std::string_view header, uint64_t size, size_t max_ranges = 1024);

// The answer for `ranges` of the `size`-byte representation stored in `file` from byte `base`:
// no ranges → 200 with everything; one → 206 with Content-Range; several → 206 multipart/byteranges.
Response RangeResponse(const std::shared_ptr<const File>& file, uint64_t base, uint64_t size,
                       const std::vector<ByteRange>& ranges, std::string_view content_type);
// The same for a representation read through `source` (bytes [0, size) of it).
Response RangeResponse(const std::shared_ptr<const ByteSource>& source, uint64_t size,
                       const std::vector<ByteRange>& ranges, std::string_view content_type);

// Reads the first `max_bytes` of the first SourceSegment of `r` now, through the stream the rest is then
// read from, so that a source failing at once (a store out of reach, a corrupt first chunk) gets an error
// answer with its status (503 with Retry-After: 1) instead of a response cut short after its header. Call it
// on a thread that may block.
Response ReadBeforeHeader(Response r, uint64_t max_bytes);

}  // namespace cairn::http
