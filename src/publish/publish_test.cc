// Trusted publishers below the routes: the exchange's refusals, each with the OAuth error it answers (id
// tokens and issuers' keys are oidc_test's). The issuer here is a key pair made by the test and served from
// memory; the interop suite (test_publishers.py) runs the exchange against a real provider (Ory Hydra).
#include <gtest/gtest.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "index/open_index.h"
#include "oidc/id_token.h"
#include "oidc/issuer_keys.h"
#include "oidc/testing/test_issuer.h"
#include "people/directory.h"
#include "people/people_service.h"
#include "publish/exchange.h"

namespace cairn::publish {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;
using oidc::IssuerKeys;
using oidc::testing::Documents;
using oidc::testing::Signer;

constexpr char kIssuer[] = "https://ci.example";
constexpr char kAudience[] = "https://hub.example";
const people::Actor kBy{.actor = "cli:test", .token_id = "", .client = ""};

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
