// Bearer-token authentication: HS256 JWTs carrying a scope (say, a repository name) and a permission.
//
// Keys: a TokenKeys set (common/key_set.h). Tokens are signed with its current key and name it in the JWT
// header's "kid" (the legacy key names none); a token verifies with the key its kid names, a token without
// kid with the legacy key, and a kid the set lacks is refused (401). SetKeys swaps the set (a rotation) and
// forgets every token verified before, so a retired key's tokens stop working at once.
//
// Claims: "scope" (non-empty string), "perm" ("read" or "write"; write includes read), "kind" ("access" or
// "cas": what the token is for, TokenKind), "exp" (required, seconds since the epoch), optional "nbf" and
// "iat". A token without "kind" (signed before tokens carried one) is classified by its scope's form
// (KindOfLegacyScope), so that it keeps working where it was meant and nowhere else. The algorithm is pinned
// to HS256: tokens whose header names any other algorithm (HS384/HS512 with the same key, "none", RS*) are
// rejected, and exp/nbf are checked here because libjwt 1.10 does not check them.
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
#include <vector>

#include "common/access.h"
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

// What a token is for: where it is accepted (SECURITY.md, "Credential kinds").
enum class TokenKind {
  // A person's or a program's token, minted by `cairn token`: the Hub API, git and LFS, the mirror, buckets,
  // and the CAS routes (for its scope's files).
  kAccess,
  // A CAS token, minted by the Hub for one CAS scope of one repository or bucket (xet-read-token,
  // xet-write-token): the CAS routes alone (/v1, /v2). Presented anywhere else it is refused (401), never
  // taken for an anonymous caller.
  kCas,
  // A person's fine-grained token (people/): what it may do is its reach (Principal::reach), namespaces and
  // repositories each read or write, which the Hub's routes, git and LFS check. Refused (401) by the CAS
  // routes, which serve one scope's files and read no reach. The server signs one kind of them: a trusted
  // publisher's exchanged token (src/publish/), reaching its scope alone, naming its policy ("sub") and id
  // ("jti"), and accepted only while TokenVerifier::Admits says that policy stands.
  kFineGrained,
};

std::string_view TokenKindName(TokenKind kind);

// The kind of a token signed without a "kind" claim: kCas when its scope has the form of a repository's CAS
// scope (hub::NewRepoScope, NewMirrorScope: "hub:…", "mirror:…"; read scopes "hub:…" or "<scope>:read"),
// which only the Hub minted tokens for and which no namespace or repository name can have (names hold no
// ':'); kAccess otherwise.
TokenKind KindOfLegacyScope(std::string_view scope);

// The kinds of token a place accepts.
struct TokenKinds {
  bool access = true;
  bool cas = false;
  bool fine_grained = false;
  constexpr bool Has(TokenKind kind) const {
    switch (kind) {
      case TokenKind::kAccess:
        return access;
      case TokenKind::kCas:
        return cas;
      case TokenKind::kFineGrained:
        return fine_grained;
    }
    return false;
  }
};
// Access tokens alone, fine-grained ones included: the Hub API, git, LFS, the mirror, buckets: whatever acts
// for a person and checks what the token reaches.
inline constexpr TokenKinds kAccessTokens{.access = true, .cas = false, .fine_grained = true};
// Access and CAS tokens: the CAS routes (/v1, /v2), which serve what the token's scope holds.
inline constexpr TokenKinds kCasRouteTokens{.access = true, .cas = true, .fine_grained = false};

// Who a valid token speaks for.
struct Principal {
  std::string scope;
  Permission perm = Permission::kRead;
  TokenKind kind = TokenKind::kAccess;  // what the token is for; minted into it
  // When the token stops being valid (unix seconds; its exp claim). Whatever a token mints — a CAS token, a
  // download link, transfer URLs — expires no later: no credential outlives the one that minted it. Zero
  // for a principal that came from no token (Mint ignores it).
  int64_t expires = 0;
  // When the token was checked, by the checking authenticator's clock (unix seconds): `expires - verified_at`
  // is what is left of its life, measured by one clock. Zero for a principal that came from no token.
  int64_t verified_at = 0;
  // A person's token (TokenVerifier): the user it speaks for (`scope` is their namespace) and the token's
  // id. Empty for the server's signed tokens.
  std::string user = {};
  std::string token_id = {};
  // A person's token: every namespace and repository it reaches and how far (their own namespace, their
  // organizations by role, a fine-grained token's list), each no further than the token allows; `perm` is
  // then the most it allows anywhere. Empty for the server's signed tokens: `scope` with `perm` is all
  // they reach.
  std::vector<ScopeAccess> reach = {};
};

// Bearer tokens the server does not sign (a person's token: people/directory.h), checked by their keeper.
// The authenticator hands it every token it claims and takes its answer as it is; such tokens are access
// tokens (kAccess or kFineGrained). Thread-safety: called from any thread.
class TokenVerifier {
 public:
  virtual ~TokenVerifier() = default;
  // Whether `token` has this verifier's form (no other check).
  virtual bool Claims(std::string_view token) const = 0;
  // Whom the token speaks for now; kUnauthorized when it is refused.
  virtual Result<Principal> Verify(std::string_view token) const = 0;
  // Whether the grant a signed fine-grained token stands on (`who.user`, a trusted publisher's policy) still
  // does: the authenticator asks on every use of such a token, and refuses it without a verifier.
  virtual bool Admits(const Principal& who) const = 0;
};

// The token an Authorization header carries: Bearer, or Basic with any user name and the token as the
// password (git's credentials); nullopt for any other form.
std::optional<std::string> CredentialOf(std::string_view authorization);

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
  // Hands the tokens `verifier` claims to it (null: none); they are never cached here.
  void SetVerifier(std::shared_ptr<const TokenVerifier> verifier);
  TokenKeys keys() const;

  // Mints a token for `who` with the current key (see MintToken).
  Result<std::string> Mint(const Principal& who, std::chrono::seconds ttl, int64_t now) const;

  // Checks an Authorization header value ("Bearer <jwt>"), that the token is of a kind `accepted` names and
  // that it grants `required`, at now() (or at `now`).
  // Errors: 401 for a missing/malformed header, an invalid, expired, not-yet-valid or wrongly signed token,
  // or a token of a kind not accepted here; 403 when the token is valid but grants less than `required`.
  Result<Principal> Authenticate(std::string_view authorization, Permission required,
                                 TokenKinds accepted = kAccessTokens) const;
  Result<Principal> Authenticate(std::string_view authorization, Permission required, int64_t now,
                                 TokenKinds accepted = kAccessTokens) const;

  // Checks a bare token (no "Bearer ") and that it is of a kind `accepted` names; 401 errors only.
  Result<Principal> Verify(std::string_view token, int64_t now, TokenKinds accepted = kAccessTokens) const;

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
  std::shared_ptr<const TokenKeys> keys_;  // guarded by mu_, like the three below
  std::shared_ptr<const TokenVerifier> verifier_;
  uint64_t generation_ = 0;  // bumped by SetKeys: a Decode begun before must not be remembered
  mutable std::unordered_map<std::string, Verified> verified_;  // cleared when full
};

// Mints an HS256 token for `who` with `key` (named in the header's kid unless it is the legacy key), valid
// from `now` for `ttl` (iat = now, exp = now + ttl), of `who.kind`.
Result<std::string> MintToken(const TokenKeys::Key& key, const Principal& who, std::chrono::seconds ttl,
                              int64_t now);
// The same with a legacy key (no kid).
Result<std::string> MintToken(std::string_view key, const Principal& who, std::chrono::seconds ttl);
Result<std::string> MintToken(std::string_view key, const Principal& who, std::chrono::seconds ttl,
                              int64_t now);

}  // namespace cairn::http
