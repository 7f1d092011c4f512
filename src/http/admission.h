// Admission control: at most `limit` requests of a kind in flight at once. A route with a gate admits a
// request after its header (and its token) and before its body is read; past the limit it answers 503 with
// Retry-After, which the stock clients retry. Uploads are buffered in memory (a xorb up to 64 MiB), so this
// is what bounds the memory they take.
//
// Tenants share fairly. Each request enters as a tenant (the route says which: a namespace, a token's scope;
// "" for a route that names none). While slots are free anyone enters, so a lone tenant may use them all.
// When the gate is full and the newcomer's tenant holds fewer tickets than its fair share — limit / the
// number of tenants holding tickets, the newcomer's counted, at least 1 — the tenant holding the most
// tickets, if that is more than its share, gives one up: its most recently admitted ticket whose body is
// still arriving (the least work lost). Without that, one tenant's slow-but-not-too-slow uploads could keep
// every slot for minutes while everyone else got 503s.
//
// Slow holders give way. A full gate would let a few hundred connections trickling their bodies keep every
// slot (each until its body-rate timeout) while real uploads get 503s. So when the gate is full and fairness
// frees nothing, the ticket of any tenant whose body has arrived slowest — held for at least `preempt_after`
// (1 s) and received below `preempt_below_rate` (256 KiB/s) — is preempted and the newcomer admitted.
//
// A preempted request ends with 408, as a body-rate timeout does; a ticket is preempted at most once, never
// once its body is complete, and only if the server said how to end it (OnPreempt). The count may pass the
// limit by the preempted requests for the moment they take to end; a preempted ticket no longer counts for
// its tenant's share.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

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
    // Its body still arriving, and the server said how to end it.
    bool preemptible() {
      std::lock_guard lock(mu_);
      return !body_complete_.load(std::memory_order_relaxed) && static_cast<bool>(preempt_);
    }

    Clock::time_point admitted_ = Clock::now();
    std::string tenant_;  // set before the ticket is shared
    std::atomic<uint64_t> body_bytes_{0};
    std::atomic<bool> body_complete_{false};
    std::mutex mu_;
    std::function<void()> preempt_;
    bool preempted_ = false;  // guarded by the gate's mu_
  };

  explicit AdmissionGate(size_t limit, std::chrono::milliseconds preempt_after = std::chrono::seconds(1),
                         uint64_t preempt_below_rate = 256 << 10)
      : limit_(limit), preempt_after_(preempt_after), preempt_below_rate_(preempt_below_rate) {}

  // A ticket for `tenant`, or null when `limit` requests hold one and none gives way (fairness, then
  // slowness).
  std::shared_ptr<Ticket> TryEnter(std::string_view tenant = {}) {
    std::function<void()> preempt;  // called once the lock is released: it may end a request, which takes it
    std::shared_ptr<Ticket> out;
    {
      std::lock_guard lock(mu_);
      if (in_flight_ >= limit_) {
        preempt = TakeFromHog(tenant);
        if (preempt) {
          ++fair_preempted_;
        } else {
          preempt = TakeSlowest();
          if (!preempt) return nullptr;
          ++preempted_;
        }
      }
      ++in_flight_;
      auto ticket = std::make_shared<Ticket>();
      ticket->tenant_ = std::string(tenant);
      ++held_[ticket->tenant_];
      auto it = holders_.insert(holders_.end(), ticket);
      // The ticket's deleter keeps the gate alive, so it may outlive the route table.
      auto self = shared_from_this();
      out = {ticket.get(), [self, ticket, it](Ticket*) mutable {
               std::lock_guard relock(self->mu_);
               --self->in_flight_;
               if (!ticket->preempted_) self->Release(ticket->tenant_);
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
  // Slow bodies preempted for a newcomer.
  uint64_t preempted() const { return preempted_.load(); }
  // Tickets taken from a tenant over its fair share for another's newcomer.
  uint64_t fair_preempted() const { return fair_preempted_.load(); }

 private:
  // With mu_ held: a tenant's ticket is no longer counted for it.
  void Release(const std::string& tenant) {
    auto it = held_.find(tenant);
    if (it != held_.end() && --it->second == 0) held_.erase(it);
  }

  // With mu_ held: marks `t` preempted and returns how to end it (empty: the server did not say how).
  std::function<void()> Preempt(Ticket& t) {
    std::function<void()> preempt;
    {
      std::lock_guard lock(t.mu_);
      preempt = std::move(t.preempt_);
    }
    if (!preempt) return {};
    t.preempted_ = true;
    Release(t.tenant_);
    return preempt;
  }

  // With mu_ held: when `tenant` holds less than its fair share, a ticket of the tenant holding the most
  // (more than its share), the most recently admitted one still receiving its body, marked preempted; how to
  // end it (empty: none). A hog whose every ticket is complete leaves the next hog to give way.
  std::function<void()> TakeFromHog(std::string_view tenant) {
    const auto mine = held_.find(tenant);
    const size_t held = mine == held_.end() ? 0 : mine->second;
    const size_t tenants = held_.size() + (mine == held_.end() ? 1 : 0);
    const size_t share = std::max<size_t>(1, limit_ / tenants);
    if (held >= share) return {};
    Ticket* pick = nullptr;
    size_t pick_held = share;  // only a tenant above its share gives way
    for (auto it = holders_.rbegin(); it != holders_.rend(); ++it) {  // newest first: ties go to the newest
      Ticket& t = **it;
      if (t.preempted_) continue;
      const size_t count = held_.find(t.tenant_)->second;
      if (count > pick_held && t.preemptible()) {
        pick = &t;
        pick_held = count;
      }
    }
    return pick == nullptr ? std::function<void()>() : Preempt(*pick);
  }

  // With mu_ held: the slowest holder that may give way, marked preempted; how to end it (empty: none).
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
    return slowest == nullptr ? std::function<void()>() : Preempt(*slowest);
  }

  const size_t limit_;
  const std::chrono::milliseconds preempt_after_;
  const uint64_t preempt_below_rate_;  // bytes per second
  mutable std::mutex mu_;
  size_t in_flight_ = 0;
  std::list<std::shared_ptr<Ticket>> holders_;       // in order of admission
  std::map<std::string, size_t, std::less<>> held_;  // tickets not preempted, by tenant (none: absent)
  std::atomic<uint64_t> preempted_{0};
  std::atomic<uint64_t> fair_preempted_{0};
};

}  // namespace cairn::http
