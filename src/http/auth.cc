#include "http/auth.h"

#include <jwt.h>

#include <boost/json.hpp>
#include <cstdlib>
#include <memory>
#include <optional>

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

int64_t UnixNow() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

Result<Principal> Authenticator::Authenticate(std::string_view authorization, Permission required) const {
  return Authenticate(authorization, required, UnixNow());
}

Result<Principal> Authenticator::Authenticate(std::string_view authorization, Permission required,
                                              int64_t now) const {
  if (authorization.empty()) return Unauthorized("missing Authorization header");
  const size_t space = authorization.find(' ');
  if (space == std::string_view::npos || !IEquals(authorization.substr(0, space), "bearer"))
    return Unauthorized("Authorization header is not a Bearer token");
  std::string_view token = authorization.substr(space + 1);
  while (!token.empty() && token.front() == ' ') token.remove_prefix(1);
  while (!token.empty() && token.back() == ' ') token.remove_suffix(1);
  auto who = Verify(token, now);
  if (!who) return who;
  if (required == Permission::kWrite && who->perm != Permission::kWrite)
    return Forbidden("token grants read access only; this call needs write");
  return who;
}

Result<Principal> Authenticator::Verify(std::string_view token, int64_t now) const {
  if (token.empty()) return Unauthorized("empty bearer token");
  if (token.size() > 8192) return Unauthorized("bearer token too long");
  std::string tok(token);  // libjwt wants a C string
  std::optional<Verified> known;
  {
    std::lock_guard lock(mu_);
    if (auto it = verified_.find(tok); it != verified_.end()) known = it->second;
  }
  if (!known) {
    auto decoded = Decode(tok);
    if (!decoded) return decoded.error();
    known = std::move(*decoded);
    std::lock_guard lock(mu_);
    if (verified_.size() >= kCachedTokens) verified_.clear();
    verified_.emplace(std::move(tok), *known);
  }
  if (now >= known->expires) return Unauthorized("token expired");
  if (now < known->not_before) return Unauthorized("token not yet valid (nbf)");
  return std::move(known->who);
}

// Checks the signature and the claims' form; the times are checked by the caller.
Result<Authenticator::Verified> Authenticator::Decode(const std::string& tok) const {
  jwt_t* raw = nullptr;
  const int rc = jwt_decode(&raw, tok.c_str(), reinterpret_cast<const unsigned char*>(key_.data()),
                            static_cast<int>(key_.size()));
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
  return v;
}

Result<std::string> MintToken(std::string_view key, const Principal& who, std::chrono::seconds ttl) {
  return MintToken(key, who, ttl, UnixNow());
}

Result<std::string> MintToken(std::string_view key, const Principal& who, std::chrono::seconds ttl,
                              int64_t now) {
  if (key.empty()) return InternalError("empty signing key");
  if (who.scope.empty()) return BadRequest("scope must not be empty");
  // libjwt takes C strings: a NUL would cut the scope short, and the token would grant another scope.
  if (who.scope.find('\0') != std::string::npos) return BadRequest("scope must not contain NUL bytes");
  if (who.perm == Permission::kNone) return BadRequest("perm must be read or write");
  if (ttl.count() <= 0) return BadRequest("ttl must be positive");
  jwt_t* raw = nullptr;
  if (jwt_new(&raw) != 0) return InternalError("jwt_new failed");
  JwtPtr jwt(raw);
  const std::string perm(PermissionName(who.perm));
  if (jwt_add_grant(jwt.get(), "scope", who.scope.c_str()) != 0 ||
      jwt_add_grant(jwt.get(), "perm", perm.c_str()) != 0 ||
      jwt_add_grant_int(jwt.get(), "iat", static_cast<long>(now)) != 0 ||
      jwt_add_grant_int(jwt.get(), "exp", static_cast<long>(now + ttl.count())) != 0)
    return InternalError("cannot set token claims");
  if (jwt_set_alg(jwt.get(), JWT_ALG_HS256, reinterpret_cast<const unsigned char*>(key.data()),
                  static_cast<int>(key.size())) != 0)
    return InternalError("cannot set token algorithm");
  CString out(jwt_encode_str(jwt.get()));
  if (!out) return InternalError("cannot encode token");
  return std::string(out.get());
}

}  // namespace cairn::http
