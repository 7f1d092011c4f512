#include "http/client_limits.h"

#include <algorithm>
#include <optional>

#include "common/media_type.h"

namespace cairn::http {

namespace {

namespace ip = boost::asio::ip;

std::array<uint8_t, 16> Bytes16(const ip::address& a) {
  if (a.is_v6()) return a.to_v6().to_bytes();
  return ip::make_address_v6(ip::v4_mapped, a.to_v4()).to_bytes();
}

// An X-Forwarded-For entry: an address, "[v6]:port" or "v4:port".
std::optional<ip::address> ParseEntry(std::string_view e) {
  boost::system::error_code ec;
  auto a = ip::make_address(e, ec);
  if (!ec) return a;
  if (e.starts_with('[')) {
    const size_t close = e.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    a = ip::make_address(e.substr(1, close - 1), ec);
  } else if (std::count(e.begin(), e.end(), ':') == 1) {
    a = ip::make_address(e.substr(0, e.find(':')), ec);
  } else {
    return std::nullopt;
  }
  if (ec) return std::nullopt;
  return a;
}

}  // namespace

Result<AddressSet> AddressSet::Parse(const std::vector<std::string>& entries) {
  AddressSet set;
  for (const std::string& raw : entries) {
    const std::string_view entry = TrimOws(raw);
    if (entry.empty()) continue;
    const size_t slash = entry.find('/');
    boost::system::error_code ec;
    const auto a = ip::make_address(entry.substr(0, slash), ec);
    if (ec) return Malformed("trusted proxy '" + raw + "' is not an address or a range");
    Range r;
    r.bytes = Bytes16(a);
    const unsigned width = a.is_v4() ? 32 : 128;
    unsigned prefix = width;
    if (slash != std::string_view::npos) {
      const std::string_view digits = entry.substr(slash + 1);
      if (digits.empty() || digits.size() > 3 || !std::all_of(digits.begin(), digits.end(), ::isdigit))
        return Malformed("trusted proxy '" + raw + "': bad prefix length");
      prefix = static_cast<unsigned>(std::stoul(std::string(digits)));
      if (prefix > width) return Malformed("trusted proxy '" + raw + "': prefix longer than the address");
    }
    r.prefix = prefix + (a.is_v4() ? 96 : 0);
    set.ranges_.push_back(r);
  }
  return set;
}

bool AddressSet::Contains(const ip::address& a) const {
  const auto b = Bytes16(a);  // an IPv4-mapped IPv6 peer matches IPv4 ranges too
  for (const Range& r : ranges_) {
    const unsigned full = r.prefix / 8, rest = r.prefix % 8;
    if (!std::equal(b.begin(), b.begin() + full, r.bytes.begin())) continue;
    if (rest != 0) {
      const auto mask = static_cast<uint8_t>(0xff << (8 - rest));
      if ((b[full] & mask) != (r.bytes[full] & mask)) continue;
    }
    return true;
  }
  return false;
}

std::string ClientAddress(const ip::address& peer, std::string_view forwarded_for,
                          const AddressSet& trusted) {
  if (trusted.empty() || !trusted.Contains(peer)) return peer.to_string();
  std::string client = peer.to_string();
  // Right to left, while the hop that wrote the entry is trusted.
  while (!forwarded_for.empty()) {
    const size_t comma = forwarded_for.rfind(',');
    const std::string_view entry =
        TrimOws(comma == std::string_view::npos ? forwarded_for : forwarded_for.substr(comma + 1));
    forwarded_for = comma == std::string_view::npos ? std::string_view() : forwarded_for.substr(0, comma);
    const auto a = ParseEntry(entry);
    if (!a) break;  // garbage from a trusted hop: keep the last address known good
    client = a->to_string();
    if (!trusted.Contains(*a)) break;
  }
  return client;
}

bool PerKeyLimiter::TryAcquire(const std::string& key) {
  std::lock_guard lock(mu_);
  size_t& n = held_[key];
  if (cap_ != 0 && n >= cap_) {
    if (n == 0) held_.erase(key);
    return false;
  }
  ++n;
  return true;
}

void PerKeyLimiter::Release(const std::string& key) {
  std::lock_guard lock(mu_);
  auto it = held_.find(key);
  if (it == held_.end()) return;
  if (--it->second == 0) held_.erase(it);
}

size_t PerKeyLimiter::held(const std::string& key) const {
  std::lock_guard lock(mu_);
  auto it = held_.find(key);
  return it == held_.end() ? 0 : it->second;
}

}  // namespace cairn::http
