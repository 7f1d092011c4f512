// A request body too large to hold in memory, written to an unnamed file (O_TMPFILE, else a name unlinked at
// once) and read back through one read-only mapping: the page cache holds it, not the heap, and nothing is
// left behind by a crash. Move-only; one thread at a time (a body arrives in order). Failures are values
// (kIo: the directory cannot be written, the disk is full).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "common/error.h"
#include "common/unique_fd.h"

namespace cairn {

class SpoolFile {
 public:
  // An empty spool in `dir` (created if missing, mode 0700).
  static Result<SpoolFile> Create(const std::string& dir);

  SpoolFile(SpoolFile&& o) noexcept;
  SpoolFile& operator=(SpoolFile&& o) noexcept;
  SpoolFile(const SpoolFile&) = delete;
  SpoolFile& operator=(const SpoolFile&) = delete;
  ~SpoolFile();

  // Appends `data` at the end; not after Map.
  Status Append(std::span<const uint8_t> data);
  uint64_t size() const { return size_; }
  // Everything appended, mapped read-only; valid while the spool lives. An empty spool maps to "".
  Result<std::string_view> Map();

 private:
  explicit SpoolFile(UniqueFd fd) : fd_(std::move(fd)) {}
  void Unmap();

  UniqueFd fd_;
  uint64_t size_ = 0;
  void* map_ = nullptr;
};

}  // namespace cairn
