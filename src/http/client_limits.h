// Who the client of a connection is, and how much of the server one client may hold.
//
// Behind a reverse proxy every connection comes from the proxy, so a per-address cap would cap the proxy. The
// operator names the proxies it trusts (addresses or CIDR ranges); for a connection from one of them the
// client is read from X-Forwarded-For: the rightmost entry that is not itself a trusted proxy (each proxy
// appends the address it saw, so entries further left were written by the client and may be forged). From
// anyone else X-Forwarded-For is ignored.
//
// Thread-safety: AddressSet is immutable after Parse; PerKeyLimiter's methods may be called from any thread.
#pragma once

#include <array>
#include <boost/asio/ip/address.hpp>
#include <cstddef>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "http/result.h"

namespace cairn::http {

// A set of addresses given as "10.1.2.3", "10.0.0.0/8", "::1", "fd00::/8".
class AddressSet {
 public:
  // Error (400, naming the entry) for an entry that is not an address or a range.
  static Result<AddressSet> Parse(const std::vector<std::string>& entries);
  bool Contains(const boost::asio::ip::address& a) const;
  bool empty() const { return ranges_.empty(); }

 private:
  struct Range {
    std::array<uint8_t, 16> bytes{};  // IPv4 as IPv4-mapped IPv6
    unsigned prefix = 128;
  };
  std::vector<Range> ranges_;
};

// The client's address, as text: `peer` unless it is in `trusted`, else from `forwarded_for` (see above;
// `peer` when the header is absent or its rightmost entry does not parse).
std::string ClientAddress(const boost::asio::ip::address& peer, std::string_view forwarded_for,
                          const AddressSet& trusted);

// Counts holders per key (a client address) up to `cap` (0: no cap).
class PerKeyLimiter {
 public:
  explicit PerKeyLimiter(size_t cap) : cap_(cap) {}
  // Takes one unit for `key`; false (nothing taken) when `key` holds `cap` already.
  bool TryAcquire(const std::string& key);
  void Release(const std::string& key);
  size_t held(const std::string& key) const;
  size_t cap() const { return cap_; }

 private:
  const size_t cap_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, size_t> held_;
};

}  // namespace cairn::http
