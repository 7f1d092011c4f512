// Hexadecimal: the one encoder and decoder of every layer (hashes, MACs, secrets, git object ids, request
// ids, chunked sizes, percent-encoding, escaped log bytes). Pure functions; no allocation but the returned
// strings.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace cairn {

inline constexpr char kLowerHexDigits[] = "0123456789abcdef";
inline constexpr char kUpperHexDigits[] = "0123456789ABCDEF";

// The value of one hex digit of either case, or -1 for any other character.
constexpr int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Appends the two digits of `b`, the high nibble first.
inline void AppendHexByte(std::string& out, uint8_t b, bool upper = false) {
  const char* digits = upper ? kUpperHexDigits : kLowerHexDigits;
  out.push_back(digits[b >> 4]);
  out.push_back(digits[b & 15]);
}

// Writes 2 × bytes.size() lowercase digits to `out` (not terminated).
inline void HexEncodeTo(std::span<const uint8_t> bytes, char* out) {
  for (const uint8_t b : bytes) {
    *out++ = kLowerHexDigits[b >> 4];
    *out++ = kLowerHexDigits[b & 15];
  }
}

// `bytes` as lowercase hex, two digits a byte in order.
inline std::string HexEncode(std::span<const uint8_t> bytes) {
  std::string out(bytes.size() * 2, '\0');
  HexEncodeTo(bytes, out.data());
  return out;
}

// `n` in the fewest lowercase digits ("0" for zero), as chunked transfer coding writes sizes.
inline std::string HexNumber(uint64_t n) {
  char buf[16];
  size_t at = sizeof buf;
  do {
    buf[--at] = kLowerHexDigits[n & 15];
    n >>= 4;
  } while (n != 0);
  return {buf + at, sizeof buf - at};
}

// Decodes exactly 2 × out.size() digits of either case into `out`; false when `hex` is another length or
// holds a character that is not a digit (`out` is then unspecified).
inline bool HexDecode(std::string_view hex, std::span<uint8_t> out) {
  if (hex.size() != out.size() * 2) return false;
  for (size_t i = 0; i < out.size(); ++i) {
    const int hi = HexValue(hex[2 * i]);
    const int lo = HexValue(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    out[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return true;
}

}  // namespace cairn
