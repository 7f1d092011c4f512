#include "oidc/issuer_keys.h"

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/param_build.h>

#include <boost/json.hpp>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/base64.h"
#include "net/http_client.h"
#include "people/publishers.h"

namespace cairn::oidc {

namespace json = boost::json;

namespace {

constexpr int kMinRsaBits = 2048;

Result<PublicKey> RsaKey(std::string_view n64, std::string_view e64) {
  const auto n = Base64Decode(n64, /*url_safe=*/true);
  const auto e = Base64Decode(e64, /*url_safe=*/true);
  if (!n || !e || n->empty() || e->empty()) return Malformed("an RSA key's n or e is not base64url");
  std::unique_ptr<BIGNUM, decltype(&BN_free)> bn_n(BN_bin2bn(n->data(), static_cast<int>(n->size()), nullptr),
                                                   BN_free);
  std::unique_ptr<BIGNUM, decltype(&BN_free)> bn_e(BN_bin2bn(e->data(), static_cast<int>(e->size()), nullptr),
                                                   BN_free);
  std::unique_ptr<OSSL_PARAM_BLD, decltype(&OSSL_PARAM_BLD_free)> bld(OSSL_PARAM_BLD_new(),
                                                                      OSSL_PARAM_BLD_free);
  if (!bn_n || !bn_e || !bld || OSSL_PARAM_BLD_push_BN(bld.get(), OSSL_PKEY_PARAM_RSA_N, bn_n.get()) != 1 ||
      OSSL_PARAM_BLD_push_BN(bld.get(), OSSL_PKEY_PARAM_RSA_E, bn_e.get()) != 1) {
    return IoError("OpenSSL could not hold an RSA key");
  }
  std::unique_ptr<OSSL_PARAM, decltype(&OSSL_PARAM_free)> params(OSSL_PARAM_BLD_to_param(bld.get()),
                                                                 OSSL_PARAM_free);
  std::unique_ptr<EVP_PKEY_CTX, decltype(&EVP_PKEY_CTX_free)> ctx(
      EVP_PKEY_CTX_new_from_name(nullptr, "RSA", nullptr), EVP_PKEY_CTX_free);
  EVP_PKEY* key = nullptr;
  if (!params || !ctx || EVP_PKEY_fromdata_init(ctx.get()) != 1 ||
      EVP_PKEY_fromdata(ctx.get(), &key, EVP_PKEY_PUBLIC_KEY, params.get()) != 1) {
    return Malformed("not an RSA public key");
  }
  PublicKey out(key, EVP_PKEY_free);
  if (EVP_PKEY_get_bits(key) < kMinRsaBits) return Malformed("an RSA key shorter than 2048 bits");
  return out;
}

std::string Field(const json::object& o, std::string_view key) {
  const auto* v = o.if_contains(key);
  return v != nullptr && v->is_string() ? std::string(v->as_string()) : std::string();
}

Result<json::object> ParseObject(std::string_view document, std::string_view what) {
  boost::system::error_code ec;
  json::value v = json::parse(document, ec);
  if (ec || !v.is_object()) return Malformed(std::string(what) + " is not a JSON object");
  return std::move(v.as_object());
}

class HttpSource final : public DocumentSource {
 public:
  Result<std::string> Get(const std::string& url) override {
    net::HttpClient client(net::RetryPolicy{.attempts = 2,
                                            .base_delay = std::chrono::milliseconds(200),
                                            .max_delay = std::chrono::milliseconds(1000),
                                            .timeout = std::chrono::seconds(10)});
    std::string body;
    auto r = client.Fetch(url, {"Accept: application/json"}, [&](std::span<const uint8_t> bytes) {
      if (body.size() + bytes.size() > kMaxDocumentBytes) return false;
      body.append(reinterpret_cast<const char*>(bytes.data()), bytes.size());
      return true;
    });
    if (!r.ok()) return Unavailable("could not fetch " + url + ": " + r.error().message);
    if (r->status < 200 || r->status > 299) {
      return Unavailable("fetching " + url + " answered " + std::to_string(r->status));
    }
    return body;
  }

  Result<PostAnswer> PostForm(const std::string& url, const std::vector<std::string>& headers,
                              std::string_view form) override {
    net::HttpClient client(net::RetryPolicy{.attempts = 1,
                                            .base_delay = std::chrono::milliseconds(200),
                                            .max_delay = std::chrono::milliseconds(1000),
                                            .timeout = std::chrono::seconds(10)});
    std::vector<std::string> all = headers;
    all.emplace_back("Content-Type: application/x-www-form-urlencoded");
    all.emplace_back("Accept: application/json");
    auto r = client.Send("POST", url, all, form, /*retries=*/false);
    if (!r.ok()) return Unavailable("could not post to " + url + ": " + r.error().message);
    if (r->body.size() > kMaxDocumentBytes) return Unavailable(url + " answered more than a document");
    return PostAnswer{r->status, std::move(r->body)};
  }
};

}  // namespace

std::unique_ptr<DocumentSource> HttpDocumentSource() {
  return std::make_unique<HttpSource>();
}

Result<std::map<std::string, PublicKey>> ParseJwks(std::string_view document) {
  auto doc = ParseObject(document, "a key set");
  if (!doc.ok()) return doc.error();
  const auto* keys = doc->if_contains("keys");
  if (keys == nullptr || !keys->is_array()) return Malformed("a key set has a \"keys\" list");
  std::map<std::string, PublicKey> out;
  for (const auto& k : keys->as_array()) {
    if (!k.is_object()) continue;
    const auto& o = k.as_object();
    const std::string use = Field(o, "use");
    const std::string alg = Field(o, "alg");
    // Signing keys for RS256 only; encryption keys and other algorithms are no business of ours.
    if (Field(o, "kty") != "RSA" || (!use.empty() && use != "sig") || (!alg.empty() && alg != "RS256")) {
      continue;
    }
    auto key = RsaKey(Field(o, "n"), Field(o, "e"));
    if (!key.ok()) continue;  // one bad key does not spoil the others
    out.emplace(Field(o, "kid"), std::move(*key));
  }
  return out;
}

bool VerifyRs256(const PublicKey& key, std::string_view input, const std::vector<uint8_t>& signature) {
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> md(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  return md && EVP_DigestVerifyInit(md.get(), nullptr, EVP_sha256(), nullptr, key.get()) == 1 &&
         EVP_DigestVerify(md.get(), signature.data(), signature.size(),
                          reinterpret_cast<const unsigned char*>(input.data()), input.size()) == 1;
}

std::shared_ptr<IssuerKeys::Issuer> IssuerKeys::IssuerOf(const std::string& iss) {
  std::lock_guard lock(mu_);
  auto& slot = issuers_[iss];
  if (!slot) slot = std::make_shared<Issuer>();
  return slot;
}

Status IssuerKeys::Fetch(const std::string& iss, Issuer& issuer) {
  issuer.tried_at = clock_.UnixSeconds();
  std::string base = iss;
  while (!base.empty() && base.back() == '/') base.pop_back();
  auto discovery = source_.Get(base + "/.well-known/openid-configuration");
  if (!discovery.ok()) return discovery.error();
  auto doc = ParseObject(*discovery, "the issuer's discovery document");
  if (!doc.ok()) return Unavailable(doc.error().message);
  if (Field(*doc, "issuer") != iss) return Unavailable("the discovery document names another issuer");
  const std::string jwks_uri = Field(*doc, "jwks_uri");
  if (!people::ValidIssuer(jwks_uri)) return Unavailable("the discovery document's jwks_uri is not https");
  ProviderEndpoints endpoints{Field(*doc, "authorization_endpoint"), Field(*doc, "token_endpoint")};
  // Absent ones are left empty (a CI provider signs nobody in); present ones must be fit to send a code to.
  for (const std::string* url : {&endpoints.authorization, &endpoints.token}) {
    if (!url->empty() && !people::ValidIssuer(*url))
      return Unavailable("the discovery document names an endpoint that is not https");
  }
  auto jwks = source_.Get(jwks_uri);
  if (!jwks.ok()) return jwks.error();
  auto keys = ParseJwks(*jwks);
  if (!keys.ok()) return Unavailable(keys.error().message);
  issuer.keys = std::move(*keys);
  issuer.endpoints = std::move(endpoints);
  issuer.fetched_at = issuer.tried_at;
  return Ok{};
}

Status IssuerKeys::Verify(const IdToken& token) {
  if (token.alg != "RS256") return Unauthorized("invalid id token: only RS256 signatures are accepted");
  auto issuer = IssuerOf(token.iss);
  std::lock_guard lock(issuer->mu);
  if (auto st = Refresh(token.iss, *issuer, &token.kid); !st.ok()) return st;
  const auto it = issuer->keys.find(token.kid);
  if (it == issuer->keys.end())
    return Unauthorized("invalid id token: signed with a key its issuer does not publish");
  if (!VerifyRs256(it->second, token.signing_input, token.signature)) {
    return Unauthorized("invalid id token: the signature does not verify");
  }
  return Ok{};
}

Status IssuerKeys::Refresh(const std::string& iss, Issuer& issuer, const std::string* kid) {
  const int64_t now = clock_.UnixSeconds();
  const bool stale = issuer.fetched_at == 0 || now - issuer.fetched_at >= kKeysLife.count();
  const bool unknown = kid != nullptr && !issuer.keys.contains(*kid);
  if ((stale || unknown) && now - issuer.tried_at >= kMinRefetch.count()) {
    if (auto st = Fetch(iss, issuer); !st.ok() && issuer.keys.empty()) return st;
  }
  if (issuer.fetched_at == 0) return Unavailable("the issuer's keys could not be fetched; try again shortly");
  return Ok{};
}

Result<ProviderEndpoints> IssuerKeys::Endpoints(const std::string& iss) {
  auto issuer = IssuerOf(iss);
  std::lock_guard lock(issuer->mu);
  if (auto st = Refresh(iss, *issuer, nullptr); !st.ok()) return st.error();
  if (issuer->endpoints.authorization.empty() || issuer->endpoints.token.empty())
    return Unavailable("the provider's discovery document names no authorization or token endpoint");
  return issuer->endpoints;
}

}  // namespace cairn::oidc
