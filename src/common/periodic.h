// A task run on a thread of its own every interval, and at once when woken, until its owner destroys it:
// the server's refreshes (signing keys, people) and the audit log's pruning.
//
// Thread-safety: Wake may be called from any thread. The destructor stops the thread, waiting for a run in
// progress to end; `fn` must not destroy its Periodic. Ownership: `fn` is kept for the Periodic's life.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>

namespace cairn {

class Periodic {
 public:
  // `fn(woken)` runs every `every` after the last run ended; `woken` says whether Wake() brought it early.
  Periodic(std::chrono::milliseconds every, std::function<void(bool woken)> fn)
      : every_(every), fn_(std::move(fn)), thread_([this] { Run(); }) {}
  ~Periodic() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  Periodic(const Periodic&) = delete;
  Periodic& operator=(const Periodic&) = delete;

  // Runs the task now (once, however often it is woken before it runs).
  void Wake() {
    {
      std::lock_guard lock(mu_);
      wake_ = true;
    }
    cv_.notify_all();
  }

 private:
  void Run() {
    std::unique_lock lock(mu_);
    while (!stop_) {
      cv_.wait_for(lock, every_, [this] { return stop_ || wake_; });
      if (stop_) return;
      const bool woken = std::exchange(wake_, false);
      lock.unlock();
      fn_(woken);
      lock.lock();
    }
  }

  const std::chrono::milliseconds every_;
  const std::function<void(bool)> fn_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool wake_ = false;
  std::thread thread_;  // last: starts once the members above exist
};

}  // namespace cairn
