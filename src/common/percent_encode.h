// Percent-encoding for URL components (RFC 3986), and its decoding: ASCII letters and digits stay, and so do
// the characters of `keep`; every other byte becomes %XX (uppercase, as RFC 3986 and SigV4 ask). With the
// default `keep` (RFC 3986's unreserved marks) the result is safe for a query value and for one path segment
// ('/' is encoded too); RFC 8187's attr-char set ("!#$&+-.^_`|~") encodes a Content-Disposition filename*.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "common/hex.h"

namespace cairn {

inline constexpr std::string_view kUnreservedMarks = "-._~";
inline constexpr std::string_view kAttrCharMarks = "!#$&+-.^_`|~";

inline std::string PercentEncode(std::string_view s, std::string_view keep = kUnreservedMarks) {
  std::string out;
  out.reserve(s.size());
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
        (c < 0x80 && keep.find(ch) != std::string_view::npos)) {
      out.push_back(ch);
    } else {
      out.push_back('%');
      AppendHexByte(out, c, /*upper=*/true);
    }
  }
  return out;
}

// `s` with each %XX taken back to its byte ('+' stays); nullopt when a '%' is not followed by two hex digits.
inline std::optional<std::string> PercentDecode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out.push_back(s[i]);
      continue;
    }
    uint8_t byte = 0;
    if (i + 2 >= s.size()) return std::nullopt;
    if (!HexDecode(s.substr(i + 1, 2), std::span<uint8_t>(&byte, 1))) return std::nullopt;
    out.push_back(static_cast<char>(byte));
    i += 2;
  }
  return out;
}

}  // namespace cairn
