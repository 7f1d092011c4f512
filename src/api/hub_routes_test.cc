// The Hub routes in process: a real http::Server serving the CAS, file and Hub routes over a SQLite index and
// a local-disk store. Every route and every error status, malformed commits and hostile paths, each leaving
// the repository as it was.
#include "api/hub_routes.h"

#include <gtest/gtest.h>
#include <openssl/sha.h>

#include <atomic>
#include <boost/json.hpp>
#include <thread>
#include <tuple>

#include "api/api_test_server.h"
#include "api/cas_routes.h"
#include "api/file_routes.h"
#include "api/ops_routes.h"
#include "common/base64.h"
#include "common/hex.h"
#include "http/test_util.h"
#include "hub/download_link.h"
#include "ingest/upload_builder.h"
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
  return HexEncode(digest);
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
    ASSERT_NO_FATAL_FAILURE(OpenServer("cairn-hub-api", server_options_));
    files_ = std::make_unique<files::FileService>(*service_, *index_, FileOptions());
    quota_ = std::make_unique<quota::QuotaService>(*index_, clock_);
    hub::HubOptions ho;
    ho.max_inline_bytes = 4096;
    ho.clock = &clock_;
    ho.quota = quota_.get();
    hub_ = std::make_unique<hub::HubService>(*index_, *files_, ho);
    buckets_ = std::make_unique<hub::BucketService>(*index_, *files_, clock_, quota_.get());
    RegisterCasRoutes(*server_, *service_, {.quota = quota_.get()});
    RegisterFileRoutes(*server_, *files_, *index_, {.public_url = base_});
    HubRouteOptions hro;
    hro.public_url = base_;
    hro.quota = quota_.get();
    hro.content_url = content_url_;
    RegisterHubRoutes(*server_, *hub_, *buckets_, *files_, hro);
    RegisterQuotaMetrics(*server_, *index_);
    server_->Start();
  }
  void TearDown() override {
    StopServer();
    buckets_.reset();
    hub_.reset();
    quota_.reset();
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
  std::string Token(const std::string& scope, bool write = true) const {
    return MintToken(scope, write ? http::Permission::kWrite : http::Permission::kRead);
  }
  // The token given, else alice's write token.
  std::string TokenOr(const std::optional<std::string>& token) const {
    return token ? *token : Token("alice");
  }
  Res Create(const std::string& ns, const std::string& name, const std::string& type = "model",
             bool is_private = false, const std::optional<std::string>& as = std::nullopt) {
    json::object body{{"name", name}, {"organization", ns}, {"type", type}};
    if (is_private) body["visibility"] = "private";
    return Send(bhttp::verb::post, "/api/repos/create", TokenOr(as), json::serialize(body));
  }
  Res Commit(const std::string& repo, const std::string& body, const std::string& rev = "main",
             const std::optional<std::string>& as = std::nullopt) {
    return Send(bhttp::verb::post, "/api/models/" + repo + "/commit/" + rev, TokenOr(as), body);
  }
  std::string Head(const std::string& repo, const std::string& rev = "main",
                   const std::optional<std::string>& as = std::nullopt) {
    auto r = Send(bhttp::verb::get, "/api/models/" + repo + "/revision/" + rev, TokenOr(as));
    EXPECT_EQ(r.result_int(), 200u) << r.body();
    return std::string(json::parse(r.body()).at("sha").as_string());
  }
  // A file uploaded through the CAS for `repo`'s scope, as hf_xet would; returns its LFS SHA-256.
  std::string UploadLarge(const std::string& ns, const std::string& name, const std::vector<uint8_t>& data) {
    auto repo = index_->FindRepo(index::RepoType::kModel, ns, name);
    EXPECT_TRUE(repo.ok());
    std::vector<std::span<const uint8_t>> spans = {data};
    auto built = ingest::BuildUpload(spans);
    for (const auto& x : built.xorbs) EXPECT_TRUE(service_->PutXorb(x.hash, x.body).ok());
    EXPECT_TRUE(service_->PutShard(built.shard_bytes, repo->scope).ok());
    return Sha256Hex(data);
  }

  // A link to `path` of alice's model `name` at its head (hub/download_link.h), as the pages make it.
  std::string LinkTo(const std::string& name, const std::string& path) {
    const auto head = hub::ObjectId::FromHex(Head("alice/" + name));
    EXPECT_TRUE(head.has_value());
    if (!head) return {};
    auto link = hub::SignDownload(*files_->repo_links(), {hub::RepoType::kModel, "alice", name}, *head, path);
    EXPECT_TRUE(link.ok());
    return link.ok() ? *link : std::string();
  }

  http::ServerOptions server_options_;  // a fixture's own before SetUp
  std::string content_url_;
  std::unique_ptr<files::FileService> files_;
  std::unique_ptr<quota::QuotaService> quota_;
  std::unique_ptr<hub::HubService> hub_;
  std::unique_ptr<hub::BucketService> buckets_;
};

// A download link (what the pages give a browser, which sends no token) reads its one file of a private
// repository, at its commit, until it expires; any change to it is refused.
TEST_F(HubApi, ADownloadLinkReadsItsFileOfAPrivateRepositoryAndNothingElse) {
  ASSERT_EQ(Create("alice", "p", "model", true).result_int(), 200u);
  ASSERT_EQ(
      Commit("alice/p", Header("s") + FileLine("s.txt", "secret") + FileLine("t.txt", "other")).result_int(),
      200u);
  EXPECT_EQ(Send(bhttp::verb::get, "/alice/p/resolve/main/s.txt").result_int(), 404u);
  const std::string link = LinkTo("p", "s.txt");
  Res r = Send(bhttp::verb::get, link);
  ASSERT_EQ(r.result_int(), 200u) << r.body();
  EXPECT_EQ(r.body(), "secret");
  EXPECT_NE(std::string(r["Content-Security-Policy"]).find("sandbox"), std::string::npos);
  const std::string head = Head("alice/p");
  const std::string query = link.substr(link.find('?'));
  std::string changed = link;
  changed.back() = changed.back() == '0' ? '1' : '0';  // another signature
  const std::string other_file = "/alice/p/resolve/" + head + "/t.txt";
  const std::string other_rev = "/alice/p/resolve/main/s.txt";
  for (const std::string& forged : {other_file + query, other_rev + query, changed}) {
    r = Send(bhttp::verb::get, forged);
    EXPECT_EQ(r.result_int(), 403u) << forged << " " << r.body();
    EXPECT_EQ(r.body().find("secret"), std::string::npos);
  }
  ASSERT_EQ(Create("alice", "q", "model", true).result_int(), 200u);
  ASSERT_EQ(Commit("alice/q", Header("s") + FileLine("s.txt", "q's")).result_int(), 200u);
  EXPECT_EQ(Send(bhttp::verb::get, "/alice/q/resolve/" + head + "/s.txt" + query).result_int(), 403u)
      << "another repository";
  clock_.Advance(static_cast<int64_t>(hub::kDownloadLinkSeconds));
  EXPECT_EQ(Send(bhttp::verb::get, link).result_int(), 403u) << "expired";
}

class HubApiWithContentOrigin : public HubApi {
 protected:
  void SetUp() override {
    server_options_.content_host = "files.example";
    content_url_ = "http://files.example";
    HubApi::SetUp();
  }
};

// With a user-content origin, a browser sent to a file's download on cairn's origin goes there with a link;
// there only linked downloads answer, and nothing else of cairn's does (the API, unlinked downloads).
TEST_F(HubApiWithContentOrigin, BrowsersGetFilesFromTheContentOriginAndNothingElseAnswersThere) {
  ASSERT_EQ(Create("alice", "pub").result_int(), 200u);
  ASSERT_EQ(Commit("alice/pub", Header("s") + FileLine("x.html", "<script>1</script>")).result_int(), 200u);
  const Headers files_host = {{"Host", "files.example"}};
  EXPECT_EQ(Send(bhttp::verb::get, "/alice/pub/resolve/main/x.html").body(), "<script>1</script>")
      << "a client (no Sec-Fetch-Dest) is answered where it asked";
  Res r = Send(bhttp::verb::get, "/alice/pub/resolve/main/x.html", "", "", {{"Sec-Fetch-Dest", "document"}});
  ASSERT_EQ(r.result_int(), 302u) << r.body();
  const std::string location(r[bhttp::field::location]);
  ASSERT_TRUE(
      location.starts_with("http://files.example/alice/pub/resolve/" + Head("alice/pub") + "/x.html?"))
      << location;
  EXPECT_EQ(r[bhttp::field::cache_control], "no-store");
  r = Send(bhttp::verb::get, location.substr(std::string("http://files.example").size()), "", "", files_host);
  EXPECT_EQ(r.result_int(), 200u) << r.body();
  EXPECT_EQ(r.body(), "<script>1</script>");
  EXPECT_EQ(Send(bhttp::verb::get, "/alice/pub/resolve/main/x.html", "", "", files_host).result_int(), 404u);
  EXPECT_EQ(Send(bhttp::verb::get, "/api/models/alice/pub", "", "", files_host).result_int(), 404u);
  EXPECT_EQ(Send(bhttp::verb::get, "/api/models/alice/pub").result_int(), 200u);
}

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
  EXPECT_EQ(json::parse(r.body()).at("url").as_string(), base_ + "/alice/m");      // read by exist_ok
  EXPECT_EQ(json::parse(r.body()).at("error").as_string(), r["X-Error-Message"]);  // shown by huggingface_hub
  EXPECT_EQ(r[bhttp::field::content_type], "application/json");
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
      ingest::BuildUpload(std::vector<std::span<const uint8_t>>{data}).file_hashes[0].hex();
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
  EXPECT_EQ(token.at("exp").as_int64(), clock_.UnixSeconds() + 3600);
  EXPECT_EQ(r["X-Xet-Token-Expiration"], std::to_string(token.at("exp").as_int64()));
  EXPECT_EQ(r["X-Xet-Cas-Url"], base_);
  http::Authenticator auth(testing::kTestJwtKey, &clock_);
  auto who = auth.Verify(std::string(token.at("accessToken").as_string()), auth.now(), http::kCasRouteTokens);
  ASSERT_TRUE(who.ok());
  EXPECT_EQ(who->kind, http::TokenKind::kCas);  // for the CAS routes alone
  // A read token's scope is the repository's read scope (what it committed), a write token's its own.
  EXPECT_EQ(who->scope, index_->FindRepo(index::RepoType::kModel, "alice", "m")->read_scope);
  EXPECT_EQ(who->perm, http::Permission::kRead);
  EXPECT_EQ(Send(bhttp::verb::get, "/api/models/alice/m/xet-write-token/main").result_int(), 401u);
  EXPECT_EQ(Send(bhttp::verb::get, "/api/models/alice/m/xet-write-token/main", Token("bob")).result_int(),
            403u);
  r = Send(bhttp::verb::get, "/api/models/alice/m/xet-write-token/main", Token("alice"));
  ASSERT_EQ(r.result_int(), 200u);
  who = auth.Verify(std::string(json::parse(r.body()).at("accessToken").as_string()), auth.now(),
                    http::kCasRouteTokens);
  ASSERT_TRUE(who.ok());
  EXPECT_EQ(who->kind, http::TokenKind::kCas);
  EXPECT_EQ(who->perm, http::Permission::kWrite);
  EXPECT_EQ(who->scope, index_->FindRepo(index::RepoType::kModel, "alice", "m")->scope);
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

// Purge as huggingface_hub calls it: super_squash_history, list_lfs_files, permanently_delete_lfs_files.
TEST_F(HubApi, PurgeRoutesSquashListAndDeleteLargeFiles) {
  ASSERT_EQ(Create("alice", "m").result_int(), 200u);
  const auto data = xet::testing::SplitMix64Bytes(11, (1 << 20) + 7);
  const std::string sha = UploadLarge("alice", "m", data);
  ASSERT_EQ(Commit("alice/m", Header("large") + LfsLine("w/big.bin", sha, data.size())).result_int(), 200u);
  ASSERT_EQ(Commit("alice/m", Header("small") + FileLine("a.txt", "a")).result_int(), 200u);
  const std::string repo = "/api/models/alice/m";

  // Listing needs a writer of the repository; a missing one is 404 alike.
  auto r = Send(bhttp::verb::get, repo + "/lfs-files", Token("alice"));
  ASSERT_EQ(r.result_int(), 200u) << r.body();
  auto files = json::parse(r.body()).as_array();
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(files[0].at("fileOid").as_string(), sha);
  EXPECT_EQ(files[0].at("oid").as_string(), sha);
  EXPECT_EQ(files[0].at("filename").as_string(), "w/big.bin");
  EXPECT_EQ(files[0].at("size").to_number<uint64_t>(), data.size());
  EXPECT_EQ(std::string(files[0].at("pushedAt").as_string()).back(), 'Z');
  EXPECT_TRUE(r["Link"].empty());
  EXPECT_EQ(Send(bhttp::verb::get, repo + "/lfs-files").result_int(), 401u);
  EXPECT_EQ(Send(bhttp::verb::get, repo + "/lfs-files", Token("bob")).result_int(), 403u);
  EXPECT_EQ(Send(bhttp::verb::get, repo + "/lfs-files", Token("alice", false)).result_int(), 403u);
  EXPECT_EQ(Send(bhttp::verb::get, "/api/models/alice/none/lfs-files", Token("alice")).result_int(), 404u);
  EXPECT_EQ(Send(bhttp::verb::get, repo + "/lfs-files?cursor=zz", Token("alice")).result_int(), 400u);

  // Squash: one commit holding the head's files.
  const std::string tree_before = Send(bhttp::verb::get, repo + "/tree/main", Token("alice")).body();
  EXPECT_EQ(Send(bhttp::verb::post, repo + "/super-squash/main", Token("bob"), "{}").result_int(), 403u);
  EXPECT_EQ(Send(bhttp::verb::post, repo + "/super-squash/main", "", "{}").result_int(), 401u);
  EXPECT_EQ(Send(bhttp::verb::post, repo + "/super-squash/main", Token("alice"), "[").result_int(), 400u);
  r = Send(bhttp::verb::post, repo + "/super-squash/nope", Token("alice"), "{}");
  EXPECT_EQ(r.result_int(), 404u);
  EXPECT_EQ(r["X-Error-Code"], "RevisionNotFound");
  r = Send(bhttp::verb::post, repo + "/super-squash/main", Token("alice"), R"({"message": "squashed"})");
  ASSERT_EQ(r.result_int(), 200u) << r.body();
  EXPECT_EQ(json::parse(r.body()).at("commitOid").as_string(), Head("alice/m"));
  r = Send(bhttp::verb::get, repo + "/commits/main", Token("alice"));
  ASSERT_EQ(json::parse(r.body()).as_array().size(), 1u);
  EXPECT_EQ(json::parse(r.body()).as_array()[0].at("title").as_string(), "squashed");
  EXPECT_EQ(Send(bhttp::verb::get, repo + "/tree/main", Token("alice")).body(), tree_before);
  ASSERT_EQ(Send(bhttp::verb::post, repo + "/tag/main", Token("alice"), R"({"tag": "v1"})").result_int(),
            200u);
  EXPECT_EQ(Send(bhttp::verb::post, repo + "/super-squash/v1", Token("alice"), "{}").result_int(), 400u);

  // Permanent deletion, rewriting history: the path goes from every ref.
  const auto del = [&](const std::string& body, const std::string& token) {
    return Send(bhttp::verb::post, repo + "/lfs-files/batch", token, body).result_int();
  };
  const std::string body = R"({"deletions": {"sha": [")" + sha + R"("], "rewriteHistory": true}})";
  EXPECT_EQ(del(body, Token("bob")), 403u);
  EXPECT_EQ(del(R"({"deletions": {"sha": "x"}})", Token("alice")), 400u);
  EXPECT_EQ(del(R"({"deletions": {"sha": ["x"]}})", Token("alice")), 400u);
  EXPECT_EQ(del(R"({"deletions": {"sha": [], "rewriteHistory": 1}})", Token("alice")), 400u);
  ASSERT_EQ(del(body, Token("alice")), 200u);
  for (const char* rev : {"main", "v1"}) {
    r = Send(bhttp::verb::get, repo + "/tree/" + rev + "/w", Token("alice"));
    EXPECT_EQ(r.result_int(), 404u) << rev;
  }
  r = Send(bhttp::verb::get, repo + "/lfs-files", Token("alice"));
  EXPECT_TRUE(json::parse(r.body()).as_array().empty());
  EXPECT_EQ(del(body, Token("alice")), 200u) << "deleting again changes nothing";
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
  auto built = ingest::BuildUpload(spans);
  for (const auto& x : built.xorbs) ASSERT_TRUE(service_->PutXorb(x.hash, x.body).ok());
  ASSERT_TRUE(service_->PutShard(built.shard_bytes, bucket->scope).ok());
  const std::string hash = built.file_hashes[0].hex();
  ASSERT_EQ(Create("alice", "m").result_int(), 200u);
  const auto other = xet::testing::SplitMix64Bytes(4, 1000);
  UploadLarge("alice", "m", other);
  const std::string elsewhere =
      ingest::BuildUpload(std::vector<std::span<const uint8_t>>{other}).file_hashes[0].hex();

  const auto line = [](const std::string& type, const std::string& path, const std::string& xet = "") {
    json::object o{{"type", type}, {"path", path}};
    if (!xet.empty()) {
      o["xetHash"] = xet;
      o["mtime"] = 1700000000123;
    }
    return json::serialize(o) + "\n";
  };
  const auto batch = [&](const std::string& body, const std::optional<std::string>& as = std::nullopt) {
    return Send(bhttp::verb::post, "/api/buckets/alice/b/batch", TokenOr(as), body);
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
  http::Authenticator auth(testing::kTestJwtKey, &clock_);
  auto who = auth.Verify(std::string(json::parse(r.body()).at("accessToken").as_string()), auth.now(),
                         http::kCasRouteTokens);
  ASSERT_TRUE(who.ok());
  EXPECT_EQ(who->kind, http::TokenKind::kCas);
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

// ---- What an attacker's review found (issue 24): each test fails on 3cdf82a.

// CAS tokens and the repository's visibility: a read token fetched while public reads nothing after it goes
// private (nor after it is deleted), and mints no link that outlives it.
TEST_F(HubApi, GoingPrivateOrAwayCutsOffEveryEarlierReadToken) {
  ASSERT_EQ(Create("alice", "m").result_int(), 200u);
  const auto read_token = [&](const std::string& token = "") {
    auto r = Send(bhttp::verb::get, "/api/models/alice/m/xet-read-token/main", token);
    EXPECT_EQ(r.result_int(), 200u) << r.body();
    return std::string(json::parse(r.body()).at("accessToken").as_string());
  };
  const auto list = [&](const std::string& cas) {
    auto r = Send(bhttp::verb::get, "/v1/files", cas);
    EXPECT_EQ(r.result_int(), 200u) << r.body();
    return json::parse(r.body()).at("files").as_array().size();
  };
  const auto first = xet::testing::SplitMix64Bytes(21, 70000);
  ASSERT_EQ(Commit("alice/m", Header("s") + LfsLine("a.bin", UploadLarge("alice", "m", first), first.size()))
                .result_int(),
            200u);
  const std::string anonymous = read_token();
  EXPECT_EQ(list(anonymous), 1u);
  const std::string a_hash =
      ingest::BuildUpload(std::vector<std::span<const uint8_t>>{first}).file_hashes[0].hex();
  EXPECT_EQ(Send(bhttp::verb::get, "/v1/files/" + a_hash, anonymous).result_int(), 200u);
  // A link from that one-hour token lives an hour at most, whatever it asks for.
  auto link = Send(bhttp::verb::post, "/v1/links", anonymous,
                   R"({"file_hash":")" + a_hash + R"(","ttl_seconds":2592000})");
  ASSERT_EQ(link.result_int(), 201u) << link.body();
  const auto expires = json::parse(link.body()).at("expires").to_number<int64_t>();
  EXPECT_EQ(expires, clock_.UnixSeconds() + 3600) << "the token's hour, to the second";
  const std::string link_url = std::string(json::parse(link.body()).at("url").as_string());
  ASSERT_EQ(Send(bhttp::verb::get, link_url.substr(base_.size())).result_int(), 200u);

  ASSERT_EQ(Send(bhttp::verb::put, "/api/models/alice/m/settings", Token("alice"), R"({"private": true})")
                .result_int(),
            200u);
  const auto second = xet::testing::SplitMix64Bytes(22, 70000);
  ASSERT_EQ(
      Commit("alice/m", Header("s") + LfsLine("b.bin", UploadLarge("alice", "m", second), second.size()))
          .result_int(),
      200u);
  const std::string b_hash =
      ingest::BuildUpload(std::vector<std::span<const uint8_t>>{second}).file_hashes[0].hex();
  // The earlier token: no listing, no download, no reconstruction, no SHA-256 lookup, no link, no bytes
  // through the link it minted.
  EXPECT_EQ(list(anonymous), 0u);
  for (const std::string& h : {a_hash, b_hash}) {
    EXPECT_EQ(Send(bhttp::verb::get, "/v1/files/" + h, anonymous).result_int(), 404u) << h;
    EXPECT_EQ(Send(bhttp::verb::get, "/v1/reconstructions/" + h, anonymous).result_int(), 404u) << h;
    EXPECT_EQ(Send(bhttp::verb::get, "/v2/reconstructions/" + h, anonymous).result_int(), 404u) << h;
    EXPECT_EQ(Send(bhttp::verb::post, "/v1/links", anonymous, R"({"file_hash":")" + h + R"("})").result_int(),
              404u)
        << h;
  }
  EXPECT_EQ(Send(bhttp::verb::get, "/v1/files/by-sha256/" + Sha256Hex(second), anonymous).result_int(), 404u);
  EXPECT_EQ(Send(bhttp::verb::get, link_url.substr(base_.size())).result_int(), 404u);
  // The owner's new read token reads both; anonymous callers get no token at all.
  EXPECT_EQ(Send(bhttp::verb::get, "/api/models/alice/m/xet-read-token/main").result_int(), 404u);
  const std::string owner = read_token(Token("alice", false));
  EXPECT_EQ(list(owner), 2u);
  EXPECT_EQ(Send(bhttp::verb::get, "/v1/files/" + b_hash, owner).result_int(), 200u);
  // A token of the caller's own that expires sooner bounds the CAS token it gets.
  const std::string short_lived = MintToken("alice", http::Permission::kRead, 60s);
  auto r = Send(bhttp::verb::get, "/api/models/alice/m/xet-read-token/main", short_lived);
  ASSERT_EQ(r.result_int(), 200u);
  EXPECT_EQ(json::parse(r.body()).at("exp").to_number<int64_t>(), clock_.UnixSeconds() + 60);
  // And so are the transfer URLs a reconstruction with that CAS token hands out.
  const std::string brief(json::parse(r.body()).at("accessToken").as_string());
  r = Send(bhttp::verb::get, "/v1/reconstructions/" + b_hash, brief);
  ASSERT_EQ(r.result_int(), 200u) << r.body();
  const size_t x = r.body().find("x=");
  ASSERT_NE(x, std::string::npos) << r.body();
  EXPECT_EQ(std::stoll(r.body().substr(x + 2, 12)), static_cast<int64_t>(Now()) + 60);

  // Deleted: the tokens of both its scopes read nothing.
  r = Send(bhttp::verb::get, "/api/models/alice/m/xet-write-token/main", Token("alice"));
  const std::string writer = std::string(json::parse(r.body()).at("accessToken").as_string());
  EXPECT_EQ(list(writer), 2u);
  ASSERT_EQ(
      Send(bhttp::verb::delete_, "/api/repos/delete", Token("alice"), R"({"name": "m", "type": "model"})")
          .result_int(),
      200u);
  EXPECT_EQ(list(owner), 0u);
  EXPECT_EQ(list(writer), 0u);
  EXPECT_EQ(Send(bhttp::verb::get, "/v1/files/" + a_hash, writer).result_int(), 404u);
  EXPECT_EQ(Send(bhttp::verb::post, "/v1/links", owner, R"({"file_hash":")" + a_hash + R"("})").result_int(),
            404u);
}

// An upload that no commit named is the uploader's alone: a repository's read token neither lists nor reads
// it; its write token does; a commit publishes it. The same for buckets and for copies out of a repository.
TEST_F(HubApi, UploadsNeverCommittedAreInvisibleToReaders) {
  ASSERT_EQ(Create("alice", "m").result_int(), 200u);
  const auto data = xet::testing::SplitMix64Bytes(31, 70000);
  const std::string sha = UploadLarge("alice", "m", data);
  const std::string hash =
      ingest::BuildUpload(std::vector<std::span<const uint8_t>>{data}).file_hashes[0].hex();
  const auto token = [&](const std::string& kind, const std::string& caller) {
    auto r = Send(bhttp::verb::get, "/api/models/alice/m/" + kind + "/main", caller);
    EXPECT_EQ(r.result_int(), 200u) << r.body();
    return std::string(json::parse(r.body()).at("accessToken").as_string());
  };
  const std::string reader = token("xet-read-token", "");
  const std::string writer = token("xet-write-token", Token("alice"));
  EXPECT_TRUE(json::parse(Send(bhttp::verb::get, "/v1/files", reader).body()).at("files").as_array().empty());
  EXPECT_EQ(Send(bhttp::verb::get, "/v1/files/" + hash, reader).result_int(), 404u);
  EXPECT_EQ(Send(bhttp::verb::get, "/v1/reconstructions/" + hash, reader).result_int(), 404u);
  EXPECT_EQ(Send(bhttp::verb::get, "/v1/files/by-sha256/" + sha, reader).result_int(), 404u);
  EXPECT_EQ(Send(bhttp::verb::get, "/v1/files/" + hash, writer).result_int(), 200u);
  EXPECT_EQ(json::parse(Send(bhttp::verb::get, "/v1/files", writer).body()).at("files").as_array().size(),
            1u);
  // Nor can a reader of the public repository lend it to a repository of its own.
  ASSERT_EQ(Create("bob", "theirs", "model", false, Token("bob")).result_int(), 200u);
  auto lent = Send(bhttp::verb::post, "/api/models/alice/m/lfs-files/duplicate", Token("bob"),
                   json::serialize(json::object{
                       {"target", {{"type", "model"}, {"name", "bob/theirs"}}},
                       {"files", json::array{json::object{{"xetHash", hash}, {"sha256", sha}}}}}));
  ASSERT_EQ(lent.result_int(), 200u);
  EXPECT_EQ(json::parse(lent.body()).at("failed").as_array().size(), 1u);
  // Committed: the same read token now reads it.
  ASSERT_EQ(Commit("alice/m", Header("s") + LfsLine("w.bin", sha, data.size())).result_int(), 200u);
  EXPECT_EQ(Send(bhttp::verb::get, "/v1/files/" + hash, reader).result_int(), 200u);
  EXPECT_EQ(Send(bhttp::verb::get, "/v1/reconstructions/" + hash, reader).result_int(), 200u);
  EXPECT_EQ(json::parse(Send(bhttp::verb::get, "/v1/files", reader).body()).at("files").as_array().size(),
            1u);

  // A bucket: what a batch added, and only that.
  ASSERT_EQ(Send(bhttp::verb::post, "/api/buckets/alice/b", Token("alice"), "{}").result_int(), 200u);
  auto bucket = index_->FindRepo(index::RepoType::kBucket, "alice", "b");
  const auto two = xet::testing::SplitMix64Bytes(32, 5000);
  const auto three = xet::testing::SplitMix64Bytes(33, 5000);
  std::vector<std::string> hashes;
  for (const auto* d : {&two, &three}) {
    auto built = ingest::BuildUpload(std::vector<std::span<const uint8_t>>{*d});
    for (const auto& x : built.xorbs) ASSERT_TRUE(service_->PutXorb(x.hash, x.body).ok());
    ASSERT_TRUE(service_->PutShard(built.shard_bytes, bucket->scope).ok());
    hashes.push_back(built.file_hashes[0].hex());
  }
  auto r = Send(
      bhttp::verb::post, "/api/buckets/alice/b/batch", Token("alice"),
      json::serialize(json::object{{"type", "addFile"}, {"path", "two"}, {"xetHash", hashes[0]}}) + "\n");
  ASSERT_EQ(r.result_int(), 200u) << r.body();
  r = Send(bhttp::verb::get, "/api/buckets/alice/b/xet-read-token");
  const std::string bucket_reader = std::string(json::parse(r.body()).at("accessToken").as_string());
  EXPECT_EQ(Send(bhttp::verb::get, "/v1/files/" + hashes[0], bucket_reader).result_int(), 200u);
  EXPECT_EQ(Send(bhttp::verb::get, "/v1/files/" + hashes[1], bucket_reader).result_int(), 404u);
}

// Stored text is bounded and an answer's memory with it: a description past 64 KiB is refused, and a
// listing page holds a bounded amount of message text, with a Link to the rest.
TEST_F(HubApi, CommitDescriptionsAreBounded) {
  ASSERT_EQ(Create("alice", "m").result_int(), 200u);
  const auto header = [](const std::string& description) {
    return json::serialize(
               json::object{{"key", "header"}, {"value", {{"summary", "s"}, {"description", description}}}}) +
           "\n";
  };
  auto r = Commit("alice/m", header(std::string((64 << 10) + 1, 'd')) + FileLine("a", "a"));
  EXPECT_EQ(r.result_int(), 400u);
  EXPECT_NE(std::string(r["X-Error-Message"]).find("65536"), std::string::npos);
  EXPECT_EQ(Commit("alice/m", header("esc \x1b[31m red") + FileLine("a", "a")).result_int(), 400u);
  for (int i = 0; i < 70; ++i)
    ASSERT_EQ(Commit("alice/m", header(std::string(64 << 10, static_cast<char>('a' + i % 26))) +
                                    FileLine("a", std::to_string(i)))
                  .result_int(),
              200u);
  // 4 MiB of messages a page: 64 of these, then the Link carries on where the page ended.
  r = Send(bhttp::verb::get, "/api/models/alice/m/commits/main?limit=1000");
  ASSERT_EQ(r.result_int(), 200u);
  EXPECT_EQ(json::parse(r.body()).as_array().size(), 64u);
  EXPECT_LT(r.body().size(), (4u << 20) + (256u << 10));
  std::string link(r["Link"]);
  ASSERT_NE(link.find("skip=64"), std::string::npos) << link;
  r = Send(bhttp::verb::get, link.substr(1 + base_.size(), link.find('>') - 1 - base_.size()));
  ASSERT_EQ(r.result_int(), 200u);
  EXPECT_EQ(json::parse(r.body()).as_array().size(), 7u);  // six more and the initial commit
  EXPECT_TRUE(r["Link"].empty());
  EXPECT_EQ(Send(bhttp::verb::get, "/api/models/alice/m/commits/main?skip=x").result_int(), 400u);
}

// Paths: every spelling of .git that NTFS or HFS+ reads as .git, and C1 controls, in commits and buckets.
TEST_F(HubApi, PathsThatAFileSystemReadsAsGitOrAsControlsAreRefused) {
  ASSERT_EQ(Create("alice", "m").result_int(), 200u);
  const std::string head = Head("alice/m");
  const std::vector<std::string> bad = {".git::$INDEX_ALLOCATION/config",
                                        ".git:$I30:$INDEX_ALLOCATION/hooks/x",
                                        ".g\u200cit/config",
                                        ".git\u200d/config",
                                        "\ufeff.git/config",
                                        "sub/.gi\u206at/config",
                                        "a\u009b31m.txt",
                                        "line\u0085break",
                                        "GIT~1/config",
                                        "git~1:x/config"};
  for (const std::string& path : bad) {
    auto r = Commit("alice/m", Header("s") + FileLine(path, "x"));
    EXPECT_EQ(r.result_int(), 400u) << path;
    EXPECT_EQ(Head("alice/m"), head) << path;
  }
  ASSERT_EQ(Send(bhttp::verb::post, "/api/buckets/alice/b", Token("alice"), "{}").result_int(), 200u);
  for (const std::string& path : bad) {
    auto r = Send(bhttp::verb::post, "/api/buckets/alice/b/batch", Token("alice"),
                  json::serialize(
                      json::object{{"type", "addFile"}, {"path", path}, {"xetHash", std::string(64, '0')}}) +
                      "\n");
    EXPECT_EQ(r.result_int(), 422u) << path;
  }
  EXPECT_EQ(json::parse(Send(bhttp::verb::get, "/api/buckets/alice/b").body()).at("totalFiles").as_int64(),
            0);
  // What stays allowed: names near those.
  ASSERT_EQ(Commit("alice/m", Header("s") + FileLine(".gitattributes", "x") + FileLine("a\u00a0b", "y") +
                                  FileLine("x.git/y", "z"))
                .result_int(),
            200u);
}

// Branch and tag names git's check-ref-format refuses are refused; refs/pr/N stays a name the index takes.
TEST_F(HubApi, RefNamesGitRefusesAreRefused) {
  ASSERT_EQ(Create("alice", "m").result_int(), 200u);
  const std::string repo = "/api/models/alice/m";
  for (const char* name : {"main~1", "main%5E", "a%20b", "x:y", "star*", "a..b", "x.lock", "a@%7B1%7D", "@",
                           ".hidden", "trail.", "HEAD", "-x", "a%5Cb"}) {
    std::string target = repo + "/branch/";
    target += name;
    EXPECT_EQ(Send(bhttp::verb::post, target, Token("alice"), "{}").result_int(), 400u) << name;
  }
  for (const char* name : {"main~1", "a b", "x.lock", "@", ".hidden"}) {
    EXPECT_EQ(Send(bhttp::verb::post, repo + "/tag/main", Token("alice"),
                   json::serialize(json::object{{"tag", name}}))
                  .result_int(),
              400u)
        << name;
  }
  EXPECT_EQ(json::parse(Send(bhttp::verb::get, repo + "/refs").body()).at("branches").as_array().size(), 1u);
  EXPECT_EQ(Send(bhttp::verb::post, repo + "/branch/feature%2Fx", Token("alice"), "{}").result_int(), 200u);
  EXPECT_TRUE(hub::ValidRefName("refs/pr/1"));
}

// Ambiguous commits are refused; what huggingface_hub only warns about is applied in order.
TEST_F(HubApi, AmbiguousCommitsAreRefusedAndRepeatsApplyInOrder) {
  ASSERT_EQ(Create("alice", "m").result_int(), 200u);
  const std::string head = Head("alice/m");
  const auto data = xet::testing::SplitMix64Bytes(41, 70000);
  const std::string sha = UploadLarge("alice", "m", data);
  for (const std::string& body : {Header("one") + Header("two") + FileLine("a", "a"),
                                  Header("s") + FileLine("a", "a") + LfsLine("a", sha, data.size()),
                                  Header("s") + LfsLine("a", sha, data.size()) + FileLine("a", "a")}) {
    auto r = Commit("alice/m", body);
    EXPECT_EQ(r.result_int(), 400u) << body.substr(0, 200);
    EXPECT_FALSE(r["X-Error-Message"].empty());
    EXPECT_EQ(Head("alice/m"), head);
  }
  // The same path twice: the last one wins. A file then its deletion: gone.
  ASSERT_EQ(Commit("alice/m", Header("s") + FileLine("a", "first") + FileLine("a", "second") +
                                  FileLine("b", "b") + DeleteLine("b"))
                .result_int(),
            200u);
  EXPECT_EQ(Send(bhttp::verb::get, "/alice/m/resolve/main/a").body(), "second");
  EXPECT_EQ(Send(bhttp::verb::get, "/alice/m/resolve/main/b").result_int(), 404u);
}

// One namespace holding every commit slot with bodies still arriving (fast enough not to be preempted as
// slow) does not lock the others out: another namespace's commit takes a slot from it and succeeds, as does
// one by a token that cannot write where it posts (refused, but answered, not 503).
TEST_F(HubApi, OneNamespaceCannotHoldEveryCommitSlot) {
  ASSERT_EQ(Create("alice", "m").result_int(), 200u);
  ASSERT_EQ(Create("bob", "m", "model", false, Token("bob")).result_int(), 200u);
  const std::string alice = Token("alice");
  std::vector<std::unique_ptr<http::testing::Client>> hogs;
  for (int i = 0; i < 8; ++i) {  // max_concurrent_commits
    auto c = std::make_unique<http::testing::Client>(port_);
    c->WriteRaw("POST /api/models/alice/m/commit/main HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + alice +
                "\r\nContent-Length: 100000000\r\n\r\n" + Header("hog"));
    hogs.push_back(std::move(c));
  }
  std::atomic<bool> stop{false};
  std::thread feeder([&] {  // ~1 MiB/s each: well above the slow-body floor
    const std::string piece(64 << 10, ' ');
    while (!stop) {
      for (auto& c : hogs) {
        boost::system::error_code ec;
        boost::asio::write(c->socket(), boost::asio::buffer(piece), ec);
      }
      std::this_thread::sleep_for(50ms);
    }
  });
  std::this_thread::sleep_for(1500ms);
  auto r = Commit("bob/m", Header("mine") + FileLine("b.txt", "b"), "main", Token("bob"));
  EXPECT_EQ(r.result_int(), 200u) << r.body();
  r = Commit("alice/m", Header("not mine") + FileLine("b.txt", "b"), "main", Token("bob"));
  EXPECT_EQ(r.result_int(), 403u) << r.body();
  stop = true;
  feeder.join();
}

// A bucket file's contentType is checked where it enters and never reaches a header raw; every answer with
// stored bytes carries nosniff and a sandboxing CSP, each header once, and an active type is a download.
TEST_F(HubApi, StoredBytesNeverActAsPagesOrInjectHeaders) {
  ASSERT_EQ(Send(bhttp::verb::post, "/api/buckets/alice/b", Token("alice"), "{}").result_int(), 200u);
  const auto add = [&](const std::string& path, const std::string& type) {
    return Send(
        bhttp::verb::post, "/api/buckets/alice/b/batch", Token("alice"),
        json::serialize(json::object{
            {"type", "addFile"}, {"path", path}, {"xetHash", std::string(64, '0')}, {"contentType", type}}) +
            "\n");
  };
  for (const std::string& bad :
       {std::string("text/plain\r\nX-Injected: x\r\nSet-Cookie: session=probe"),
        std::string("text/plain\nX-Injected: x"), std::string("text/plain\0x", 12), std::string("text/"),
        std::string(300, 'a') + "/b", std::string("t\xc3\xa9xt/plain")}) {
    auto r = add("bad", bad);
    EXPECT_EQ(r.result_int(), 422u) << bad;
  }
  ASSERT_EQ(add("page.html", "text/html; charset=utf-8").result_int(), 200u);
  ASSERT_EQ(add("plain.txt", "text/plain").result_int(), 200u);
  // A value stored before media types were checked (written behind the service's back).
  auto bucket = index_->FindRepo(index::RepoType::kBucket, "alice", "b");
  ASSERT_TRUE(index_
                  ->ChangeBucket(bucket->id,
                                 {{"old", index::BucketFile{"old", xet::FileHash{}, 0, 0,
                                                            std::string("text/html\r\nX-Injected: 1"), 0}}},
                                 nullptr)
                  .ok());
  const auto check = [&](const Res& r, const std::string& type, bool attachment) {
    EXPECT_EQ(r.count(bhttp::field::content_type), 1u);
    EXPECT_EQ(r.count("Accept-Ranges"), r.count("Accept-Ranges") > 0 ? 1u : 0u);
    EXPECT_EQ(r[bhttp::field::content_type], type);
    EXPECT_EQ(r["X-Content-Type-Options"], "nosniff");
    EXPECT_EQ(r["Content-Security-Policy"], "sandbox; default-src 'none'");
    EXPECT_EQ(std::string(r["Content-Disposition"]).starts_with("attachment"), attachment);
    EXPECT_EQ(r.count("X-Injected"), 0u);
  };
  check(Send(bhttp::verb::get, "/buckets/alice/b/resolve/page.html"), "text/html; charset=utf-8", true);
  check(Send(bhttp::verb::get, "/buckets/alice/b/resolve/plain.txt"), "text/plain", false);
  check(Send(bhttp::verb::get, "/buckets/alice/b/resolve/old"), "application/octet-stream", false);
  // The repositories' files, small and large, and /v1/files.
  ASSERT_EQ(Create("alice", "m").result_int(), 200u);
  const auto data = xet::testing::SplitMix64Bytes(51, 70000);
  ASSERT_EQ(Commit("alice/m", Header("s") + FileLine("index.html", "<script>alert(1)</script>") +
                                  LfsLine("w.bin", UploadLarge("alice", "m", data), data.size()))
                .result_int(),
            200u);
  check(Send(bhttp::verb::get, "/alice/m/resolve/main/index.html"), "application/octet-stream", false);
  auto r = Send(bhttp::verb::get, "/alice/m/resolve/main/w.bin");
  ASSERT_EQ(r.result_int(), 200u);
  check(r, "application/octet-stream", false);
  r = Send(bhttp::verb::get, "/api/models/alice/m/xet-read-token/main");
  const std::string reader(json::parse(r.body()).at("accessToken").as_string());
  const std::string hash(Send(bhttp::verb::head, "/alice/m/resolve/main/w.bin")["X-Xet-Hash"]);
  r = Send(bhttp::verb::get, "/v1/files/" + hash, reader);
  ASSERT_EQ(r.result_int(), 200u);
  check(r, "application/octet-stream", false);
  r = Send(bhttp::verb::get, "/v1/files/" + hash, reader, "", {{"Range", "bytes=0-1,5-9"}});
  ASSERT_EQ(r.result_int(), 206u);
  EXPECT_TRUE(std::string(r[bhttp::field::content_type]).starts_with("multipart/byteranges"));
  EXPECT_EQ(r["X-Content-Type-Options"], "nosniff");
}

// ---- What an attacker's review found (issue 45): each test fails on e44264e.

// A CAS token speaks for nobody on the Hub API: presented as a caller it is refused (401) on every route that
// reads a caller, as an invalid token is, never taken for an anonymous caller (which reads public
// repositories); it still reads its scope on the CAS and file routes.
TEST_F(HubApi, ACasTokenIsRefusedOnEveryHubRoute) {
  ASSERT_EQ(Create("alice", "m").result_int(), 200u);
  ASSERT_EQ(Commit("alice/m", Header("s") + FileLine("a.txt", "hello")).result_int(), 200u);
  ASSERT_EQ(Send(bhttp::verb::post, "/api/buckets/alice/b", Token("alice"), "{}").result_int(), 200u);
  auto r =
      Send(bhttp::verb::get, "/api/models/alice/m/xet-read-token/main");  // anonymous: a public repository
  ASSERT_EQ(r.result_int(), 200u) << r.body();
  const std::string reader(json::parse(r.body()).at("accessToken").as_string());
  r = Send(bhttp::verb::get, "/api/models/alice/m/xet-write-token/main", Token("alice"));
  ASSERT_EQ(r.result_int(), 200u) << r.body();
  const std::string writer(json::parse(r.body()).at("accessToken").as_string());
  r = Send(bhttp::verb::get, "/api/buckets/alice/b/xet-write-token", Token("alice"));
  ASSERT_EQ(r.result_int(), 200u) << r.body();
  const std::string bucket_writer(json::parse(r.body()).at("accessToken").as_string());
  const std::string m = "/api/models/alice/m";
  const std::string b = "/api/buckets/alice/b";
  const std::vector<std::tuple<bhttp::verb, std::string, std::string>> routes = {
      {bhttp::verb::get, "/api/whoami-v2", ""},
      {bhttp::verb::get, "/api/quotas/alice", ""},
      {bhttp::verb::post, "/api/repos/create", R"({"name":"n","organization":"alice","type":"model"})"},
      {bhttp::verb::delete_, "/api/repos/delete", R"({"name":"m","organization":"alice","type":"model"})"},
      {bhttp::verb::post, "/api/repos/move", R"({"fromRepo":"alice/m","toRepo":"alice/m2","type":"model"})"},
      {bhttp::verb::get, "/api/buckets/alice", ""},
      {bhttp::verb::post, "/api/buckets/alice/b2", "{}"},
      {bhttp::verb::get, b, ""},
      {bhttp::verb::delete_, b, ""},
      {bhttp::verb::put, b + "/settings", R"({"private":true})"},
      {bhttp::verb::get, b + "/tree", ""},
      {bhttp::verb::post, b + "/paths-info", R"({"paths":["x"]})"},
      {bhttp::verb::post, b + "/batch", "\n"},
      {bhttp::verb::get, b + "/xet-write-token", ""},
      {bhttp::verb::get, b + "/xet-read-token", ""},
      {bhttp::verb::get, "/buckets/alice/b/resolve/x", ""},
      {bhttp::verb::get, "/api/models", ""},
      {bhttp::verb::get, m, ""},
      {bhttp::verb::get, m + "/revision/main", ""},
      {bhttp::verb::put, m + "/settings", R"({"private":true})"},
      {bhttp::verb::get, m + "/tree/main", ""},
      {bhttp::verb::post, m + "/paths-info/main", "paths=a.txt"},
      {bhttp::verb::get, m + "/refs", ""},
      {bhttp::verb::get, m + "/commits/main", ""},
      {bhttp::verb::post, m + "/branch/dev", "{}"},
      {bhttp::verb::delete_, m + "/branch/dev", ""},
      {bhttp::verb::post, m + "/tag/main", R"({"tag":"v1"})"},
      {bhttp::verb::delete_, m + "/tag/v1", ""},
      {bhttp::verb::post, m + "/preupload/main", R"({"files":[]})"},
      {bhttp::verb::post, m + "/commit/main", Header("x") + FileLine("b.txt", "x")},
      {bhttp::verb::post, m + "/lfs-files/duplicate",
       R"({"target":{"type":"model","name":"alice/n"},"files":[]})"},
      {bhttp::verb::get, m + "/lfs-files", ""},
      {bhttp::verb::post, m + "/lfs-files/batch", R"({"deletions":{"sha":[],"rewriteHistory":true}})"},
      {bhttp::verb::post, m + "/super-squash/main", "{}"},
      {bhttp::verb::get, m + "/xet-write-token/main", ""},
      {bhttp::verb::get, m + "/xet-read-token/main", ""},
      {bhttp::verb::get, "/alice/m/resolve/main/a.txt", ""},
      {bhttp::verb::head, "/alice/m/resolve/main/a.txt", ""},
      {bhttp::verb::get, "/models/alice/m/resolve/main/a.txt", ""},
  };
  for (const std::string& cas : {reader, writer, bucket_writer}) {
    for (const auto& [verb, target, body] : routes) {
      auto answer = Send(verb, target, cas, body);
      EXPECT_EQ(answer.result_int(), 401u) << verb << " " << target << ": " << answer.body();
    }
  }
  // Nothing changed, and the tokens still read their scopes where they are meant.
  EXPECT_EQ(Send(bhttp::verb::get, "/alice/m/resolve/main/a.txt").body(), "hello");
  EXPECT_EQ(Send(bhttp::verb::get, "/api/models/alice/m/refs", Token("alice")).body().find("dev"),
            std::string::npos);
  EXPECT_EQ(Send(bhttp::verb::get, "/v1/files", reader).result_int(), 200u);
  EXPECT_EQ(Send(bhttp::verb::get, "/v1/files", writer).result_int(), 200u);
  // And an access token is still a caller.
  EXPECT_EQ(Send(bhttp::verb::get, "/api/whoami-v2", Token("alice", false)).result_int(), 200u);
}

}  // namespace
}  // namespace cairn::api

namespace cairn::api {
namespace {

TEST_F(HubApi, AFullQuotaRefusesCommitsUploadsAndTokensWithTheMessageUsersSee) {
  ASSERT_EQ(Create("alice", "m").result_int(), 200u);
  ASSERT_EQ(Send(bhttp::verb::post, "/api/buckets/alice/b", Token("alice"), "{}").result_int(), 200u);
  const auto first = xet::testing::SplitMix64Bytes(11, 100000);
  ASSERT_EQ(
      Commit("alice/m", Header("one") + LfsLine("a.bin", UploadLarge("alice", "m", first), first.size()))
          .result_int(),
      200u);
  // Usage, for a token of the namespace or of one of its repositories; measured (no quota yet).
  auto r = Send(bhttp::verb::get, "/api/quotas/alice?measure=true", Token("alice", false));
  ASSERT_EQ(r.result_int(), 200u) << r.body();
  auto usage = json::parse(r.body()).as_object();
  const uint64_t used = usage.at("used").to_number<uint64_t>();
  EXPECT_GE(used, first.size());
  EXPECT_EQ(usage.at("chunkBytes").to_number<uint64_t>(), first.size());
  EXPECT_TRUE(usage.at("limit").is_null());
  EXPECT_TRUE(usage.at("exact").as_bool());
  EXPECT_EQ(Send(bhttp::verb::get, "/api/quotas/alice", Token("alice/m", false)).result_int(), 200u);
  EXPECT_EQ(Send(bhttp::verb::get, "/api/quotas/alice", Token("bob")).result_int(), 403u);
  EXPECT_EQ(Send(bhttp::verb::get, "/api/quotas/alice").result_int(), 401u);
  EXPECT_EQ(Send(bhttp::verb::get, "/api/quotas/..", Token("alice")).result_int(), 403u);

  // Room for 50,000 bytes more: a second large file of 100,000 is refused whole, and nothing of it shows.
  ASSERT_TRUE(quota_->SetLimit(index::AuditActor{}, "alice", used + 50000).ok());
  const std::string head = Head("alice/m");
  const auto second = xet::testing::SplitMix64Bytes(12, 100000);
  r = Commit("alice/m", Header("two") + LfsLine("b.bin", UploadLarge("alice", "m", second), second.size()));
  ASSERT_EQ(r.result_int(), 403u) << r.body();
  EXPECT_NE(std::string(r["X-Error-Message"]).find("Storage quota of namespace 'alice' reached"),
            std::string::npos)
      << r["X-Error-Message"];
  EXPECT_EQ(Head("alice/m"), head);
  r = Send(bhttp::verb::get, "/api/quotas/alice", Token("alice"));
  usage = json::parse(r.body()).as_object();
  EXPECT_EQ(usage.at("used").to_number<uint64_t>(), used);
  EXPECT_EQ(usage.at("limit").to_number<uint64_t>(), used + 50000);
  // What fits goes in: a small file, the same large file under a second name (it adds no chunk).
  ASSERT_EQ(Commit("alice/m", Header("small") + FileLine("s.txt", "small")).result_int(), 200u);
  ASSERT_EQ(
      Commit("alice/m", Header("again") + LfsLine("a2.bin", Sha256Hex(first), first.size())).result_int(),
      200u);

  // Used up: uploads are refused before they start (preupload, write tokens, xorbs, bucket batches); reads
  // and deletions go on.
  ASSERT_TRUE(quota_->SetLimit(index::AuditActor{}, "alice", 1).ok());
  r = Send(bhttp::verb::post, "/api/models/alice/m/preupload/main", Token("alice"),
           R"({"files": [{"path": "c.bin", "sample": "aGk=", "size": 100000}]})");
  EXPECT_EQ(r.result_int(), 403u) << r.body();
  EXPECT_NE(std::string(r["X-Error-Message"]).find("cairn quota set alice"), std::string::npos);
  EXPECT_EQ(Send(bhttp::verb::get, "/api/models/alice/m/xet-write-token/main", Token("alice")).result_int(),
            403u);
  EXPECT_EQ(Send(bhttp::verb::get, "/api/buckets/alice/b/xet-write-token", Token("alice")).result_int(),
            403u);
  EXPECT_EQ(Send(bhttp::verb::get, "/api/models/alice/m/xet-read-token/main", Token("alice")).result_int(),
            200u);
  const auto third = xet::testing::SplitMix64Bytes(13, 5000);
  const auto built = ingest::BuildUpload(std::vector<std::span<const uint8_t>>{third});
  const auto& x = built.xorbs[0];
  auto repo = index_->FindRepo(index::RepoType::kModel, "alice", "m");
  ASSERT_TRUE(repo.ok());
  r = Send(bhttp::verb::post, "/v1/xorbs/default/" + x.hash.hex(), Token(repo->scope),
           std::string(reinterpret_cast<const char*>(x.body.data()), x.body.size()));
  EXPECT_EQ(r.result_int(), 403u) << r.body();
  EXPECT_FALSE(*index_->HasXorb(x.hash));
  r = Send(bhttp::verb::post, "/v1/xorbs/default/" + x.hash.hex(),
           Token("plain"),  // no repository's: no quota
           std::string(reinterpret_cast<const char*>(x.body.data()), x.body.size()));
  EXPECT_EQ(r.result_int(), 200u) << r.body();
  EXPECT_EQ(Commit("alice/m", Header("more") + FileLine("t.txt", "more")).result_int(), 403u);
  ASSERT_EQ(Commit("alice/m", Header("less") + DeleteLine("s.txt")).result_int(), 200u);
  // The metrics say the limit and what is charged.
  r = Send(bhttp::verb::get, "/metrics");
  EXPECT_NE(r.body().find("cairn_quota_limit_bytes{namespace=\"alice\"} 1\n"), std::string::npos) << r.body();
  EXPECT_NE(r.body().find("cairn_quota_used_bytes{namespace=\"alice\"}"), std::string::npos);
  // Raised again, uploads go on.
  ASSERT_TRUE(quota_->SetLimit(index::AuditActor{}, "alice", uint64_t{1} << 30).ok());
  EXPECT_EQ(Send(bhttp::verb::get, "/api/models/alice/m/xet-write-token/main", Token("alice")).result_int(),
            200u);
}

}  // namespace
}  // namespace cairn::api
