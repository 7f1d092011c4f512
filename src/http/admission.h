// Admission control: at most `limit` requests of a kind in flight at once. A route with a gate admits a
// request after its header (and its token) and before its body is read; past the limit it answers 503 with
// Retry-After, which the stock clients retry. Uploads are buffered in memory (a xorb up to 64 MiB), so this
// is what bounds the memory they take.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>

namespace cairn::http {

class AdmissionGate : public std::enable_shared_from_this<AdmissionGate> {
 public:
  explicit AdmissionGate(size_t limit) : limit_(limit) {}

  // A ticket held for as long as the request is in flight (released when the last copy goes), or null when
  // `limit` requests hold one already.
  std::shared_ptr<void> TryEnter() {
    size_t n = in_flight_.load();
    do {
      if (n >= limit_) return nullptr;
    } while (!in_flight_.compare_exchange_weak(n, n + 1));
    // The ticket keeps the gate alive, so it may outlive the route table.
    auto self = shared_from_this();
    return {self.get(), [self](void*) { self->in_flight_.fetch_sub(1); }};
  }

  size_t in_flight() const { return in_flight_.load(); }
  size_t limit() const { return limit_; }

 private:
  const size_t limit_;
  std::atomic<size_t> in_flight_{0};
};

}  // namespace cairn::http
