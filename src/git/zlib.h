// zlib streams as git writes them (the objects of a pack) and as git's HTTP client sends a large request
// (Content-Encoding: gzip). Inflation is bounded: past `max_out` bytes of output it stops with kLimit, so a
// small body that expands without end (a zip bomb) costs at most the bound.
//
// A Deflater is one thread's (not thread-safe); the functions are pure.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"

namespace cairn::git {

class Deflater {
 public:
  // `level`: zlib's (1 fastest ... 9 smallest).
  explicit Deflater(int level);
  ~Deflater();
  Deflater(const Deflater&) = delete;
  Deflater& operator=(const Deflater&) = delete;
  // Appends `in` as one whole zlib stream to `out`.
  Status Deflate(std::span<const uint8_t> in, std::string& out);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// The zlib stream at the start of `in`, which must inflate to exactly `size` bytes (a pack entry's); how many
// bytes of `in` it took in *consumed. kMalformed for a broken stream, one that ends short of `size` or would
// give more (inflation stops there: never more memory than `size`).
Result<std::vector<uint8_t>> InflateExact(std::span<const uint8_t> in, size_t size, size_t* consumed);

// The bytes a gzip (or zlib) stream `in` holds; kMalformed for a broken stream or bytes after its end,
// kLimit past `max_out` bytes.
Result<std::string> Gunzip(std::string_view in, size_t max_out);

}  // namespace cairn::git
