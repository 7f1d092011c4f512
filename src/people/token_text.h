// A person's token as text: "cairn_" + its id (16 hex digits: public, what listings, revocations and the
// audit log name) + "_" + its secret (64 hex digits: 32 random bytes). The index keeps the SHA-256 of the
// secret, never the secret: a copy of the index lets no one act as anyone. A secret of 256 random bits needs
// no slow hash: nothing can be guessed from its SHA-256. Pure functions apart from NewTokenText (the
// system's random source); safe from any thread.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"

namespace cairn::people {

inline constexpr std::string_view kTokenPrefix = "cairn_";

struct TokenText {
  std::string id;      // 16 lowercase hex digits
  std::string secret;  // 64 lowercase hex digits
  std::string text() const { return std::string(kTokenPrefix) + id + "_" + secret; }
};

// A new id and secret from the system's random source; kIo when it fails.
Result<TokenText> NewTokenText();
// The id and secret of a token's text; nullopt for anything not exactly of the form above (a JWT, a
// truncated paste), so that a caller can tell a person's token from the server's signed ones by its form.
std::optional<TokenText> ParseTokenText(std::string_view text);
// SHA-256 of the secret's text, as the index keeps it.
std::vector<uint8_t> SecretHash(std::string_view secret);
// Whether two hashes are equal, in time that does not depend on where they differ.
bool SameHash(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b);

}  // namespace cairn::people
