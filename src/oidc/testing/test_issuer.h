// An OpenID Connect issuer for tests: a key pair that signs id tokens as an issuer would (Signer), and the
// issuer's documents served from memory (Documents: discovery, key set, and a token endpoint the test
// answers), counting what is asked. Header-only; tests of oidc/ and publish/ use it.
#pragma once

#include <gtest/gtest.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/rsa.h>

#include <boost/json.hpp>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/base64.h"
#include "oidc/issuer_keys.h"

namespace cairn::oidc::testing {

namespace json = boost::json;

inline std::string B64(std::string_view s) {
  return Base64Encode(s, /*url_safe=*/true);
}

// An RSA key pair the test signs with, as an issuer would.
class Signer {
 public:
  explicit Signer(std::string kid, int bits = 2048)
      : kid_(std::move(kid)), key_(EVP_RSA_gen(bits), EVP_PKEY_free) {}

  // The public key as a JWK.
  json::object Jwk() const {
    BIGNUM* n = nullptr;
    BIGNUM* e = nullptr;
    EVP_PKEY_get_bn_param(key_.get(), OSSL_PKEY_PARAM_RSA_N, &n);
    EVP_PKEY_get_bn_param(key_.get(), OSSL_PKEY_PARAM_RSA_E, &e);
    const auto bytes = [](BIGNUM* b) {
      std::string out(static_cast<size_t>(BN_num_bytes(b)), '\0');
      BN_bn2bin(b, reinterpret_cast<unsigned char*>(out.data()));
      BN_free(b);
      return B64(out);
    };
    return {{"kty", "RSA"}, {"use", "sig"},  {"alg", "RS256"},
            {"kid", kid_},  {"n", bytes(n)}, {"e", bytes(e)}};
  }

  // A JWT of `claims` with header `alg` (RS256 signs; any other is written as given, signed the same way).
  std::string Sign(const json::object& claims, const std::string& alg = "RS256") const {
    const std::string input =
        B64(json::serialize(json::object{{"alg", alg}, {"kid", kid_}, {"typ", "JWT"}})) + "." +
        B64(json::serialize(claims));
    std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> md(EVP_MD_CTX_new(), EVP_MD_CTX_free);
    size_t len = 0;
    EXPECT_EQ(EVP_DigestSignInit(md.get(), nullptr, EVP_sha256(), nullptr, key_.get()), 1);
    EXPECT_EQ(EVP_DigestSign(md.get(), nullptr, &len, reinterpret_cast<const unsigned char*>(input.data()),
                             input.size()),
              1);
    std::string sig(len, '\0');
    EXPECT_EQ(EVP_DigestSign(md.get(), reinterpret_cast<unsigned char*>(sig.data()), &len,
                             reinterpret_cast<const unsigned char*>(input.data()), input.size()),
              1);
    sig.resize(len);
    return input + "." + B64(sig);
  }

 private:
  std::string kid_;
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key_;
};

// An issuer's documents, served from memory, counting what is asked; its token endpoint answers what
// `token_endpoint` says (the form posted, its headers -> status and body).
class Documents final : public DocumentSource {
 public:
  Result<std::string> Get(const std::string& url) override {
    ++gets[url];
    const auto it = docs.find(url);
    if (it == docs.end()) return Unavailable("no document at " + url);
    return it->second;
  }
  Result<PostAnswer> PostForm(const std::string& url, const std::vector<std::string>& headers,
                              std::string_view form) override {
    ++gets[url];
    posted.emplace_back(form);
    if (!token_endpoint || url != token_url) return Unavailable("nothing answers at " + url);
    return token_endpoint(std::string(form), headers);
  }
  void Publish(const std::string& issuer, const std::vector<const Signer*>& signers) {
    token_url = issuer + "/token";
    docs[issuer + "/.well-known/openid-configuration"] =
        json::serialize(json::object{{"issuer", issuer},
                                     {"jwks_uri", issuer + "/jwks"},
                                     {"authorization_endpoint", issuer + "/auth"},
                                     {"token_endpoint", token_url}});
    json::array keys;
    for (const Signer* s : signers) keys.emplace_back(s->Jwk());
    docs[issuer + "/jwks"] = json::serialize(json::object{{"keys", keys}});
  }
  std::map<std::string, std::string> docs;
  std::map<std::string, int> gets;
  std::string token_url;
  std::function<PostAnswer(const std::string& form, const std::vector<std::string>& headers)> token_endpoint;
  std::vector<std::string> posted;
};

}  // namespace cairn::oidc::testing
