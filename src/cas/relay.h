// Xorb bytes in transit: a file another server holds, being copied here (the pull-through mirror,
// mirror/relay.h), whose reconstruction this server answers before the file is stored — with the other
// server's terms and xorb ranges, under this server's own signed transfer URLs — and whose ranges it sends
// on as they arrive. The CAS routes ask a relay about a file they do not find, and about a transfer of a
// xorb the store does not hold.
//
// Thread-safety: every method may be called concurrently, from request threads. Ownership: whoever
// registers the routes keeps the relay alive while they serve.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "cas/reconstruction.h"
#include "common/error.h"
#include "common/unique_fd.h"
#include "xet/hash.h"

namespace cairn::cas {

// Where a relayed range's bytes lie once they may be sent: `fd` (a descriptor of the caller's own) holds
// them from `offset` on.
struct RelayedBytes {
  UniqueFd fd;
  uint64_t offset = 0;
};

// A relayed range of a xorb: bytes [0, length) of it, sent once all of them arrived and verified.
class RelayedRange {
 public:
  virtual ~RelayedRange() = default;
  virtual uint64_t length() const = 0;
  // Waits until every byte of the range arrived and verified, then gives the file that holds them (sent from
  // with sendfile(2): never copied through this process); kUnavailable when the transfer failed or its bytes
  // did not verify (the client asks again).
  virtual Result<RelayedBytes> AwaitBytes() const = 0;
};

class Relay {
 public:
  virtual ~Relay() = default;
  // The plan of an answer for `range` (whole file when empty) of `file` as it is being copied, when a copy
  // is in transit and `scope` may read it (nullopt otherwise: the file is asked of the index as usual). Its
  // xorbs' signing states are left for CasService::AnswerRelayed to prepare.
  virtual std::optional<ReconstructionPlan> Plan(const xet::FileHash& file, const std::string& scope,
                                                 std::optional<ByteRange> range) = 0;
  // Bytes [first, last] of `xorb` when they are relayed (null otherwise).
  virtual std::shared_ptr<const RelayedRange> Open(const xet::XorbHash& xorb, uint64_t first,
                                                   uint64_t last) = 0;
};

// A relay made of two functions (for one whose owner is made after the routes that ask it).
class FunctionRelay final : public Relay {
 public:
  using PlanFn = std::function<std::optional<ReconstructionPlan>(const xet::FileHash&, const std::string&,
                                                                 std::optional<ByteRange>)>;
  using OpenFn = std::function<std::shared_ptr<const RelayedRange>(const xet::XorbHash&, uint64_t, uint64_t)>;
  FunctionRelay(PlanFn plan, OpenFn open) : plan_(std::move(plan)), open_(std::move(open)) {}
  std::optional<ReconstructionPlan> Plan(const xet::FileHash& file, const std::string& scope,
                                         std::optional<ByteRange> range) override {
    return plan_(file, scope, range);
  }
  std::shared_ptr<const RelayedRange> Open(const xet::XorbHash& xorb, uint64_t first,
                                           uint64_t last) override {
    return open_(xorb, first, last);
  }

 private:
  PlanFn plan_;
  OpenFn open_;
};

}  // namespace cairn::cas
