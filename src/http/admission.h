// Admission control: at most `limit` requests of a kind in flight at once. A route with a gate admits a
// request after its header (and its token) and before its body is read; past the limit it answers 503 with
// Retry-After, which the stock clients retry. Uploads are buffered in memory (a xorb up to 64 MiB), so this
// is what bounds the memory they take.
//
// Slow holders give way. A full gate would let a few hundred connections trickling their bodies keep every
// slot (each until its body-rate timeout) while real uploads get 503s. So when the gate is full, the ticket
// whose body has arrived slowest — held for at least `preempt_after` (1 s) and received below
// `preempt_below_rate` (256 KiB/s) — is preempted (its request ends with 408, as a body-rate timeout does)
// and the newcomer is admitted in its place. The count may pass the limit by the preempted requests for the
// moment they take to end.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>

namespace cairn::http {

class AdmissionGate : public std::enable_shared_from_this<AdmissionGate> {
 public:
  using Clock = std::chrono::steady_clock;

  // Held for as long as the request is in flight (released when the last copy goes).
  class Ticket {
   public:
    // The request's body bytes received so far (the server counts them as they arrive).
    void AddBodyBytes(uint64_t n) { body_bytes_.fetch_add(n, std::memory_order_relaxed); }
    // The whole body has arrived: the request no longer gives way.
    void BodyComplete() { body_complete_.store(true, std::memory_order_relaxed); }
    // How to end the request if it is preempted; called at most once, from any thread.
    void OnPreempt(std::function<void()> fn) {
      std::lock_guard lock(mu_);
      preempt_ = std::move(fn);
    }

   private:
    friend class AdmissionGate;
    Clock::time_point admitted_ = Clock::now();
    std::atomic<uint64_t> body_bytes_{0};
    std::atomic<bool> body_complete_{false};
    std::mutex mu_;
    std::function<void()> preempt_;
    bool preempted_ = false;
  };

  explicit AdmissionGate(size_t limit, std::chrono::milliseconds preempt_after = std::chrono::seconds(1),
                         uint64_t preempt_below_rate = 256 << 10)
      : limit_(limit), preempt_after_(preempt_after), preempt_below_rate_(preempt_below_rate) {}

  // A ticket, or null when `limit` requests hold one and none of them is slow enough to give way.
  std::shared_ptr<Ticket> TryEnter() {
    std::function<void()> preempt;  // called once the lock is released: it may end a request, which takes it
    std::shared_ptr<Ticket> out;
    {
      std::lock_guard lock(mu_);
      if (in_flight_ >= limit_) {
        preempt = TakeSlowest();
        if (!preempt) return nullptr;
      }
      ++in_flight_;
      auto ticket = std::make_shared<Ticket>();
      auto it = holders_.insert(holders_.end(), ticket);
      // The ticket's deleter keeps the gate alive, so it may outlive the route table.
      auto self = shared_from_this();
      out = {ticket.get(), [self, ticket, it](Ticket*) mutable {
               std::lock_guard relock(self->mu_);
               --self->in_flight_;
               self->holders_.erase(it);
               ticket.reset();
             }};
    }
    if (preempt) preempt();
    return out;
  }

  size_t in_flight() const {
    std::lock_guard lock(mu_);
    return in_flight_;
  }
  size_t limit() const { return limit_; }
  uint64_t preempted() const { return preempted_.load(); }

 private:
  // The slowest holder that may give way, marked preempted: how to end it (empty: none). With mu_ held.
  std::function<void()> TakeSlowest() {
    const auto now = Clock::now();
    Ticket* slowest = nullptr;
    double slowest_rate = static_cast<double>(preempt_below_rate_);
    for (const auto& t : holders_) {
      if (t->preempted_ || t->body_complete_.load(std::memory_order_relaxed) ||
          now - t->admitted_ < preempt_after_)
        continue;
      const double held = std::chrono::duration<double>(now - t->admitted_).count();
      const double rate = static_cast<double>(t->body_bytes_.load(std::memory_order_relaxed)) / held;
      if (rate < slowest_rate) {
        slowest_rate = rate;
        slowest = t.get();
      }
    }
    if (slowest == nullptr) return {};
    std::function<void()> preempt;
    {
      std::lock_guard lock(slowest->mu_);
      preempt = std::move(slowest->preempt_);
    }
    if (!preempt) return {};  // not a body it can stop (the server did not say how)
    slowest->preempted_ = true;
    ++preempted_;
    return preempt;
  }

  const size_t limit_;
  const std::chrono::milliseconds preempt_after_;
  const uint64_t preempt_below_rate_;  // bytes per second
  mutable std::mutex mu_;
  size_t in_flight_ = 0;
  std::list<std::shared_ptr<Ticket>> holders_;
  std::atomic<uint64_t> preempted_{0};
};

}  // namespace cairn::http
