// Bearer-token authentication: HS256 JWTs carrying a scope (say, a repository name) and a permission.
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
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

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
};

// Seconds since the Unix epoch, now.
int64_t UnixNow();

class Authenticator {
 public:
  // `key` is the HMAC key (any bytes; cairn uses the 64 hex characters of <data>/secrets/jwt.key).
  explicit Authenticator(std::string key) : key_(std::move(key)) {}

  // Checks an Authorization header value ("Bearer <jwt>") and that the token grants `required`.
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
  Result<Verified> Decode(const std::string& token) const;

  std::string key_;
  mutable std::mutex mu_;
  mutable std::unordered_map<std::string, Verified> verified_;  // cleared when full
};

// Mints an HS256 token for `who`, valid from `now` for `ttl` (iat = now, exp = now + ttl).
Result<std::string> MintToken(std::string_view key, const Principal& who, std::chrono::seconds ttl);
Result<std::string> MintToken(std::string_view key, const Principal& who, std::chrono::seconds ttl,
                              int64_t now);

}  // namespace cairn::http
