// The Hub routes in process: a real http::Server serving the CAS, file and Hub routes over a SQLite index and
// a local-disk store. Every route and every error status, malformed commits and hostile paths, each leaving
// the repository as it was.
#include "api/hub_routes.h"

#include <gtest/gtest.h>
#include <openssl/sha.h>

#include <boost/json.hpp>

#include "api/api_test_server.h"
#include "api/cas_routes.h"
#include "api/file_routes.h"
#include "client/upload_builder.h"
#include "common/base64.h"
#include "http/test_util.h"
#include "xet/test_support.h"

namespace cairn::api {
namespace {

using namespace std::chrono_literals;
namespace json = boost::json;
namespace bhttp = boost::beast::http;
using Res = bhttp::response<bhttp::string_body>;
using Headers = std::map<std::string, std::string>;

std::string Sha256Hex(std::span<const uint8_t> data) {
  uint8_t digest[SHA256_DIGEST_LENGTH];
  SHA256(data.data(), data.size(), digest);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (uint8_t b : digest) {
    out.push_back(kHex[b >> 4]);
    out.push_back(kHex[b & 15]);
  }
  return out;
}

std::string Base64(std::string_view in) {
  return Base64Encode(in);
}

std::string Header(const std::string& summary, const std::string& parent = "") {
  json::object v{{"summary", summary}, {"description", ""}};
  if (!parent.empty()) v["parentCommit"] = parent;
  return json::serialize(json::object{{"key", "header"}, {"value", v}}) + "\n";
}

std::string FileLine(const std::string& path, const std::string& content) {
  return json::serialize(json::object{
             {"key", "file"},
             {"value", {{"path", path}, {"content", Base64(content)}, {"encoding", "base64"}}}}) +
         "\n";
}

std::string LfsLine(const std::string& path, const std::string& sha, uint64_t size) {
  return json::serialize(
             json::object{{"key", "lfsFile"},
                          {"value", {{"path", path}, {"algo", "sha256"}, {"oid", sha}, {"size", size}}}}) +
         "\n";
}

std::string DeleteLine(const std::string& path, bool folder = false) {
  return json::serialize(
             json::object{{"key", folder ? "deletedFolder" : "deletedFile"}, {"value", {{"path", path}}}}) +
         "\n";
}

class HubApi : public testing::ApiServerTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(OpenServer("cairn-hub-api"));
    files::FileServiceOptions fo;
    fo.url_keys = cas::UrlKeys::Single([] {
      xet::Hash h;
      h.bytes.fill(7);
      return h;
    }());
    fo.log = [](const std::string&) {};
    files_ = std::make_unique<files::FileService>(*service_, *index_, fo);
    hub::HubOptions ho;
    ho.max_inline_bytes = 4096;
    hub_ = std::make_unique<hub::HubService>(*index_, *files_, ho);
    buckets_ = std::make_unique<hub::BucketService>(*index_);
    RegisterCasRoutes(*server_, *service_);
    RegisterFileRoutes(*server_, *files_, {.public_url = base_});
    HubRouteOptions hro;
    hro.public_url = base_;
    RegisterHubRoutes(*server_, *hub_, *buckets_, *files_, hro);
    server_->Start();
  }
  void TearDown() override {
    StopServer();
    buckets_.reset();
    hub_.reset();
    files_.reset();
    ApiServerTest::TearDown();
  }

  Res Send(bhttp::verb verb, const std::string& target, const std::string& token = "", std::string body = {},
           const Headers& headers = {}) {
    http::testing::Client c(port_);
    bhttp::request<bhttp::string_body> req{verb, target, 11};
    if (!token.empty()) req.set(bhttp::field::authorization, "Bearer " + token);
    for (const auto& [k, v] : headers) req.set(k, v);
    if (!body.empty() || verb == bhttp::verb::post || verb == bhttp::verb::put) {
      req.body() = std::move(body);
      req.prepare_payload();
    }
    return c.Send(std::move(req));
  }
  static std::string Token(const std::string& scope, bool write = true) {
    auto t = http::MintToken(testing::kTestJwtKey,
                             {scope, write ? http::Permission::kWrite : http::Permission::kRead}, 1h);
    EXPECT_TRUE(t.ok());
    return *t;
  }
  Res Create(const std::string& ns, const std::string& name, const std::string& type = "model",
             bool is_private = false, const std::string& token = Token("alice")) {
    json::object body{{"name", name}, {"organization", ns}, {"type", type}};
    if (is_private) body["visibility"] = "private";
    return Send(bhttp::verb::post, "/api/repos/create", token, json::serialize(body));
  }
  Res Commit(const std::string& repo, const std::string& body, const std::string& rev = "main",
             const std::string& token = Token("alice")) {
    return Send(bhttp::verb::post, "/api/models/" + repo + "/commit/" + rev, token, body);
  }
  std::string Head(const std::string& repo, const std::string& rev = "main",
                   const std::string& token = Token("alice")) {
    auto r = Send(bhttp::verb::get, "/api/models/" + repo + "/revision/" + rev, token);
    EXPECT_EQ(r.result_int(), 200u) << r.body();
    return std::string(json::parse(r.body()).at("sha").as_string());
  }
  // A file uploaded through the CAS for `repo`'s scope, as hf_xet would; returns its LFS SHA-256.
  std::string UploadLarge(const std::string& ns, const std::string& name, const std::vector<uint8_t>& data) {
    auto repo = index_->FindRepo(index::RepoType::kModel, ns, name);
    EXPECT_TRUE(repo.ok());
    std::vector<std::span<const uint8_t>> spans = {data};
    auto built = client::BuildUpload(spans);
    for (const auto& x : built.xorbs) EXPECT_TRUE(service_->PutXorb(x.hash, x.body).ok());
    EXPECT_TRUE(service_->PutShard(built.shard_bytes, repo->scope).ok());
    return Sha256Hex(data);
  }

  std::unique_ptr<files::FileService> files_;
  std::unique_ptr<hub::HubService> hub_;
  std::unique_ptr<hub::BucketService> buckets_;
};

TEST_F(HubApi, CreatesRepositoriesAndRefusesWhatItMust) {
  EXPECT_EQ(Create("alice", "m", "model", false, "").result_int(), 401u);
  EXPECT_EQ(Create("alice", "m", "model", false, Token("alice", false)).result_int(), 403u);
  EXPECT_EQ(Create("bob", "m").result_int(), 403u);  // another namespace
  EXPECT_EQ(Create("alice", "a..b").result_int(), 400u);
  EXPECT_EQ(Create("alice", "-x").result_int(), 400u);
  EXPECT_EQ(Create("alice", "m", "kernel").result_int(), 400u);
  EXPECT_EQ(Send(bhttp::verb::post, "/api/repos/create", Token("alice"), "not json").result_int(), 400u);
  auto r = Create("alice", "m");
  ASSERT_EQ(r.result_int(), 200u) << r.body();
  EXPECT_EQ(json::parse(r.body()).at("url").as_string(), base_ + "/alice/m");
  r = Create("alice", "m");
  ASSERT_EQ(r.result_int(), 409u);
  EXPECT_EQ(json::parse(r.body()).at("url").as_string(), base_ + "/alice/m");  // read by exist_ok
  // No organization: the token's namespace. A repository-scoped token creates that repository only.
  r = Send(bhttp::verb::post, "/api/repos/create", Token("alice"),
           R"({"name": "d", "organization": null, "type": "dataset"})");
  ASSERT_EQ(r.result_int(), 200u) << r.body();
  EXPECT_EQ(json::parse(r.body()).at("url").as_string(), base_ + "/datasets/alice/d");
  EXPECT_EQ(Create("alice", "one", "model", false, Token("alice/one")).result_int(), 200u);
  EXPECT_EQ(Create("alice", "two", "model", false, Token("alice/one")).result_int(), 403u);
  EXPECT_EQ(Create("alice", "x", "dataset", false, Token("alice/x")).result_int(), 403u);  // a model's scope
  EXPECT_EQ(Create("alice", "x", "dataset", false, Token("datasets/alice/x")).result_int(), 200u);
  // whoami answers with the namespace.
  r = Send(bhttp::verb::get, "/api/whoami-v2", Token("datasets/alice/x", false));
  ASSERT_EQ(r.result_int(), 200u);
  EXPECT_EQ(json::parse(r.body()).at("name").as_string(), "alice");
  EXPECT_EQ(Send(bhttp::verb::get, "/api/whoami-v2").result_int(), 401u);
  EXPECT_EQ(Send(bhttp::verb::get, "/api/whoami-v2", "forged.token.here").result_int(), 401u);
}

TEST_F(HubApi, MalformedCommitsAndHostilePathsChangeNothing) {
  ASSERT_EQ(Create("alice", "m").result_int(), 200u);
  ASSERT_EQ(Commit("alice/m", Header("base") + FileLine("dir/a.txt", "a")).result_int(), 200u);
  const std::string head = Head("alice/m");
  const std::vector<std::pair<std::string, unsigned>> bad = {
      {"not json\n", 400},
      {FileLine("x.txt", "x"), 400},               // no header first
      {Header("") + FileLine("x.txt", "x"), 400},  // no summary
      {Header("s") + R"({"key": "rename", "value": {"path": "x"}})"
                     "\n",
       400},
      {Header("s") + R"({"key": "file", "value": {"path": "x", "content": "%%%", "encoding": "base64"}})"
                     "\n",
       400},
      {Header("s") + R"({"key": "file", "value": {"path": "x", "content": "eA==", "encoding": "utf-8"}})"
                     "\n",
       400},
      {Header("s") + LfsLine("w.bin", "zz", 1), 400},
      {Header("s") + LfsLine("w.bin", std::string(64, 'a'), 1), 400},  // never uploaded to this repository
      {Header("s", "abc") + FileLine("x", "x"), 400},                  // not a commit id
      {Header("s", std::string(40, '0')) + FileLine("x", "x"), 412},   // stale parent
      {Header("s") + FileLine("../x", "x"), 400},
      {Header("s") + FileLine("a/../../x", "x"), 400},
      {Header("s") + FileLine("/etc/passwd", "x"), 400},
      {Header("s") + FileLine("a//b", "x"), 400},
      {Header("s") + FileLine(".git/config", "x"), 400},
      {Header("s") + FileLine(".GIT/config", "x"), 400},  // git's folder on a case-insensitive file system
      {Header("s") + FileLine(".git./config", "x"), 400},
      {Header("s") + FileLine("GIT~1/config", "x"), 400},
      {Header("s") + FileLine("bad\xff.txt", "x"), 400},  // not UTF-8
      {Header("s") + FileLine("a/./b", "x"), 400},
      {Header("s") + FileLine("a\\b", "x"), 400},
      {Header("s") + FileLine(std::string("a\nb"), "x"), 400},
      {Header("s") + FileLine("dir", "x"), 400},                         // a folder is there
      {Header("s") + FileLine("dir/a.txt/b", "x"), 400},                 // a file is in the way
      {Header("s") + FileLine("big.txt", std::string(5000, 'x')), 400},  // too large to go inline
      {Header("s") + DeleteLine("missing.txt"), 404},
      {Header("s") + DeleteLine("dir", false), 404},  // a folder, named as a file
      {Header("s") + DeleteLine("dir/a.txt", true), 404},
      {Header("s") + FileLine("ok.txt", "fine") + DeleteLine("missing"), 404},  // all or nothing
  };
  for (const auto& [body, status] : bad) {
    auto r = Commit("alice/m", body);
    EXPECT_EQ(r.result_int(), status) << body << "\n" << r.body();
    EXPECT_FALSE(r["X-Error-Message"].empty()) << body;
    EXPECT_EQ(Head("alice/m"), head) << body;
  }
  auto r = Commit("alice/m", Header("s") + DeleteLine("missing.txt"));
  EXPECT_EQ(r["X-Error-Code"], "EntryNotFound");
  EXPECT_EQ(Commit("alice/m", Header("s") + FileLine("x", "x"), "refs%2Ftags%2Fmain").result_int(), 404u);
  r = Commit("alice/m", Header("s") + FileLine("x", "x"), "nope");
  EXPECT_EQ(r.result_int(), 404u);
  EXPECT_EQ(r["X-Error-Code"], "RevisionNotFound");
  r = Commit("alice/m", Header("s") + FileLine("x", "x"), "main", Token("bob"));
  EXPECT_EQ(r.result_int(), 403u);
  r = Commit("alice/m", Header("s") + FileLine("x", "x"), "main", Token("alice", false));
  EXPECT_EQ(r.result_int(), 403u);
  EXPECT_EQ(Commit("alice/m", Header("s") + FileLine("x", "x"), "main", "").result_int(), 401u);
  EXPECT_EQ(Commit("alice/none", Header("s") + FileLine("x", "x")).result_int(), 404u);
  EXPECT_EQ(Send(bhttp::verb::post, "/api/models/alice/m/commit/main?create_pr=1", Token("alice"),
                 Header("s") + FileLine("x", "x"))
                .result_int(),
            400u);
  EXPECT_EQ(Head("alice/m"), head);
  // Names that are not UTF-8 are refused, or not found, before they reach the index.
  EXPECT_EQ(Send(bhttp::verb::post, "/api/models/alice/m/branch/%FF", Token("alice"), "{}").result_int(),
            400u);
  r = Send(bhttp::verb::get, "/api/models/%FF/m");
  EXPECT_EQ(r.result_int(), 404u);
  EXPECT_EQ(r["X-Error-Code"], "RepoNotFound");
  EXPECT_EQ(Create("alice", "models").result_int(), 400u);  // a reserved name
  EXPECT_EQ(Head("alice/m"), head);
  // And a good one, from the head given as its parent (the branch named in full).
  r = Commit("alice/m", Header("s", head) + FileLine("b.txt", "b") + DeleteLine("dir/", true),
             "refs%2Fheads%2Fmain");
  ASSERT_EQ(r.result_int(), 200u) << r.body();
  const auto answer = json::parse(r.body());
  EXPECT_EQ(answer.at("commitUrl").as_string(),
            base_ + "/alice/m/commit/" + std::string(answer.at("commitOid").as_string()));
  EXPECT_EQ(Head("alice/m"), answer.at("commitOid").as_string());
  // A folder emptied by a commit can become a file in the same commit.
  ASSERT_EQ(Commit("alice/m", Header("s") + FileLine("x/y", "y")).result_int(), 200u);
  ASSERT_EQ(Commit("alice/m", Header("s") + DeleteLine("x/y") + FileLine("x", "now a file")).result_int(),
            200u);
  r = Send(bhttp::verb::get, "/alice/m/resolve/main/x");
  EXPECT_EQ(r.body(), "now a file");
  // A small file that reads like an LFS pointer is the text it holds, not a broken large file.
  const std::string pointer =
      "version https://git-lfs.github.com/spec/v1\noid sha256:" + std::string(64, 'c') + "\nsize 5\n";
  ASSERT_EQ(Commit("alice/m", Header("s") + FileLine("pointer.txt", pointer)).result_int(), 200u);
  r = Send(bhttp::verb::get, "/api/models/alice/m/tree/main?recursive=true");
  ASSERT_EQ(r.result_int(), 200u) << r.body();
  EXPECT_EQ(Send(bhttp::verb::get, "/alice/m/resolve/main/pointer.txt").body(), pointer);
  EXPECT_EQ(Send(bhttp::verb::head, "/alice/m/resolve/main/pointer.txt")["X-Xet-Hash"], "");
}

TEST_F(HubApi, LargeFilesAreLinkedOnlyThroughTheirRepositorysUpload) {
  ASSERT_EQ(Create("alice", "m").result_int(), 200u);
  ASSERT_EQ(Create("alice", "other").result_int(), 200u);
  const auto data = xet::testing::SplitMix64Bytes(9, (1 << 20) + 5);
  const std::string sha = UploadLarge("alice", "m", data);
  // The other repository cannot name it by its hash.
  EXPECT_EQ(Commit("alice/other", Header("s") + LfsLine("w.bin", sha, data.size())).result_int(), 400u);
  // Unless the source lends it (a cross-repository copy): the caller reads the source and writes the target.
  const std::string xet =
      client::BuildUpload(std::vector<std::span<const uint8_t>>{data}).file_hashes[0].hex();
  const auto lend = [&](const std::string& target, const std::string& sha256, const std::string& token) {
    return Send(bhttp::verb::post, "/api/models/alice/m/lfs-files/duplicate", token,
                json::serialize(json::object{
                    {"target", {{"type", "model"}, {"name", target}}},
                    {"files", json::array{json::object{{"xetHash", xet}, {"sha256", sha256}}}}}));
  };
  ASSERT_EQ(Create("bob", "theirs", "model", false, Token("bob")).result_int(), 200u);
  // A public source: reading it is enough; but never into what bob cannot write.
  EXPECT_EQ(lend("bob/theirs", sha, Token("bob")).result_int(), 200u);
  EXPECT_EQ(lend("alice/other", sha, Token("bob")).result_int(), 403u);
  // A private source does not exist for bob.
  const auto visibility = [&](const char* v) {
    return Send(bhttp::verb::put, "/api/models/alice/m/settings", Token("alice"),
                std::string(R"({"visibility": ")") + v + "\"}")
        .result_int();
  };
  ASSERT_EQ(visibility("private"), 200u);
  EXPECT_EQ(lend("bob/theirs", sha, Token("bob")).result_int(), 404u);
  ASSERT_EQ(visibility("public"), 200u);
  auto lent = lend("alice/other", std::string(64, 'b'), Token("alice"));
  ASSERT_EQ(lent.result_int(), 200u);
  EXPECT_EQ(json::parse(lent.body()).at("failed").as_array().size(), 1u);  // not that file's sha256
  EXPECT_EQ(Commit("alice/other", Header("s") + LfsLine("w.bin", sha, data.size())).result_int(), 400u);
  lent = lend("alice/other", sha, Token("alice"));
  ASSERT_EQ(lent.result_int(), 200u);
  EXPECT_TRUE(json::parse(lent.body()).at("failed").as_array().empty());
  EXPECT_EQ(Commit("alice/other", Header("s") + LfsLine("w.bin", sha, data.size())).result_int(), 200u);
  EXPECT_EQ(
      Send(bhttp::verb::post, "/api/models/alice/m/lfs-files/duplicate", Token("alice"), "{}").result_int(),
      400u);
  EXPECT_EQ(Commit("alice/m", Header("s") + LfsLine("w.bin", sha, data.size() + 1)).result_int(), 400u);
  auto r = Commit("alice/m", Header("s") + LfsLine("w.bin", sha, data.size()));
  ASSERT_EQ(r.result_int(), 200u) << r.body();
  // A copy names the file by its hash alone.
  r = Commit("alice/m", Header("copy") +
                            R"({"key": "lfsFile", "value": {"path": "copy.bin", "algo": "sha256", "oid": ")" +
                            sha + "\"}}\n");
  ASSERT_EQ(r.result_int(), 200u) << r.body();

  for (const std::string path : {"w.bin", "copy.bin"}) {
    r = Send(bhttp::verb::head, "/alice/m/resolve/main/" + path);
    ASSERT_EQ(r.result_int(), 200u) << r.body();
    EXPECT_EQ(r["X-Linked-Etag"], "\"" + sha + "\"");
    EXPECT_EQ(r["ETag"], "\"" + sha + "\"");
    EXPECT_EQ(r["X-Linked-Size"], std::to_string(data.size()));
    EXPECT_EQ(r["Content-Length"], std::to_string(data.size()));
    EXPECT_EQ(r["X-Repo-Commit"], Head("alice/m"));
    EXPECT_EQ(r["X-Xet-Hash"].size(), 64u);
    EXPECT_NE(std::string(r["Link"]).find("/api/models/alice/m/xet-read-token/"), std::string::npos);
  }
  r = Send(bhttp::verb::get, "/alice/m/resolve/main/w.bin", "", "", {{"Range", "bytes=1048570-1048580"}});
  ASSERT_EQ(r.result_int(), 206u);
  EXPECT_EQ(r.body(), std::string(reinterpret_cast<const char*>(data.data()) + 1048570, 11));
  const std::string xet_hash(Send(bhttp::verb::head, "/alice/m/resolve/main/w.bin")["X-Xet-Hash"]);
  // URLs come from the public URL, whatever Host the request names; GET and HEAD agree.
  r = Send(bhttp::verb::get, "/alice/m/resolve/main/w.bin", "", "", {{"Host", "evil.example"}});
  ASSERT_EQ(r.result_int(), 200u);
  EXPECT_EQ(r.body().size(), data.size());
  EXPECT_EQ(r["ETag"], "\"" + sha + "\"");
  EXPECT_EQ(r["X-Xet-Hash"], xet_hash);
  EXPECT_EQ(std::string(r["Link"]).find("<" + base_ + "/api/models/alice/m/xet-read-token/"), 0u);
  r = Send(bhttp::verb::post, "/api/repos/create", Token("alice"),
           R"({"name": "h", "organization": "alice", "type": "model"})", {{"Host", "evil.example"}});
  EXPECT_EQ(json::parse(r.body()).at("url").as_string(), base_ + "/alice/h");
  // The tree says the same as the resolve headers.
  r = Send(bhttp::verb::post, "/api/models/alice/m/paths-info/main", "",
           "paths=w.bin&paths=nope&expand=false", {{"Content-Type", "application/x-www-form-urlencoded"}});
  ASSERT_EQ(r.result_int(), 200u) << r.body();
  const auto entries = json::parse(r.body()).as_array();
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].at("lfs").at("oid").as_string(), sha);
  EXPECT_EQ(entries[0].at("xetHash").as_string(), xet_hash);  // the tree and the resolve headers agree
  EXPECT_EQ(entries[0].at("size").as_int64(), static_cast<int64_t>(data.size()));
  // The CAS tokens handed out are for this repository's scope, read or write as asked.
  r = Send(bhttp::verb::get, "/api/models/alice/m/xet-read-token/main");
  ASSERT_EQ(r.result_int(), 200u) << r.body();
  const auto token = json::parse(r.body());
  EXPECT_EQ(token.at("casUrl").as_string(), base_);
  EXPECT_NEAR(static_cast<double>(token.at("exp").as_int64()), static_cast<double>(http::UnixNow() + 3600),
              60);
  EXPECT_EQ(r["X-Xet-Token-Expiration"], std::to_string(token.at("exp").as_int64()));
  EXPECT_EQ(r["X-Xet-Cas-Url"], base_);
  http::Authenticator auth(testing::kTestJwtKey);
  auto who = auth.Verify(std::string(token.at("accessToken").as_string()), http::UnixNow());
  ASSERT_TRUE(who.ok());
  EXPECT_EQ(who->scope, index_->FindRepo(index::RepoType::kModel, "alice", "m")->scope);
  EXPECT_EQ(who->perm, http::Permission::kRead);
  EXPECT_EQ(Send(bhttp::verb::get, "/api/models/alice/m/xet-write-token/main").result_int(), 401u);
  EXPECT_EQ(Send(bhttp::verb::get, "/api/models/alice/m/xet-write-token/main", Token("bob")).result_int(),
            403u);
  r = Send(bhttp::verb::get, "/api/models/alice/m/xet-write-token/main", Token("alice"));
  ASSERT_EQ(r.result_int(), 200u);
  who = auth.Verify(std::string(json::parse(r.body()).at("accessToken").as_string()), http::UnixNow());
  ASSERT_TRUE(who.ok());
  EXPECT_EQ(who->perm, http::Permission::kWrite);
}

TEST_F(HubApi, ReadsAnswerNotFoundWithTheCodeTheClientReads) {
  ASSERT_EQ(Create("alice", "m").result_int(), 200u);
  ASSERT_EQ(Create("alice", "p", "model", true).result_int(), 200u);
  ASSERT_EQ(Commit("alice/m", Header("s") + FileLine("a/b.txt", "hello")).result_int(), 200u);
  const std::vector<std::tuple<std::string, std::string, std::string>> missing = {
      {"/api/models/alice/none", "", "RepoNotFound"},
      {"/api/models/alice/p", "", "RepoNotFound"},  // private: not found, not forbidden
      {"/api/models/alice/p", Token("bob"), "RepoNotFound"},
      {"/alice/p/resolve/main/.gitattributes", "", "RepoNotFound"},
      {"/api/models/alice/p/tree/main", Token("bob", false), "RepoNotFound"},
      {"/api/models/alice/m/revision/nope", "", "RevisionNotFound"},
      {"/api/models/alice/m/revision/" + std::string(40, 'a'), "", "RevisionNotFound"},
      {"/alice/m/resolve/nope/a/b.txt", "", "RevisionNotFound"},
      {"/alice/m/resolve/main/a/c.txt", "", "EntryNotFound"},
      {"/alice/m/resolve/main/a", "", "EntryNotFound"},  // a folder
      {"/alice/m/resolve/main/a/../a/b.txt", "", "EntryNotFound"},
      {"/alice/m/resolve/main/a/%2E%2E/a/b.txt", "", "EntryNotFound"},
      {"/api/models/alice/m/tree/main/nope", "", "EntryNotFound"},
      {"/api/models/alice/m/tree/main/a%2Fb.txt", "", "EntryNotFound"},  // a file, not a folder
      {"/api/datasets/alice/m", "", "RepoNotFound"},                     // the same name, another type
      {"/api/models/gpt2", "", "RepoNotFound"},                          // no namespace
      {"/api/models/gpt2/revision/main", "", "RepoNotFound"},
      {"/gpt2/resolve/main/config.json", "", "RepoNotFound"},
  };
  for (const auto& [target, token, code] : missing) {
    auto r = Send(bhttp::verb::get, target, token);
    EXPECT_EQ(r.result_int(), 404u) << target;
    EXPECT_EQ(r["X-Error-Code"], code) << target;
  }
  EXPECT_EQ(Send(bhttp::verb::get, "/api/models/alice/p", Token("alice", false)).result_int(), 200u);
  EXPECT_EQ(Send(bhttp::verb::get, "/api/models/alice/p", Token("alice/p", false)).result_int(), 200u);
  EXPECT_EQ(Send(bhttp::verb::get, "/api/models/alice/m", "bad.token.value").result_int(), 401u);
  auto r = Send(bhttp::verb::get, "/alice/m/resolve/main/a/b.txt", "", "", {{"Range", "bytes=1-3"}});
  ASSERT_EQ(r.result_int(), 206u);
  EXPECT_EQ(r.body(), "ell");
  r = Send(bhttp::verb::get, "/alice/m/resolve/main/a/b.txt", "", "", {{"Range", "bytes=9-"}});
  EXPECT_EQ(r.result_int(), 416u);
  r = Send(bhttp::verb::get, "/api/models/alice/m/tree/main/a");
  ASSERT_EQ(r.result_int(), 200u);
  EXPECT_EQ(json::parse(r.body()).as_array().at(0).at("path").as_string(), "a/b.txt");
  // Listings leave out what the caller may not see.
  r = Send(bhttp::verb::get, "/api/models?author=alice");
  ASSERT_EQ(r.result_int(), 200u);
  EXPECT_EQ(json::parse(r.body()).as_array().size(), 1u);
  r = Send(bhttp::verb::get, "/api/models?author=alice", Token("alice", false));
  EXPECT_EQ(json::parse(r.body()).as_array().size(), 2u);
  EXPECT_EQ(Send(bhttp::verb::get, "/api/kernels/alice/m").result_int(), 404u);
  EXPECT_EQ(Send(bhttp::verb::get, "/api/models?limit=0").result_int(), 400u);
}

TEST_F(HubApi, BranchesTagsHistoryAndPages) {
  ASSERT_EQ(Create("alice", "m").result_int(), 200u);
  std::string body = Header("many");
  for (int i = 0; i < 1005; ++i) body += FileLine("f/" + std::to_string(i), "x");
  ASSERT_EQ(Commit("alice/m", body).result_int(), 200u);
  const std::string first = Head("alice/m");
  for (int i = 0; i < 3; ++i)
    ASSERT_EQ(
        Commit("alice/m", Header("c" + std::to_string(i)) + FileLine("n", std::to_string(i))).result_int(),
        200u);

  // Tree pages: 1000 entries, then the rest from the same commit by the Link.
  auto r = Send(bhttp::verb::get, "/api/models/alice/m/tree/main/f?recursive=false&expand=false");
  ASSERT_EQ(r.result_int(), 200u);
  EXPECT_EQ(json::parse(r.body()).as_array().size(), 1000u);
  std::string link(r["Link"]);
  ASSERT_NE(link.find("rel=\"next\""), std::string::npos);
  const std::string next = link.substr(1 + base_.size(), link.find('>') - 1 - base_.size());
  r = Send(bhttp::verb::get, next);
  ASSERT_EQ(r.result_int(), 200u) << next;
  EXPECT_EQ(json::parse(r.body()).as_array().size(), 5u);
  EXPECT_TRUE(r["Link"].empty());

  // History, newest first, in pages.
  r = Send(bhttp::verb::get, "/api/models/alice/m/commits/main?limit=2");
  ASSERT_EQ(r.result_int(), 200u);
  auto commits = json::parse(r.body()).as_array();
  ASSERT_EQ(commits.size(), 2u);
  EXPECT_EQ(commits[0].at("title").as_string(), "c2");
  EXPECT_EQ(commits[0].at("authors").as_array()[0].at("user").as_string(), "alice");
  EXPECT_EQ(std::string(commits[0].at("date").as_string()).back(), 'Z');
  EXPECT_FALSE(r["Link"].empty());

  // Branches and tags.
  const std::string repo = "/api/models/alice/m";
  EXPECT_EQ(
      Send(bhttp::verb::post, repo + "/branch/dev", Token("alice"), R"({"startingPoint": ")" + first + "\"}")
          .result_int(),
      200u);
  EXPECT_EQ(Head("alice/m", "dev"), first);
  EXPECT_EQ(Send(bhttp::verb::post, repo + "/branch/dev", Token("alice"), "{}").result_int(), 409u);
  EXPECT_EQ(Send(bhttp::verb::post, repo + "/branch/x", Token("alice"), R"({"startingPoint": "nope"})")
                .result_int(),
            404u);
  EXPECT_EQ(Send(bhttp::verb::post, repo + "/branch/refs%2Fpr%2F1", Token("alice"), "{}").result_int(), 400u);
  EXPECT_EQ(
      Send(bhttp::verb::post, repo + "/branch/" + std::string(40, 'a'), Token("alice"), "{}").result_int(),
      400u);
  EXPECT_EQ(Send(bhttp::verb::post, repo + "/branch/x", Token("bob"), "{}").result_int(), 403u);
  EXPECT_EQ(Send(bhttp::verb::post, repo + "/tag/dev", Token("alice"), R"({"tag": "v1"})").result_int(),
            200u);
  EXPECT_EQ(Send(bhttp::verb::post, repo + "/tag/main", Token("alice"), R"({"tag": "v1"})").result_int(),
            409u);
  EXPECT_EQ(Send(bhttp::verb::post, repo + "/tag/main", Token("alice"), R"({"name": "v1"})").result_int(),
            400u);
  EXPECT_EQ(Head("alice/m", "v1"), first);
  EXPECT_EQ(Head("alice/m", "refs%2Ftags%2Fv1"), first);
  r = Send(bhttp::verb::get, repo + "/refs");
  ASSERT_EQ(r.result_int(), 200u);
  const auto refs = json::parse(r.body());
  EXPECT_EQ(refs.at("branches").as_array().size(), 2u);
  EXPECT_EQ(refs.at("tags").as_array()[0].at("ref").as_string(), "refs/tags/v1");
  EXPECT_TRUE(refs.at("converts").as_array().empty());
  EXPECT_EQ(Send(bhttp::verb::delete_, repo + "/branch/main", Token("alice")).result_int(), 400u);
  EXPECT_EQ(Send(bhttp::verb::delete_, repo + "/branch/nope", Token("alice")).result_int(), 404u);
  EXPECT_EQ(Send(bhttp::verb::delete_, repo + "/branch/dev", Token("alice")).result_int(), 200u);
  EXPECT_EQ(Send(bhttp::verb::delete_, repo + "/tag/v1", Token("alice")).result_int(), 200u);
  r = Send(bhttp::verb::delete_, repo + "/tag/v1", Token("alice"));
  EXPECT_EQ(r.result_int(), 404u);
  EXPECT_EQ(r["X-Error-Code"], "RevisionNotFound");
  // The commit stays readable by its id.
  EXPECT_EQ(Head("alice/m", first), first);
}

TEST_F(HubApi, SettingsMovesDeletesAndPreupload) {
  ASSERT_EQ(Create("alice", "m").result_int(), 200u);
  ASSERT_EQ(Commit("alice/m", Header("s") + FileLine("t.txt", "text")).result_int(), 200u);
  const std::string repo = "/api/models/alice/m";
  // Preupload: small text inline, binary or large to the CAS; unchanged files carry their oid.
  const std::string files = json::serialize(json::object{
      {"files",
       json::array{json::object{{"path", "t.txt"}, {"sample", Base64("text")}, {"size", 4}},
                   json::object{{"path", "w.bin"}, {"sample", Base64(std::string("\0\1", 2))}, {"size", 2}},
                   json::object{{"path", "big.txt"}, {"sample", Base64("aaaa")}, {"size", 1 << 20}}}}});
  auto r = Send(bhttp::verb::post, repo + "/preupload/main", Token("alice"), files);
  ASSERT_EQ(r.result_int(), 200u) << r.body();
  const auto answer = json::parse(r.body()).at("files").as_array();
  EXPECT_EQ(answer[0].at("uploadMode").as_string(), "regular");
  EXPECT_EQ(answer[0].at("oid").as_string().size(), 40u);
  EXPECT_FALSE(answer[0].at("shouldIgnore").as_bool());
  EXPECT_EQ(answer[1].at("uploadMode").as_string(), "lfs");
  EXPECT_TRUE(answer[1].at("oid").is_null());
  EXPECT_EQ(answer[2].at("uploadMode").as_string(), "lfs");
  EXPECT_EQ(Send(bhttp::verb::post, repo + "/preupload/main", Token("alice"), R"({"files": 3})").result_int(),
            400u);
  EXPECT_EQ(Send(bhttp::verb::post, repo + "/preupload/main", Token("bob"), files).result_int(), 403u);

  // Visibility.
  EXPECT_EQ(
      Send(bhttp::verb::put, repo + "/settings", Token("alice"), R"({"visibility": "private"})").result_int(),
      200u);
  EXPECT_EQ(Send(bhttp::verb::get, repo).result_int(), 404u);
  EXPECT_EQ(Send(bhttp::verb::put, repo + "/settings", Token("alice"), R"({"gated": "auto"})").result_int(),
            400u);
  EXPECT_EQ(
      Send(bhttp::verb::put, repo + "/settings", Token("bob"), R"({"visibility": "public"})").result_int(),
      404u);
  EXPECT_EQ(
      Send(bhttp::verb::put, repo + "/settings", Token("alice"), R"({"visibility": "public"})").result_int(),
      200u);
  EXPECT_EQ(Send(bhttp::verb::get, repo).result_int(), 200u);

  // Moves keep the history and the files' scope; a taken name is refused.
  ASSERT_EQ(Create("alice", "taken").result_int(), 200u);
  const std::string before = Head("alice/m");
  auto move = [&](const std::string& from, const std::string& to, const std::string& token) {
    return Send(bhttp::verb::post, "/api/repos/move", token,
                json::serialize(json::object{{"fromRepo", from}, {"toRepo", to}, {"type", "model"}}));
  };
  EXPECT_EQ(move("alice/m", "alice/taken", Token("alice")).result_int(), 409u);
  EXPECT_EQ(move("alice/m", "bob/m", Token("alice")).result_int(), 403u);
  EXPECT_EQ(move("alice/m", "bad", Token("alice")).result_int(), 400u);
  EXPECT_EQ(move("alice/m", "alice/n", Token("alice")).result_int(), 200u);
  EXPECT_EQ(Head("alice/n"), before);
  EXPECT_EQ(Send(bhttp::verb::get, repo).result_int(), 404u);

  // Deletes.
  const auto del = [&](const std::string& name, const std::string& token) {
    return Send(bhttp::verb::delete_, "/api/repos/delete", token,
                json::serialize(json::object{{"name", name}, {"organization", "alice"}, {"type", "model"}}));
  };
  EXPECT_EQ(del("n", Token("bob")).result_int(), 403u);
  EXPECT_EQ(del("n", Token("alice", false)).result_int(), 403u);
  EXPECT_EQ(del("n", Token("alice")).result_int(), 200u);
  r = del("n", Token("alice"));
  EXPECT_EQ(r.result_int(), 404u);
  EXPECT_EQ(r["X-Error-Code"], "RepoNotFound");
  // A repository made again under the name starts empty, with a scope of its own.
  ASSERT_EQ(Create("alice", "n").result_int(), 200u);
  r = Send(bhttp::verb::get, "/api/models/alice/n");
  EXPECT_EQ(json::parse(r.body()).at("siblings").as_array().size(), 1u);  // .gitattributes
  EXPECT_EQ(Send(bhttp::verb::post, "/api/validate-yaml", "", R"({"content": "x"})").result_int(), 200u);
}

TEST_F(HubApi, BucketsAddFilesUploadedForThemOnly) {
  const auto create = [&](const std::string& target, const std::string& token) {
    return Send(bhttp::verb::post, target, token, "{}");
  };
  EXPECT_EQ(create("/api/buckets/alice/b", "").result_int(), 401u);
  EXPECT_EQ(create("/api/buckets/alice/b", Token("bob")).result_int(), 403u);
  EXPECT_EQ(create("/api/buckets/alice/b..c", Token("alice")).result_int(), 400u);
  auto r = create("/api/buckets/me/b", Token("alice"));  // "me": the token's namespace
  ASSERT_EQ(r.result_int(), 200u) << r.body();
  EXPECT_EQ(json::parse(r.body()).at("url").as_string(), base_ + "/buckets/alice/b");
  r = create("/api/buckets/alice/b", Token("alice"));
  ASSERT_EQ(r.result_int(), 409u);
  EXPECT_EQ(json::parse(r.body()).at("url").as_string(), base_ + "/buckets/alice/b");

  // A file uploaded with the bucket's CAS scope, one uploaded for a repository.
  auto bucket = index_->FindRepo(index::RepoType::kBucket, "alice", "b");
  ASSERT_TRUE(bucket.ok());
  const auto data = xet::testing::SplitMix64Bytes(3, 70000);
  std::vector<std::span<const uint8_t>> spans = {data};
  auto built = client::BuildUpload(spans);
  for (const auto& x : built.xorbs) ASSERT_TRUE(service_->PutXorb(x.hash, x.body).ok());
  ASSERT_TRUE(service_->PutShard(built.shard_bytes, bucket->scope).ok());
  const std::string hash = built.file_hashes[0].hex();
  ASSERT_EQ(Create("alice", "m").result_int(), 200u);
  const auto other = xet::testing::SplitMix64Bytes(4, 1000);
  UploadLarge("alice", "m", other);
  const std::string elsewhere =
      client::BuildUpload(std::vector<std::span<const uint8_t>>{other}).file_hashes[0].hex();

  const auto line = [](const std::string& type, const std::string& path, const std::string& xet = "") {
    json::object o{{"type", type}, {"path", path}};
    if (!xet.empty()) {
      o["xetHash"] = xet;
      o["mtime"] = 1700000000123;
    }
    return json::serialize(o) + "\n";
  };
  const auto batch = [&](const std::string& body, const std::string& token = Token("alice")) {
    return Send(bhttp::verb::post, "/api/buckets/alice/b/batch", token, body);
  };
  r = batch(line("addFile", "dir/f.bin", hash) + line("addFile", "empty", std::string(64, '0')) +
            line("addFile", "x", elsewhere) + line("addFile", "../up", hash) + line("deleteFile", "missing"));
  ASSERT_EQ(r.result_int(), 200u) << r.body();
  const auto failed = json::parse(r.body()).at("failed").as_array();
  ASSERT_EQ(failed.size(), 2u);  // the repository's file, and the bad path
  EXPECT_EQ(failed[0].at("path").as_string(), "x");
  EXPECT_EQ(failed[1].at("path").as_string(), "../up");
  r = batch(line("addFile", "x", elsewhere));
  EXPECT_EQ(r.result_int(), 422u);  // every operation failed
  EXPECT_EQ(batch("not json\n").result_int(), 400u);
  EXPECT_EQ(batch(line("rename", "a")).result_int(), 400u);
  EXPECT_EQ(batch(line("addFile", "a", "nothex")).result_int(), 400u);
  EXPECT_EQ(batch(line("deleteFile", "dir/f.bin"), Token("bob")).result_int(), 403u);
  EXPECT_EQ(batch(line("deleteFile", "dir/f.bin"), Token("alice", false)).result_int(), 403u);
  EXPECT_EQ(batch(line("addFile", "x", hash), "").result_int(), 401u);
  json::object late{{"type", "addFile"}, {"path", "late"}, {"xetHash", hash}, {"mtime", 300000000000000}};
  EXPECT_EQ(batch(json::serialize(late) + "\n").result_int(), 400u);  // past the year 9999
  // Two changes of one path in one batch: the last one holds, on every backend.
  ASSERT_EQ(batch(line("addFile", "twice", hash) + line("deleteFile", "twice")).result_int(), 200u);
  ASSERT_EQ(
      batch(line("addFile", "again", std::string(64, '0')) + line("addFile", "again", hash)).result_int(),
      200u);
  ASSERT_EQ(batch(line("deleteFile", "again")).result_int(), 200u);
  // A file named like a folder plus '0' is listed beside the folder.
  ASSERT_EQ(
      batch(line("addFile", "dir0", std::string(64, '0')) + line("addFile", "dir/z", std::string(64, '0')))
          .result_int(),
      200u);

  // What is there: sizes from the uploads, not from the client.
  r = Send(bhttp::verb::get, "/api/buckets/alice/b");
  ASSERT_EQ(r.result_int(), 200u);
  auto info = json::parse(r.body());
  EXPECT_EQ(info.at("totalFiles").as_int64(), 4);  // dir/f.bin, empty, dir0, dir/z
  EXPECT_EQ(info.at("size").as_int64(), static_cast<int64_t>(data.size()));
  r = Send(bhttp::verb::get, "/api/buckets/alice/b/tree?recursive=false");
  ASSERT_EQ(r.result_int(), 200u);
  auto tree = json::parse(r.body()).as_array();
  ASSERT_EQ(tree.size(), 3u) << r.body();
  EXPECT_EQ(tree[0].at("type").as_string(), "directory");
  EXPECT_EQ(tree[0].at("path").as_string(), "dir");
  EXPECT_EQ(tree[1].at("path").as_string(), "dir0");
  EXPECT_EQ(tree[2].at("path").as_string(), "empty");
  r = Send(bhttp::verb::get, "/api/buckets/alice/b/tree/dir");
  tree = json::parse(r.body()).as_array();
  ASSERT_EQ(tree.size(), 2u);
  EXPECT_EQ(tree[0].at("mtime").as_string(), "2023-11-14T22:13:20.123Z");
  r = Send(bhttp::verb::post, "/api/buckets/alice/b/paths-info", "",
           R"({"paths": ["dir/f.bin", "dir", "", "nope"]})");
  ASSERT_EQ(r.result_int(), 200u);
  EXPECT_EQ(json::parse(r.body()).as_array().size(), 1u);
  r = Send(bhttp::verb::head, "/buckets/alice/b/resolve/dir%2Ff.bin");
  ASSERT_EQ(r.result_int(), 200u);
  EXPECT_EQ(r["X-Xet-Hash"], hash);
  EXPECT_EQ(r["Content-Length"], std::to_string(data.size()));
  EXPECT_EQ(r["Link"], "<" + base_ + "/api/buckets/alice/b/xet-read-token>; rel=\"xet-auth\"");
  r = Send(bhttp::verb::get, "/buckets/alice/b/resolve/dir/f.bin", "", "", {{"Range", "bytes=0-9"}});
  ASSERT_EQ(r.result_int(), 206u);
  EXPECT_EQ(r.body(), std::string(reinterpret_cast<const char*>(data.data()), 10));
  r = Send(bhttp::verb::get, "/buckets/alice/b/resolve/nope");
  EXPECT_EQ(r.result_int(), 404u);
  EXPECT_EQ(r["X-Error-Code"], "EntryNotFound");

  // Private: others see nothing; tokens for the bucket's scope.
  EXPECT_EQ(Send(bhttp::verb::put, "/api/buckets/alice/b/settings", Token("alice"), R"({"private": true})")
                .result_int(),
            200u);
  for (const std::string& token : {std::string(), Token("bob")}) {
    r = Send(bhttp::verb::get, "/api/buckets/alice/b", token);
    EXPECT_EQ(r.result_int(), 404u);
    EXPECT_EQ(r["X-Error-Code"], "RepoNotFound");
    EXPECT_EQ(Send(bhttp::verb::get, "/buckets/alice/b/resolve/empty", token).result_int(), 404u);
    EXPECT_TRUE(json::parse(Send(bhttp::verb::get, "/api/buckets/alice", token).body()).as_array().empty());
  }
  r = Send(bhttp::verb::get, "/api/buckets/alice/b/xet-write-token", Token("alice"));
  ASSERT_EQ(r.result_int(), 200u);
  http::Authenticator auth(testing::kTestJwtKey);
  auto who = auth.Verify(std::string(json::parse(r.body()).at("accessToken").as_string()), http::UnixNow());
  ASSERT_TRUE(who.ok());
  EXPECT_EQ(who->scope, bucket->scope);
  EXPECT_EQ(
      Send(bhttp::verb::get, "/api/buckets/alice/b/xet-write-token", Token("alice", false)).result_int(),
      403u);
  EXPECT_EQ(json::parse(Send(bhttp::verb::get, "/api/buckets/me", Token("alice")).body()).as_array().size(),
            1u);

  // Moves and deletes.
  r = Send(bhttp::verb::post, "/api/repos/move", Token("alice"),
           R"({"fromRepo": "alice/b", "toRepo": "alice/c", "type": "bucket"})");
  ASSERT_EQ(r.result_int(), 200u) << r.body();
  EXPECT_EQ(Send(bhttp::verb::get, "/api/buckets/alice/c", Token("alice")).result_int(), 200u);
  EXPECT_EQ(Send(bhttp::verb::delete_, "/api/buckets/alice/c", Token("bob")).result_int(), 404u);
  EXPECT_EQ(Send(bhttp::verb::delete_, "/api/buckets/alice/c", Token("alice")).result_int(), 200u);
  EXPECT_EQ(Send(bhttp::verb::get, "/api/buckets/alice/c", Token("alice")).result_int(), 404u);
}

}  // namespace
}  // namespace cairn::api
