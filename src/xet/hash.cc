#include "xet/hash.h"

#include <bit>

#include "common/hex.h"

namespace cairn::xet {

static_assert(std::endian::native == std::endian::little, "cairn assumes a little-endian host");

std::optional<Hash> Hash::FromHex(std::string_view hex) {
  if (hex.size() != 64) return std::nullopt;
  Hash h;
  for (size_t word = 0; word < 4; ++word) {
    // Digits of a word are big-endian; the word's bytes are stored little-endian.
    for (size_t i = 0; i < 8; ++i) {
      const int hi = HexValue(hex[word * 16 + i * 2]);
      const int lo = HexValue(hex[word * 16 + i * 2 + 1]);
      if (hi < 0 || lo < 0) return std::nullopt;
      h.bytes[word * 8 + 7 - i] = static_cast<uint8_t>(hi << 4 | lo);
    }
  }
  return h;
}

void Hash::write_hex(char* out) const {
  for (int word = 0; word < 4; ++word) {
    for (int i = 0; i < 8; ++i) {
      const uint8_t b = bytes[static_cast<size_t>(word * 8 + 7 - i)];
      *out++ = kLowerHexDigits[b >> 4];
      *out++ = kLowerHexDigits[b & 15];
    }
  }
}

std::string Hash::hex() const {
  std::string s(64, '\0');
  write_hex(s.data());
  return s;
}

}  // namespace cairn::xet
