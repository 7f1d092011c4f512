// Trusted publishers below the routes: id tokens parsed within their bytes, signatures checked against an
// issuer's key set (RS256 only, keys refetched on rotation but not on every made-up kid), and the exchange's
// refusals, each with the OAuth error it answers. The issuer here is a key pair made by the test and served
// from memory; the interop suite (test_publishers.py) runs the exchange against a real provider (Ory Hydra).
#include <gtest/gtest.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/rsa.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/base64.h"
#include "index/open_index.h"
#include "people/directory.h"
#include "people/people_service.h"
#include "publish/exchange.h"
#include "publish/id_token.h"
#include "publish/issuer_keys.h"

namespace cairn::publish {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;

constexpr char kIssuer[] = "https://ci.example";
constexpr char kAudience[] = "https://hub.example";
const people::Actor kBy{.actor = "cli:test", .token_id = "", .client = ""};

std::string B64(std::string_view s) {
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

// An issuer's documents, served from memory, counting what is asked.
class Documents final : public DocumentSource {
 public:
  Result<std::string> Get(const std::string& url) override {
    ++gets[url];
    const auto it = docs.find(url);
    if (it == docs.end()) return Unavailable("no document at " + url);
    return it->second;
  }
  void Publish(const std::string& issuer, const std::vector<const Signer*>& signers) {
    docs[issuer + "/.well-known/openid-configuration"] =
        json::serialize(json::object{{"issuer", issuer}, {"jwks_uri", issuer + "/jwks"}});
    json::array keys;
    for (const Signer* s : signers) keys.emplace_back(s->Jwk());
    docs[issuer + "/jwks"] = json::serialize(json::object{{"keys", keys}});
  }
  std::map<std::string, std::string> docs;
  std::map<std::string, int> gets;
};

TEST(IdTokens, AreReadWithinTheirBytes) {
  for (const char* bad : {"", "a", "a.b", "a.b.c.d", "!!.e30.c2ln", "e30.e30.c2ln", "e30.e30."}) {
    EXPECT_EQ(ParseIdToken(bad).error().code, ErrorCode::kUnauthorized) << bad;
  }
  const std::string header = B64(R"({"alg":"RS256","kid":"k"})");
  const auto token = [&](std::string_view payload) { return header + "." + B64(payload) + ".c2ln"; };
  EXPECT_FALSE(ParseIdToken(token(R"({"iss":"i","aud":"a"})")).ok()) << "no exp";
  EXPECT_FALSE(ParseIdToken(token(R"({"iss":"i","exp":5})")).ok()) << "no aud";
  EXPECT_FALSE(ParseIdToken(token(R"([1,2])")).ok()) << "not an object";
  auto t = ParseIdToken(token(R"({"iss":"i","aud":["a","b"],"exp":5.5,"sub":"s","n":3,"ok":true,"o":{}})"));
  ASSERT_TRUE(t.ok()) << t.error().message;
  EXPECT_EQ(t->aud, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(t->exp, 5);
  EXPECT_EQ(t->claims.at("n"), "3");
  EXPECT_EQ(t->claims.at("ok"), "true");
  EXPECT_FALSE(t->claims.contains("o")) << "objects are no claim a policy compares";
  EXPECT_FALSE(ParseIdToken(std::string(kMaxIdTokenBytes + 1, 'a')).ok());
}

TEST(IssuerKeysTest, VerifyRs256WithThePublishedKeyAndNothingElse) {
  Signer signer("k1");
  Documents docs;
  docs.Publish(kIssuer, {&signer});
  TestClock clock(1'800'000'000);
  IssuerKeys keys(docs, clock);
  const json::object claims{{"iss", kIssuer}, {"aud", kAudience}, {"exp", 1'800'000'600}};
  auto good = ParseIdToken(signer.Sign(claims));
  ASSERT_TRUE(good.ok());
  EXPECT_TRUE(keys.Verify(*good).ok());

  auto tampered = *good;
  tampered.signing_input[tampered.signing_input.size() - 2] ^= 1;
  EXPECT_EQ(keys.Verify(tampered).error().code, ErrorCode::kUnauthorized);
  for (const char* alg : {"none", "HS256", "RS512", "ES256"}) {
    auto other = ParseIdToken(signer.Sign(claims, alg));
    ASSERT_TRUE(other.ok());
    EXPECT_EQ(keys.Verify(*other).error().code, ErrorCode::kUnauthorized) << alg;
  }
  Signer stranger("k1");  // the same kid, another key
  auto forged = ParseIdToken(stranger.Sign(claims));
  ASSERT_TRUE(forged.ok());
  EXPECT_EQ(keys.Verify(*forged).error().code, ErrorCode::kUnauthorized);
  EXPECT_EQ(docs.gets[std::string(kIssuer) + "/jwks"], 1) << "the key set is kept";
}

TEST(IssuerKeysTest, ARotationIsFetchedButMadeUpKidsAreNotChasedEachTime) {
  Signer old_key("k1");
  Signer new_key("k2");
  Documents docs;
  docs.Publish(kIssuer, {&old_key});
  TestClock clock(1'800'000'000);
  IssuerKeys keys(docs, clock);
  const json::object claims{{"iss", kIssuer}, {"aud", kAudience}, {"exp", 1'800'009'000}};
  ASSERT_TRUE(keys.Verify(*ParseIdToken(old_key.Sign(claims))).ok());
  docs.Publish(kIssuer, {&old_key, &new_key});
  auto rotated = ParseIdToken(new_key.Sign(claims));
  EXPECT_FALSE(keys.Verify(*rotated).ok()) << "within kMinRefetch of the last fetch";
  EXPECT_FALSE(keys.Verify(*rotated).ok());
  EXPECT_EQ(docs.gets[std::string(kIssuer) + "/jwks"], 1);
  clock.Advance(IssuerKeys::kMinRefetch.count());
  EXPECT_TRUE(keys.Verify(*rotated).ok());
  EXPECT_EQ(docs.gets[std::string(kIssuer) + "/jwks"], 2);
}

TEST(IssuerKeysTest, ADiscoveryDocumentOfAnotherIssuerOrAShortKeyIsRefused) {
  Signer signer("k1");
  Documents docs;
  docs.Publish(kIssuer, {&signer});
  docs.docs[std::string(kIssuer) + "/.well-known/openid-configuration"] = json::serialize(
      json::object{{"issuer", "https://evil.example"}, {"jwks_uri", "https://evil.example/j"}});
  TestClock clock(1'800'000'000);
  IssuerKeys keys(docs, clock);
  auto t = ParseIdToken(signer.Sign({{"iss", kIssuer}, {"aud", kAudience}, {"exp", 1'800'000'600}}));
  EXPECT_EQ(keys.Verify(*t).error().code, ErrorCode::kUnavailable);

  Signer weak("w", 1024);
  Documents weak_docs;
  weak_docs.Publish(kIssuer, {&weak});
  IssuerKeys weak_keys(weak_docs, clock);
  auto w = ParseIdToken(weak.Sign({{"iss", kIssuer}, {"aud", kAudience}, {"exp", 1'800'000'600}}));
  EXPECT_EQ(weak_keys.Verify(*w).error().code, ErrorCode::kUnauthorized) << "a 1024-bit key is not kept";
}

// A trust policy on a real index, a directory that read it, and an issuer.
class ExchangeTest : public ::testing::Test {
 protected:
  ExchangeTest() {
    dir_ = fs::temp_directory_path() / ("cairn-publish-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    auto opened = index::OpenIndex("sqlite:" + (dir_ / "index.db").string());
    EXPECT_TRUE(opened.ok());
    index_ = std::move(*opened);
    people_ = std::make_unique<people::PeopleService>(*index_, clock_);
    EXPECT_TRUE(people_->CreateOrg(kBy, "acme", "").ok());
    auto policy =
        people_->CreatePublisher(kBy, {.ns = "acme",
                                       .repo = "acme/model",
                                       .issuer = kIssuer,
                                       .audience = kAudience,
                                       .claims = {{"repository", "acme/ci"}, {"ref", "refs/heads/main"}},
                                       .role = index::TokenRole::kWrite});
    EXPECT_TRUE(policy.ok()) << policy.error().message;
    policy_id_ = policy->id;
    directory_ = std::make_unique<people::Directory>(*index_, clock_);
    EXPECT_TRUE(directory_->Refresh().ok());
    docs_.Publish(kIssuer, {&signer_});
    keys_ = std::make_unique<IssuerKeys>(docs_, clock_);
    exchanger_ = std::make_unique<Exchanger>(*directory_, *keys_, clock_);
  }
  ~ExchangeTest() override {
    exchanger_.reset();
    directory_.reset();
    people_.reset();
    index_.reset();
    fs::remove_all(dir_);
  }
  ExchangeTest(const ExchangeTest&) = delete;
  ExchangeTest& operator=(const ExchangeTest&) = delete;

  json::object Claims() const {
    return {{"iss", kIssuer},
            {"aud", json::array{kAudience}},
            {"sub", "job"},
            {"exp", now() + 600},
            {"iat", now()},
            {"repository", "acme/ci"},
            {"ref", "refs/heads/main"}};
  }
  int64_t now() const { return clock_.UnixSeconds(); }
  std::string Reason(const Result<ExchangeGrant>& r) const { return r.ok() ? "granted" : r.error().reason; }

  fs::path dir_;
  TestClock clock_{1'800'000'000};
  std::unique_ptr<index::Index> index_;
  std::unique_ptr<people::PeopleService> people_;
  std::unique_ptr<people::Directory> directory_;
  Signer signer_{"k1"};
  Documents docs_;
  std::unique_ptr<IssuerKeys> keys_;
  std::unique_ptr<Exchanger> exchanger_;
  std::string policy_id_;
};

TEST_F(ExchangeTest, AMatchingIdTokenEarnsItsRepositoryNoLongerThanItLives) {
  auto grant = exchanger_->Exchange(signer_.Sign(Claims()), "acme/model");
  ASSERT_TRUE(grant.ok()) << grant.error().message;
  EXPECT_EQ(grant->access, Access::kWrite);
  EXPECT_EQ(grant->expires, now() + 600) << "no longer than the id token";
  EXPECT_EQ(grant->policy_id, policy_id_);
  EXPECT_EQ(grant->subject, std::string(kIssuer) + "#job");
  auto long_lived = Claims();
  long_lived["exp"] = now() + 86'400;
  EXPECT_EQ(exchanger_->Exchange(signer_.Sign(long_lived), "acme/model")->expires,
            now() + Exchanger::kMaxLife);
  EXPECT_TRUE(directory_->PublisherLive(policy_id_));
}

TEST_F(ExchangeTest, EachRefusalAnswersTheOAuthErrorItIs) {
  const auto with = [&](std::string_view key, json::value v) {
    auto c = Claims();
    c[key] = std::move(v);
    return signer_.Sign(c);
  };
  EXPECT_EQ(Reason(exchanger_->Exchange(with("ref", "refs/heads/fork"), "acme/model")), "invalid_target");
  EXPECT_EQ(Reason(exchanger_->Exchange(with("aud", "https://other.example"), "acme/model")),
            "invalid_target");
  EXPECT_EQ(Reason(exchanger_->Exchange(with("iss", "https://other.example"), "acme/model")),
            "invalid_target");
  EXPECT_EQ(Reason(exchanger_->Exchange(with("exp", now() - 1), "acme/model")), "invalid_request");
  EXPECT_EQ(Reason(exchanger_->Exchange(with("nbf", now() + 3600), "acme/model")), "invalid_request");
  EXPECT_EQ(Reason(exchanger_->Exchange(signer_.Sign(Claims()), "acme/other")), "invalid_target");
  EXPECT_EQ(Reason(exchanger_->Exchange(signer_.Sign(Claims()), "datasets/acme/model")), "invalid_target");
  EXPECT_EQ(Reason(exchanger_->Exchange(signer_.Sign(Claims()), "../acme")), "invalid_target");
  EXPECT_EQ(Reason(exchanger_->Exchange("not.a.token", "acme/model")), "invalid_request");
  Signer forger("k1");
  bool verified = true;
  EXPECT_EQ(Reason(exchanger_->Exchange(forger.Sign(Claims()), "acme/model", &verified)), "invalid_request");
  EXPECT_FALSE(verified);
  EXPECT_EQ(Reason(exchanger_->Exchange(with("ref", "x"), "acme/model", &verified)), "invalid_target");
  EXPECT_TRUE(verified) << "a real token whose claims do not match";
  EXPECT_EQ(docs_.gets[std::string("https://other.example") + "/.well-known/openid-configuration"], 0)
      << "an issuer no policy names is never fetched";
}

TEST_F(ExchangeTest, ARevokedPolicyGrantsNothingMoreAndItsTokensStop) {
  ASSERT_TRUE(exchanger_->Exchange(signer_.Sign(Claims()), "acme/model").ok());
  ASSERT_TRUE(*people_->RevokePublisher(kBy, policy_id_));
  ASSERT_TRUE(directory_->Refresh().ok());
  EXPECT_FALSE(directory_->PublisherLive(policy_id_));
  EXPECT_EQ(Reason(exchanger_->Exchange(signer_.Sign(Claims()), "acme/model")), "invalid_target");
  EXPECT_FALSE(*people_->RevokePublisher(kBy, policy_id_)) << "revoked already";
}

TEST_F(ExchangeTest, ANamespaceWidePolicyGrantsEveryRepositoryAndReadsTheNamespace) {
  auto wide = people_->CreatePublisher(kBy, {.ns = "acme",
                                             .repo = "",
                                             .issuer = kIssuer,
                                             .audience = kAudience,
                                             .claims = {{"repository", "acme/release"}},
                                             .role = index::TokenRole::kWrite});
  ASSERT_TRUE(wide.ok());
  ASSERT_TRUE(directory_->Refresh().ok());
  auto c = Claims();
  c["repository"] = "acme/release";
  auto repo = exchanger_->Exchange(signer_.Sign(c), "datasets/acme/data");
  ASSERT_TRUE(repo.ok()) << repo.error().message;
  EXPECT_EQ(repo->access, Access::kWrite);
  auto ns = exchanger_->Exchange(signer_.Sign(c), "acme");
  ASSERT_TRUE(ns.ok());
  EXPECT_EQ(ns->access, Access::kRead) << "a namespace's token reads";
}

TEST_F(ExchangeTest, PoliciesAreCheckedWhereTheyEnter) {
  const people::PublisherSpec good{.ns = "acme",
                                   .repo = "acme/model",
                                   .issuer = kIssuer,
                                   .audience = kAudience,
                                   .claims = {{"repository", "acme/ci"}},
                                   .role = index::TokenRole::kWrite};
  auto bad = good;
  bad.claims.clear();
  EXPECT_EQ(people_->CreatePublisher(kBy, bad).error().code, ErrorCode::kMalformed) << "no claims: anyone";
  for (const char* issuer : {"http://ci.example", "ftp://x", "https://a@b", "https://x?y", "https://"}) {
    bad = good;
    bad.issuer = issuer;
    EXPECT_EQ(people_->CreatePublisher(kBy, bad).error().code, ErrorCode::kMalformed) << issuer;
  }
  bad = good;
  bad.issuer = "http://127.0.0.1:4444";
  EXPECT_TRUE(people_->CreatePublisher(kBy, bad).ok()) << "http on loopback";
  for (const char* repo : {"other/model", "acme", "models/acme/x", "acme/a/b"}) {
    bad = good;
    bad.repo = repo;
    EXPECT_EQ(people_->CreatePublisher(kBy, bad).error().code, ErrorCode::kMalformed) << repo;
  }
  bad = good;
  bad.role = index::TokenRole::kFineGrained;
  EXPECT_EQ(people_->CreatePublisher(kBy, bad).error().code, ErrorCode::kMalformed);
  bad = good;
  bad.ns = "nobody";
  bad.repo = "nobody/model";
  EXPECT_EQ(people_->CreatePublisher(kBy, bad).error().code, ErrorCode::kNotFound);
  EXPECT_EQ(people::ParseClaim("a=b=c")->value, "b=c");
  EXPECT_FALSE(people::ParseClaim("a b=c").ok());
  EXPECT_FALSE(people::ParseClaim("a=\n").ok());
}

}  // namespace
}  // namespace cairn::publish
