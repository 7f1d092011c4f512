// Bearer-token authentication: HS256 JWTs carrying a scope (say, a repository name) and a permission.
//
// Keys: a TokenKeys set (common/key_set.h). Tokens are signed with its current key and name it in the JWT
// header's "kid" (the legacy key names none); a token verifies with the key its kid names, a token without
// kid with the legacy key, and a kid the set lacks is refused (401). SetKeys swaps the set (a rotation) and
// forgets every token verified before, so a retired key's tokens stop working at once.
//
// Claims: "scope" (non-empty string), "perm" ("read" or "write"; write includes read), "exp" (required,
// seconds since the epoch), optional "nbf" and "iat". The algorithm is pinned to HS256: tokens whose header
// names any other algorithm (HS384/HS512 with the same key, "none", RS*) are rejected, and exp/nbf are
// checked here because libjwt 1.10 does not check them.
//
// Verified tokens are remembered (by their exact text, up to kCachedTokens of them) with their claims, so a
// client that sends the same token with every request costs one signature check, not one per request; exp
// and nbf are still checked against `now` on every call.
//
// Thread-safety: every method may be called from any thread (the cache has its own mutex).
#pragma once

#include <chrono>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "common/clock.h"
#include "common/key_set.h"
#include "http/result.h"

namespace cairn::http {

enum class Permission {
  kNone,   // no token needed (built-ins, capability URLs that authorize themselves)
  kRead,   //
  kWrite,  // includes read
};

std::string_view PermissionName(Permission p);

// Who a valid token speaks for.
struct Principal {
  std::string scope;
  Permission perm = Permission::kRead;
  // When the token stops being valid (unix seconds; its exp claim). Whatever a token mints — a CAS token, a
  // download link, transfer URLs — expires no later: no credential outlives the one that minted it. Zero
  // for a principal that came from no token (Mint ignores it).
  int64_t expires = 0;
  // When the token was checked, by the checking authenticator's clock (unix seconds): `expires - verified_at`
  // is what is left of its life, measured by one clock. Zero for a principal that came from no token.
  int64_t verified_at = 0;
};

// Seconds since the Unix epoch, now, by the real clock (Clock::System()): for the command line. The server
// reads the time through its Authenticator's clock.
int64_t UnixNow();

// Token keys: the HMAC key material is the secret's text (cairn's are 64 hex characters).
using TokenKeys = KeySet<std::string>;

class Authenticator {
 public:
  // `clock`: what tokens' times are checked against and minted from (outlives the authenticator).
  explicit Authenticator(TokenKeys keys, const Clock* clock = &Clock::System());
  // One legacy key (any bytes).
  explicit Authenticator(std::string key, const Clock* clock = &Clock::System())
      : Authenticator(TokenKeys::Single(std::move(key)), clock) {}

  // Now, by this authenticator's clock (unix seconds): what a token minted now is stamped with.
  int64_t now() const { return clock_->UnixSeconds(); }

  // Replaces the keys; tokens verified before are checked again with the new ones.
  void SetKeys(TokenKeys keys);
  TokenKeys keys() const;

  // Mints a token for `who` with the current key (see MintToken).
  Result<std::string> Mint(const Principal& who, std::chrono::seconds ttl, int64_t now) const;

  // Checks an Authorization header value ("Bearer <jwt>") and that the token grants `required`, at now()
  // (or at `now`).
  // Errors: 401 for a missing/malformed header or an invalid, expired, not-yet-valid or wrongly signed token;
  // 403 when the token is valid but grants less than `required`.
  Result<Principal> Authenticate(std::string_view authorization, Permission required) const;
  Result<Principal> Authenticate(std::string_view authorization, Permission required, int64_t now) const;

  // Checks a bare token (no "Bearer "); 401 errors only.
  Result<Principal> Verify(std::string_view token, int64_t now) const;

  static constexpr size_t kCachedTokens = 4096;

 private:
  // A token whose signature and claims were checked, and the times it is valid between.
  struct Verified {
    Principal who;
    int64_t not_before = std::numeric_limits<int64_t>::min();
    int64_t expires = 0;
  };
  static Result<Verified> Decode(const TokenKeys& keys, const std::string& token);

  const Clock* const clock_;
  mutable std::mutex mu_;
  std::shared_ptr<const TokenKeys> keys_;  // guarded by mu_, like the two below
  uint64_t generation_ = 0;                // bumped by SetKeys: a Decode begun before must not be remembered
  mutable std::unordered_map<std::string, Verified> verified_;  // cleared when full
};

// Mints an HS256 token for `who` with `key` (named in the header's kid unless it is the legacy key), valid
// from `now` for `ttl` (iat = now, exp = now + ttl).
Result<std::string> MintToken(const TokenKeys::Key& key, const Principal& who, std::chrono::seconds ttl,
                              int64_t now);
// The same with a legacy key (no kid).
Result<std::string> MintToken(std::string_view key, const Principal& who, std::chrono::seconds ttl);
Result<std::string> MintToken(std::string_view key, const Principal& who, std::chrono::seconds ttl,
                              int64_t now);

}  // namespace cairn::http
