// Test support: the fault seam for index reads and writes. An index that passes everything through
// (forwarding_index.h) but asks a test's hook first (overriding ForwardingIndex::Before, so every method of
// the interface, present and future, passes the seam), so a test can fail chosen calls (or all of them) with
// the errors a database gives (kIo, kUnavailable) and prove that callers report an index failure as one:
// never taken for "not found", never a half-made change. The backends' own write seam
// (SqliteOptions::fault_before_commit) fails a COMMIT after the statements ran.
//
// Thread-safety: as the inner index; set `fault` before the calls it should see.
#pragma once

#include <atomic>
#include <functional>
#include <span>
#include <string_view>
#include <vector>

#include "index/forwarding_index.h"

namespace cairn::index::testing {

class FaultyIndex final : public ForwardingIndex {
 public:
  using ForwardingIndex::ForwardingIndex;

  // Asked before every call that can fail, with the method's name and, for the calls given repository object
  // keys, those keys: an error is answered instead of the call. Null (the default): every call goes through.
  using Fault = std::function<Status(std::string_view call, std::span<const std::vector<uint8_t>> keys)>;
  Fault fault;

  // How many calls were made so far.
  size_t calls() const { return calls_; }

 protected:
  Status Before(std::string_view call, std::span<const std::vector<uint8_t>> keys) override {
    ++calls_;
    return fault ? fault(call, keys) : Status(Ok{});
  }

 private:
  std::atomic<size_t> calls_{0};
};

}  // namespace cairn::index::testing
