// The pages' routes in process, against a real server, index and Hub: each route's answer and each error
// status (a missing or hidden repository, revision, folder and file; a folder asked as a file; forms without
// their token or from another origin), the security headers, sessions from sign-in to sign-out, and company
// sign-in's two routes against an issuer served from memory (oidc/testing/test_issuer.h).
#include "web/page_routes.h"

#include <gtest/gtest.h>

#include <boost/beast/http.hpp>
#include <map>
#include <string>

#include "api/api_test_server.h"
#include "http/test_util.h"
#include "hub/hub_service.h"
#include "oidc/relying_party.h"
#include "oidc/single_sign_on.h"
#include "oidc/testing/test_issuer.h"
#include "people/device_flow.h"
#include "people/directory.h"
#include "people/people_service.h"
#include "people/sign_in.h"

namespace cairn::web {
namespace {

namespace bhttp = boost::beast::http;
using V = bhttp::verb;
using Res = bhttp::response<bhttp::string_body>;

std::vector<uint8_t> Bytes(std::string_view s) {
  return {s.begin(), s.end()};
}

class PageRoutes : public api::testing::ApiServerTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(OpenServer("cairn-page-routes"));
    files_ = std::make_unique<files::FileService>(*service_, *index_, FileOptions());
    hub::HubOptions ho;
    ho.clock = &clock_;
    hub_ = std::make_unique<hub::HubService>(*index_, *files_, ho);
    directory_ = std::make_unique<people::Directory>(*index_, clock_);
    people_ = std::make_unique<people::PeopleService>(*index_, clock_, directory_.get());
    sign_in_ = std::make_unique<people::SignInService>(*index_, *directory_, clock_);
    ASSERT_TRUE(people_->CreateUser(kBy, "alice", "", false).ok());
    ASSERT_TRUE(people_->CreateUser(kBy, "bob", "", false).ok());
    ASSERT_TRUE(people_->CreateUser(kBy, "olga", "", /*is_operator=*/true).ok());
    ASSERT_TRUE(directory_->Refresh().ok());
    ASSERT_TRUE(sign_in_->SetPassword(kBy, "alice", "alice's long password").ok());
    MakeRepo("pub", false);
    MakeRepo("secret", true);
    docs_.Publish(kIssuer, {&issuer_signer_});
    keys_ = std::make_unique<oidc::IssuerKeys>(docs_, clock_);
    party_ = std::make_unique<oidc::RelyingParty>(
        oidc::ProviderConfig{.issuer = kIssuer,
                             .client_id = "cairn",
                             .client_secret = "",
                             .redirect_uri = base_ + "/login/oidc/callback"},
        *keys_, docs_, clock_);
    oidc::SsoSettings settings;
    settings.display_name = "Test <SSO>";
    sso_ = std::make_unique<oidc::SingleSignOn>(settings, *party_, *people_, *sign_in_, clock_);
    PageOptions po;
    po.public_url = base_;
    po.sign_in = sign_in_.get();
    po.people = people_.get();
    po.sso = sso_.get();
    po.index = index_.get();
    buckets_ = std::make_unique<hub::BucketService>(*index_, *files_, clock_);
    po.buckets = buckets_.get();
    po.health = {{"index", [this] { return index_->Ping(); }},
                 {"store", [] { return Status(Unavailable("the disk is gone")); }}};
    RegisterPageRoutes(*server_, *hub_, *files_, std::move(po));
    server_->Start();
  }
  void TearDown() override {
    StopServer();
    sso_.reset();
    buckets_.reset();
    party_.reset();
    keys_.reset();
    sign_in_.reset();
    directory_.reset();
    people_.reset();
    hub_.reset();
    files_.reset();
    ApiServerTest::TearDown();
  }

  void MakeRepo(const std::string& name, bool is_private) {
    const hub::Caller alice{.scope = "alice", .write = true, .expires = 0, .user = "", .reach = {}};
    auto repo = hub_->CreateRepo(alice, {hub::RepoType::kModel, "alice", name}, is_private);
    ASSERT_TRUE(repo.ok()) << repo.error().message;
    hub::CommitRequest c;
    c.summary = "add <files>";
    c.operations = {
        hub::AddInline{"README.md", Bytes("---\nlicense: mit\n---\n# Hello <script>x</script>\n")},
        hub::AddInline{"dir/a.txt", Bytes("one\ntwo\n")},
        hub::AddInline{"bin.dat", Bytes(std::string("\0\1", 2))}};
    ASSERT_TRUE(hub_->CreateCommit(alice, *repo, c).ok());
  }

  Res Get(const std::string& target, const std::string& cookie = {}) {
    http::testing::Client c(port_);
    bhttp::request<bhttp::string_body> req{V::get, target, 11};
    if (!cookie.empty()) req.set(bhttp::field::cookie, cookie);
    return c.Send(std::move(req));
  }
  Res Post(const std::string& target, const std::string& body, const std::string& cookie = {},
           const std::string& origin = {}) {
    http::testing::Client c(port_);
    bhttp::request<bhttp::string_body> req{V::post, target, 11};
    if (!cookie.empty()) req.set(bhttp::field::cookie, cookie);
    if (!origin.empty()) req.set("Origin", origin);
    req.set(bhttp::field::content_type, "application/x-www-form-urlencoded");
    req.body() = body;
    req.prepare_payload();
    return c.Send(std::move(req));
  }
  // Signs alice in; the session's cookie header.
  std::string SignIn() {
    const std::string token(64, 'a');
    auto r = Post("/login",
                  "csrf=" + token + "&username=alice&password=alice%27s+long+password&next=%2Falice%2Fsecret",
                  "cairn_form=" + token);
    EXPECT_EQ(r.result_int(), 303u) << r.body();
    EXPECT_EQ(r[bhttp::field::location], "/alice/secret");
    const std::string set(r[bhttp::field::set_cookie]);
    EXPECT_NE(set.find("HttpOnly"), std::string::npos);
    EXPECT_NE(set.find("SameSite=Lax"), std::string::npos);
    return set.substr(0, set.find(';'));
  }

  static inline const people::Actor kBy{.actor = "cli:test", .token_id = "", .client = ""};
  std::unique_ptr<files::FileService> files_;
  std::unique_ptr<hub::HubService> hub_;
  std::unique_ptr<people::PeopleService> people_;
  std::unique_ptr<people::Directory> directory_;
  std::unique_ptr<people::SignInService> sign_in_;
  static constexpr char kIssuer[] = "https://sso.example";
  oidc::testing::Signer issuer_signer_{"k1"};
  oidc::testing::Documents docs_;
  std::unique_ptr<oidc::IssuerKeys> keys_;
  std::unique_ptr<oidc::RelyingParty> party_;
  std::unique_ptr<oidc::SingleSignOn> sso_;
  std::unique_ptr<hub::BucketService> buckets_;
};

TEST_F(PageRoutes, EachPageAnswersWithItsStatusAndHeaders) {
  const std::map<std::string, unsigned> expected = {
      {"/", 200},
      {"/models", 200},
      {"/datasets", 200},
      {"/alice", 200},
      {"/nobody", 404},
      {"/alice/pub", 200},
      {"/alice/pub/tree/main", 200},
      {"/alice/pub/tree/main/dir", 200},
      {"/alice/pub/tree/main/nope", 404},
      {"/alice/pub/tree/nope", 404},
      {"/alice/pub/blob/main/dir/a.txt", 200},
      {"/alice/pub/blob/main/bin.dat", 200},
      {"/alice/pub/blob/main/dir", 302},
      {"/alice/pub/blob/main/missing.txt", 404},
      {"/alice/pub/commits/main", 200},
      {"/alice/pub/commits/main?p=99", 200},
      {"/alice/pub/commit/" + std::string(40, '0'), 404},
      {"/alice/secret", 404},
      {"/alice/secret/tree/main", 404},
      {"/alice/nothing", 404},
      {"/datasets/alice/pub", 404},
      {"/widgets/alice/pub", 404},
      {"/login", 200},
      {"/login/oidc", 303},
      {"/login/oidc/callback", 401},
      {"/login/oidc/callback?error=access_denied", 401},
      {"/settings/tokens", 303},
      {"/admin", 303},
      {"/buckets", 200},
      {"/buckets/alice/nothing", 404},
      {"/buckets/alice/nothing/tree/a", 404},
  };
  for (const auto& [target, status] : expected) {
    const Res r = Get(target);
    EXPECT_EQ(r.result_int(), status) << target;
    if (status == 200 || status == 404) {
      EXPECT_EQ(r[bhttp::field::content_type], "text/html; charset=utf-8") << target;
      EXPECT_NE(std::string(r["Content-Security-Policy"]).find("default-src 'none'"), std::string::npos)
          << target;
      EXPECT_EQ(r["X-Content-Type-Options"], "nosniff") << target;
      EXPECT_EQ(r.body().find("<script"), std::string::npos) << target;
    }
  }
  EXPECT_NE(Get("/alice/pub").body().find("&lt;files&gt;"), std::string::npos) << "a commit message escaped";
  EXPECT_NE(Get("/alice/pub/blob/main/bin.dat").body().find("not text"), std::string::npos);
  EXPECT_EQ(Get("/alice/pub/blob/main/dir")[bhttp::field::location], "/alice/pub/tree/main/dir");
  const std::string css = std::string(Get("/").body());
  const size_t at = css.find("/static/cairn-");
  ASSERT_NE(at, std::string::npos);
  const Res sheet = Get(css.substr(at, css.find('"', at) - at));
  EXPECT_EQ(sheet.result_int(), 200u);
  EXPECT_EQ(sheet[bhttp::field::content_type], "text/css; charset=utf-8");
}

TEST_F(PageRoutes, ASessionOpensPrivateRepositoriesUntilItEnds) {
  const std::string cookie = SignIn();
  EXPECT_EQ(Get("/alice/secret", cookie).result_int(), 200u);
  EXPECT_EQ(Get("/alice/secret/blob/main/dir/a.txt", cookie).result_int(), 200u);
  const std::string page(Get("/", cookie).body());
  EXPECT_NE(page.find("alice/secret"), std::string::npos);
  // The layout's form token is the session's; a sign-out without it, or from another origin, is refused.
  const size_t at = page.find("name=\"csrf\" value=\"");
  ASSERT_NE(at, std::string::npos);
  const std::string csrf = page.substr(at + 19, 64);
  EXPECT_EQ(Post("/logout", "csrf=" + std::string(64, '0'), cookie).result_int(), 403u);
  EXPECT_EQ(Post("/logout", "csrf=" + csrf, cookie, "http://evil.example").result_int(), 403u);
  EXPECT_EQ(Get("/alice/secret", cookie).result_int(), 200u);
  EXPECT_EQ(Post("/logout", "csrf=" + csrf, cookie, base_).result_int(), 303u);
  EXPECT_EQ(Get("/alice/secret", cookie).result_int(), 404u);
}

TEST_F(PageRoutes, SignInRefusesForgedFormsWrongPasswordsAndOpenRedirects) {
  const std::string token(64, 'b');
  // No form cookie, a different one, or another origin: refused before any password is tried.
  EXPECT_EQ(Post("/login", "csrf=" + token + "&username=alice&password=x").result_int(), 403u);
  EXPECT_EQ(
      Post("/login", "csrf=" + token + "&username=alice&password=x", "cairn_form=" + std::string(64, 'c'))
          .result_int(),
      403u);
  EXPECT_EQ(Post("/login", "csrf=" + token + "&username=alice&password=alice%27s+long+password",
                 "cairn_form=" + token, "http://evil.example")
                .result_int(),
            403u);
  const Res wrong = Post("/login", "csrf=" + token + "&username=alice&password=nope", "cairn_form=" + token);
  EXPECT_EQ(wrong.result_int(), 401u);
  EXPECT_NE(wrong.body().find("wrong user name or password"), std::string::npos);
  for (const char* next : {"%2F%2Fevil.example", "https%3A%2F%2Fevil.example", "%2F%5Cevil.example"}) {
    const Res r =
        Post("/login", "csrf=" + token + "&username=alice&password=alice%27s+long+password&next=" + next,
             "cairn_form=" + token);
    EXPECT_EQ(r.result_int(), 303u);
    EXPECT_EQ(r[bhttp::field::location], "/") << next;
  }
  EXPECT_EQ(Post("/logout", "").result_int(), 303u) << "signing out without a session changes nothing";
}

// The operator's page: an operator's only (anyone else signed in gets the 404 page), with the index's totals,
// each dependency's state and the latest events.
TEST_F(PageRoutes, TheOperatorPageIsAnOperatorsAlone) {
  const Res alice = Get("/admin", SignIn());
  EXPECT_EQ(alice.result_int(), 404u);
  EXPECT_EQ(alice.body().find("Dedup ratio"), std::string::npos);
  auto olga = sign_in_->Start(people_->Find("olga", std::nullopt)->id, "password", "10.0.0.9");
  ASSERT_TRUE(olga.ok()) << olga.error().message;
  const Res page = Get("/admin", "cairn_session=" + olga->cookie);
  ASSERT_EQ(page.result_int(), 200u) << page.body();
  const std::string& body = page.body();
  EXPECT_NE(body.find("Dedup ratio"), std::string::npos);
  EXPECT_NE(body.find("<strong>fails</strong>: the disk is gone"), std::string::npos);
  EXPECT_NE(body.find("repo.create"), std::string::npos) << "the latest events";
  EXPECT_NE(body.find("href=\"/admin\""), std::string::npos) << "the layout links an operator to it";
  EXPECT_EQ(Get("/", SignIn()).body().find("href=\"/admin\""), std::string::npos) << "and nobody else";
}

// A commit's page lists exactly the files it changed, however deep (the two trees walked together).
TEST_F(PageRoutes, ACommitsPageListsWhatItChangedInFoldersAtAnyDepth) {
  const hub::Caller alice{.scope = "alice", .write = true, .expires = 0, .user = "", .reach = {}};
  auto repo = hub_->Open(alice, {hub::RepoType::kModel, "alice", "pub"}, true);
  ASSERT_TRUE(repo.ok()) << repo.error().message;
  hub::CommitRequest c;
  c.summary = "change deep";
  c.operations = {hub::AddInline{"dir/deeper/new.txt", Bytes("new\n")},
                  hub::AddInline{"dir/a.txt", Bytes("one\nTWO\n")}, hub::DeletePath{"bin.dat", false}};
  auto made = hub_->CreateCommit(alice, *repo, c);
  ASSERT_TRUE(made.ok()) << made.error().message;
  const Res page = Get("/alice/pub/commit/" + made->oid.hex());
  ASSERT_EQ(page.result_int(), 200u);
  const std::string& body = page.body();
  EXPECT_NE(body.find("3 files changed"), std::string::npos) << body.substr(0, 4000);
  EXPECT_NE(body.find("dir/deeper/new.txt"), std::string::npos);
  EXPECT_NE(body.find("+TWO"), std::string::npos);
  EXPECT_NE(body.find("bin.dat"), std::string::npos);
  EXPECT_EQ(body.find("README.md"), std::string::npos) << "an unchanged file is not listed";
}

// What a page keeps from a commit (Kept) follows the branch: a new commit shows at once on the card, the
// folder and the history, and a repository made private is a 404 however often its pages were read.
TEST_F(PageRoutes, PagesFollowTheBranchAndTheRepositorysVisibility) {
  const hub::Caller alice{.scope = "alice", .write = true, .expires = 0, .user = "", .reach = {}};
  for (const char* target : {"/alice/pub", "/alice/pub/tree/main/dir", "/alice/pub/commits/main"})
    ASSERT_EQ(Get(target).result_int(), 200u) << target;
  EXPECT_NE(Get("/alice/pub").body().find("Hello"), std::string::npos);
  auto repo = hub_->Open(alice, {hub::RepoType::kModel, "alice", "pub"}, true);
  ASSERT_TRUE(repo.ok()) << repo.error().message;
  hub::CommitRequest c;
  c.summary = "second &amp; last";
  c.operations = {hub::AddInline{"README.md", Bytes("# Goodbye\n")},
                  hub::AddInline{"dir/b.txt", Bytes("b\n")}};
  ASSERT_TRUE(hub_->CreateCommit(alice, *repo, c).ok());
  const std::string card = Get("/alice/pub").body();
  EXPECT_NE(card.find("Goodbye"), std::string::npos) << card;
  EXPECT_EQ(card.find("Hello"), std::string::npos) << card;
  EXPECT_NE(Get("/alice/pub/tree/main/dir").body().find(">b.txt<"), std::string::npos);
  EXPECT_NE(Get("/alice/pub/commits/main").body().find("second &amp;amp; last"), std::string::npos);

  ASSERT_TRUE(hub_->UpdateSettings(alice, {hub::RepoType::kModel, "alice", "pub"}, true).ok());
  for (const char* target : {"/alice/pub", "/alice/pub/tree/main/dir", "/alice/pub/commits/main"})
    EXPECT_EQ(Get(target).result_int(), 404u) << target;
}

// A browser sends no token: a private repository's file is a download through a signed link, a public one's
// the plain download route (hub/download_link.h; the route's side is tested in api).
TEST_F(PageRoutes, APrivateFilesDownloadIsASignedLink) {
  const std::string pub = Get("/alice/pub/blob/main/dir/a.txt").body();
  EXPECT_NE(pub.find("href=\"/alice/pub/resolve/main/dir/a.txt\""), std::string::npos) << pub;
  const std::string cookie = SignIn();
  const std::string secret = Get("/alice/secret/blob/main/dir/a.txt", cookie).body();
  const size_t at = secret.find("href=\"/alice/secret/resolve/");
  ASSERT_NE(at, std::string::npos) << secret;
  const std::string href = secret.substr(at + 6, secret.find('"', at + 6) - at - 6);
  EXPECT_EQ(href.find("/resolve/main/"), std::string::npos) << "the commit, not the branch: " << href;
  EXPECT_NE(href.find("/dir/a.txt?x="), std::string::npos) << href;
  EXPECT_NE(href.find("&amp;s="), std::string::npos) << "escaped in the attribute: " << href;
}

// An organization's page lists its members and their roles to its members (and operators) alone.
TEST_F(PageRoutes, AnOrganizationsMembersAreShownToItsMembers) {
  ASSERT_TRUE(people_->CreateOrg(kBy, "acme", "").ok());
  ASSERT_TRUE(people_->SetRole(kBy, "acme", "alice", people::OrgRole::kAdmin).ok());
  ASSERT_TRUE(directory_->Refresh().ok());
  const Res member = Get("/acme", SignIn());
  ASSERT_EQ(member.result_int(), 200u);
  EXPECT_NE(member.body().find("<td><a href=\"/alice\">alice</a></td><td>admin</td>"), std::string::npos);
  const Res stranger = Get("/acme");
  EXPECT_EQ(stranger.result_int(), 404u) << "nothing it may see there";
  EXPECT_EQ(stranger.body().find(">admin<"), std::string::npos);
  auto bob = sign_in_->Start(people_->Find("bob", std::nullopt)->id, "password", "10.0.0.8");
  ASSERT_TRUE(bob.ok());
  const std::string bob_cookie = "cairn_session=" + bob->cookie;
  EXPECT_EQ(Get("/acme", bob_cookie).result_int(), 404u) << "not a member";

  // Its admin adds bob with the page's form; without the form token, or from bob, nothing changes.
  const std::string alice = SignIn();
  const std::string page(Get("/acme", alice).body());
  const size_t at = page.find("name=\"csrf\" value=\"");
  ASSERT_NE(at, std::string::npos);
  const std::string csrf = page.substr(at + 19, 64);
  EXPECT_EQ(
      Post("/organizations/acme/members", "csrf=" + std::string(64, '0') + "&user=bob&role=write", alice)
          .result_int(),
      403u);
  EXPECT_EQ(Post("/organizations/acme/members", "csrf=" + csrf + "&user=bob&role=write", alice,
                 "http://evil.example")
                .result_int(),
            403u);
  EXPECT_EQ(Get("/acme", bob_cookie).result_int(), 404u);
  const Res added =
      Post("/organizations/acme/members", "csrf=" + csrf + "&user=bob&role=write", alice, base_);
  ASSERT_EQ(added.result_int(), 303u) << added.body();
  EXPECT_EQ(added[bhttp::field::location], "/acme");
  const Res as_bob = Get("/acme", bob_cookie);
  ASSERT_EQ(as_bob.result_int(), 200u);
  EXPECT_NE(as_bob.body().find("<td>write</td>"), std::string::npos);
  EXPECT_EQ(as_bob.body().find("Add a member"), std::string::npos) << "a writer manages no members";
  const std::string& bob_page = as_bob.body();
  const size_t b = bob_page.find("name=\"csrf\" value=\"");
  EXPECT_EQ(Post("/organizations/acme/members",
                 "csrf=" + bob_page.substr(b + 19, 64) + "&user=bob&role=admin", bob_cookie, base_)
                .result_int(),
            404u)
      << "nor makes himself admin";
  EXPECT_EQ(Post("/organizations/acme/members", "csrf=" + csrf + "&user=alice&role=none", alice, base_)
                .result_int(),
            409u)
      << "the last admin stays";
  EXPECT_EQ(
      Post("/organizations/acme/members", "csrf=" + csrf + "&user=bob&role=owner", alice, base_).result_int(),
      400u);
}

// The query parameter `name` of a URL (its values here need no decoding).
std::string Param(std::string_view url, const std::string& name) {
  const size_t at = url.find(name + "=");
  if (at == std::string_view::npos) return {};
  const size_t start = at + name.size() + 1;
  return std::string(url.substr(start, url.find('&', start) - start));
}

TEST_F(PageRoutes, CompanySignInComesBackSignedInOnlyToTheBrowserThatLeft) {
  EXPECT_NE(Get("/login").body().find("Sign in with Test &lt;SSO&gt;"), std::string::npos);
  ASSERT_TRUE(sign_in_->Link(kBy, "alice", kIssuer, "alice-at-sso").ok());
  const Res start = Get("/login/oidc?next=%2Falice%2Fsecret");
  ASSERT_EQ(start.result_int(), 303u);
  const std::string to(start[bhttp::field::location]);
  EXPECT_TRUE(to.starts_with(std::string(kIssuer) + "/auth?response_type=code&client_id=cairn&")) << to;
  const std::string set(start[bhttp::field::set_cookie]);
  EXPECT_NE(set.find("HttpOnly"), std::string::npos);
  const std::string flow = set.substr(0, set.find(';'));
  // The provider: the id token for alice, with the attempt's nonce, for the verifier of its challenge.
  docs_.token_endpoint = [&](const std::string& form, const std::vector<std::string>&) {
    const int64_t now = clock_.UnixSeconds();
    boost::json::object claims{{"iss", kIssuer},   {"aud", "cairn"}, {"sub", "alice-at-sso"},
                               {"exp", now + 300}, {"iat", now},     {"nonce", Param(to, "nonce")}};
    EXPECT_NE(form.find("code_verifier="), std::string::npos);
    return oidc::PostAnswer{
        200, boost::json::serialize(boost::json::object{{"id_token", issuer_signer_.Sign(claims)}})};
  };
  const std::string state = Param(to, "state");
  // Another browser (no flow cookie) with the same answer: nobody signed in, nothing redeemed.
  const Res stolen = Get("/login/oidc/callback?state=" + state + "&code=c");
  EXPECT_EQ(stolen.result_int(), 401u);
  EXPECT_TRUE(docs_.posted.empty());
  const Res back = Get("/login/oidc/callback?state=" + state + "&code=c", flow);
  ASSERT_EQ(back.result_int(), 303u) << back.body();
  EXPECT_EQ(back[bhttp::field::location], "/alice/secret");
  std::string session;
  bool flow_cleared = false;
  for (const auto& field : back) {
    const std::string value(field.value());
    if (field.name() != bhttp::field::set_cookie) continue;
    if (value.starts_with("cairn_session=")) session = value.substr(0, value.find(';'));
    flow_cleared = flow_cleared || value.starts_with("cairn_sso=;");
  }
  ASSERT_FALSE(session.empty());
  EXPECT_EQ(Get("/alice/secret", session).result_int(), 200u);
  EXPECT_TRUE(flow_cleared) << "the attempt is answered once: its cookie goes with the answer";
}

}  // namespace
}  // namespace cairn::web
