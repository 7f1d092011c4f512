// A server-wide cap on the bytes that read-ahead holds: every plain download takes what it fetches ahead
// from one budget, so that many slow clients together cannot hold unbounded memory.
//
// A stream that holds nothing may always take what it needs for the bytes it must send next (Take), so a
// full budget slows streams down to no read-ahead but never stops one: the total held stays within the
// capacity plus one fetch unit per stream.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <atomic>
#include <cstdint>

namespace cairn::files {

class ByteBudget {
 public:
  explicit ByteBudget(uint64_t capacity) : capacity_(capacity) {}
  ByteBudget(const ByteBudget&) = delete;
  ByteBudget& operator=(const ByteBudget&) = delete;

  // Takes `n` bytes if that keeps the total within the capacity.
  bool TryTake(uint64_t n) {
    uint64_t used = used_.load(std::memory_order_relaxed);
    do {
      if (used + n > capacity_) return false;
    } while (!used_.compare_exchange_weak(used, used + n, std::memory_order_relaxed));
    return true;
  }
  // Takes `n` bytes whatever the total (see above).
  void Take(uint64_t n) { used_.fetch_add(n, std::memory_order_relaxed); }
  void Give(uint64_t n) { used_.fetch_sub(n, std::memory_order_relaxed); }

  uint64_t in_use() const { return used_.load(std::memory_order_relaxed); }
  uint64_t capacity() const { return capacity_; }

 private:
  const uint64_t capacity_;
  std::atomic<uint64_t> used_{0};
};

}  // namespace cairn::files
