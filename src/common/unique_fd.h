// An owned file descriptor (closed on destruction), the one owner of every raw descriptor cairn opens.
// Move-only; not thread-safe (like the int it wraps).
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <utility>

namespace cairn {

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { reset(); }
  UniqueFd(UniqueFd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() { return std::exchange(fd_, -1); }
  // Another descriptor of the same open file (close-on-exec), owned by the caller; invalid (errno set) when
  // none is left or this one is invalid.
  UniqueFd Duplicate() const { return UniqueFd(valid() ? ::fcntl(fd_, F_DUPFD_CLOEXEC, 0) : -1); }
  void reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);  // close errors on a read-only or already-fsynced fd carry no information
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

}  // namespace cairn
