#include "http/auth.h"

#include <jwt.h>

#include <boost/json.hpp>
#include <cstdlib>
#include <memory>
#include <optional>

#include "common/base64.h"
#include "common/clock.h"

namespace cairn::http {
namespace {

struct JwtFree {
  void operator()(jwt_t* j) const { jwt_free(j); }
};
using JwtPtr = std::unique_ptr<jwt_t, JwtFree>;

struct CFree {
  void operator()(char* p) const {
    free(p);
  }  // NOLINT(cppcoreguidelines-no-malloc): libjwt allocates with malloc
};
using CString = std::unique_ptr<char, CFree>;

bool IEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    const auto lower = [](char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; };
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

// An integral NumericDate claim; absent -> present=false.
Result<int64_t> NumericDate(const boost::json::object& claims, std::string_view name, bool* present) {
  *present = false;
  const auto* v = claims.if_contains(name);
  if (v == nullptr) return int64_t{0};
  *present = true;
  if (v->is_int64()) return v->get_int64();
  if (v->is_uint64() && v->get_uint64() <= static_cast<uint64_t>(INT64_MAX))
    return static_cast<int64_t>(v->get_uint64());
  return Unauthorized("token claim " + std::string(name) + " is not an integer");
}

// The "kid" of a token's header (empty when it has none), read before the signature is checked so that the
// key it names can check it. The header is base64url JSON; libjwt parses it again when it verifies.
Result<std::string> HeaderKeyId(std::string_view token) {
  const size_t dot = token.find('.');
  if (dot == std::string_view::npos) return Unauthorized("invalid token (malformed or bad signature)");
  const auto json = Base64Decode(token.substr(0, dot), /*url_safe=*/true);
  if (!json) return Unauthorized("invalid token (malformed or bad signature)");
  boost::system::error_code ec;
  const boost::json::value header =
      boost::json::parse(std::string_view(reinterpret_cast<const char*>(json->data()), json->size()), ec);
  if (ec || !header.is_object()) return Unauthorized("invalid token (malformed or bad signature)");
  const auto* kid = header.get_object().if_contains("kid");
  if (kid == nullptr) return std::string();
  if (!kid->is_string() || kid->get_string().empty())
    return Unauthorized("invalid token: kid is not a key id");
  return std::string(kid->get_string());
}

}  // namespace

std::string_view PermissionName(Permission p) {
  switch (p) {
    case Permission::kNone:
      return "none";
    case Permission::kRead:
      return "read";
    case Permission::kWrite:
      return "write";
  }
  return "none";
}

std::string_view TokenKindName(TokenKind kind) {
  switch (kind) {
    case TokenKind::kCas:
      return "cas";
    case TokenKind::kFineGrained:
      return "fineGrained";
    case TokenKind::kAccess:
      break;
  }
  return "access";
}

TokenKind KindOfLegacyScope(std::string_view scope) {
  return scope.starts_with("hub:") || scope.starts_with("mirror:") ? TokenKind::kCas : TokenKind::kAccess;
}

std::optional<std::string> CredentialOf(std::string_view header) {
  if (header.starts_with("Bearer ")) return std::string(header.substr(7));
  if (!header.starts_with("Basic ")) return std::nullopt;
  auto decoded = Base64Decode(header.substr(6));
  if (!decoded) return std::nullopt;
  const std::string_view pair(reinterpret_cast<const char*>(decoded->data()), decoded->size());
  const size_t colon = pair.find(':');
  if (colon == std::string_view::npos || colon + 1 == pair.size()) return std::nullopt;
  return std::string(pair.substr(colon + 1));
}

int64_t UnixNow() {
  return Clock::System().UnixSeconds();
}

Authenticator::Authenticator(TokenKeys keys, const Clock* clock)
    : clock_(clock), keys_(std::make_shared<const TokenKeys>(std::move(keys))) {}

void Authenticator::SetKeys(TokenKeys keys) {
  auto next = std::make_shared<const TokenKeys>(std::move(keys));
  std::lock_guard lock(mu_);
  keys_ = std::move(next);
  ++generation_;
  verified_.clear();
}

TokenKeys Authenticator::keys() const {
  std::lock_guard lock(mu_);
  return *keys_;
}

Result<std::string> Authenticator::Mint(const Principal& who, std::chrono::seconds ttl, int64_t now) const {
  std::shared_ptr<const TokenKeys> keys;
  {
    std::lock_guard lock(mu_);
    keys = keys_;
  }
  return MintToken(keys->current(), who, ttl, now);
}

Result<Principal> Authenticator::Authenticate(std::string_view authorization, Permission required,
                                              TokenKinds accepted) const {
  return Authenticate(authorization, required, now(), accepted);
}

Result<Principal> Authenticator::Authenticate(std::string_view authorization, Permission required,
                                              int64_t now, TokenKinds accepted) const {
  if (authorization.empty()) return Unauthorized("missing Authorization header");
  const size_t space = authorization.find(' ');
  if (space == std::string_view::npos || !IEquals(authorization.substr(0, space), "bearer"))
    return Unauthorized("Authorization header is not a Bearer token");
  std::string_view token = authorization.substr(space + 1);
  while (!token.empty() && token.front() == ' ') token.remove_prefix(1);
  while (!token.empty() && token.back() == ' ') token.remove_suffix(1);
  auto who = Verify(token, now, accepted);
  if (!who) return who;
  if (required == Permission::kWrite && who->perm != Permission::kWrite)
    return Denied("token grants read access only; this call needs write");
  return who;
}

void Authenticator::SetVerifier(std::shared_ptr<const TokenVerifier> verifier) {
  std::lock_guard lock(mu_);
  verifier_ = std::move(verifier);
}

Result<Principal> Authenticator::Verify(std::string_view token, int64_t now, TokenKinds accepted) const {
  if (token.empty()) return Unauthorized("empty bearer token");
  if (token.size() > 8192) return Unauthorized("bearer token too long");
  std::shared_ptr<const TokenVerifier> verifier;
  {
    std::lock_guard lock(mu_);
    verifier = verifier_;
  }
  if (verifier != nullptr && verifier->Claims(token)) {
    auto who = verifier->Verify(token);
    if (!who) return who;
    if (who->kind == TokenKind::kCas) return Unauthorized("a person's token is never a CAS token");
    if (!accepted.Has(who->kind)) {
      return Unauthorized(who->kind == TokenKind::kFineGrained
                              ? "a fine-grained token is not accepted here: the CAS routes take a CAS token "
                                "(xet-read-token, xet-write-token) or a read or write token"
                              : "this needs a CAS token");
    }
    who->verified_at = now;
    return who;
  }
  std::string tok(token);  // libjwt wants a C string
  std::optional<Verified> known;
  std::shared_ptr<const TokenKeys> keys;
  uint64_t generation = 0;
  {
    std::lock_guard lock(mu_);
    if (auto it = verified_.find(tok); it != verified_.end()) known = it->second;
    keys = keys_;
    generation = generation_;
  }
  if (!known) {
    auto decoded = Decode(*keys, tok);
    if (!decoded) return decoded.error();
    known = std::move(*decoded);
    std::lock_guard lock(mu_);
    if (generation == generation_) {
      if (verified_.size() >= kCachedTokens) verified_.clear();
      verified_.emplace(std::move(tok), *known);
    }
  }
  if (now >= known->expires) return Unauthorized("token expired");
  // A grant held elsewhere stands only while its keeper says so (a revoked trust policy's tokens stop).
  if (known->who.kind == TokenKind::kFineGrained && (verifier == nullptr || !verifier->Admits(known->who))) {
    return Unauthorized("token revoked: the grant it was issued under is gone");
  }
  known->who.expires = known->expires;
  known->who.verified_at = now;
  if (now < known->not_before) return Unauthorized("token not yet valid (nbf)");
  // Refused like an invalid token: a credential of another kind is not a weaker one (never anonymous).
  if (!accepted.Has(known->who.kind)) {
    return Unauthorized(
        known->who.kind == TokenKind::kCas
            ? "a CAS token is accepted by the CAS routes (/v1, /v2) only; this needs an access token"
            : "this needs a CAS token");
  }
  return std::move(known->who);
}

// Checks the signature and the claims' form; the times are checked by the caller.
Result<Authenticator::Verified> Authenticator::Decode(const TokenKeys& keys, const std::string& tok) {
  auto kid = HeaderKeyId(tok);
  if (!kid) return kid.error();
  const TokenKeys::Key* key = keys.Find(*kid);
  // Key ids are not secret, but a caller's text is not echoed either.
  if (key == nullptr) return Unauthorized("invalid token: signed with an unknown or retired key (kid)");
  const std::string& secret = key->material;
  jwt_t* raw = nullptr;
  const int rc = jwt_decode(&raw, tok.c_str(), reinterpret_cast<const unsigned char*>(secret.data()),
                            static_cast<int>(secret.size()));
  JwtPtr jwt(raw);
  if (rc != 0 || !jwt) return Unauthorized("invalid token (malformed or bad signature)");
  // libjwt takes the algorithm from the token's own header: pin it.
  if (jwt_get_alg(jwt.get()) != JWT_ALG_HS256) return Unauthorized("invalid token: algorithm must be HS256");

  CString grants(jwt_get_grants_json(jwt.get(), nullptr));
  if (!grants) return Unauthorized("invalid token: no claims");
  boost::system::error_code ec;
  boost::json::value parsed = boost::json::parse(grants.get(), ec);
  if (ec || !parsed.is_object()) return Unauthorized("invalid token: claims are not a JSON object");
  const boost::json::object& claims = parsed.get_object();

  Verified v;
  bool has_exp = false;
  auto exp = NumericDate(claims, "exp", &has_exp);
  if (!exp) return exp.error();
  if (!has_exp) return Unauthorized("invalid token: no exp claim");
  v.expires = *exp;
  bool has_nbf = false;
  auto nbf = NumericDate(claims, "nbf", &has_nbf);
  if (!nbf) return nbf.error();
  if (has_nbf) v.not_before = *nbf;
  bool has_iat = false;
  auto iat = NumericDate(claims, "iat", &has_iat);
  if (!iat) return iat.error();

  Principal& who = v.who;
  const auto* scope = claims.if_contains("scope");
  if (scope == nullptr || !scope->is_string() || scope->get_string().empty())
    return Unauthorized("invalid token: no scope claim");
  who.scope = std::string(scope->get_string());
  const auto* perm = claims.if_contains("perm");
  if (perm == nullptr || !perm->is_string()) return Unauthorized("invalid token: no perm claim");
  if (perm->get_string() == "read") {
    who.perm = Permission::kRead;
  } else if (perm->get_string() == "write") {
    who.perm = Permission::kWrite;
  } else {
    return Unauthorized("invalid token: perm must be \"read\" or \"write\"");
  }
  const auto* kind = claims.if_contains("kind");
  if (kind == nullptr) {
    who.kind = KindOfLegacyScope(who.scope);  // signed before tokens carried their kind
  } else if (kind->is_string() && kind->get_string() == "access") {
    who.kind = TokenKind::kAccess;
  } else if (kind->is_string() && kind->get_string() == "cas") {
    who.kind = TokenKind::kCas;
  } else if (kind->is_string() && kind->get_string() == "fineGrained") {
    // A grant held elsewhere (a trusted publisher's exchange): its holder and id, and the scope it reaches.
    const auto* sub = claims.if_contains("sub");
    const auto* jti = claims.if_contains("jti");
    if (sub == nullptr || !sub->is_string() || sub->get_string().empty() || jti == nullptr ||
        !jti->is_string() || jti->get_string().empty()) {
      return Unauthorized("invalid token: a fine-grained token names its holder (sub) and id (jti)");
    }
    who.kind = TokenKind::kFineGrained;
    who.user = std::string(sub->get_string());
    who.token_id = std::string(jti->get_string());
    who.reach = {ScopeAccess{who.scope, who.perm == Permission::kWrite ? Access::kWrite : Access::kRead}};
  } else {
    return Unauthorized("invalid token: kind must be \"access\", \"cas\" or \"fineGrained\"");
  }
  return v;
}

Result<std::string> MintToken(std::string_view key, const Principal& who, std::chrono::seconds ttl) {
  return MintToken(key, who, ttl, UnixNow());
}

Result<std::string> MintToken(std::string_view key, const Principal& who, std::chrono::seconds ttl,
                              int64_t now) {
  return MintToken(TokenKeys::Key{std::string(kLegacyKeyId), std::string(key)}, who, ttl, now);
}

Result<std::string> MintToken(const TokenKeys::Key& signing, const Principal& who, std::chrono::seconds ttl,
                              int64_t now) {
  const std::string& key = signing.material;
  if (key.empty()) return IoError("empty signing key");
  if (who.scope.empty()) return Malformed("scope must not be empty");
  // libjwt takes C strings: a NUL would cut the scope short, and the token would grant another scope.
  if (who.scope.find('\0') != std::string::npos) return Malformed("scope must not contain NUL bytes");
  if (who.perm == Permission::kNone) return Malformed("perm must be read or write");
  // A signed token carries a scope alone: it could not say what a person's reach says. A fine-grained one
  // reaches its scope alone, no further than its perm, and names the grant it stands on (sub, jti).
  const bool fine = who.kind == TokenKind::kFineGrained;
  if (fine && (who.user.empty() || who.token_id.empty() || who.user.find('\0') != std::string::npos ||
               who.token_id.find('\0') != std::string::npos)) {
    return Malformed("a signed fine-grained token names its holder and id");
  }
  if (fine ? who.reach.size() > 1 || (who.reach.size() == 1 && who.reach[0].scope != who.scope)
           : !who.reach.empty()) {
    return Malformed("a person's reach cannot be signed into a token");
  }
  if (ttl.count() <= 0) return Malformed("ttl must be positive");
  jwt_t* raw = nullptr;
  if (jwt_new(&raw) != 0) return IoError("jwt_new failed");
  JwtPtr jwt(raw);
  const std::string perm(PermissionName(who.perm));
  const std::string kind(TokenKindName(who.kind));
  if (jwt_add_grant(jwt.get(), "scope", who.scope.c_str()) != 0 ||
      jwt_add_grant(jwt.get(), "perm", perm.c_str()) != 0 ||
      jwt_add_grant(jwt.get(), "kind", kind.c_str()) != 0 ||
      (fine && (jwt_add_grant(jwt.get(), "sub", who.user.c_str()) != 0 ||
                jwt_add_grant(jwt.get(), "jti", who.token_id.c_str()) != 0)) ||
      jwt_add_grant_int(jwt.get(), "iat", static_cast<long>(now)) != 0 ||
      jwt_add_grant_int(jwt.get(), "exp", static_cast<long>(now + ttl.count())) != 0)
    return IoError("cannot set token claims");
  if (signing.named() && jwt_add_header(jwt.get(), "kid", signing.id.c_str()) != 0)
    return IoError("cannot set the token's key id");
  if (jwt_set_alg(jwt.get(), JWT_ALG_HS256, reinterpret_cast<const unsigned char*>(key.data()),
                  static_cast<int>(key.size())) != 0)
    return IoError("cannot set token algorithm");
  CString out(jwt_encode_str(jwt.get()));
  if (!out) return IoError("cannot encode token");
  return std::string(out.get());
}

}  // namespace cairn::http
