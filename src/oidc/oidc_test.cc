// OpenID Connect below the routes: id tokens read within their bytes, signatures checked against an issuer's
// key set (RS256 only, keys refetched on rotation but not on every made-up kid), the relying party's checks
// of a sign-in (state, PKCE, the token endpoint's answer, the id token's issuer, audience, nonce and
// lifetime), and company sign-in's users and memberships on a real index. The issuer here is a key pair made
// by the test, its documents served from memory; the interop suite signs people in through Ory Hydra.
#include <gtest/gtest.h>
#include <openssl/sha.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/base64.h"
#include "index/open_index.h"
#include "oidc/id_token.h"
#include "oidc/issuer_keys.h"
#include "oidc/relying_party.h"
#include "oidc/single_sign_on.h"
#include "oidc/testing/test_issuer.h"
#include "people/directory.h"
#include "people/people_service.h"
#include "people/sign_in.h"

namespace cairn::oidc {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;
using testing::B64;
using testing::Documents;
using testing::Signer;

constexpr char kIssuer[] = "https://ci.example";
constexpr char kAudience[] = "https://hub.example";

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
  auto g = ParseIdToken(token(R"({"iss":"i","aud":"a","exp":5,"groups":["x",1,"y"]})"));
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->lists.at("groups"), (std::vector<std::string>{"x", "y"})) << "a list keeps its strings";
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

// The query parameter `name` of URL `url` (percent-decoding left out: the tests' values need none).
std::string Param(const std::string& url, const std::string& name) {
  const size_t at = url.find((url.find('?') < url.find("&" + name + "=") ? "&" : "?") + name + "=");
  if (at == std::string::npos) return {};
  const size_t start = at + name.size() + 2;
  return url.substr(start, url.find('&', start) - start);
}

std::map<std::string, std::string> Form(const std::string& form) {
  std::map<std::string, std::string> out;
  size_t start = 0;
  while (start <= form.size()) {
    const size_t end = std::min(form.find('&', start), form.size());
    const std::string pair = form.substr(start, end - start);
    const size_t eq = pair.find('=');
    if (eq != std::string::npos) out[pair.substr(0, eq)] = pair.substr(eq + 1);
    start = end + 1;
  }
  return out;
}

// A provider (key pair, documents, token endpoint) and a relying party of it, on a test clock.
class RelyingPartyTest : public ::testing::Test {
 protected:
  RelyingPartyTest() {
    docs_.Publish(kIssuer, {&signer_});
    docs_.token_endpoint = [this](const std::string& form, const std::vector<std::string>& headers) {
      return Answer(form, headers);
    };
  }

  // The provider's token endpoint: the code it issued, with the verifier whose challenge it saw, for this
  // client; an id token of `claims_` with the nonce it saw.
  PostAnswer Answer(const std::string& form, const std::vector<std::string>& headers) {
    const auto f = Form(form);
    const std::string basic = "Authorization: Basic " + Base64Encode(std::string("cairn:s3cret"));
    if (headers.empty() || headers[0] != basic) return {401, R"({"error":"invalid_client"})"};
    if (f.count("code") == 0 || f.at("code") != "the-code" || f.at("grant_type") != "authorization_code")
      return {400, R"({"error":"invalid_grant"})"};
    std::array<uint8_t, SHA256_DIGEST_LENGTH> digest{};
    const std::string verifier = f.count("code_verifier") != 0 ? f.at("code_verifier") : "";
    SHA256(reinterpret_cast<const uint8_t*>(verifier.data()), verifier.size(), digest.data());
    if (Base64Encode(digest, true) != challenge_) return {400, R"({"error":"invalid_grant","pkce":1})"};
    json::object claims = claims_;
    if (!claims.contains("nonce")) claims["nonce"] = nonce_;
    return {200, json::serialize(json::object{{"id_token", signer_.Sign(claims)}, {"token_type", "Bearer"}})};
  }

  json::object Claims() const {
    return {{"iss", kIssuer}, {"aud", "cairn"}, {"sub", "u-1"}, {"exp", now() + 300}, {"iat", now()}};
  }
  int64_t now() const { return clock_.UnixSeconds(); }

  // Begins an attempt and plays the provider's authorization endpoint: it keeps the nonce and challenge.
  Attempt Begin() {
    auto begun = party_.Begin();
    EXPECT_TRUE(begun.ok()) << begun.error().message;
    const std::string& url = begun->second;
    EXPECT_TRUE(url.starts_with(std::string(kIssuer) + "/auth?response_type=code&client_id=cairn&")) << url;
    EXPECT_EQ(Param(url, "code_challenge_method"), "S256");
    EXPECT_EQ(Param(url, "state"), begun->first.state);
    nonce_ = Param(url, "nonce");
    challenge_ = Param(url, "code_challenge");
    return begun->first;
  }

  TestClock clock_{1'800'000'000};
  Signer signer_{"k1"};
  Documents docs_;
  IssuerKeys keys_{docs_, clock_};
  ProviderConfig config_{.issuer = kIssuer,
                         .client_id = "cairn",
                         .client_secret = "s3cret",
                         .redirect_uri = "https://hub.example/login/sso/callback",
                         .scopes = "openid profile"};
  RelyingParty party_{config_, keys_, docs_, clock_};
  json::object claims_ = Claims();
  std::string nonce_;
  std::string challenge_;
};

TEST_F(RelyingPartyTest, ASignInWithTheRightStateCodeAndNonceNamesItsSubject) {
  const Attempt a = Begin();
  EXPECT_TRUE(IsAttemptSecret(a.state) && IsAttemptSecret(a.nonce) && IsAttemptSecret(a.verifier));
  EXPECT_NE(a.state, a.nonce);
  claims_["groups"] = json::array{"ml", "ops"};
  auto who = party_.Finish(a, a.state, "the-code");
  ASSERT_TRUE(who.ok()) << who.error().message;
  EXPECT_EQ(who->issuer, kIssuer);
  EXPECT_EQ(who->subject, "u-1");
  EXPECT_EQ(who->lists.at("groups"), (std::vector<std::string>{"ml", "ops"}));
  const auto form = Form(docs_.posted.back());
  EXPECT_EQ(form.at("redirect_uri"), "https%3A%2F%2Fhub.example%2Flogin%2Fsso%2Fcallback");
  EXPECT_EQ(form.count("client_secret"), 0u) << "the secret goes in the Authorization header";
}

TEST_F(RelyingPartyTest, AnAnswerToAnotherAttemptSendsNothing) {
  const Attempt a = Begin();
  const Attempt b = Begin();
  const size_t posted = docs_.posted.size();
  EXPECT_EQ(party_.Finish(a, b.state, "the-code").error().code, ErrorCode::kUnauthorized);
  EXPECT_EQ(party_.Finish(a, "", "the-code").error().code, ErrorCode::kUnauthorized);
  EXPECT_EQ(party_.Finish(a, a.state, "").error().code, ErrorCode::kUnauthorized);
  EXPECT_EQ(docs_.posted.size(), posted) << "no code is redeemed for another attempt's answer";
}

TEST_F(RelyingPartyTest, EachBadAnswerOfTheProviderIsRefused) {
  const auto refused = [&](const std::string& why, const std::function<void(Attempt&)>& change) {
    Attempt a = Begin();
    change(a);
    auto r = party_.Finish(a, a.state, "the-code");
    EXPECT_FALSE(r.ok()) << why;
    if (!r.ok()) {
      EXPECT_EQ(r.error().code, ErrorCode::kUnauthorized) << why << ": " << r.error().message;
    }
    claims_ = Claims();
  };
  refused("another verifier (PKCE)", [](Attempt& a) { a.verifier = std::string(43, 'A'); });
  refused("another nonce", [&](Attempt&) { claims_["nonce"] = std::string(43, 'n'); });
  refused("another client", [&](Attempt&) { claims_["aud"] = "other"; });
  refused("several audiences, azp another's", [&](Attempt&) {
    claims_["aud"] = json::array{"cairn", "other"};
    claims_["azp"] = "other";
  });
  refused("another issuer", [&](Attempt&) { claims_["iss"] = "https://evil.example"; });
  refused("expired", [&](Attempt&) { claims_["exp"] = now() - RelyingParty::kLeeway - 1; });
  refused("not yet valid", [&](Attempt&) { claims_["nbf"] = now() + RelyingParty::kLeeway + 60; });
  refused("no subject", [&](Attempt&) { claims_.erase("sub"); });
  // Signed by a key the issuer does not publish, under the published kid.
  Signer forger("k1");
  Attempt a = Begin();
  docs_.token_endpoint = [&](const std::string&, const std::vector<std::string>&) {
    json::object c = Claims();
    c["nonce"] = nonce_;
    return PostAnswer{200, json::serialize(json::object{{"id_token", forger.Sign(c)}})};
  };
  EXPECT_EQ(party_.Finish(a, a.state, "the-code").error().code, ErrorCode::kUnauthorized);
  docs_.token_endpoint = [](const std::string&, const std::vector<std::string>&) {
    return PostAnswer{503, "down"};
  };
  a = Begin();
  EXPECT_EQ(party_.Finish(a, a.state, "the-code").error().code, ErrorCode::kUnavailable);
}

TEST(Flows, AreReadBackAsWrittenAndNothingElse) {
  const Flow flow{.attempt = {std::string(43, 'a'), std::string(43, 'b'), std::string(43, 'c')},
                  .began = 1234,
                  .next = "/acme/model?x=1"};
  auto back = ParseFlow(FormatFlow(flow));
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->attempt.state, flow.attempt.state);
  EXPECT_EQ(back->began, 1234);
  EXPECT_EQ(back->next, flow.next);
  for (const char* bad : {"", "f1", "f1.a.b.c.1.", "f2.aaa.bbb.ccc.1.Lw"})
    EXPECT_FALSE(ParseFlow(bad)) << bad;
  std::string text = FormatFlow(flow);
  text[5] = '!';
  EXPECT_FALSE(ParseFlow(text));
  EXPECT_TRUE(ParseGroupRole("ml-team=acme:write").ok());
  EXPECT_EQ(ParseGroupRole("cn=ml,ou=x=acme:admin")->group, "cn=ml,ou=x");
  for (const char* bad : {"ml", "ml=acme", "ml=acme:owner", "=acme:read", "ml=bad name:read"})
    EXPECT_FALSE(ParseGroupRole(bad).ok()) << bad;
}

// Company sign-in on a real index: users made and linked, names never taken over, memberships from groups.
class SingleSignOnTest : public RelyingPartyTest {
 protected:
  SingleSignOnTest() {
    dir_ = fs::temp_directory_path() / ("cairn-oidc-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    auto opened = index::OpenIndex("sqlite:" + (dir_ / "index.db").string());
    EXPECT_TRUE(opened.ok());
    index_ = std::move(*opened);
    directory_ = std::make_unique<people::Directory>(*index_, clock_);
    people_ = std::make_unique<people::PeopleService>(*index_, clock_, directory_.get());
    sign_in_ = std::make_unique<people::SignInService>(*index_, *directory_, clock_);
    EXPECT_TRUE(people_->CreateOrg(kBy, "acme", "").ok());
    EXPECT_TRUE(people_->CreateOrg(kBy, "labs", "").ok());
    EXPECT_TRUE(people_->CreateUser(kBy, "ada", "", false).ok());  // acme's admin besides those of groups
    EXPECT_TRUE(people_->SetRole(kBy, "acme", "ada", index::OrgRole::kAdmin).ok());
    settings_.groups_claim = "groups";
    settings_.groups = {*ParseGroupRole("ml=acme:write"), *ParseGroupRole("leads=acme:admin"),
                        *ParseGroupRole("lab=labs:read")};
  }
  ~SingleSignOnTest() override {
    sign_in_.reset();
    directory_.reset();
    people_.reset();
    index_.reset();
    fs::remove_all(dir_);
  }
  SingleSignOnTest(const SingleSignOnTest&) = delete;
  SingleSignOnTest& operator=(const SingleSignOnTest&) = delete;

  // Signs in through `sso` as subject `sub` named `username` in `groups`.
  Result<SingleSignOn::Finished> SignIn(SingleSignOn& sso, const std::string& sub,
                                        const std::string& username, json::array groups = {}) {
    auto started = sso.Begin("/acme/model");
    if (!started) return started.error();
    auto flow = ParseFlow(started->cookie);
    EXPECT_TRUE(flow.has_value());
    nonce_ = Param(started->url, "nonce");
    challenge_ = Param(started->url, "code_challenge");
    claims_ = Claims();
    claims_["sub"] = sub;
    claims_["preferred_username"] = username;
    claims_["groups"] = std::move(groups);
    for (const auto& [k, v] : claims_override_) claims_[k] = v;
    claims_override_.clear();
    return sso.Finish(started->cookie, flow->attempt.state, "the-code", "10.0.0.1");
  }
  std::optional<index::OrgRole> RoleIn(const std::string& org, const std::string& user) {
    auto members = people_->Members(org);
    EXPECT_TRUE(members.ok());
    for (const auto& m : *members)
      if (m.account.name == user) return m.role;
    return std::nullopt;
  }

  static inline const people::Actor kBy{.actor = "cli:test", .token_id = "", .client = ""};
  fs::path dir_;
  std::unique_ptr<index::Index> index_;
  std::unique_ptr<people::PeopleService> people_;
  std::unique_ptr<people::Directory> directory_;
  std::unique_ptr<people::SignInService> sign_in_;
  SsoSettings settings_;
  std::map<std::string, std::string> claims_override_;  // more claims for the next SignIn
};

TEST_F(SingleSignOnTest, ANewSubjectGetsAUserLinkedToItAndTheSameUserNextTime) {
  SingleSignOn sso(settings_, party_, *people_, *sign_in_, clock_);
  auto first = SignIn(sso, "u-1", "grace@example.com", {"ml"});
  ASSERT_TRUE(first.ok()) << first.error().message;
  EXPECT_EQ(first->user, "grace");
  EXPECT_EQ(first->next, "/acme/model");
  EXPECT_EQ(first->session.expires, now() + settings_.session_life.count());
  auto who = sign_in_->Resolve(first->session.cookie);
  ASSERT_TRUE(who.ok()) << who.error().message;
  EXPECT_EQ(who->person.user, "grace");
  EXPECT_EQ(RoleIn("acme", "grace"), index::OrgRole::kWrite);
  // Renamed at the provider: still the same user, found by subject.
  auto again = SignIn(sso, "u-1", "grace.h", {"ml", "leads", "lab"});
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_EQ(again->user, "grace");
  EXPECT_EQ(RoleIn("acme", "grace"), index::OrgRole::kAdmin) << "the highest role of her groups";
  EXPECT_EQ(RoleIn("labs", "grace"), index::OrgRole::kRead);
  // Out of a group: out of its organization at the next sign-in.
  ASSERT_TRUE(SignIn(sso, "u-1", "grace", {"ml"}).ok());
  EXPECT_EQ(RoleIn("acme", "grace"), index::OrgRole::kWrite);
  EXPECT_EQ(RoleIn("labs", "grace"), std::nullopt);
  auto linked = sign_in_->Identities("grace");
  ASSERT_TRUE(linked.ok());
  ASSERT_EQ(linked->size(), 1u);
  EXPECT_EQ((*linked)[0].subject, "u-1");
}

TEST_F(SingleSignOnTest, AProvidersFullNameIsKeptOnlyAsTextALabelMayHold) {
  SingleSignOn sso(settings_, party_, *people_, *sign_in_, clock_);
  const std::string long_name = std::string(99, 'a') + "\xC3\xA9";  // é across the 100-byte cut
  const auto name_of = [&](const std::string& sub, const std::string& user, const std::string& full) {
    claims_override_ = {{"name", full}};
    auto r = SignIn(sso, sub, user);
    EXPECT_TRUE(r.ok()) << r.error().message;
    return people_->Find(user, std::nullopt)->full_name;
  };
  EXPECT_EQ(name_of("s1", "ann", "Ann \xC3\xA9"), "Ann \xC3\xA9");
  EXPECT_EQ(name_of("s2", "ben", long_name), std::string(99, 'a')) << "cut on a character's boundary";
  EXPECT_EQ(name_of("s3", "cat", "line\nbreak"), "") << "control characters: no full name, still signed in";
  const std::string whole = std::string(98, 'b') + "\xC3\xA9";  // ends exactly at the cut
  EXPECT_EQ(name_of("s4", "dan", whole + "z"), whole);
}

TEST_F(SingleSignOnTest, AnExistingNameIsNeverTakenOverAndAnOperatorLinksIt) {
  ASSERT_TRUE(people_->CreateUser(kBy, "alice", "", /*is_operator=*/true).ok());
  SingleSignOn sso(settings_, party_, *people_, *sign_in_, clock_);
  auto r = SignIn(sso, "evil", "alice");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kDenied) << r.error().message;
  ASSERT_TRUE(sign_in_->Link(kBy, "alice", kIssuer, "a-1").ok());
  EXPECT_EQ(sign_in_->Link(kBy, "alice", kIssuer, "a-1").error().code, ErrorCode::kConflict);
  auto linked = SignIn(sso, "a-1", "whatever");
  ASSERT_TRUE(linked.ok()) << linked.error().message;
  EXPECT_EQ(linked->user, "alice");
  EXPECT_TRUE(*sign_in_->Unlink(kBy, kIssuer, "a-1"));
  EXPECT_FALSE(*sign_in_->Unlink(kBy, kIssuer, "a-1"));
}

TEST_F(SingleSignOnTest, UnknownSubjectsAreRefusedWhenUsersAreNotMadeAndDisabledUsersAlways) {
  settings_.create_users = false;
  SingleSignOn closed(settings_, party_, *people_, *sign_in_, clock_);
  EXPECT_EQ(SignIn(closed, "u-2", "bob").error().code, ErrorCode::kDenied);
  EXPECT_EQ(people_->Find("bob", std::nullopt).error().code, ErrorCode::kNotFound);
  settings_.create_users = true;
  SingleSignOn open(settings_, party_, *people_, *sign_in_, clock_);
  ASSERT_TRUE(SignIn(open, "u-2", "bob").ok());
  ASSERT_TRUE(people_->SetDisabled(kBy, "bob", true).ok());
  EXPECT_EQ(SignIn(open, "u-2", "bob").error().code, ErrorCode::kDenied);
  EXPECT_EQ(SignIn(open, "u-3", "bad name!").error().code, ErrorCode::kDenied);
}

TEST_F(SingleSignOnTest, AFlowCookieFromAnotherBrowserOrTooOldSignsNobodyIn) {
  SingleSignOn sso(settings_, party_, *people_, *sign_in_, clock_);
  auto started = sso.Begin("/");
  ASSERT_TRUE(started.ok());
  auto flow = ParseFlow(started->cookie);
  nonce_ = Param(started->url, "nonce");
  challenge_ = Param(started->url, "code_challenge");
  EXPECT_EQ(sso.Finish("", flow->attempt.state, "the-code", "").error().code, ErrorCode::kUnauthorized);
  auto other = sso.Begin("/");
  EXPECT_EQ(sso.Finish(other->cookie, flow->attempt.state, "the-code", "").error().code,
            ErrorCode::kUnauthorized);
  clock_.Advance(SingleSignOn::kAttemptLife + 1);
  EXPECT_EQ(sso.Finish(started->cookie, flow->attempt.state, "the-code", "").error().code,
            ErrorCode::kUnauthorized);
}

}  // namespace
}  // namespace cairn::oidc
