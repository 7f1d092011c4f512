// Base64 (RFC 4648 §4 and §5): the standard alphabet with '=' padding, or the URL-safe alphabet without
// padding, as JWTs write it.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

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

inline std::string Base64Encode(std::span<const uint8_t> in, bool url_safe = false) {
  return Base64Encode(std::string_view(reinterpret_cast<const char*>(in.data()), in.size()), url_safe);
}

// The bytes `in` encodes; nullopt for a character outside the alphabet or a lone final character (which
// carries no whole byte). The standard alphabet may end in '=' padding, the URL-safe one has none.
inline std::optional<std::vector<uint8_t>> Base64Decode(std::string_view in, bool url_safe = false) {
  static const auto tables = [] {
    std::array<std::array<uint8_t, 256>, 2> t{};
    const std::string_view alphabets[2] = {
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/",
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"};
    for (size_t a = 0; a < 2; ++a) {
      t[a].fill(0xff);
      for (size_t i = 0; i < alphabets[a].size(); ++i)
        t[a][static_cast<unsigned char>(alphabets[a][i])] = static_cast<uint8_t>(i);
    }
    return t;
  }();
  const auto& table = tables[url_safe ? 1 : 0];
  while (!url_safe && !in.empty() && in.back() == '=') in.remove_suffix(1);
  std::vector<uint8_t> out;
  out.reserve(in.size() * 3 / 4);
  uint32_t acc = 0;
  int bits = 0;
  for (const char ch : in) {
    const uint8_t v = table[static_cast<unsigned char>(ch)];
    if (v == 0xff) return std::nullopt;
    acc = acc << 6 | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<uint8_t>(acc >> bits));
    }
  }
  if (bits >= 6) return std::nullopt;
  return out;
}

}  // namespace cairn
