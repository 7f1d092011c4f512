// Whole reads and writes on a file descriptor: the loops every caller of pread(2)/write(2) needs (EINTR,
// short transfers), written once. Errors are errno values, for the caller to word with its path.
#pragma once

#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <system_error>

namespace cairn {

// An errno value's text (strerror(3) is not thread-safe; this is).
inline std::string ErrnoText(int err) {
  return std::error_code(err, std::generic_category()).message();
}

// What PreadFull returns when the file ends before `out` is full.
inline constexpr int kShortFile = -1;

// Reads exactly out.size() bytes at `offset`: 0, an errno value, or kShortFile.
inline int PreadFull(int fd, uint64_t offset, std::span<uint8_t> out) {
  while (!out.empty()) {
    const ssize_t n = ::pread(fd, out.data(), out.size(), static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    if (n == 0) return kShortFile;
    out = out.subspan(static_cast<size_t>(n));
    offset += static_cast<uint64_t>(n);
  }
  return 0;
}

// Writes all of `data` at the file offset: 0 or an errno value.
inline int WriteFull(int fd, std::span<const uint8_t> data) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    data = data.subspan(static_cast<size_t>(n));
  }
  return 0;
}

}  // namespace cairn
