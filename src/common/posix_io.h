// Whole reads and writes on a file descriptor: the loops every caller of pread(2)/write(2) needs (EINTR,
// short transfers), written once. Errors are errno values, for the caller to word with its path.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <system_error>

#include "common/error.h"

namespace cairn {

// An errno value's text (strerror(3) is not thread-safe; this is).
inline std::string ErrnoText(int err) {
  return std::error_code(err, std::generic_category()).message();
}

// A failed call on `path`, worded "<what> <path>: <errno's text>".
inline Error PathIoError(const std::string& what, const std::filesystem::path& path, int err) {
  return IoError(what + " " + path.string() + ": " + ErrnoText(err));
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

// What OpenRegularFile returns for a path that is not a regular file (a FIFO, a device, a directory, a
// socket) and for one that is a symbolic link.
inline constexpr int kNotRegularFile = -2;
inline constexpr int kSymbolicLink = -3;

// Opens `path` read-only when it is a regular file, without following a symbolic link at its last component
// and without blocking on what is not a regular file (a FIFO opened read-only waits for a writer): the
// descriptor in `*fd` and 0, or an errno value, kSymbolicLink, kNotRegularFile (`*fd` then -1). For files a
// directory of someone else's making names (a bundle, a backup): their reads neither hang nor leave it.
inline int OpenRegularFile(const char* path, int* fd) {
  *fd = ::open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (*fd < 0) return errno == ELOOP ? kSymbolicLink : errno;
  struct stat st {};
  const int err = ::fstat(*fd, &st) != 0 ? errno : S_ISREG(st.st_mode) ? 0 : kNotRegularFile;
  // Reads of a regular file never block: the flag is cleared so that it behaves as any other descriptor.
  if (err != 0 || ::fcntl(*fd, F_SETFL, O_RDONLY) != 0) {
    const int failed = err != 0 ? err : errno;
    ::close(*fd);
    *fd = -1;
    return failed;
  }
  return 0;
}

// Words OpenRegularFile's and the other functions' errors.
inline std::string OpenErrorText(int err) {
  if (err == kNotRegularFile) return "not a regular file";
  if (err == kSymbolicLink) return "a symbolic link";
  if (err == kShortFile) return "shorter than expected";
  return ErrnoText(err);
}

// The most one write(2) is given. A larger write into the page cache lets the kernel allocate large
// folios, whose pages a virtual machine's host may have taken back (free page reporting) and must fault in
// again: 64 MiB written in one call cost 10x the CPU of the same bytes in 256 KiB calls (Linux 6.18 guest,
// ext4; BENCHMARKS.md, issue 46).
inline constexpr size_t kWriteSlice = 256 * 1024;

// Writes all of `data` at the file offset, kWriteSlice at a time: 0 or an errno value.
inline int WriteFull(int fd, std::span<const uint8_t> data) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), std::min(data.size(), kWriteSlice));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    data = data.subspan(static_cast<size_t>(n));
  }
  return 0;
}

// Writes all of `data` at `offset`, kWriteSlice at a time: 0 or an errno value.
inline int PwriteFull(int fd, uint64_t offset, std::span<const uint8_t> data) {
  while (!data.empty()) {
    const ssize_t n =
        ::pwrite(fd, data.data(), std::min(data.size(), kWriteSlice), static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    data = data.subspan(static_cast<size_t>(n));
    offset += static_cast<uint64_t>(n);
  }
  return 0;
}

}  // namespace cairn
