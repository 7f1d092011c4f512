#include "common/worker_pool.h"

#include <algorithm>
#include <atomic>

namespace cairn {

struct WorkerPool::Job {
  const std::function<void(size_t)>* task = nullptr;
  size_t count = 0;
  std::atomic<size_t> next{0};
  size_t helpers = 0;  // workers inside Work(); guarded by the pool's mutex

  void Work() {
    for (size_t i; (i = next.fetch_add(1)) < count;) (*task)(i);
  }
};

WorkerPool::WorkerPool(size_t threads) {
  threads_.reserve(threads);
  for (size_t i = 0; i < threads; ++i) threads_.emplace_back([this] { Run(); });
}

WorkerPool::~WorkerPool() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void WorkerPool::ParallelFor(size_t count, const std::function<void(size_t)>& task) {
  if (count == 0) return;
  if (count == 1 || threads_.empty()) {
    for (size_t i = 0; i < count; ++i) task(i);
    return;
  }
  Job job;
  job.task = &task;
  job.count = count;
  {
    std::lock_guard lock(mu_);
    queue_.push_back(&job);
  }
  cv_.notify_all();
  job.Work();
  // Every task is claimed now. Unqueue the job so no new worker joins, then wait for the workers still
  // running tasks they claimed: once none is left, every task has finished and `job` may go out of scope.
  std::unique_lock lock(mu_);
  std::erase(queue_, &job);
  done_.wait(lock, [&] { return job.helpers == 0; });
}

void WorkerPool::Run() {
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (stopping_) return;
    Job* job = queue_.front();
    if (job->next.load() >= job->count) {
      queue_.pop_front();  // fully claimed; its owner is finishing it
      continue;
    }
    ++job->helpers;
    lock.unlock();
    job->Work();
    lock.lock();
    if (--job->helpers == 0) done_.notify_all();
  }
}

}  // namespace cairn
