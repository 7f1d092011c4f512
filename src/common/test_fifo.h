// A FIFO in place of a file, for the tests of what reads directories of someone else's making (a bundle, a
// backup). A reader that opens it and waits for a writer is released, after `wait`, by a writer that closes
// at once (the reader then sees the file end): a hang shows as a wrong answer, and in released(), instead of
// a test that never ends. Tests only.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <thread>

namespace cairn::testing {

class FifoInPlace {
 public:
  explicit FifoInPlace(std::filesystem::path path, std::chrono::milliseconds wait = std::chrono::seconds(5))
      : path_(std::move(path)) {
    std::error_code ec;
    std::filesystem::remove(path_, ec);
    made_ = ::mkfifo(path_.c_str(), 0644) == 0;
    watchdog_ = std::thread([this, wait] {
      std::unique_lock lock(mu_);
      cv_.wait_for(lock, wait, [this] { return done_; });
      while (!done_) {
        const int fd = ::open(path_.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);  // ENXIO: no reader
        if (fd >= 0) {
          ::close(fd);
          ++released_;
        }
        cv_.wait_for(lock, std::chrono::milliseconds(50), [this] { return done_; });
      }
    });
  }
  ~FifoInPlace() {
    {
      std::lock_guard lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    watchdog_.join();
  }
  FifoInPlace(const FifoInPlace&) = delete;
  FifoInPlace& operator=(const FifoInPlace&) = delete;

  bool made() const { return made_; }
  // How many times a reader waiting on it had to be released.
  int released() const { return released_.load(); }

 private:
  std::filesystem::path path_;
  bool made_ = false;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::atomic<int> released_{0};
  std::thread watchdog_;
};

}  // namespace cairn::testing
