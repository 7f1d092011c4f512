// Every route against a failing index (index/testing/faulty_index.h, every call failed): a request that
// succeeds while the index answers gets 500 when the index fails with an I/O error and 503 with Retry-After
// when the index cannot be reached, never a 404, a 200 made from nothing or a half-made change; the routes
// that need no index answer as they do when it is healthy. /v2/shards, whose answer is a stream, ends it with
// an error frame that says the failure is retryable. A guard fails when a registered route has no request
// here, so a new route must say how it fails.
//
// What the routes serve is made first through services on the bare index, which then go: the routes'
// services start with cold caches and ask the index.
#include <gtest/gtest.h>
#include <openssl/sha.h>

#include <boost/json.hpp>
#include <set>
#include <utility>

#include "api/api_test_server.h"
#include "api/cas_routes.h"
#include "api/file_routes.h"
#include "api/hub_routes.h"
#include "api/ops_routes.h"
#include "api/person_tokens.h"
#include "common/hex.h"
#include "files/file_service.h"
#include "http/test_util.h"
#include "hub/bucket_service.h"
#include "hub/hub_service.h"
#include "index/testing/faulty_index.h"
#include "ingest/upload_builder.h"
#include "people/directory.h"
#include "xet/test_support.h"

namespace cairn::api {
namespace {

namespace bhttp = boost::beast::http;
namespace json = boost::json;

// Who the fixture's own changes are by, as the audit log records them.
const people::Actor kBy{.actor = "cli:test", .token_id = "", .client = ""};
using Res = bhttp::response<bhttp::string_body>;
using http::Permission;

// One request to one route.
struct Call {
  bhttp::verb method;
  std::string pattern;  // the route's, as registered
  std::string target;
  std::string token;  // bare; "" for none
  std::string body;
  unsigned healthy;  // the status while the index answers
  bool needs_index = true;
  std::string content_type = "application/json";
};

class RouteFaults : public testing::ApiServerTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(OpenServer("cairn-route-faults"));
    {
      files::FileService files(*service_, *index_, FileOptions());
      hub::HubService hub(*index_, files, HubOptions());
      hub::BucketService buckets(*index_, files, clock_);
      ASSERT_NO_FATAL_FAILURE(MakeContent(hub, buckets));
    }
    // A quota with room: every upload and commit route asks it.
    ASSERT_TRUE(index_->SetQuotaLimit("alice", uint64_t{1} << 40, nullptr).ok());
    // A person with a token to manage the others by, and one to revoke.
    {
      people::PeopleService made(*index_, clock_);
      ASSERT_TRUE(made.CreateUser(kBy, "pat", "", false).ok());
      ASSERT_TRUE(made.CreateUser(kBy, "kim", "", false).ok());
      ASSERT_TRUE(made.CreateOrg(kBy, "patorg", "").ok());
      ASSERT_TRUE(made.SetRole(kBy, "patorg", "pat", people::OrgRole::kAdmin).ok());
      ASSERT_TRUE(made.SetRole(kBy, "patorg", "kim", people::OrgRole::kRead).ok());
      auto manager =
          made.CreateToken(kBy, "pat", "manager", people::TokenRole::kWrite, {}, std::chrono::hours(24));
      auto other =
          made.CreateToken(kBy, "pat", "other", people::TokenRole::kRead, {}, std::chrono::hours(24));
      ASSERT_TRUE(manager.ok() && other.ok());
      person_token_ = manager->text;
      other_token_id_ = other->record.id;
      auto policy = made.CreatePublisher(kBy, {.ns = "patorg",
                                               .repo = "",
                                               .issuer = "https://ci.example",
                                               .audience = "a",
                                               .claims = {{"repository", "patorg/ci"}},
                                               .role = people::TokenRole::kWrite});
      ASSERT_TRUE(policy.ok());
      policy_id_ = policy->id;
    }
    faulty_ = std::make_unique<index::testing::FaultyIndex>(*index_);
    directory_ = std::make_unique<people::Directory>(*faulty_, clock_);
    ASSERT_TRUE(directory_->Refresh().ok());
    people_ = std::make_unique<people::PeopleService>(*faulty_, clock_, directory_.get());
    auth_->SetVerifier(std::make_shared<PersonTokens>(*directory_));
    quota_ = std::make_unique<quota::QuotaService>(*faulty_, clock_);
    cas_ = std::make_unique<cas::CasService>(*faulty_, *store_, pool_, CasOptions());
    files_ = std::make_unique<files::FileService>(*cas_, *faulty_, FileOptions());
    hub::HubOptions ho = HubOptions();
    ho.quota = quota_.get();
    hub_ = std::make_unique<hub::HubService>(*faulty_, *files_, ho);
    buckets_ = std::make_unique<hub::BucketService>(*faulty_, *files_, clock_, quota_.get());
    RegisterCasRoutes(*server_, *cas_, {.quota = quota_.get()});
    RegisterFileRoutes(*server_, *files_, *faulty_, {.public_url = base_});
    HubRouteOptions hro;
    hro.public_url = base_;
    hro.quota = quota_.get();
    hro.people = directory_.get();
    hro.people_service = people_.get();
    hro.audit = faulty_.get();
    RegisterHubRoutes(*server_, *hub_, *buckets_, *files_, hro);
    RegisterReadiness(*server_, {{"index", [this] { return faulty_->Ping(); }}});
    server_->Start();
  }
  void TearDown() override {
    StopServer();
    buckets_.reset();
    hub_.reset();
    files_.reset();
    cas_.reset();
    quota_.reset();
    people_.reset();
    directory_.reset();
    faulty_.reset();
    ApiServerTest::TearDown();
  }

  hub::HubOptions HubOptions() {
    hub::HubOptions ho;
    ho.clock = &clock_;
    return ho;
  }

  // A model alice/m with a small file, a folder and a large file; repositories to create around, delete and
  // move; a bucket alice/b with the large file, and one to delete; the large file in a plain scope too.
  void MakeContent(hub::HubService& hub, hub::BucketService& buckets) {
    const hub::Caller alice{"alice", true};
    const auto repo = [&](hub::RepoType type, const std::string& name) {
      auto r = hub.CreateRepo(alice, {type, "alice", name}, false);
      EXPECT_TRUE(r.ok()) << name;
      return r.ok() ? *r : hub::Repo{};
    };
    const hub::Repo m = repo(hub::RepoType::kModel, "m");
    repo(hub::RepoType::kModel, "gone");
    repo(hub::RepoType::kModel, "old");
    repo(hub::RepoType::kModel, "dup");
    const hub::Repo b = repo(hub::RepoType::kBucket, "b");
    repo(hub::RepoType::kBucket, "b3");
    scope_ = m.record.scope;

    const auto data = xet::testing::SplitMix64Bytes(1, 70000);
    const auto built = ingest::BuildUpload(std::vector<std::span<const uint8_t>>{data});
    for (const auto& x : built.xorbs) ASSERT_TRUE(service_->PutXorb(x.hash, x.body).ok());
    for (const auto* scope : {&m.record.scope, &b.record.scope, &plain_scope_})
      ASSERT_TRUE(service_->PutShard(built.shard_bytes, *scope).ok());
    file_ = built.file_hashes[0].hex();
    xorb_ = built.xorbs[0].hash;
    xorb_end_ = built.xorbs[0].layout.chunks.back().end_offset - 1;  // the last byte (ranges are inclusive)
    chunk_ = built.xorbs[0].layout.chunks[0].hash.hex();
    shard_sha_ = built.shard.files[0].sha256->hex();
    uint8_t digest[SHA256_DIGEST_LENGTH];
    SHA256(data.data(), data.size(), digest);
    sha_ = HexEncode(digest);

    hub::CommitRequest c;
    c.summary = "content";
    c.operations = {hub::AddInline{"t.txt", {'h', 'i'}}, hub::AddInline{"dir/u.txt", {'u'}},
                    hub::AddLfs{"big.bin", hub::LfsPointer{sha_, data.size()}}};
    auto committed = hub.CreateCommit(alice, m, c);
    ASSERT_TRUE(committed.ok()) << committed.error().message;
    auto added = buckets.Apply(alice, b,
                               {hub::BucketOp{.kind = hub::BucketOp::Kind::kAdd,
                                              .path = "dir/f.bin",
                                              .file = built.file_hashes[0],
                                              .mtime_ms = 1700000000123,
                                              .content_type = std::nullopt,
                                              .source = std::nullopt}});
    ASSERT_TRUE(added.ok() && added->empty());

    // A second upload, for the upload routes.
    const auto more = xet::testing::SplitMix64Bytes(2, 5000);
    upload_ = ingest::BuildUpload(std::vector<std::span<const uint8_t>>{more});
  }

  Res Send(const Call& c) {
    http::testing::Client client(port_);
    bhttp::request<bhttp::string_body> req{c.method, c.target, 11};
    if (!c.token.empty()) req.set(bhttp::field::authorization, "Bearer " + c.token);
    if (c.method == bhttp::verb::post || c.method == bhttp::verb::put || c.method == bhttp::verb::delete_) {
      req.set(bhttp::field::content_type, c.content_type);
      req.body() = c.body;
    }
    return client.Send(std::move(req));
  }

  std::vector<Call> Calls() {
    const std::string hub = MintToken("alice", Permission::kWrite);
    const std::string cas = MintToken(scope_, Permission::kWrite);
    const std::string plain = MintToken(plain_scope_, Permission::kWrite);
    const auto& x = upload_.xorbs[0];
    const std::string xorb_body(reinterpret_cast<const char*>(x.body.data()), x.body.size());
    const std::string shard(reinterpret_cast<const char*>(upload_.shard_bytes.data()),
                            upload_.shard_bytes.size());
    const std::string transfer = Signer().Url(xorb_, {{0, xorb_end_}}, Now() + 3600).substr(base_.size());
    const std::string line =
        json::serialize(json::object{
            {"type", "addFile"}, {"path", "dir/g.bin"}, {"xetHash", file_}, {"mtime", 1700000000123}}) +
        "\n";
    const std::string commit =
        json::serialize(json::object{{"key", "header"}, {"value", {{"summary", "s"}, {"description", ""}}}}) +
        "\n" +
        json::serialize(json::object{
            {"key", "file"}, {"value", {{"path", "v.txt"}, {"content", "dg=="}, {"encoding", "base64"}}}}) +
        "\n";
    const std::string m = "/api/models/alice/m";
    const std::string b = "/api/buckets/alice/b";
    const std::string repo = "/api/{types}/{ns}/{name}";
    const std::string bucket = "/api/buckets/{ns}/{name}";
    using V = bhttp::verb;
    return {
        // CAS
        {V::post, "/v1/xorbs/{prefix}/{hash}", "/v1/xorbs/default/" + x.hash.hex(), cas, xorb_body, 200, true,
         "application/octet-stream"},
        {V::post, "/v1/xorb-grants/{prefix}/{hash}", "/v1/xorb-grants/default/" + x.hash.hex(), cas, "{}",
         404, false},
        {V::post, "/v1/shards", "/v1/shards", cas, shard, 200, true, "application/octet-stream"},
        {V::post, "/v2/shards", "/v2/shards", cas, shard, 200, true, "application/octet-stream"},
        {V::get, "/v1/reconstructions/{file}", "/v1/reconstructions/" + file_, cas, "", 200},
        {V::get, "/v2/reconstructions/{file}", "/v2/reconstructions/" + file_, cas, "", 200},
        {V::get, "/v1/reconstructions", "/v1/reconstructions?file_id=" + file_, cas, "", 200},
        {V::get, "/v1/chunks/{prefix}/{hash}", "/v1/chunks/default/" + chunk_, cas, "", 200},
        {V::post, "/v1/telemetry", "/v1/telemetry", cas, R"({"event":"e","metrics":{}})", 200, false},
        // A transfer URL authorizes itself and reads the store alone.
        {V::get, "/v1/transfer/{xorb}", transfer, "", "", 206, false},
        // Plain files
        {V::get, "/v1/files/{file}", "/v1/files/" + file_, cas, "", 200},
        {V::get, "/v1/files", "/v1/files", cas, "", 200},
        {V::get, "/v1/files/by-sha256/{sha256}", "/v1/files/by-sha256/" + shard_sha_, cas, "", 200},
        {V::post, "/v1/links", "/v1/links", cas, R"({"file_hash":")" + file_ + "\"}", 201},
        // The index says whose the scope is (a repository's answers 409) before the file leaves it.
        {V::delete_, "/v1/files/{file}", "/v1/files/" + file_, plain, "", 204},
        // The Hub
        {V::get, "/api/whoami-v2", "/api/whoami-v2", hub, "", 200, false},
        {V::get, "/api/quotas/{ns}", "/api/quotas/alice", hub, "", 200},
        {V::get, "/api/settings/repositories", "/api/settings/repositories", hub, "", 200},
        {V::get, "/api/organizations/{ns}/settings/repositories",
         "/api/organizations/alice/settings/repositories", hub, "", 200},
        {V::get, "/api/settings/tokens", "/api/settings/tokens", person_token_, "", 200},
        {V::post, "/api/settings/tokens", "/api/settings/tokens", person_token_,
         R"({"name": "made", "role": "read", "expiresIn": 600})", 200},
        {V::delete_, "/api/settings/tokens/{id}", "/api/settings/tokens/" + other_token_id_, person_token_,
         "", 200},
        {V::get, "/api/audit", "/api/audit?ns=patorg", person_token_, "", 200},
        {V::get, "/api/organizations/{ns}/members", "/api/organizations/patorg/members", person_token_, "",
         200},
        {V::put, "/api/organizations/{ns}/members/{user}", "/api/organizations/patorg/members/kim",
         person_token_, R"({"role": "write"})", 200},
        {V::delete_, "/api/organizations/{ns}/members/{user}", "/api/organizations/patorg/members/kim",
         person_token_, "", 200},
        {V::get, "/api/publishers/{ns}", "/api/publishers/patorg", person_token_, "", 200},
        {V::post, "/api/publishers/{ns}", "/api/publishers/patorg", person_token_,
         R"({"issuer": "https://ci.example", "audience": "a", "claims": {"repository": "patorg/ci"}})", 200},
        {V::delete_, "/api/publishers/{ns}/{id}", "/api/publishers/patorg/" + policy_id_, person_token_, "",
         200},
        // This server has no exchanger: the route answers without the index.
        {V::post, "/oauth/token", "/oauth/token", "", "{}", 404, false},
        // No device flow on this server either: the route answers without the index.
        {V::post, "/oauth/device", "/oauth/device", "", "client_id=x", 404, false},
        {V::post, "/api/validate-yaml", "/api/validate-yaml", "", R"({"content": "x"})", 200, false},
        {V::get, "/api/agent-harnesses", "/api/agent-harnesses", "", "", 200, false},
        {V::post, "/api/repos/create", "/api/repos/create", hub,
         R"({"name": "new", "organization": "alice", "type": "model"})", 200},
        {V::delete_, "/api/repos/delete", "/api/repos/delete", hub, R"({"name": "gone", "type": "model"})",
         200},
        {V::post, "/api/repos/move", "/api/repos/move", hub,
         R"({"fromRepo": "alice/old", "toRepo": "alice/older", "type": "model"})", 200},
        {V::get, "/api/buckets/{ns}", "/api/buckets/alice", hub, "", 200},
        {V::post, bucket, "/api/buckets/alice/b2", hub, "{}", 200},
        {V::get, bucket, b, hub, "", 200},
        {V::delete_, bucket, "/api/buckets/alice/b3", hub, "", 200},
        {V::put, bucket + "/settings", b + "/settings", hub, R"({"private": false})", 200},
        {V::get, bucket + "/tree", b + "/tree", hub, "", 200},
        {V::get, bucket + "/tree/{path...}", b + "/tree/dir", hub, "", 200},
        {V::post, bucket + "/paths-info", b + "/paths-info", hub, R"({"paths": ["dir/f.bin"]})", 200},
        {V::post, bucket + "/batch", b + "/batch", hub, line, 200, true, "application/x-ndjson"},
        {V::get, bucket + "/xet-write-token", b + "/xet-write-token", hub, "", 200},
        {V::get, bucket + "/xet-read-token", b + "/xet-read-token", hub, "", 200},
        {V::get, "/buckets/{ns}/{name}/resolve/{path...}", "/buckets/alice/b/resolve/dir/f.bin", "", "", 200},
        {V::get, "/api/{types}", "/api/models", "", "", 200},
        {V::get, repo, m, "", "", 200},
        {V::get, repo + "/revision/{rev}", m + "/revision/main", "", "", 200},
        {V::put, repo + "/settings", m + "/settings", hub, R"({"private": false})", 200},
        {V::get, repo + "/tree/{rev}", m + "/tree/main", "", "", 200},
        {V::get, repo + "/tree/{rev}/{path...}", m + "/tree/main/dir", "", "", 200},
        {V::post, repo + "/paths-info/{rev}", m + "/paths-info/main", "", "paths=t.txt&expand=false", 200,
         true, "application/x-www-form-urlencoded"},
        {V::get, repo + "/refs", m + "/refs", "", "", 200},
        {V::get, repo + "/commits/{rev}", m + "/commits/main", "", "", 200},
        {V::post, repo + "/branch/{branch}", m + "/branch/dev", hub, "{}", 200},
        {V::delete_, repo + "/branch/{branch}", m + "/branch/dev", hub, "", 200},
        {V::post, repo + "/tag/{rev}", m + "/tag/main", hub, R"({"tag": "v1"})", 200},
        {V::delete_, repo + "/tag/{rev}", m + "/tag/v1", hub, "", 200},
        {V::post, repo + "/preupload/{rev}", m + "/preupload/main", hub,
         R"({"files": [{"path": "t.txt", "sample": "aGk=", "size": 2}]})", 200},
        {V::post, repo + "/commit/{rev}", m + "/commit/main", hub, commit, 200, true, "application/x-ndjson"},
        {V::post, repo + "/lfs-files/duplicate", m + "/lfs-files/duplicate", hub,
         json::serialize(
             json::object{{"target", {{"type", "model"}, {"name", "alice/dup"}}},
                          {"files", json::array{json::object{{"xetHash", file_}, {"sha256", sha_}}}}}),
         200},
        {V::get, repo + "/lfs-files", m + "/lfs-files", hub, "", 200},
        // A SHA-256 the repository never linked: the history is walked, nothing changes.
        {V::post, repo + "/lfs-files/batch", m + "/lfs-files/batch", hub,
         R"({"deletions": {"sha": [")" + std::string(64, 'a') + R"("], "rewriteHistory": true}})", 200},
        {V::post, repo + "/super-squash/{branch}", m + "/super-squash/main", hub, R"({"message": "squash"})",
         200},
        {V::get, repo + "/xet-write-token/{rev}", m + "/xet-write-token/main", hub, "", 200},
        {V::get, repo + "/xet-read-token/{rev}", m + "/xet-read-token/main", "", "", 200},
        {V::get, "/{ns}/{name}/resolve/{rev}/{path...}", "/alice/m/resolve/main/big.bin", "", "", 200},
        // Names without a namespace are refused before any lookup (cairn has no canonical repositories).
        {V::get, "/api/{types}/{name}", "/api/models/gpt2", "", "", 404, false},
        {V::get, "/api/{types}/{name}/revision/{rev}", "/api/models/gpt2/revision/main", "", "", 404, false},
        {V::get, "/{name}/resolve/{rev}/{path...}", "/gpt2/resolve/main/x", "", "", 404, false},
        // A typed resolve of a repository that does not exist: the index says so, or fails.
        {V::get, "/{types}/{ns}/{name}/resolve/{rev}/{path...}", "/datasets/alice/d/resolve/main/x", "", "",
         404},
        // Operations: readiness says the index is not ready, whatever its error; liveness and the metrics
        // (here without the index's gauges) need no index.
        {V::get, "/readyz", "/readyz", "", "", 200},
        {V::get, "/healthz", "/healthz", "", "", 200, false},
        {V::get, "/metrics", "/metrics", "", "", 200, false},
    };
  }

  std::unique_ptr<index::testing::FaultyIndex> faulty_;
  std::unique_ptr<people::Directory> directory_;
  std::unique_ptr<people::PeopleService> people_;
  std::string person_token_;
  std::string other_token_id_;
  std::string policy_id_;
  std::unique_ptr<quota::QuotaService> quota_;
  std::unique_ptr<cas::CasService> cas_;
  std::unique_ptr<files::FileService> files_;
  std::unique_ptr<hub::HubService> hub_;
  std::unique_ptr<hub::BucketService> buckets_;
  std::string scope_, file_, chunk_, shard_sha_, sha_;
  const std::string plain_scope_ = "plain";  // no repository's
  xet::XorbHash xorb_;
  uint64_t xorb_end_ = 0;
  ingest::BuiltUpload upload_;
};

TEST_F(RouteFaults, EveryRouteReportsAFailingIndexAsAFailure) {
  const std::vector<Call> calls = Calls();
  // The guard: every registered route has a request here.
  std::set<std::pair<std::string, std::string>> covered;
  for (const auto& c : calls) covered.emplace(std::string(bhttp::to_string(c.method)), c.pattern);
  for (const auto& route : server_->router().routes()) {
    EXPECT_TRUE(covered.contains({std::string(bhttp::to_string(route.method)), route.pattern}))
        << "no request for " << bhttp::to_string(route.method) << " " << route.pattern
        << ": add one to RouteFaults::Calls";
  }

  for (const Error& error :
       {IoError("injected: disk I/O error"), Unavailable("injected: the database is unreachable")}) {
    const bool unreachable = error.code == ErrorCode::kUnavailable;
    SCOPED_TRACE(unreachable ? "unreachable" : "I/O error");
    faulty_->fault = [error](std::string_view, std::span<const std::vector<uint8_t>>) -> Status {
      return error;
    };
    for (const auto& c : calls) {
      SCOPED_TRACE(std::string(bhttp::to_string(c.method)) + " " + c.target);
      const size_t before = faulty_->calls();
      const Res r = Send(c);
      if (!c.needs_index) {
        EXPECT_EQ(r.result_int(), c.healthy) << r.body();
        continue;
      }
      EXPECT_GT(faulty_->calls(), before) << "the request never asked the index";
      if (c.pattern == "/v2/shards") {  // a stream: the failure is its last frame
        EXPECT_EQ(r.result_int(), 200u);
        const std::string& body = r.body();
        const auto last = json::parse(body.substr(body.rfind('\n', body.size() - 2) + 1)).as_object();
        EXPECT_EQ(last.at("type").as_string(), "error") << body;
        EXPECT_EQ(last.at("retryable").as_bool(), true) << body;
        continue;
      }
      const unsigned want = c.pattern == "/readyz" || unreachable ? 503 : 500;
      EXPECT_EQ(r.result_int(), want) << r.body();
      if (want == 503) {
        EXPECT_EQ(r["Retry-After"], "1");
      }
      EXPECT_NE(r.body().find("injected"), std::string::npos) << "the error is the index's: " << r.body();
    }
  }

  // The same requests, the index healthy: each succeeds, so each failure above was the index's.
  faulty_->fault = nullptr;
  for (const auto& c : calls) {
    SCOPED_TRACE(std::string(bhttp::to_string(c.method)) + " " + c.target);
    const Res r = Send(c);
    EXPECT_EQ(r.result_int(), c.healthy) << r.body();
  }
}

}  // namespace
}  // namespace cairn::api
