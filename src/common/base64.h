// Base64 encoding (RFC 4648 §4 and §5): the standard alphabet with '=' padding, or the URL-safe alphabet
// without padding, as JWTs write it. Encoding only; the decoders live with the parsers that need them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace cairn {

inline std::string Base64Encode(std::string_view in, bool url_safe = false) {
  const char* alphabet = url_safe ? "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
                                  : "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  uint32_t acc = 0;
  int bits = 0;
  for (const char c : in) {
    acc = acc << 8 | static_cast<uint8_t>(c);
    bits += 8;
    while (bits >= 6) {
      bits -= 6;
      out.push_back(alphabet[(acc >> bits) & 63]);
    }
  }
  if (bits > 0) out.push_back(alphabet[(acc << (6 - bits)) & 63]);
  while (!url_safe && out.size() % 4 != 0) out.push_back('=');
  return out;
}

}  // namespace cairn
