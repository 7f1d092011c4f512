// Percent-encoding for URL components (RFC 3986): ASCII letters and digits stay, and so do the characters of
// `keep`; every other byte becomes %XX (uppercase, as RFC 3986 and SigV4 ask). With the default `keep` (RFC
// 3986's unreserved marks) the result is safe for a query value and for one path segment ('/' is encoded
// too); RFC 8187's attr-char set ("!#$&+-.^_`|~") encodes a Content-Disposition filename*.
#pragma once

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

}  // namespace cairn
