// The Hub and git routes with a pull-through mirror, in process: an upstream cairn (the fixture's server,
// with the CAS, Hub and git routes) and a mirror of it (a second server on a backend of its own). Every
// answer a mirrored repository gives and every error status: a copy on first read with the upstream's ids, a
// large file fetched on its first download (HEAD answered with upstream's Xet hash), absent paths, revisions
// and repositories, writes refused, the read policy, offline mode, and upstream gone (what is held is served,
// what is not answers 503 with Retry-After).
#include <gtest/gtest.h>
#include <openssl/sha.h>

#include <boost/json.hpp>
#include <thread>
#include <tuple>

#include "api/api_test_server.h"
#include "api/cas_routes.h"
#include "api/git_routes.h"
#include "api/hub_routes.h"
#include "common/base64.h"
#include "common/hex.h"
#include "http/test_util.h"
#include "ingest/upload_builder.h"
#include "mirror/mirror_service.h"
#include "xet/test_support.h"

namespace cairn::api {
namespace {

namespace json = boost::json;
namespace bhttp = boost::beast::http;
using Res = bhttp::response<bhttp::string_body>;

// A server, its backend and its services: the upstream reuses the fixture's backend, the mirror has its own.
struct Node {
  std::unique_ptr<files::FileService> files;
  std::unique_ptr<hub::HubService> hub;
  std::unique_ptr<hub::BucketService> buckets;
};

class MirrorApi : public testing::ApiServerTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(OpenServer("cairn-mirror-upstream"));
    up_.files = std::make_unique<files::FileService>(*service_, *index_, FileOptions());
    up_.hub = std::make_unique<hub::HubService>(*index_, *up_.files, hub::HubOptions{.clock = &clock_});
    up_.buckets = std::make_unique<hub::BucketService>(*index_, *up_.files, clock_, nullptr);
    RegisterCasRoutes(*server_, *service_, {});
    RegisterHubRoutes(*server_, *up_.hub, *up_.buckets, *up_.files, {.public_url = base_});
    GitRouteOptions go;
    go.public_url = base_;
    RegisterGitRoutes(*server_, *up_.hub, *up_.files, *index_, go);
    server_->Start();
    Publish();
  }

  void TearDown() override {
    StopMirror();
    mirror_dir_.clear();
    StopServer();
    up_ = {};
    ApiServerTest::TearDown();
  }

  // alice/m upstream: README.md (small) and w.bin (large, 300 KB) in one commit after the first.
  void Publish() { ASSERT_NO_FATAL_FAILURE(PublishLarge("m", 7, &large_, &sha_, &xet_, &head_)); }

  // alice/<name> upstream with README.md and w.bin, 300 KB of random bytes from `seed`.
  void PublishLarge(const std::string& name, uint64_t seed, std::vector<uint8_t>* large, std::string* sha,
                    std::string* xet, std::string* head, bool is_private = false) {
    const hub::Caller alice{.scope = "alice", .write = true, .expires = 0};
    auto repo = up_.hub->CreateRepo(alice, {hub::RepoType::kModel, "alice", name}, is_private);
    ASSERT_TRUE(repo.ok());
    const std::string random = http::testing::RandomBytes(300000, seed);
    large->assign(random.begin(), random.end());
    std::vector<std::span<const uint8_t>> spans = {*large};
    auto built = ingest::BuildUpload(spans);
    for (const auto& x : built.xorbs) ASSERT_TRUE(service_->PutXorb(x.hash, x.body).ok());
    ASSERT_TRUE(service_->PutShard(built.shard_bytes, repo->record.scope).ok());
    uint8_t digest[SHA256_DIGEST_LENGTH];
    SHA256(large->data(), large->size(), digest);
    *sha = HexEncode(digest);
    *xet = built.file_hashes.at(0).hex();
    hub::CommitRequest c;
    c.summary = "weights";
    c.operations = {hub::AddInline{"README.md", {'h', 'i', '\n'}},
                    hub::AddLfs{"w.bin", hub::LfsPointer{*sha, large->size()}, true}};
    auto made = up_.hub->CreateCommit(alice, *repo, c);
    ASSERT_TRUE(made.ok()) << made.error().message;
    *head = made->oid.hex();
  }

  // The mirror: a server of its own over a fresh backend, mirroring the fixture's server.
  void StartMirror(mirror::MirrorOptions mo = {}) {
    StopMirror();
    ASSERT_NO_FATAL_FAILURE(
        cas::testing::OpenTestBackend("cairn-mirror-node", &mirror_dir_, &m_store_, &m_index_));
    http::ServerOptions o;
    o.host = "127.0.0.1";
    o.port = 0;
    mirror_server_ = std::make_unique<http::Server>(
        o, std::make_shared<http::Authenticator>(testing::kTestJwtKey, &clock_));
    ASSERT_TRUE(mirror_server_->Listen().ok());
    mirror_base_ = "http://127.0.0.1:" + std::to_string(mirror_server_->port());
    cas::ServiceOptions so = CasOptions();
    so.public_url = mirror_base_;
    m_cas_ = std::make_unique<cas::CasService>(*m_index_, *m_store_, pool_, so);
    m_.files = std::make_unique<files::FileService>(*m_cas_, *m_index_, FileOptions());
    m_.hub = std::make_unique<hub::HubService>(*m_index_, *m_.files, hub::HubOptions{.clock = &clock_});
    m_.buckets = std::make_unique<hub::BucketService>(*m_index_, *m_.files, clock_, nullptr);
    mo.upstream.url = base_;
    if (mo.spool_dir.empty()) mo.spool_dir = mirror_dir_ / "spool";
    mo.upstream.retry.attempts = 2;
    mo.upstream.retry.base_delay = std::chrono::milliseconds(10);
    mo.clock = &clock_;
    mirror_ = std::make_unique<mirror::MirrorService>(*m_index_, *m_index_, *m_.hub, *m_.files, *m_cas_, mo);
    relay_ = std::make_unique<cas::FunctionRelay>(
        [m = mirror_.get()](const xet::FileHash& f, const std::string& scope,
                            std::optional<cas::ByteRange> r) { return m->RelayPlan(f, scope, r); },
        [m = mirror_.get()](const xet::XorbHash& x, uint64_t first, uint64_t last) {
          return m->RelayOpen(x, first, last);
        });
    RegisterCasRoutes(*mirror_server_, *m_cas_,
                      {.await_file = [m = mirror_.get()](const xet::FileHash& f) { return m->Await(f); },
                       .relay = relay_.get()});
    RegisterHubRoutes(*mirror_server_, *m_.hub, *m_.buckets, *m_.files,
                      {.public_url = mirror_base_, .mirror = mirror_.get()});
    GitRouteOptions go;
    go.public_url = mirror_base_;
    go.mirror = mirror_.get();
    RegisterGitRoutes(*mirror_server_, *m_.hub, *m_.files, *m_index_, go);
    mirror_server_->Start();
  }

  void StopMirror() {
    if (mirror_server_) {
      mirror_server_->Stop(std::chrono::seconds(2));
      mirror_server_->Wait();
    }
    mirror_server_.reset();
    mirror_.reset();
    relay_.reset();
    m_ = {};
    m_cas_.reset();
    m_index_.reset();
    m_store_.reset();
    if (!mirror_dir_.empty()) std::filesystem::remove_all(mirror_dir_);
  }

  Res Ask(bhttp::verb verb, const std::string& target, const std::string& token = "", std::string body = {},
          const std::string& authorization = "") {
    http::testing::Client c(mirror_server_->port());
    bhttp::request<bhttp::string_body> req{verb, target, 11};
    if (!token.empty()) req.set(bhttp::field::authorization, "Bearer " + token);
    if (!authorization.empty()) req.set(bhttp::field::authorization, authorization);
    if (!body.empty() || verb == bhttp::verb::post) req.body() = std::move(body);
    return c.Send(std::move(req));
  }
  Res Get(const std::string& target, const std::string& token = "") {
    return Ask(bhttp::verb::get, target, token);
  }
  // Until alice/<name>'s w.bin is stored and linked on the mirror: a moment after a download's last byte
  // (sent once the file's SHA-256 is checked).
  void WaitStored(const std::string& name) {
    for (int i = 0; i < 500; ++i) {
      if (Get("/api/models/alice/" + name + "/tree/main").body().find("xetHash") != std::string::npos) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    FAIL() << name << " was not stored";
  }

  Node up_, m_;
  std::vector<uint8_t> large_;
  std::string sha_, xet_, head_;
  std::filesystem::path mirror_dir_;
  std::unique_ptr<store::LocalDiskStore> m_store_;
  std::unique_ptr<index::SqliteIndex> m_index_;
  std::unique_ptr<cas::CasService> m_cas_;
  std::unique_ptr<mirror::MirrorService> mirror_;
  std::unique_ptr<cas::Relay> relay_;
  std::unique_ptr<http::Server> mirror_server_;
  std::string mirror_base_;
};

TEST_F(MirrorApi, CopiesOnFirstReadWithTheUpstreamsIdsAndFetchesLargeFilesOnce) {
  ASSERT_NO_FATAL_FAILURE(StartMirror());
  auto r = Get("/api/models/alice/m/revision/main");
  ASSERT_EQ(r.result_int(), 200u) << r.body();
  EXPECT_EQ(json::parse(r.body()).at("sha").as_string(), head_);
  EXPECT_NE(Get("/api/models?author=alice").body().find("alice/m"), std::string::npos);  // anyone reads it
  r = Get("/api/models/alice/m/tree/main");
  ASSERT_EQ(r.result_int(), 200u) << r.body();
  const auto tree = json::parse(r.body()).as_array();
  ASSERT_EQ(tree.size(), 3u);  // .gitattributes, README.md, w.bin
  const auto& w = tree.at(2).as_object();
  EXPECT_EQ(w.at("path").as_string(), "w.bin");
  EXPECT_EQ(w.at("size").as_int64(), 300000);  // a large file before its bytes are here
  EXPECT_EQ(w.at("lfs").at("oid").as_string(), sha_);
  EXPECT_FALSE(w.contains("xetHash"));
  r = Get("/alice/m/resolve/main/README.md");
  ASSERT_EQ(r.result_int(), 200u);
  EXPECT_EQ(r.body(), "hi\n");
  // HEAD answers with upstream's Xet hash; the bytes follow.
  r = Ask(bhttp::verb::head, "/alice/m/resolve/main/w.bin");
  ASSERT_EQ(r.result_int(), 200u) << r.body();
  EXPECT_EQ(r["X-Xet-Hash"], xet_);
  EXPECT_EQ(r["ETag"], "\"" + sha_ + "\"");
  EXPECT_EQ(r["X-Linked-Size"], "300000");
  EXPECT_EQ(r["X-Repo-Commit"], head_);
  EXPECT_NE(r["Link"].find(mirror_base_ + "/api/models/alice/m/xet-read-token/"), std::string::npos);
  r = Get("/alice/m/resolve/" + head_ + "/w.bin");
  ASSERT_EQ(r.result_int(), 200u);
  EXPECT_EQ(r.body(), std::string(large_.begin(), large_.end()));
  EXPECT_EQ(r["X-Xet-Hash"], xet_);
  ASSERT_NO_FATAL_FAILURE(WaitStored("m"));
  r = Get("/api/models/alice/m/tree/main");
  EXPECT_EQ(json::parse(r.body()).as_array().at(2).at("xetHash").as_string(), xet_);
  // The reconstruction is the mirror's own, with a read token it minted.
  r = Get("/api/models/alice/m/xet-read-token/main");
  ASSERT_EQ(r.result_int(), 200u);
  const std::string cas_token(json::parse(r.body()).at("accessToken").as_string());
  EXPECT_EQ(json::parse(r.body()).at("casUrl").as_string(), mirror_base_);
  EXPECT_EQ(Get("/v2/reconstructions/" + xet_, cas_token).result_int(), 200u);
  EXPECT_EQ(Get("/alice/m/resolve/main/w.bin").body().size(), large_.size());  // held now: a hit
  const auto c = mirror_->counters();
  EXPECT_EQ(c.repos_fetched, 1u);
  EXPECT_EQ(c.files_fetched, 1u);
  EXPECT_GE(c.upstream_bytes, 300000u);  // the xorb ranges relayed: chunk headers too
  EXPECT_LE(c.upstream_bytes, 303000u);
  EXPECT_GE(c.file_hits, 1u);
}

// A range of a file the mirror has not fetched (a plain client resuming a cut download) is sent from the
// bytes arriving, not after the whole file.
TEST_F(MirrorApi, ARangeOfAColdFileIsSentFromTheBytesArriving) {
  ASSERT_NO_FATAL_FAILURE(StartMirror());
  const auto ranged = [&](const std::string& range) {
    http::testing::Client c(mirror_server_->port());
    bhttp::request<bhttp::string_body> req{bhttp::verb::get, "/alice/m/resolve/main/w.bin", 11};
    req.set(bhttp::field::range, range);
    return c.Send(std::move(req));
  };
  auto r = ranged("bytes=1000-1999");
  ASSERT_EQ(r.result_int(), 206u) << r.body();
  EXPECT_EQ(r[bhttp::field::content_range], "bytes 1000-1999/300000");
  EXPECT_EQ(r.body(), std::string(large_.begin() + 1000, large_.begin() + 2000));
  EXPECT_EQ(r["X-Linked-Size"], "300000");
  EXPECT_TRUE(r.chunked());     // streamed as the bytes arrive, not answered from the stored file
  r = ranged("bytes=299990-");  // to the end: the last bytes come once the whole file is checked
  ASSERT_EQ(r.result_int(), 206u) << r.body();
  EXPECT_EQ(r.body(), std::string(large_.end() - 10, large_.end()));
  EXPECT_EQ(ranged("bytes=300000-").result_int(), 416u);
  // Decoded from the relay of upstream's xorbs: no second copy of the file was written for these reads.
  EXPECT_EQ(mirror_->counters().spooled_bytes, 0u);
}

TEST_F(MirrorApi, AbsentThingsAreNotFoundAndWritesAreRefused) {
  ASSERT_NO_FATAL_FAILURE(StartMirror());
  auto r = Get("/api/models/alice/none/revision/main");
  EXPECT_EQ(r.result_int(), 404u);
  EXPECT_EQ(r["X-Error-Code"], "RepoNotFound");
  r = Get("/api/models/alice/m/revision/nope");
  EXPECT_EQ(r.result_int(), 404u);
  EXPECT_EQ(r["X-Error-Code"], "RevisionNotFound");
  r = Get("/api/models/alice/m/revision/" + std::string(40, 'a'));
  EXPECT_EQ(r.result_int(), 404u);  // a commit id upstream lacks
  r = Get("/alice/m/resolve/main/absent.bin");
  EXPECT_EQ(r.result_int(), 404u);
  EXPECT_EQ(r["X-Error-Code"], "EntryNotFound");  // the libraries probe absent files
  const std::string alice = MintToken("alice", http::Permission::kWrite);
  r = Ask(bhttp::verb::post, "/api/models/alice/m/commit/main", alice,
          R"({"key":"header","value":{"summary":"x","description":""}})"
          "\n");
  EXPECT_EQ(r.result_int(), 403u) << r.body();
  r = Ask(bhttp::verb::post, "/api/models/alice/m/branch/dev", alice, "{}");
  EXPECT_EQ(r.result_int(), 403u) << r.body();
  EXPECT_EQ(Ask(bhttp::verb::get, "/api/models/alice/m/xet-write-token/main", alice).result_int(), 403u);
}

TEST_F(MirrorApi, ReadPolicyAndOfflineMode) {
  ASSERT_NO_FATAL_FAILURE(StartMirror(mirror::MirrorOptions{.token_to_read = true}));
  EXPECT_EQ(Get("/api/models/alice/m/revision/main").result_int(), 401u);
  const std::string token = MintToken("bob", http::Permission::kRead);
  EXPECT_EQ(Get("/api/models/alice/m/revision/main", token).result_int(), 200u);
  // Nor are they listed to anonymous callers (which repositories a site mirrors is its own business).
  EXPECT_EQ(Get("/api/models?author=alice").body().find("alice/m"), std::string::npos);
  EXPECT_NE(Get("/api/models?author=alice", token).body().find("alice/m"), std::string::npos);
  ASSERT_NO_FATAL_FAILURE(StartMirror(mirror::MirrorOptions{.offline = true}));
  auto r = Get("/api/models/alice/m/revision/main");
  EXPECT_EQ(r.result_int(), 503u);  // never fetched, and upstream is not asked
  EXPECT_FALSE(r["Retry-After"].empty());
}

TEST_F(MirrorApi, UpstreamGoneServesWhatIsHeldAnd503ForTheRest) {
  ASSERT_NO_FATAL_FAILURE(StartMirror(mirror::MirrorOptions{.revision_ttl = std::chrono::seconds(1)}));
  ASSERT_EQ(Get("/alice/m/resolve/main/w.bin").result_int(), 200u);
  // A new upstream commit shows once the TTL has passed.
  const hub::Caller alice{.scope = "alice", .write = true, .expires = 0};
  auto repo = up_.hub->Open(alice, {hub::RepoType::kModel, "alice", "m"}, true);
  ASSERT_TRUE(repo.ok());
  hub::CommitRequest c;
  c.summary = "more";
  c.operations = {hub::AddInline{"NOTES.md", {'n'}}};
  auto made = up_.hub->CreateCommit(alice, *repo, c);
  ASSERT_TRUE(made.ok());
  EXPECT_EQ(json::parse(Get("/api/models/alice/m/revision/main").body()).at("sha").as_string(), head_);
  clock_.Advance(2);
  EXPECT_EQ(json::parse(Get("/api/models/alice/m/revision/main").body()).at("sha").as_string(),
            made->oid.hex());
  StopServer();  // upstream gone
  clock_.Advance(2);
  auto r = Get("/api/models/alice/m/revision/main");
  ASSERT_EQ(r.result_int(), 200u) << r.body();  // the branch as last seen
  EXPECT_EQ(json::parse(r.body()).at("sha").as_string(), made->oid.hex());
  r = Get("/alice/m/resolve/main/w.bin");
  ASSERT_EQ(r.result_int(), 200u);
  EXPECT_EQ(r.body(), std::string(large_.begin(), large_.end()));
  r = Get("/api/models/alice/other/revision/main");
  EXPECT_EQ(r.result_int(), 503u);
  EXPECT_FALSE(r["Retry-After"].empty());
  EXPECT_GE(mirror_->counters().upstream_failures, 1u);
}

TEST_F(MirrorApi, PastTheSizeLimitTheLeastRecentlyReadRepositoriesAreEvicted) {
  for (const auto& [name, seed] : {std::pair{"n", 8}, std::pair{"o", 9}}) {
    std::vector<uint8_t> bytes;
    std::string sha, xet, head;
    ASSERT_NO_FATAL_FAILURE(PublishLarge(name, seed, &bytes, &sha, &xet, &head));
  }
  mirror::MirrorOptions mo;
  mo.max_bytes = 700000;                        // two of the 300 KB files
  mo.evict_interval = std::chrono::seconds(0);  // checked by the test
  ASSERT_NO_FATAL_FAILURE(StartMirror(mo));
  const auto read = [&](const std::string& name) {
    clock_.Advance(120);  // each read later than the last one noted
    auto r = Get("/alice/" + name + "/resolve/main/w.bin");
    ASSERT_EQ(r.result_int(), 200u) << name << ": " << r.body();
    ASSERT_EQ(r.body().size(), 300000u);
    ASSERT_NO_FATAL_FAILURE(WaitStored(name));
  };
  ASSERT_NO_FATAL_FAILURE(read("m"));
  ASSERT_NO_FATAL_FAILURE(read("n"));
  auto report = mirror_->Evict(mo.max_bytes);
  ASSERT_TRUE(report.ok()) << report.error().message;
  EXPECT_EQ(report->repos, 2u);
  EXPECT_EQ(report->held_bytes, 600000u);
  EXPECT_TRUE(report->evicted.empty());
  ASSERT_NO_FATAL_FAILURE(read("m"));  // m read again: n is now the least recently read
  ASSERT_NO_FATAL_FAILURE(read("o"));
  report = mirror_->Evict(mo.max_bytes);
  ASSERT_TRUE(report.ok()) << report.error().message;
  EXPECT_EQ(report->held_bytes, 900000u);
  EXPECT_EQ(report->kept_bytes, 600000u);
  EXPECT_EQ(report->evicted, std::vector<std::string>{"alice/n"});
  EXPECT_EQ(m_index_->FindRepo(hub::RepoType::kModel, "alice", "n").error().code, ErrorCode::kNotFound);
  EXPECT_TRUE(m_index_->FindRepo(hub::RepoType::kModel, "alice", "m").ok());
  // A repository this server holds itself is never evicted; the most recently read mirrored one stays.
  const hub::Caller bob{.scope = "bob", .write = true, .expires = 0};
  ASSERT_TRUE(m_.hub->CreateRepo(bob, {hub::RepoType::kModel, "bob", "local"}, false).ok());
  report = mirror_->Evict(1);
  ASSERT_TRUE(report.ok()) << report.error().message;
  EXPECT_EQ(report->evicted, std::vector<std::string>{"alice/m"});
  EXPECT_TRUE(m_index_->FindRepo(hub::RepoType::kModel, "alice", "o").ok());
  EXPECT_TRUE(m_index_->FindRepo(hub::RepoType::kModel, "bob", "local").ok());
  EXPECT_EQ(mirror_->counters().evicted_repos, 2u);
  // An evicted repository is copied again on its next read.
  ASSERT_NO_FATAL_FAILURE(read("n"));
  EXPECT_EQ(mirror_->counters().repos_fetched, 4u);
}

// ---- What an attacker's review found (issue 45): fails on e44264e.

// With read = "token", a CAS token (the mirror gives anyone one for a public repository of its own) is not a
// token to read mirrored repositories with: a private upstream repository, read through the mirror's token,
// is refused to it on every route and git verb (401, as an invalid token), while an access token reads it.
TEST_F(MirrorApi, ACasTokenIsNoTokenToReadMirroredRepositoriesWith) {
  std::vector<uint8_t> large;
  std::string sha, xet, head;
  ASSERT_NO_FATAL_FAILURE(PublishLarge("p", 11, &large, &sha, &xet, &head, /*is_private=*/true));
  mirror::MirrorOptions mo{.token_to_read = true};
  mo.upstream.token = MintToken("alice", http::Permission::kRead, std::chrono::hours(24));
  ASSERT_NO_FATAL_FAILURE(StartMirror(mo));
  const hub::Caller carol{.scope = "carol", .write = true, .expires = 0};
  ASSERT_TRUE(m_.hub->CreateRepo(carol, {hub::RepoType::kModel, "carol", "pub"}, false).ok());
  auto r = Get("/api/models/carol/pub/xet-read-token/main");  // anonymous, as the Hub gives them
  ASSERT_EQ(r.result_int(), 200u) << r.body();
  const std::string cas(json::parse(r.body()).at("accessToken").as_string());
  const std::string basic = "Basic " + Base64Encode("git:" + cas);
  const std::string lfs_batch =
      R"({"operation":"download","transfers":["basic"],"objects":[{"oid":")" + sha + R"(","size":300000}]})";
  const std::vector<std::tuple<bhttp::verb, std::string, std::string>> routes = {
      {bhttp::verb::get, "/api/models/alice/p", ""},
      {bhttp::verb::get, "/api/models/alice/p/revision/main", ""},
      {bhttp::verb::get, "/api/models/alice/p/tree/main", ""},
      {bhttp::verb::get, "/api/models/alice/p/refs", ""},
      {bhttp::verb::get, "/api/models/alice/p/commits/main", ""},
      {bhttp::verb::post, "/api/models/alice/p/paths-info/main", "paths=w.bin"},
      {bhttp::verb::get, "/api/models/alice/p/xet-read-token/main", ""},
      {bhttp::verb::get, "/api/models/alice/p/lfs-files", ""},
      {bhttp::verb::get, "/api/models?author=alice", ""},
      {bhttp::verb::head, "/alice/p/resolve/main/w.bin", ""},
      {bhttp::verb::get, "/alice/p/resolve/main/w.bin", ""},
      {bhttp::verb::get, "/alice/p/resolve/main/README.md", ""},
      {bhttp::verb::get, "/alice/p.git/info/refs?service=git-upload-pack", ""},
      {bhttp::verb::get, "/alice/p.git/info/refs?service=git-receive-pack", ""},
      {bhttp::verb::post, "/alice/p.git/git-upload-pack", "0000"},
      {bhttp::verb::post, "/alice/p.git/git-receive-pack", "0000"},
      {bhttp::verb::post, "/alice/p.git/info/lfs/objects/batch", lfs_batch},
      {bhttp::verb::post, "/alice/p.git/info/lfs/locks/verify", "{}"},
  };
  for (const auto& [verb, target, body] : routes) {
    auto bearer = Ask(verb, target, cas, body);
    EXPECT_EQ(bearer.result_int(), 401u) << verb << " " << target << ": " << bearer.body().substr(0, 300);
    auto password = Ask(verb, target, "", body, basic);
    EXPECT_EQ(password.result_int(), 401u)
        << verb << " " << target << " (Basic): " << password.body().substr(0, 300);
  }
  EXPECT_EQ(mirror_->counters().repos_fetched, 0u);  // nor did it make the mirror fetch anything
  // An access token of this server reads it (the read policy).
  const std::string token = MintToken("bob", http::Permission::kRead);
  r = Get("/alice/p/resolve/main/w.bin", token);
  ASSERT_EQ(r.result_int(), 200u) << r.body();
  EXPECT_EQ(r.body(), std::string(large.begin(), large.end()));
  r = Ask(bhttp::verb::get, "/alice/p.git/info/refs?service=git-upload-pack", "", "",
          "Basic " + Base64Encode("git:" + token));
  EXPECT_EQ(r.result_int(), 200u) << r.body();
}

}  // namespace
}  // namespace cairn::api
