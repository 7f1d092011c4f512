// Client strings on their way into a log line or a terminal: printable ASCII stays, every other byte (and the
// backslash and double quote that would make the result ambiguous) is written \xHH, so no line break, escape
// sequence or forged field survives.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "common/hex.h"

namespace cairn {

// `s` escaped as above; at most `max_bytes` of it, then "..." when it was longer.
inline std::string Printable(std::string_view s, size_t max_bytes = std::string_view::npos) {
  std::string out;
  for (size_t i = 0; i < s.size() && i < max_bytes; ++i) {
    const auto b = static_cast<unsigned char>(s[i]);
    if (b >= 0x20 && b < 0x7f && b != '\\' && b != '"') {
      out += static_cast<char>(b);
    } else {
      out += "\\x";
      AppendHexByte(out, b);
    }
  }
  if (s.size() > max_bytes) out += "...";
  return out;
}

}  // namespace cairn
