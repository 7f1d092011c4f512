// The one seam between cairn and the wall clock (LevelDB's Env habit): every expiry, grace period and stored
// timestamp reads the time through a Clock, so that tests move time instead of sleeping.
//
// Ownership: Clock::System() lives as long as the process; whoever injects another clock keeps it alive for
// as long as anything holds it (services and indexes keep a plain pointer). Thread-safety: every method may
// be called from any thread. Deadlines of I/O in progress (a stalled socket, a slow body) are not wall-clock
// time and keep std::chrono::steady_clock.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace cairn {

class Clock {
 public:
  virtual ~Clock() = default;
  // Seconds since the Unix epoch.
  virtual int64_t UnixSeconds() const = 0;

  // The real clock (std::chrono::system_clock).
  static const Clock& System();
};

class SystemClock final : public Clock {
 public:
  int64_t UnixSeconds() const override {
    return std::chrono::duration_cast<std::chrono::seconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
};

inline const Clock& Clock::System() {
  static const SystemClock clock;
  return clock;
}

// A clock that moves only when told to. Starts at 2023-11-14T22:13:20Z unless given another time.
class TestClock final : public Clock {
 public:
  explicit TestClock(int64_t start = 1'700'000'000) : now_(start) {}
  int64_t UnixSeconds() const override { return now_.load(std::memory_order_relaxed); }
  void Set(int64_t unix_seconds) { now_.store(unix_seconds, std::memory_order_relaxed); }
  void Advance(int64_t seconds) { now_.fetch_add(seconds, std::memory_order_relaxed); }

 private:
  std::atomic<int64_t> now_;
};

}  // namespace cairn
