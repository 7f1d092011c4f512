// Group commit for the index backends: callers submit a write and block until it is durable; writer threads
// each take everything queued at once as one batch and run it as one transaction (one fsync for the lot).
// Under load, batches grow by themselves: while one transaction commits, the next batch queues up.
//
// Thread-safety: Submit may be called from any thread. `run` is called on a writer thread with that writer's
// number (so a backend can keep one connection per writer) and must return one status per request, in order.
// Ownership: requests are the callers'; they stay alive until Submit returns. Stopping (the destructor)
// finishes everything already queued and refuses what comes later.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <span>
#include <thread>
#include <utility>
#include <vector>

#include "common/error.h"
#include "index/index.h"

namespace cairn::index {

template <typename Request>
class WriteQueue {
 public:
  using Runner = std::function<std::vector<Status>(size_t writer, std::span<Request* const> batch)>;

  // `before_batch` (tests) runs on the writer thread with each batch's size, before its transaction.
  WriteQueue(size_t writers, Runner run, std::function<void(size_t)> before_batch)
      : run_(std::move(run)), before_batch_(std::move(before_batch)) {
    for (size_t i = 0; i < (writers == 0 ? 1 : writers); ++i) threads_.emplace_back([this, i] { Loop(i); });
  }
  ~WriteQueue() {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
  }
  WriteQueue(const WriteQueue&) = delete;
  WriteQueue& operator=(const WriteQueue&) = delete;

  // Blocks until `req` ran (durably, or failing with nothing stored).
  Status Submit(Request& req) {
    Slot slot{&req};
    std::unique_lock lock(mu_);
    if (stopping_) return IoError("index is closing");
    queue_.push_back(&slot);
    cv_.notify_one();
    done_cv_.wait(lock, [&] { return slot.done; });
    return std::move(slot.status);
  }

  WriteStats stats() const {
    std::lock_guard lock(mu_);
    WriteStats s = stats_;
    s.queued = queue_.size();
    return s;
  }

 private:
  struct Slot {
    Request* request;
    bool done = false;
    Status status = Ok{};
  };

  void Loop(size_t writer) {
    std::vector<Slot*> batch;
    std::vector<Request*> requests;
    for (;;) {
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) return;  // stopping, and everything queued is done
        batch.assign(queue_.begin(), queue_.end());
        queue_.clear();
      }
      if (before_batch_) before_batch_(batch.size());
      requests.clear();
      for (Slot* s : batch) requests.push_back(s->request);
      std::vector<Status> results = run_(writer, requests);
      results.resize(batch.size(), IoError("index writer returned no result"));
      {
        std::lock_guard lock(mu_);
        stats_.requests += batch.size();
        stats_.transactions += 1;
        for (size_t i = 0; i < batch.size(); ++i) {
          batch[i]->status = std::move(results[i]);
          batch[i]->done = true;
        }
      }
      done_cv_.notify_all();
    }
  }

  const Runner run_;
  const std::function<void(size_t)> before_batch_;
  mutable std::mutex mu_;
  std::condition_variable cv_;       // work queued, or stopping
  std::condition_variable done_cv_;  // a batch finished
  std::deque<Slot*> queue_;
  bool stopping_ = false;
  WriteStats stats_;
  std::vector<std::thread> threads_;  // last: started once everything above exists
};

}  // namespace cairn::index
