#include "oidc/relying_party.h"

#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

#include <algorithm>
#include <array>
#include <boost/json.hpp>
#include <utility>

#include "common/base64.h"
#include "common/percent_encode.h"
#include "oidc/id_token.h"

namespace cairn::oidc {

namespace json = boost::json;

namespace {

constexpr size_t kSecretBytes = 32;  // 43 base64url characters: PKCE's verifier at its shortest
constexpr size_t kSecretChars = 43;

Result<std::string> RandomSecret() {
  std::array<uint8_t, kSecretBytes> raw{};
  if (RAND_bytes(raw.data(), static_cast<int>(raw.size())) != 1) return IoError("RAND_bytes failed");
  return Base64Encode(raw, /*url_safe=*/true);
}

std::string Challenge(std::string_view verifier) {
  std::array<uint8_t, SHA256_DIGEST_LENGTH> digest{};
  SHA256(reinterpret_cast<const uint8_t*>(verifier.data()), verifier.size(), digest.data());
  return Base64Encode(digest, /*url_safe=*/true);
}

bool Same(std::string_view a, std::string_view b) {
  return !a.empty() && a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

Error SignInRefused(std::string why) {
  return Error{ErrorCode::kUnauthorized, "the sign-in was refused: " + std::move(why)};
}

std::string Query(std::initializer_list<std::pair<std::string_view, std::string_view>> params) {
  std::string out;
  for (const auto& [name, value] : params) {
    if (!out.empty()) out += '&';
    out.append(name).append("=").append(PercentEncode(value));
  }
  return out;
}

}  // namespace

bool IsAttemptSecret(std::string_view text) {
  return text.size() == kSecretChars && std::all_of(text.begin(), text.end(), [](char c) {
           return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
                  c == '_';
         });
}

Result<std::pair<Attempt, std::string>> RelyingParty::Begin() {
  auto endpoints = keys_.Endpoints(config_.issuer);
  if (!endpoints) return endpoints.error();
  Attempt attempt;
  for (std::string* secret : {&attempt.state, &attempt.nonce, &attempt.verifier}) {
    auto made = RandomSecret();
    if (!made) return made.error();
    *secret = std::move(*made);
  }
  const std::string& base = endpoints->authorization;
  std::string url = base + (base.find('?') == std::string::npos ? "?" : "&") +
                    Query({{"response_type", "code"},
                           {"client_id", config_.client_id},
                           {"redirect_uri", config_.redirect_uri},
                           {"scope", config_.scopes},
                           {"state", attempt.state},
                           {"nonce", attempt.nonce},
                           {"code_challenge", Challenge(attempt.verifier)},
                           {"code_challenge_method", "S256"}});
  return std::pair{std::move(attempt), std::move(url)};
}

Result<Identity> RelyingParty::Finish(const Attempt& attempt, std::string_view state, std::string_view code) {
  if (!Same(state, attempt.state)) return SignInRefused("the answer is to another sign-in (state)");
  if (code.empty() || code.size() > 4096) return SignInRefused("the provider sent no code");
  auto endpoints = keys_.Endpoints(config_.issuer);
  if (!endpoints) return endpoints.error();
  auto id_token = Redeem(*endpoints, attempt, code);
  if (!id_token) return id_token.error();
  return Accept(*id_token, attempt);
}

Result<std::string> RelyingParty::Redeem(const ProviderEndpoints& endpoints, const Attempt& attempt,
                                         std::string_view code) {
  std::vector<std::string> headers;
  std::string form = Query({{"grant_type", "authorization_code"},
                            {"code", code},
                            {"redirect_uri", config_.redirect_uri},
                            {"code_verifier", attempt.verifier}});
  if (config_.client_secret.empty()) {
    form += "&" + Query({{"client_id", config_.client_id}});
  } else {
    // RFC 6749 §2.3.1: the id and secret form-encoded, then joined and base64'd.
    headers.push_back("Authorization: Basic " + Base64Encode(PercentEncode(config_.client_id) + ":" +
                                                             PercentEncode(config_.client_secret)));
  }
  auto answer = source_.PostForm(endpoints.token, headers, form);
  if (!answer) return answer.error();
  boost::system::error_code ec;
  const json::value doc = json::parse(answer->body, ec);
  const json::object* o = ec ? nullptr : doc.if_object();
  if (answer->status != 200) {
    const json::value* error = o != nullptr ? o->if_contains("error") : nullptr;
    const std::string reason = error != nullptr && error->is_string() ? std::string(error->as_string()) : "";
    if (answer->status >= 500)
      return Unavailable("the provider's token endpoint answered " + std::to_string(answer->status));
    return SignInRefused("the provider refused the code (" + std::to_string(answer->status) +
                         (reason.empty() ? "" : " " + reason.substr(0, 64)) + ")");
  }
  const json::value* id_token = o != nullptr ? o->if_contains("id_token") : nullptr;
  if (id_token == nullptr || !id_token->is_string())
    return SignInRefused("the provider's answer carries no id token");
  return std::string(id_token->as_string());
}

Result<Identity> RelyingParty::Accept(std::string_view text, const Attempt& attempt) {
  auto token = ParseIdToken(text);
  if (!token) return SignInRefused(token.error().message);
  if (token->iss != config_.issuer) return SignInRefused("the id token names another issuer");
  if (auto st = keys_.Verify(*token); !st) {
    if (st.error().code == ErrorCode::kUnavailable) return st.error();
    return SignInRefused(st.error().message);
  }
  const int64_t now = clock_.UnixSeconds();
  if (token->exp + kLeeway <= now) return SignInRefused("the id token expired");
  if (token->nbf != 0 && token->nbf - kLeeway > now) return SignInRefused("the id token is not valid yet");
  if (token->iat != 0 && token->iat - kLeeway > now)
    return SignInRefused("the id token was issued in the future");
  if (std::find(token->aud.begin(), token->aud.end(), config_.client_id) == token->aud.end())
    return SignInRefused("the id token is for another client");
  const auto azp = token->claims.find("azp");
  if (token->aud.size() > 1 && (azp == token->claims.end() || azp->second != config_.client_id))
    return SignInRefused("the id token was issued to another party (azp)");
  const auto nonce = token->claims.find("nonce");
  if (nonce == token->claims.end() || !Same(nonce->second, attempt.nonce))
    return SignInRefused("the id token is for another sign-in (nonce)");
  if (token->sub.empty() || token->sub.size() > 255) return SignInRefused("the id token names no subject");
  return Identity{.issuer = token->iss,
                  .subject = token->sub,
                  .claims = std::move(token->claims),
                  .lists = std::move(token->lists)};
}

}  // namespace cairn::oidc
