// An OpenID Connect id token (a JWT signed by its issuer, RFC 7519 / OpenID Connect Core §2) as cairn reads
// one before it trusts it: split, decoded and its claims parsed, its signature not yet checked (IssuerKeys
// does, with the issuer's published keys). Bounded by the bytes given: at most kMaxIdTokenBytes are read.
//
// Pure functions: any thread. Failures: kUnauthorized naming what is wrong with the token (never its text).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"

namespace cairn::oidc {

inline constexpr size_t kMaxIdTokenBytes = 16 * 1024;

struct IdToken {
  // The header's.
  std::string alg;
  std::string kid;
  // The registered claims cairn checks.
  std::string iss;
  std::vector<std::string> aud;  // a single string or a list, as the token gives it
  std::string sub;
  int64_t exp = 0;
  int64_t nbf = 0;  // 0: none given
  int64_t iat = 0;  // 0: none given
  // Every claim whose value is a string, a number or a boolean, as text ("true", "42"): what a trust
  // policy's claims are compared with. Objects are left out.
  std::map<std::string, std::string> claims;
  // Every claim whose value is a list: its strings (a person's groups, say); other items are left out.
  std::map<std::string, std::vector<std::string>> lists;
  // What the signature covers ("header.payload"), and the signature's bytes.
  std::string signing_input;
  std::vector<uint8_t> signature;
};

// The token's parts. kUnauthorized for anything but three base64url parts holding JSON objects with a string
// "alg", a string "iss", an "aud" and a numeric "exp".
Result<IdToken> ParseIdToken(std::string_view text);

}  // namespace cairn::oidc
