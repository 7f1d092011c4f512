#include "common/work_queue.h"

#include <utility>

namespace cairn {

WorkQueue::WorkQueue(size_t threads, size_t max_queued) : max_queued_(max_queued) {
  if (threads == 0) threads = 1;
  threads_.reserve(threads);
  for (size_t i = 0; i < threads; ++i) threads_.emplace_back([this] { Run(); });
}

WorkQueue::~WorkQueue() {
  std::deque<std::function<void()>> dropped;
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    dropped.swap(tasks_);
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
  // `dropped` is destroyed here, outside the lock: a task's captures may do work in their destructors.
}

bool WorkQueue::Post(std::function<void()> task) {
  {
    std::lock_guard lock(mu_);
    if (stopping_ || tasks_.size() >= max_queued_) return false;
    tasks_.push_back(std::move(task));
  }
  cv_.notify_one();
  return true;
}

size_t WorkQueue::queued() const {
  std::lock_guard lock(mu_);
  return tasks_.size();
}

void WorkQueue::Run() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !tasks_.empty(); });
      if (stopping_) return;
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
  }
}

}  // namespace cairn
