// Signing people in with a company's OpenID Connect provider: cairn as a relying party of the authorization
// code flow (OpenID Connect Core §3.1), with PKCE (RFC 7636, S256), a state that binds the answer to the
// browser that asked and a nonce that binds the id token to this attempt.
//
// Begin makes an attempt's three secrets and the provider's URL to send the browser to; the caller keeps
// the secrets with the browser (a cookie) and hands them back with the code the provider's redirect brings.
// Finish checks the state first (nothing is sent for an answer to another attempt), exchanges the code at the
// provider's token endpoint (client_secret_basic; a public client sends only its id), and accepts the id
// token only when its signature verifies with the issuer's published keys (IssuerKeys: RS256), it names this
// issuer, this client in `aud` (and in `azp` when it names several), the attempt's nonce, and it is within
// its lifetime (kLeeway for clocks apart).
//
// Thread-safety: any thread. Ownership: borrows the keys, the document source and the clock, which outlive
// it. Failures: kUnauthorized for an answer cairn refuses (another attempt's state, a code the provider
// refused, an id token that fails a check), naming what failed and never a secret; kUnavailable when the
// provider could not be reached.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "common/error.h"
#include "oidc/issuer_keys.h"

namespace cairn::oidc {

struct ProviderConfig {
  std::string issuer;         // the provider's URL, as its id tokens name it
  std::string client_id;      // cairn's client at the provider
  std::string client_secret;  // empty: a public client (PKCE alone)
  std::string redirect_uri;   // cairn's callback, registered with the provider
  std::string scopes = "openid profile email";
};

// One sign-in's secrets, kept by the browser between Begin and Finish: 43 base64url characters each.
struct Attempt {
  std::string state;
  std::string nonce;
  std::string verifier;  // PKCE's code verifier
};

// Who the provider says signed in.
struct Identity {
  std::string issuer;
  std::string subject;
  std::map<std::string, std::string> claims;              // the id token's scalar claims, as text
  std::map<std::string, std::vector<std::string>> lists;  // and its lists of strings (groups)
};

// Whether `text` could be an attempt's secret (43 base64url characters).
bool IsAttemptSecret(std::string_view text);

class RelyingParty {
 public:
  static constexpr int64_t kLeeway = 60;

  RelyingParty(ProviderConfig config, IssuerKeys& keys, DocumentSource& source, const Clock& clock)
      : config_(std::move(config)), keys_(keys), source_(source), clock_(clock) {}

  const ProviderConfig& config() const { return config_; }

  // A new attempt, and the provider's authorization URL for it.
  Result<std::pair<Attempt, std::string>> Begin();
  // Who signed in, from the provider's redirect (`state`, `code`) to the attempt `attempt`.
  Result<Identity> Finish(const Attempt& attempt, std::string_view state, std::string_view code);

 private:
  // The id token the token endpoint answers `code` with.
  Result<std::string> Redeem(const ProviderEndpoints& endpoints, const Attempt& attempt,
                             std::string_view code);
  // Checks `text` as this attempt's id token.
  Result<Identity> Accept(std::string_view text, const Attempt& attempt);

  ProviderConfig config_;
  IssuerKeys& keys_;
  DocumentSource& source_;
  const Clock& clock_;
};

}  // namespace cairn::oidc
