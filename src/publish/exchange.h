// Trusted publishers' token exchange (RFC 8693, as huggingface_hub's `_oidc.py` sends it): a CI job's OpenID
// Connect id token, from an issuer a trust policy names (people/publishers.h), for a short-lived token to one
// repository (or, read-only, one namespace) of the policy's namespace.
//
// The order of the checks keeps a stranger from learning or costing much: the resource's form; the id token's
// form; a live policy of the resource's namespace naming the token's issuer (none: cairn fetches nothing);
// (one made on another node a moment ago is found by a rate-limited refresh, as an unknown token is);
// the signature, against the issuer's published keys (IssuerKeys: RS256 only); exp and nbf (with kLeeway
// for clocks apart); then the audience and the claims a policy asks for. The grant lives until the id token
// expires, at most kMaxLife.
//
// Thread-safety: any thread. Ownership: borrows the directory, the keys and the clock, which outlive it.
// Failures carry the OAuth error code (RFC 6749 §5.2, RFC 8693 §2.2.2) as their reason: "invalid_target"
// for a resource cairn will not issue for (malformed, or no policy admits the token for it), and
// "invalid_request" for an id token that is malformed, badly signed, expired or not yet valid; both
// kMalformed (400). kUnavailable when an issuer's keys could not be fetched.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/access.h"
#include "common/clock.h"
#include "common/error.h"
#include "oidc/id_token.h"
#include "oidc/issuer_keys.h"
#include "people/directory.h"

namespace cairn::publish {

using oidc::IdToken;
using oidc::IssuerKeys;
using oidc::ParseIdToken;

// The holder an exchanged token names (http::Principal::user): "publisher:<policy id>".
inline constexpr std::string_view kHolderPrefix = "publisher:";
// The policy id a holder names; nullopt for any other holder.
std::optional<std::string_view> PolicyOfHolder(std::string_view holder);

inline Error InvalidRequest(std::string m) {
  return {ErrorCode::kMalformed, std::move(m), "invalid_request"};
}
inline Error InvalidTarget(std::string m) {
  return {ErrorCode::kMalformed, std::move(m), "invalid_target"};
}

// What an exchange grants.
struct ExchangeGrant {
  std::string resource;           // "acme/model", "datasets/acme/data", or a namespace "acme" (read only)
  std::string ns;                 // the namespace's name as the account spells it
  Access access = Access::kRead;  // kRead or kWrite
  int64_t expires = 0;            // unix seconds
  std::string policy_id;
  std::string subject;  // the id token's issuer and subject ("iss#sub"): who the audit log says asked
};

class Exchanger {
 public:
  static constexpr int64_t kMaxLife = 3600;
  static constexpr int64_t kLeeway = 60;

  Exchanger(people::Directory& directory, IssuerKeys& keys, const Clock& clock)
      : directory_(directory), keys_(keys), clock_(clock) {}

  // The grant `subject_token` earns for `resource`. `verified` (when given) is set when the token's
  // signature verified, whatever came after: a refusal then was a real token's (worth an audit record).
  Result<ExchangeGrant> Exchange(std::string_view subject_token, std::string_view resource,
                                 bool* verified = nullptr);

 private:
  people::Directory& directory_;
  IssuerKeys& keys_;
  const Clock& clock_;
};

}  // namespace cairn::publish
