// The collector on a schedule, inside `cairn serve` (gc_interval): a thread that runs the collector every
// interval, logs each run and keeps the figures /metrics shows. On several nodes each runs its own schedule;
// the index's collector lock makes them take turns (a run that waited finds little left to do).
//
// Thread-safety: last() and the counters may be read from any thread. Stops (after the run in progress, if
// any, which is safe to cut short at its next step or the mark's next pause) and joins when destroyed.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <thread>

#include "gc/collector.h"

namespace cairn::gc {

class Scheduler {
 public:
  static constexpr int kNice = 19;  // the collector's thread yields the CPU to everything else
  // The index slices and `store` must outlive the scheduler. The first run comes one interval after the
  // start.
  Scheduler(index::CasIndex& cas, index::RepoIndex& repos, index::GcIndex& gc, store::BlobStore& store,
            GcOptions options, std::chrono::seconds interval);
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // The report of the last run that finished (nullopt before the first).
  std::optional<GcReport> last() const;
  uint64_t runs() const { return runs_.load(); }
  uint64_t failures() const { return failures_.load(); }
  uint64_t reclaimed_bytes() const { return reclaimed_bytes_.load(); }  // over every run of this process

 private:
  void Run();

  Collector collector_;
  const std::chrono::seconds interval_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;             // guarded by mu_
  std::optional<GcReport> last_;  // guarded by mu_
  std::atomic<uint64_t> runs_{0};
  std::atomic<uint64_t> failures_{0};
  std::atomic<uint64_t> reclaimed_bytes_{0};
  std::thread thread_;  // last: starts once the members above exist
};

}  // namespace cairn::gc
