#include "people/token_text.h"

#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

#include <algorithm>

#include "common/hex.h"

namespace cairn::people {

namespace {

constexpr size_t kIdBytes = 8;
constexpr size_t kSecretBytes = 32;

bool LowerHex(std::string_view s, size_t digits) {
  return s.size() == digits && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

}  // namespace

Result<TokenText> NewTokenText() {
  std::array<uint8_t, kIdBytes + kSecretBytes> raw{};
  if (RAND_bytes(raw.data(), static_cast<int>(raw.size())) != 1) return IoError("RAND_bytes failed");
  const std::span<const uint8_t> all(raw);
  return TokenText{.id = HexEncode(all.first(kIdBytes)), .secret = HexEncode(all.subspan(kIdBytes))};
}

std::optional<TokenText> ParseTokenText(std::string_view text) {
  if (!text.starts_with(kTokenPrefix)) return std::nullopt;
  text.remove_prefix(kTokenPrefix.size());
  if (text.size() != 2 * kIdBytes + 1 + 2 * kSecretBytes || text[2 * kIdBytes] != '_') return std::nullopt;
  const std::string_view id = text.substr(0, 2 * kIdBytes);
  const std::string_view secret = text.substr(2 * kIdBytes + 1);
  if (!LowerHex(id, 2 * kIdBytes) || !LowerHex(secret, 2 * kSecretBytes)) return std::nullopt;
  return TokenText{.id = std::string(id), .secret = std::string(secret)};
}

std::vector<uint8_t> SecretHash(std::string_view secret) {
  std::vector<uint8_t> out(SHA256_DIGEST_LENGTH);
  SHA256(reinterpret_cast<const unsigned char*>(secret.data()), secret.size(), out.data());
  return out;
}

bool SameHash(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace cairn::people
