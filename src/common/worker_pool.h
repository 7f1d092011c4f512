// A fixed set of worker threads for CPU-heavy work (xorb validation, large answers), so network threads never
// block on it. ParallelFor splits one job across the workers and the calling thread.
//
// Thread-safety: every public method may be called from any thread. A job runs to completion before
// ParallelFor returns; jobs from several callers share the workers fairly (first come, first served).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace cairn {

class WorkerPool {
 public:
  explicit WorkerPool(size_t threads);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  size_t size() const { return threads_.size(); }

  // Runs task(i) for every i in [0, count); the caller works too, so this makes progress even when every
  // worker is busy. Returns when all tasks are done.
  void ParallelFor(size_t count, const std::function<void(size_t)>& task);

 private:
  struct Job;
  void Run();

  std::mutex mu_;
  std::condition_variable cv_;    // work queued, or stopping
  std::condition_variable done_;  // a job's last helper left
  std::deque<Job*> queue_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace cairn
