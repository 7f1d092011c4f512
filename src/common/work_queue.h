// A bounded queue of tasks run by a fixed set of threads: where handlers put CPU-heavy or blocking work
// (xorb validation, shard verification, large answers, disk writes) so the I/O threads never block.
// Post() refuses work when the queue is full, so a flood of requests turns into 503s instead of unbounded
// memory.
//
// Thread-safety: every method may be called from any thread. The destructor stops the threads after the task
// each is running; tasks still queued are destroyed without running.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace cairn {

class WorkQueue {
 public:
  WorkQueue(size_t threads, size_t max_queued);
  ~WorkQueue();
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  // Queues `task`; false (task dropped) when max_queued tasks are already waiting or the queue is stopping.
  bool Post(std::function<void()> task);

  size_t threads() const { return threads_.size(); }
  size_t queued() const;

 private:
  void Run();

  const size_t max_queued_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace cairn
