// The Hub's routes for people, in process: a real server over a SQLite index whose directory knows users, an
// organization with a member of each role, and their tokens. Each role may do what it grants and is refused
// the rest with the Hub's status, and nothing changes on a refusal; a private repository is a 404 to anyone
// who may not read it; a person's own tokens are listed, made and revoked through the API within what the
// making token may.
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <chrono>
#include <map>
#include <thread>

#include "api/api_test_server.h"
#include "api/hub_routes.h"
#include "api/person_tokens.h"
#include "api/refusal_audit.h"
#include "common/base64.h"
#include "http/test_util.h"
#include "people/device_flow.h"
#include "people/directory.h"
#include "people/sign_in.h"

namespace cairn::api {
namespace {

namespace json = boost::json;
namespace bhttp = boost::beast::http;
using Res = bhttp::response<bhttp::string_body>;
using V = bhttp::verb;

// Who the fixture's own changes are by, as the audit log records them.
const people::Actor kBy{.actor = "cli:test", .token_id = "", .client = ""};

size_t Count(const std::string& json_array) {
  const json::value v = json::parse(json_array);
  return v.as_array().size();
}

class PeopleApi : public testing::ApiServerTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(OpenServer("cairn-people-api"));
    files_ = std::make_unique<files::FileService>(*service_, *index_, FileOptions());
    hub::HubOptions ho;
    ho.clock = &clock_;
    hub_ = std::make_unique<hub::HubService>(*index_, *files_, ho);
    buckets_ = std::make_unique<hub::BucketService>(*index_, *files_, clock_);
    directory_ = std::make_unique<people::Directory>(*index_, clock_);
    people_ = std::make_unique<people::PeopleService>(*index_, clock_, directory_.get());
    for (const char* user : {"ann", "wes", "rey", "sam"})
      ASSERT_TRUE(people_->CreateUser(kBy, user, "", false).ok());
    ASSERT_TRUE(people_->CreateOrg(kBy, "acme", "ACME").ok());
    ASSERT_TRUE(people_->SetRole(kBy, "acme", "ann", people::OrgRole::kAdmin).ok());
    ASSERT_TRUE(people_->SetRole(kBy, "acme", "wes", people::OrgRole::kWrite).ok());
    ASSERT_TRUE(people_->SetRole(kBy, "acme", "rey", people::OrgRole::kRead).ok());
    for (const char* user : {"ann", "wes", "rey", "sam"})
      tokens_[user] = Make(user, people::TokenRole::kWrite);
    ASSERT_TRUE(directory_->Refresh().ok());
    auth_->SetVerifier(std::make_shared<PersonTokens>(*directory_));
    HubRouteOptions hro;
    hro.public_url = base_;
    hro.people = directory_.get();
    hro.people_service = people_.get();
    hro.audit = index_.get();
    sign_in_ = std::make_unique<people::SignInService>(*index_, *directory_, clock_);
    device_ = std::make_unique<people::DeviceFlow>(*index_, *people_, *sign_in_, clock_);
    hro.device = device_.get();
    RegisterHubRoutes(*server_, *hub_, *buckets_, *files_, hro);
    server_->Start();
  }
  void TearDown() override {
    StopServer();
    device_.reset();
    sign_in_.reset();
    directory_.reset();
    people_.reset();
    buckets_.reset();
    hub_.reset();
    files_.reset();
    ApiServerTest::TearDown();
  }

  std::string Make(const std::string& user, people::TokenRole role,
                   const std::vector<people::Grant>& grants = {}) {
    auto made = people_->CreateToken(kBy, user, user + "-token", role, grants, std::chrono::hours(24));
    EXPECT_TRUE(made.ok()) << made.error().message;
    return made.ok() ? made->text : "";
  }
  Res Send(V verb, const std::string& target, const std::string& token, std::string body = {}) {
    http::testing::Client c(port_);
    bhttp::request<bhttp::string_body> req{verb, target, 11};
    if (!token.empty()) req.set(bhttp::field::authorization, "Bearer " + token);
    if (!body.empty() || verb == V::post || verb == V::put) {
      req.body() = std::move(body);
      req.prepare_payload();
    }
    return c.Send(std::move(req));
  }
  unsigned Status(V verb, const std::string& target, const std::string& token, std::string body = {}) {
    return Send(verb, target, token, std::move(body)).result_int();
  }
  unsigned Create(const std::string& as, const std::string& name, bool is_private = true) {
    json::object body{{"name", name}, {"organization", "acme"}, {"type", "model"}};
    if (is_private) body["visibility"] = "private";
    return Status(V::post, "/api/repos/create", tokens_[as], json::serialize(body));
  }
  unsigned Commit(const std::string& as, const std::string& repo, const std::string& path) {
    const std::string body =
        json::serialize(json::object{{"key", "header"}, {"value", {{"summary", "s"}, {"description", ""}}}}) +
        "\n" +
        json::serialize(json::object{
            {"key", "file"},
            {"value", {{"path", path}, {"content", Base64Encode("x")}, {"encoding", "base64"}}}}) +
        "\n";
    return Status(V::post, "/api/models/" + repo + "/commit/main", tokens_[as], body);
  }
  std::vector<std::string> Listed(const std::string& as, const std::string& target) {
    auto r = Send(V::get, target, tokens_[as]);
    EXPECT_EQ(r.result_int(), 200u) << r.body();
    std::vector<std::string> out;
    const json::value listed = json::parse(r.body());
    for (const auto& v : listed.as_array()) out.emplace_back(v.at("id").as_string());
    return out;
  }

  std::unique_ptr<files::FileService> files_;
  std::unique_ptr<hub::HubService> hub_;
  std::unique_ptr<hub::BucketService> buckets_;
  std::unique_ptr<people::PeopleService> people_;
  std::unique_ptr<people::Directory> directory_;
  std::unique_ptr<people::SignInService> sign_in_;
  std::unique_ptr<people::DeviceFlow> device_;
  std::map<std::string, std::string> tokens_;
};

// hf auth login's requests (RFC 8628), the person's approval made through the service (the pages' half is
// tested in the browser): every answer and error the client tells apart, the token it gets working, refresh
// tokens used once, and codes past their life.
TEST_F(PeopleApi, TheDeviceFlowAnswersEachStepAsRfc8628Has) {
  const auto form = [&](const std::string& target, const std::string& body) {
    http::testing::Client c(port_);
    bhttp::request<bhttp::string_body> req{V::post, target, 11};
    req.set(bhttp::field::content_type, "application/x-www-form-urlencoded");
    req.body() = body;
    req.prepare_payload();
    auto r = c.Send(std::move(req));
    return std::pair{r.result_int(), json::parse(r.body()).as_object()};
  };
  const auto error = [](const json::object& o) { return std::string(o.at("error").as_string()); };
  auto [status, started] = form("/oauth/device", "client_id=cli");
  ASSERT_EQ(status, 200u) << json::serialize(started);
  EXPECT_EQ(started.at("verification_uri").as_string(), base_ + "/device");
  const std::string code(started.at("user_code").as_string());
  EXPECT_EQ(started.at("verification_uri_complete").as_string(), base_ + "/device?user_code=" + code);
  EXPECT_EQ(started.at("interval").as_int64(), 5);
  EXPECT_EQ(started.at("expires_in").as_int64(), 900);
  const std::string poll =
      "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Adevice_code&client_id=cli&device_code=" +
      std::string(started.at("device_code").as_string());
  EXPECT_EQ(error(form("/oauth/token", poll).second), "authorization_pending");
  EXPECT_EQ(error(form("/oauth/token", poll).second), "slow_down");
  clock_.Advance(5);
  EXPECT_EQ(error(form("/oauth/token", poll).second), "authorization_pending");
  EXPECT_EQ(form("/oauth/device", "").first, 400u);
  EXPECT_EQ(error(form("/oauth/token", "grant_type=refresh_token&refresh_token=nope").second),
            "invalid_grant");

  const people::Actor ann{.actor = "ann", .token_id = "", .client = ""};
  const int64_t ann_id = people_->Find("ann", people::AccountKind::kUser)->id;
  EXPECT_EQ(device_->Decide(ann, ann_id, "BCDF-GHJK", true).error().code, ErrorCode::kNotFound);
  ASSERT_TRUE(device_->Decide(ann, ann_id, code, true).ok());
  EXPECT_EQ(device_->Decide(ann, ann_id, code, false).error().code, ErrorCode::kNotFound) << "decided once";
  clock_.Advance(5);
  auto [ok, issued] = form("/oauth/token", poll);
  ASSERT_EQ(ok, 200u) << json::serialize(issued);
  EXPECT_EQ(issued.at("token_type").as_string(), "bearer");
  EXPECT_EQ(issued.at("expires_in").as_int64(), 30 * 86400);
  const std::string access(issued.at("access_token").as_string());
  EXPECT_EQ(Status(V::get, "/api/whoami-v2", access), 200u);
  clock_.Advance(5);
  EXPECT_EQ(error(form("/oauth/token", poll).second), "invalid_grant") << "one token per code";

  // A refresh gets a new pair; the old refresh token then gets nothing.
  const std::string refresh = "grant_type=refresh_token&client_id=cli&refresh_token=" +
                              std::string(issued.at("refresh_token").as_string());
  auto [renewed_status, renewed] = form("/oauth/token", refresh);
  ASSERT_EQ(renewed_status, 200u) << json::serialize(renewed);
  EXPECT_NE(renewed.at("access_token").as_string(), access);
  EXPECT_EQ(error(form("/oauth/token", refresh).second), "invalid_grant");

  // Denied, and expired, codes.
  auto [s2, second] = form("/oauth/device", "client_id=cli");
  const std::string poll2 = "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Adevice_code&device_code=" +
                            std::string(second.at("device_code").as_string());
  ASSERT_TRUE(device_->Decide(ann, ann_id, std::string(second.at("user_code").as_string()), false).ok());
  EXPECT_EQ(error(form("/oauth/token", poll2).second), "access_denied");
  auto [s3, third] = form("/oauth/device", "client_id=cli");
  clock_.Advance(901);
  EXPECT_EQ(error(form("/oauth/token",
                       "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Adevice_code&"
                       "device_code=" +
                           std::string(third.at("device_code").as_string()))
                      .second),
            "expired_token");
  EXPECT_EQ(device_->Decide(ann, ann_id, std::string(third.at("user_code").as_string()), true).error().code,
            ErrorCode::kNotFound);
}

TEST_F(PeopleApi, EachRoleDoesWhatItGrantsAndNoMore) {
  EXPECT_EQ(Create("ann", "m"), 200u);
  EXPECT_EQ(Create("wes", "w"), 200u);
  EXPECT_EQ(Create("rey", "r"), 403u);
  EXPECT_EQ(Create("sam", "s"), 403u);

  EXPECT_EQ(Commit("wes", "acme/m", "a.txt"), 200u);
  EXPECT_EQ(Commit("rey", "acme/m", "b.txt"), 403u);
  EXPECT_EQ(Commit("sam", "acme/m", "c.txt"), 404u);  // private: not there for a stranger
  EXPECT_EQ(Status(V::get, "/api/models/acme/m", tokens_["rey"]), 200u);
  EXPECT_EQ(Status(V::get, "/api/models/acme/m", tokens_["sam"]), 404u);
  EXPECT_EQ(Status(V::get, "/api/models/acme/m", ""), 404u);
  EXPECT_EQ(Status(V::get, "/api/models/acme/m/tree/main", tokens_["sam"]), 404u);

  const std::string settings = R"({"visibility": "public"})";
  EXPECT_EQ(Status(V::put, "/api/models/acme/m/settings", tokens_["wes"], settings), 403u);
  EXPECT_EQ(Status(V::get, "/api/models/acme/m", tokens_["sam"]), 404u) << "the refusal changed nothing";
  EXPECT_EQ(
      Status(V::delete_, "/api/repos/delete", tokens_["wes"], R"({"name": "w", "organization": "acme"})"),
      403u);
  EXPECT_EQ(
      Status(V::post, "/api/repos/move", tokens_["wes"], R"({"fromRepo": "acme/w", "toRepo": "wes/w"})"),
      403u);
  EXPECT_EQ(Status(V::put, "/api/models/acme/m/settings", tokens_["ann"], settings), 200u);
  EXPECT_EQ(Status(V::get, "/api/models/acme/m", tokens_["sam"]), 200u);
  // Moving needs the admin's right on the source and a writer's at the destination.
  EXPECT_EQ(
      Status(V::post, "/api/repos/move", tokens_["ann"], R"({"fromRepo": "acme/w", "toRepo": "sam/w"})"),
      403u);
  EXPECT_EQ(
      Status(V::post, "/api/repos/move", tokens_["ann"], R"({"fromRepo": "acme/w", "toRepo": "ann/w"})"),
      200u);

  // Listings show the private repository exactly to those who may read it.
  EXPECT_EQ(Create("ann", "p"), 200u);
  EXPECT_EQ(Listed("rey", "/api/models?author=acme"), (std::vector<std::string>{"acme/m", "acme/p"}));
  EXPECT_EQ(Listed("sam", "/api/models?author=acme"), (std::vector<std::string>{"acme/m"}));
  EXPECT_EQ(Listed("rey", "/api/organizations/acme/settings/repositories"),
            (std::vector<std::string>{"acme/m", "acme/p"}));
  EXPECT_EQ(Listed("ann", "/api/settings/repositories"), (std::vector<std::string>{"ann/w"}));
  EXPECT_EQ(Status(V::get, "/api/organizations/acme/settings/repositories", tokens_["sam"]), 403u);
  EXPECT_EQ(Status(V::get, "/api/settings/repositories", ""), 401u);
  EXPECT_EQ(Status(V::get, "/api/settings/repositories?cursor=widgets:x", tokens_["ann"]), 400u);

  // A read token reads by its owner's roles and writes nothing.
  tokens_["wes-read"] = Make("wes", people::TokenRole::kRead);
  EXPECT_EQ(Commit("wes-read", "acme/m", "d.txt"), 403u);
  EXPECT_EQ(Status(V::get, "/api/models/acme/p", tokens_["wes-read"]), 200u);
}

TEST_F(PeopleApi, AFineGrainedTokenReachesWhatItListsWithinItsOwnersRights) {
  ASSERT_EQ(Create("ann", "m"), 200u);
  ASSERT_EQ(Create("ann", "other"), 200u);
  tokens_["fine"] = Make("wes", people::TokenRole::kFineGrained, {{"acme/m", true}, {"ann", true}});
  EXPECT_EQ(Commit("fine", "acme/m", "a.txt"), 200u);
  EXPECT_EQ(Status(V::get, "/api/models/acme/other", tokens_["fine"]), 404u);
  EXPECT_EQ(Create("fine", "new"), 403u);
  const json::value who = json::parse(Send(V::get, "/api/whoami-v2", tokens_["fine"]).body());
  const json::value& token = who.at("auth").at("accessToken");
  EXPECT_EQ(token.at("role").as_string(), "fineGrained");
  EXPECT_EQ(Count(json::serialize(token.at("fineGrained").at("scoped"))), 2u);
  // Within the owner's rights: wes reads acme and cannot write it once his role is read.
  ASSERT_TRUE(people_->SetRole(kBy, "acme", "wes", people::OrgRole::kRead).ok());
  ASSERT_TRUE(directory_->Refresh().ok());
  EXPECT_EQ(Commit("fine", "acme/m", "b.txt"), 403u);
  EXPECT_EQ(Status(V::get, "/api/models/acme/m", tokens_["fine"]), 200u);
}

TEST_F(PeopleApi, APersonsOwnTokensThroughTheApi) {
  const std::string path = "/api/settings/tokens";
  auto made = Send(V::post, path, tokens_["wes"], R"({"name": "script", "role": "read", "expiresIn": 600})");
  ASSERT_EQ(made.result_int(), 200u) << made.body();
  const json::value token = json::parse(made.body());
  const std::string text(token.at("token").as_string());
  const std::string id(token.at("id").as_string());
  EXPECT_EQ(Status(V::get, "/api/whoami-v2", text), 200u);
  auto listed = Send(V::get, path, tokens_["wes"]);
  EXPECT_EQ(listed.result_int(), 200u);
  EXPECT_EQ(listed.body().find(text.substr(23)), std::string::npos) << "a listing never shows a secret";
  EXPECT_EQ(Count(listed.body()), 2u);

  tokens_["read"] = Make("wes", people::TokenRole::kRead);
  tokens_["fine"] = Make("wes", people::TokenRole::kFineGrained, {{"wes", true}});
  ASSERT_TRUE(directory_->Refresh().ok());
  const std::string scope_token = MintToken("wes", http::Permission::kWrite);
  const std::pair<std::string, std::string> refusals403[] = {
      {tokens_["read"], R"({"name": "x", "role": "write"})"},
      {tokens_["fine"], R"({"name": "x", "role": "read"})"},
      {scope_token, R"({"name": "x", "role": "read"})"}};
  for (const auto& [as, body] : refusals403) EXPECT_EQ(Status(V::post, path, as, body), 403u) << body;
  for (const char* body : {R"({"name": "x", "role": "read", "expiresIn": 999999999})", R"({"name": "x"})",
                           R"({"name": "", "role": "read"})", R"([1])", R"({"name": "x", "role": "read",
                           "scoped": [{"scope": "wes", "permission": "write"}]})"}) {
    EXPECT_EQ(Status(V::post, path, tokens_["wes"], body), 400u) << body;
  }
  EXPECT_EQ(Status(V::post, path, "", R"({"name": "x", "role": "read"})"), 401u);
  EXPECT_EQ(Count(Send(V::get, path, tokens_["wes"]).body()), 4u) << "nothing made";

  const std::string others = tokens_["sam"].substr(6, 16);
  EXPECT_EQ(Status(V::delete_, path + "/" + others, tokens_["wes"]), 404u);
  EXPECT_EQ(Status(V::get, "/api/whoami-v2", tokens_["sam"]), 200u);
  EXPECT_EQ(Status(V::delete_, path + "/" + id, tokens_["wes"]), 200u);
  EXPECT_EQ(Status(V::get, "/api/whoami-v2", text), 401u) << "this node refuses it at once";
}

// An organization's members are listed to its members; its admins change roles and remove members, never the
// last admin; anyone else finds no such organization.
TEST_F(PeopleApi, AnOrganizationsAdminsManageItsMembers) {
  const std::string members = "/api/organizations/acme/members";
  auto listed = Send(V::get, members, tokens_["rey"]);
  ASSERT_EQ(listed.result_int(), 200u) << listed.body();
  EXPECT_EQ(Count(listed.body()), 3u);
  EXPECT_EQ(Status(V::get, members, tokens_["sam"]), 404u);
  EXPECT_EQ(Status(V::get, members, ""), 401u);
  EXPECT_EQ(Status(V::get, "/api/organizations/nowhere/members", tokens_["ann"]), 404u);

  EXPECT_EQ(Status(V::put, members + "/sam", tokens_["wes"], R"({"role": "read"})"), 403u) << "a writer";
  EXPECT_EQ(Status(V::put, members + "/sam", tokens_["sam"], R"({"role": "admin"})"), 404u) << "a stranger";
  EXPECT_EQ(Status(V::put, members + "/sam", tokens_["ann"], R"({"role": "owner"})"), 400u);
  EXPECT_EQ(Status(V::put, members + "/nobody", tokens_["ann"], R"({"role": "read"})"), 404u);
  EXPECT_EQ(Status(V::get, members, tokens_["sam"]), 404u) << "the refusals changed nothing";

  EXPECT_EQ(Status(V::put, members + "/sam", tokens_["ann"], R"({"role": "read"})"), 200u);
  EXPECT_EQ(Status(V::get, members, tokens_["sam"]), 200u) << "seen by this node at once";
  EXPECT_EQ(Status(V::delete_, members + "/ann", tokens_["ann"]), 409u) << "the last admin stays";
  EXPECT_EQ(Status(V::put, members + "/ann", tokens_["ann"], R"({"role": "write"})"), 409u);
  EXPECT_EQ(Status(V::put, members + "/wes", tokens_["ann"], R"({"role": "admin"})"), 200u);
  EXPECT_EQ(Status(V::delete_, members + "/ann", tokens_["wes"]), 200u);
  EXPECT_EQ(Status(V::get, members, tokens_["ann"]), 404u);
  EXPECT_EQ(Create("ann", "late"), 403u) << "no longer a member";
}

// Every change through the routes is in the audit log with who made it, with which token and from where; an
// organization's admin reads its events, an operator every event, anyone else nothing; no token's text is
// in it.
TEST_F(PeopleApi, TheAuditLogRecordsWhoChangedWhat) {
  ASSERT_EQ(Create("ann", "m"), 200u);
  ASSERT_EQ(Commit("wes", "acme/m", "a.txt"), 200u);
  ASSERT_EQ(Status(V::put, "/api/models/acme/m/settings", tokens_["ann"], R"({"visibility": "public"})"),
            200u);
  ASSERT_EQ(Status(V::put, "/api/organizations/acme/members/sam", tokens_["ann"], R"({"role": "read"})"),
            200u);
  auto made = Send(V::post, "/api/settings/tokens", tokens_["wes"], R"({"name": "ci", "role": "read"})");
  ASSERT_EQ(made.result_int(), 200u);
  const std::string text(json::parse(made.body()).at("token").as_string());

  auto log = Send(V::get, "/api/audit?ns=acme", tokens_["ann"]);
  ASSERT_EQ(log.result_int(), 200u) << log.body();
  const json::value events = json::parse(log.body());
  std::vector<std::string> actions;
  for (const auto& e : events.as_array()) actions.emplace_back(e.at("action").as_string());
  // The fixture's own changes (by the command line) come first: the organization and its members.
  EXPECT_EQ(actions, (std::vector<std::string>{"member.set", "repo.settings", "commit", "repo.create",
                                               "member.set", "member.set", "member.set", "org.create"}));
  EXPECT_EQ(events.as_array().back().at("actor").as_string(), "cli:test");
  const auto& commit = events.as_array()[2];
  EXPECT_EQ(commit.at("actor").as_string(), "wes");
  EXPECT_EQ(commit.at("tokenId").as_string(), tokens_["wes"].substr(6, 16));
  EXPECT_NE(commit.at("client").as_string(), "");
  EXPECT_EQ(commit.at("target").as_string(), "acme/m");

  EXPECT_EQ(Status(V::get, "/api/audit?ns=acme", tokens_["wes"]), 403u) << "a writer is no admin";
  EXPECT_EQ(Status(V::get, "/api/audit", tokens_["ann"]), 403u) << "an admin names the namespace";
  EXPECT_EQ(Status(V::get, "/api/audit?ns=acme", MintToken("acme", http::Permission::kWrite)), 403u);
  EXPECT_EQ(Status(V::get, "/api/audit?ns=acme", ""), 401u);
  EXPECT_EQ(Status(V::get, "/api/audit?ns=acme&limit=0", tokens_["ann"]), 400u);
  EXPECT_EQ(Status(V::get, "/api/audit?ns=acme&since=yesterday", tokens_["ann"]), 400u);

  ASSERT_TRUE(people_->CreateUser(kBy, "opal", "", true).ok());
  tokens_["opal"] = Make("opal", people::TokenRole::kRead);
  ASSERT_TRUE(directory_->Refresh().ok());
  auto all = Send(V::get, "/api/audit?limit=2", tokens_["opal"]);
  ASSERT_EQ(all.result_int(), 200u) << all.body();
  EXPECT_EQ(Count(all.body()), 2u);
  EXPECT_NE(all["Link"].find("before="), std::string::npos) << "a full page names the next";
  auto everything = Send(V::get, "/api/audit?limit=1000", tokens_["opal"]);
  EXPECT_NE(everything.body().find("token.create"), std::string::npos);
  EXPECT_EQ(everything.body().find(text.substr(23)), std::string::npos) << "never a token's secret";
  EXPECT_EQ(everything.body().find(tokens_["wes"].substr(23)), std::string::npos);
}

// A write attempt refused (401, 403, 404) by someone the server can name is in the audit log as
// access.refused, with who, which token, from where and what was asked: a reader committing, a stranger
// writing a private repository, a writer changing members, a revoked token and a disabled user's. Reads and
// callers nobody can name (no token, a made-up one) are not; one actor's refusals are rate-limited.
TEST_F(PeopleApi, RefusedWriteAttemptsAreInTheAuditLog) {
  ASSERT_EQ(Create("ann", "m"), 200u);
  const std::string revoked = Make("wes", people::TokenRole::kWrite);
  const std::string revoked_id = revoked.substr(6, 16);
  ASSERT_TRUE(people_->Revoke(kBy, revoked_id).ok());
  ASSERT_TRUE(people_->CreateUser(kBy, "dee", "", false).ok());
  tokens_["dee"] = Make("dee", people::TokenRole::kWrite);
  ASSERT_TRUE(people_->SetDisabled(kBy, "dee", true).ok());
  ASSERT_TRUE(directory_->Refresh().ok());

  EXPECT_EQ(Commit("rey", "acme/m", "b.txt"), 403u);
  EXPECT_EQ(Commit("sam", "acme/m", "c.txt"), 404u);
  EXPECT_EQ(Status(V::put, "/api/organizations/acme/members/sam", tokens_["wes"], R"({"role": "admin"})"),
            403u);
  tokens_["revoked"] = revoked;
  EXPECT_EQ(Commit("revoked", "dee/x", "d.txt"), 401u);
  EXPECT_EQ(Status(V::post, "/api/repos/create", tokens_["dee"], R"({"name": "x", "type": "model"})"), 401u);
  // Not recorded: a read, no token, a made-up token.
  EXPECT_EQ(Status(V::get, "/api/models/acme/m", tokens_["sam"]), 404u);
  tokens_["none"] = "";
  EXPECT_EQ(Commit("none", "acme/m", "e.txt"), 401u);
  tokens_["made-up"] = "cairn_" + std::string(16, 'a') + "_" + std::string(43, 'b');
  EXPECT_EQ(Commit("made-up", "acme/m", "f.txt"), 401u);

  const auto refused = [&] {
    auto listed = index_->ListAudit(index::AuditFilter{}, std::nullopt, 1000);
    EXPECT_TRUE(listed.ok());
    std::vector<index::AuditEvent> out;
    for (auto& e : *listed) {
      if (e.action == "access.refused") out.push_back(e);
    }
    return out;
  };
  std::vector<index::AuditEvent> events;
  for (int i = 0; i < 200 && events.size() < 5; ++i) {  // written on the workers, after the answer
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    events = refused();
  }
  std::map<std::string, index::AuditEvent> by;
  for (const auto& e : events) by[e.actor + (e.token_id == revoked_id ? "/revoked" : "")] = e;
  ASSERT_EQ(by.size(), 5u);
  EXPECT_EQ(by["rey"].target, "/api/models/acme/m/commit/main");
  EXPECT_EQ(by["rey"].ns, "acme");
  EXPECT_EQ(by["rey"].detail, "POST 403");
  EXPECT_EQ(by["rey"].token_id, tokens_["rey"].substr(6, 16));
  EXPECT_NE(by["rey"].client, "");
  EXPECT_EQ(by["sam"].detail, "POST 404");
  EXPECT_EQ(by["wes"].detail, "PUT 403");
  EXPECT_EQ(by["wes/revoked"].detail, "POST 401");
  EXPECT_EQ(by["dee"].detail, "POST 401");

  // A flood of one actor's refusals is cut to its bucket: the log takes a burst, not every one.
  for (int i = 0; i < 3 * static_cast<int>(RefusalAudit::kBurst); ++i) Commit("rey", "acme/m", "g.txt");
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  size_t from_rey = 0;
  for (const auto& e : refused()) from_rey += e.actor == "rey" ? 1 : 0;
  EXPECT_GE(from_rey, static_cast<size_t>(RefusalAudit::kBurst));
  EXPECT_LT(from_rey, static_cast<size_t>(2 * RefusalAudit::kBurst));
}

}  // namespace
}  // namespace cairn::api
