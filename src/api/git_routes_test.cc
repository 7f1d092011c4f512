// The git routes in process: who may read (Basic with a token as password, Bearer, anonymous for public
// repositories, one 401 for private and missing ones), what each refusal answers, protocol v2 and v0
// advertisements, and a fetch whose request came gzipped; pushes refused from their header, bounded in
// flight and spooled; LFS uploads past the uploads gate. The packs themselves: git/upload_pack_test.cc.
#include "api/git_routes.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <boost/json.hpp>
#include <chrono>
#include <filesystem>
#include <thread>

#include "api/api_test_server.h"
#include "api/errors.h"
#include "api/lfs_routes.h"
#include "common/base64.h"
#include "git/pkt_line.h"
#include "git/test_git.h"
#include "http/test_util.h"
#include "ingest/shard_records.h"

namespace cairn::api {
namespace {

namespace bhttp = boost::beast::http;
using Res = bhttp::response<bhttp::string_body>;
using Headers = std::map<std::string, std::string>;

class GitApi : public testing::ApiServerTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(OpenServer("cairn-git-api"));
    files_ = std::make_unique<files::FileService>(*service_, *index_, FileOptions());
    hub::HubOptions ho;
    ho.clock = &clock_;
    hub_ = std::make_unique<hub::HubService>(*index_, *files_, ho);
    GitRouteOptions go;
    go.max_request_bytes = 64 << 10;
    go.max_inflated_bytes = 1 << 20;
    go.public_url = base_;
    go.spool_dir = (dir_ / "git-push").string();
    go.max_concurrent_pushes = 2;
    go.max_concurrent_fetches = 2;
    lfs::LfsOptions lo;
    lo.public_url = base_;
    lo.staging_dir = dir_ / "lfs-parts";
    lo.clock = &clock_;
    lfs_ = std::make_unique<lfs::LfsService>(*service_, *index_, lo);
    go.lfs = lfs_.get();
    RegisterGitRoutes(*server_, *hub_, *files_, *index_, go);
    RegisterLfsRoutes(*server_, *lfs_, {.uploads = uploads_});
    server_->Start();
    ASSERT_TRUE(hub_->CreateRepo(alice_, {index::RepoType::kModel, "alice", "open"}, false).ok());
    ASSERT_TRUE(hub_->CreateRepo(alice_, {index::RepoType::kModel, "alice", "secret"}, true).ok());
    ASSERT_TRUE(hub_->CreateRepo(alice_, {index::RepoType::kDataset, "alice", "data"}, false).ok());
  }
  void TearDown() override {
    StopServer();
    lfs_.reset();
    hub_.reset();
    files_.reset();
    ApiServerTest::TearDown();
  }

  Res Send(bhttp::verb verb, const std::string& target, const Headers& headers = {}, std::string body = {}) {
    http::testing::Client c(port_);
    bhttp::request<bhttp::string_body> req{verb, target, 11};
    for (const auto& [k, v] : headers) req.set(k, v);
    if (verb == bhttp::verb::post || verb == bhttp::verb::put) {
      req.body() = std::move(body);
      req.prepare_payload();
    }
    return c.Send(std::move(req));
  }
  static std::string Basic(const std::string& token) { return "Basic " + Base64Encode("git:" + token); }
  Res InfoRefs(const std::string& repo, const Headers& headers = {}) {
    return Send(bhttp::verb::get, "/" + repo + "/info/refs?service=git-upload-pack", headers);
  }
  std::string Head(const std::string& ns, const std::string& name,
                   index::RepoType type = index::RepoType::kModel) {
    auto repo = hub_->Open(alice_, {type, ns, name}, false);
    EXPECT_TRUE(repo.ok());
    return hub_->Resolve(*repo, "main")->hex();
  }
  static std::string FetchRequest(const std::string& want) {
    std::string out;
    git::AppendPkt(out, "command=fetch\n");
    git::AppendDelim(out);
    git::AppendPkt(out, "want " + want + "\n");
    git::AppendPkt(out, "done\n");
    git::AppendFlush(out);
    return out;
  }

  // A push's header with `headers` and a body of `length` bytes, of which none is sent: what the server
  // answers from the header alone (a read past 5 s fails the test rather than hang it).
  std::unique_ptr<http::testing::Client> PushHeader(const std::string& headers, uint64_t length) {
    auto c = std::make_unique<http::testing::Client>(port_);
    const timeval five{.tv_sec = 5, .tv_usec = 0};
    ::setsockopt(c->socket().native_handle(), SOL_SOCKET, SO_RCVTIMEO, &five, sizeof five);
    c->WriteRaw(
        "POST /alice/open/git-receive-pack HTTP/1.1\r\nHost: x\r\n"
        "Content-Type: application/x-git-receive-pack-request\r\n" +
        headers + "Content-Length: " + std::to_string(length) + "\r\n\r\n");
    return c;
  }

  std::unique_ptr<files::FileService> files_;
  std::unique_ptr<hub::HubService> hub_;
  std::unique_ptr<lfs::LfsService> lfs_;
  // Room for a test's sequential uploads (a slot is freed a moment after the answer reaches the client).
  const std::shared_ptr<http::AdmissionGate> uploads_ = std::make_shared<http::AdmissionGate>(kUploadSlots);
  static constexpr size_t kUploadSlots = 3;
  const hub::Caller alice_{"alice", true};
};

TEST_F(GitApi, PublicRepositoriesAdvertiseToAnyone) {
  auto v2 = InfoRefs("alice/open", {{"Git-Protocol", "version=2"}});
  ASSERT_EQ(v2.result_int(), 200u) << v2.body();
  EXPECT_EQ(v2[bhttp::field::content_type], "application/x-git-upload-pack-advertisement");
  EXPECT_EQ(v2[bhttp::field::cache_control], "no-cache, max-age=0, must-revalidate");
  EXPECT_TRUE(v2.body().starts_with("000eversion 2\n")) << v2.body();
  auto v0 = InfoRefs("alice/open.git");
  ASSERT_EQ(v0.result_int(), 200u);
  EXPECT_TRUE(v0.body().starts_with("001e# service=git-upload-pack\n0000")) << v0.body();
  EXPECT_NE(v0.body().find(Head("alice", "open") + " HEAD"), std::string::npos);
  auto dataset = InfoRefs("datasets/alice/data", {{"Git-Protocol", "version=2"}});
  EXPECT_EQ(dataset.result_int(), 200u);
}

TEST_F(GitApi, PrivateAndMissingLookAlikeWithoutAToken) {
  for (const std::string_view repo :
       {"alice/secret", "alice/nothing", "datasets/alice/nothing", "alice/bad..name", "buckets/alice/b"}) {
    auto r = InfoRefs(std::string(repo));
    EXPECT_EQ(r.result_int(), 401u) << repo;
    EXPECT_EQ(r[bhttp::field::www_authenticate], "Basic realm=\"cairn\"") << repo;
    EXPECT_EQ(r.body(), "Authentication required\n") << repo;
    auto post =
        Send(bhttp::verb::post, "/" + std::string(repo) + "/git-upload-pack",
             {{"Content-Type", "application/x-git-upload-pack-request"}}, FetchRequest(std::string(40, '0')));
    EXPECT_EQ(post.result_int(), 401u) << repo;
  }
  // The owner's token as a Basic password, or as a Bearer token: served.
  const std::string tok = MintToken("alice", http::Permission::kRead);
  EXPECT_EQ(InfoRefs("alice/secret", {{"Authorization", Basic(tok)}}).result_int(), 200u);
  EXPECT_EQ(InfoRefs("alice/secret", {{"Authorization", "Bearer " + tok}}).result_int(), 200u);
  // Another namespace's token: not found, as for a repository that does not exist.
  const std::string bob = Basic(MintToken("bob", http::Permission::kRead));
  EXPECT_EQ(InfoRefs("alice/secret", {{"Authorization", bob}}).result_int(), 404u);
  EXPECT_EQ(InfoRefs("alice/nothing", {{"Authorization", bob}}).result_int(), 404u);
  // Credentials that are no token, or no credentials git would send: 401, and git asks again.
  for (const std::string& bad :
       {Basic("not-a-token"), std::string("Basic !!!"), std::string("Basic ") + Base64Encode("only-user"),
        std::string("Digest x")}) {
    auto r = InfoRefs("alice/open", {{"Authorization", bad}});
    EXPECT_EQ(r.result_int(), 401u) << bad;
    EXPECT_EQ(r[bhttp::field::www_authenticate], "Basic realm=\"cairn\"");
  }
}

TEST_F(GitApi, WhatIsNotServedSaysSo) {
  auto dumb = Send(bhttp::verb::get, "/alice/open/info/refs");
  EXPECT_EQ(dumb.result_int(), 403u);
  // Push: credentials first (401 whatever the repository), then write access (403), then the refs.
  auto push = Send(bhttp::verb::get, "/alice/open/info/refs?service=git-receive-pack");
  EXPECT_EQ(push.result_int(), 401u);
  EXPECT_EQ(push[bhttp::field::www_authenticate], "Basic realm=\"cairn\"");
  EXPECT_EQ(Send(bhttp::verb::get, "/alice/nothing/info/refs?service=git-receive-pack").result_int(), 401u);
  const std::string read = Basic(MintToken("alice", http::Permission::kRead));
  EXPECT_EQ(
      Send(bhttp::verb::get, "/alice/open/info/refs?service=git-receive-pack", {{"Authorization", read}})
          .result_int(),
      403u);
  const std::string write = Basic(MintToken("alice", http::Permission::kWrite));
  auto ok =
      Send(bhttp::verb::get, "/alice/open/info/refs?service=git-receive-pack", {{"Authorization", write}});
  ASSERT_EQ(ok.result_int(), 200u);
  EXPECT_EQ(ok[bhttp::field::content_type], "application/x-git-receive-pack-advertisement");
  EXPECT_TRUE(ok.body().starts_with("001f# service=git-receive-pack\n0000")) << ok.body();
  EXPECT_NE(ok.body().find(Head("alice", "open") + " refs/heads/main"), std::string::npos);
  auto bad_type = Send(bhttp::verb::post, "/alice/open/git-receive-pack", {{"Authorization", write}}, "0000");
  EXPECT_EQ(bad_type.result_int(), 415u);
  // A push that deletes the default branch: refused in report-status, nothing changed.
  std::string cmd;
  git::AppendPkt(cmd, Head("alice", "open") + " " + std::string(40, '0') + " refs/heads/main" +
                          std::string(1, '\0') + "report-status\n");
  git::AppendFlush(cmd);
  auto del =
      Send(bhttp::verb::post, "/alice/open/git-receive-pack",
           {{"Authorization", write}, {"Content-Type", "application/x-git-receive-pack-request"}}, cmd);
  ASSERT_EQ(del.result_int(), 200u);
  EXPECT_NE(del.body().find("ng refs/heads/main the default branch cannot be deleted"), std::string::npos)
      << del.body();
  EXPECT_FALSE(Head("alice", "open").empty());
  auto junk = Send(bhttp::verb::post, "/alice/open/git-receive-pack",
                   {{"Authorization", write}, {"Content-Type", "application/x-git-receive-pack-request"}},
                   "0010nonsense");
  EXPECT_NE(junk.body().find("ERR "), std::string::npos) << junk.body();
  auto other = Send(bhttp::verb::get, "/alice/open/info/refs?service=git-upload-archive");
  EXPECT_EQ(other.result_int(), 403u);
  auto type = Send(bhttp::verb::post, "/alice/open/git-upload-pack", {{"Content-Type", "text/plain"}},
                   FetchRequest(Head("alice", "open")));
  EXPECT_EQ(type.result_int(), 415u);
  auto big = Send(bhttp::verb::post, "/alice/open/git-upload-pack",
                  {{"Content-Type", "application/x-git-upload-pack-request"}}, std::string(65 << 10, '0'));
  EXPECT_EQ(big.result_int(), 413u);
}

TEST_F(GitApi, AFetchAnswersAPackOrAnErrLine) {
  const Headers v2{{"Content-Type", "application/x-git-upload-pack-request"}, {"Git-Protocol", "version=2"}};
  auto r = Send(bhttp::verb::post, "/alice/open/git-upload-pack", v2, FetchRequest(Head("alice", "open")));
  ASSERT_EQ(r.result_int(), 200u) << r.body();
  EXPECT_EQ(r[bhttp::field::content_type], "application/x-git-upload-pack-result");
  EXPECT_TRUE(r.body().starts_with("000dpackfile\n")) << r.body().substr(0, 40);
  EXPECT_NE(r.body().find("PACK"), std::string::npos);
  // A request git could not have sent: 200 with git's ERR line, which git prints as the remote's error.
  auto bad = Send(bhttp::verb::post, "/alice/open/git-upload-pack", v2, FetchRequest(std::string(40, '0')));
  ASSERT_EQ(bad.result_int(), 200u);
  EXPECT_TRUE(bad.body().starts_with("0050ERR not our ref 0000000000000000000000000000000000000000\n") ||
              bad.body().find("ERR not our ref") != std::string::npos)
      << bad.body();
  auto garbage = Send(bhttp::verb::post, "/alice/open/git-upload-pack", v2, "zzzz");
  ASSERT_EQ(garbage.result_int(), 200u);
  EXPECT_NE(garbage.body().find("ERR pkt-line"), std::string::npos) << garbage.body();
}

// A push that will be refused is refused from its header: not a byte of its 256 MiB body is read (the
// client sends none and gets its answer). The attacker's probe of issue 45 item 1.
TEST_F(GitApi, APushIsRefusedFromItsHeader) {
  constexpr uint64_t k256MiB = 256ULL << 20;
  const auto answer = [&](const std::string& headers) {
    auto c = PushHeader(headers, k256MiB);
    return c->Read();
  };
  auto anonymous = answer("");
  EXPECT_EQ(anonymous.result_int(), 401u);
  EXPECT_EQ(anonymous[bhttp::field::www_authenticate], "Basic realm=\"cairn\"");
  EXPECT_EQ(answer("Authorization: Basic Z2l0OmdhcmJhZ2U=\r\n").result_int(), 401u);  // git:garbage
  EXPECT_EQ(answer("Authorization: " + Basic("") + "\r\n").result_int(), 401u);
  EXPECT_EQ(
      answer("Authorization: " + Basic(MintToken("alice", http::Permission::kRead)) + "\r\n").result_int(),
      403u);
  // A CAS token (what xet-write-token hands out) pushes nothing.
  const auto cas = http::MintToken(testing::kTestJwtKey,
                                   {"hub:alice-open", http::Permission::kWrite, http::TokenKind::kCas},
                                   std::chrono::hours(1), clock_.UnixSeconds());
  ASSERT_TRUE(cas);
  EXPECT_EQ(answer("Authorization: Bearer " + *cas + "\r\n").result_int(), 401u);
  // A write token of another namespace: the repository's answer, still before the body.
  EXPECT_EQ(
      answer("Authorization: " + Basic(MintToken("bob", http::Permission::kWrite)) + "\r\n").result_int(),
      403u);
  // Past max_push_bytes (512 MiB): 413 from Content-Length.
  auto huge = PushHeader("Authorization: " + Basic(MintToken("alice", http::Permission::kWrite)) + "\r\n",
                         1ULL << 30);
  EXPECT_EQ(huge->Read().result_int(), 413u);
}

// Pushes in flight are bounded (here 2): the next one is answered 503 with Retry-After from its header, and a
// push is served once a slot is free again.
TEST_F(GitApi, PushesInFlightAreBounded) {
  const std::string token = Basic(MintToken("alice", http::Permission::kWrite));
  const std::string write = "Authorization: " + token + "\r\n";
  auto first = PushHeader(write, 1 << 20);
  auto second = PushHeader(write, 1 << 20);
  first->WriteRaw("0000");
  second->WriteRaw("0000");
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // both admitted (their headers read)
  auto third = PushHeader(write, 1 << 20);
  auto busy = third->Read();
  EXPECT_EQ(busy.result_int(), 503u) << busy.body();
  EXPECT_EQ(busy[bhttp::field::retry_after], "1");
  first.reset();  // gone: its slot is freed
  second.reset();
  std::string cmd;
  git::AppendPkt(cmd, Head("alice", "open") + " " + std::string(40, '0') + " refs/heads/main" +
                          std::string(1, '\0') + "report-status\n");
  git::AppendFlush(cmd);
  for (int attempt = 0;; ++attempt) {  // the server notices the closed connections as it reads them
    auto r =
        Send(bhttp::verb::post, "/alice/open/git-receive-pack",
             {{"Authorization", token}, {"Content-Type", "application/x-git-receive-pack-request"}}, cmd);
    if (r.result_int() == 503 && attempt < 100) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      continue;
    }
    ASSERT_EQ(r.result_int(), 200u) << r.body();
    EXPECT_NE(r.body().find("ng refs/heads/main"), std::string::npos) << r.body();
    break;
  }
}

// Fetch requests, whose bodies are held in memory, are bounded too (here 2): anonymous readers of a public
// repository cannot make the server hold a body for each of their connections.
TEST_F(GitApi, FetchesInFlightAreBounded) {
  const auto start = [&] {
    auto c = std::make_unique<http::testing::Client>(port_);
    const timeval five{.tv_sec = 5, .tv_usec = 0};
    ::setsockopt(c->socket().native_handle(), SOL_SOCKET, SO_RCVTIMEO, &five, sizeof five);
    c->WriteRaw(
        "POST /alice/open/git-upload-pack HTTP/1.1\r\nHost: x\r\n"
        "Content-Type: application/x-git-upload-pack-request\r\nContent-Length: 60000\r\n\r\n0000");
    return c;
  };
  auto first = start();
  auto second = start();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // both admitted (their headers read)
  auto busy = start()->Read();
  EXPECT_EQ(busy.result_int(), 503u) << busy.body();
  EXPECT_EQ(busy[bhttp::field::retry_after], "1");
}

// A push's body goes to an unnamed spool file, streamed in batches: one larger than a batch is read whole and
// answered (here an ERR line: it is not a pack), and nothing is left in the spool directory.
TEST_F(GitApi, APushBodyIsSpooledNotHeld) {
  const std::string write = Basic(MintToken("alice", http::Permission::kWrite));
  std::string body;
  git::AppendPkt(body, Head("alice", "open") + " " + std::string(40, 'a') + " refs/heads/main" +
                           std::string(1, '\0') + "report-status\n");
  git::AppendFlush(body);
  body += "PACK" + std::string(9 << 20, 'x');  // more than two of the sink's 4 MiB batches
  auto r = Send(bhttp::verb::post, "/alice/open/git-receive-pack",
                {{"Authorization", write}, {"Content-Type", "application/x-git-receive-pack-request"}}, body);
  ASSERT_EQ(r.result_int(), 200u) << r.body();
  EXPECT_TRUE(r.body().find("ERR ") != std::string::npos || r.body().find("unpack ") != std::string::npos)
      << r.body().substr(0, 200);
  EXPECT_TRUE(std::filesystem::is_empty(dir_ / "git-push"));
  EXPECT_FALSE(Head("alice", "open").empty());
}

// git-lfs uploads enter the uploads gate (here of 3): past it, 503 with Retry-After before the body is read;
// a forged link is refused before it takes a slot. Issue 45 item 4.
TEST_F(GitApi, LfsUploadsPastTheLimitAreTurnedAway) {
  const std::string data(300000, 'z');
  const std::string oid =
      ingest::ShardSha256Of({reinterpret_cast<const uint8_t*>(data.data()), data.size()}).hex();
  Headers lfs{{"Content-Type", "application/vnd.git-lfs+json"},
              {"Authorization", Basic(MintToken("alice", http::Permission::kWrite))}};
  auto r = Send(bhttp::verb::post, "/alice/open.git/info/lfs/objects/batch", lfs,
                R"({"operation":"upload","objects":[{"oid":")" + oid + R"(","size":300000}]})");
  ASSERT_EQ(r.result_int(), 200u) << r.body();
  const auto answer = boost::json::parse(r.body()).as_object();
  const auto& actions = answer.at("objects").as_array()[0].as_object().at("actions").as_object();
  const std::string put = std::string(actions.at("upload").at("href").as_string()).substr(base_.size());
  const auto start = [&](const std::string& target) {
    auto c = std::make_unique<http::testing::Client>(port_);
    const timeval five{.tv_sec = 5, .tv_usec = 0};
    ::setsockopt(c->socket().native_handle(), SOL_SOCKET, SO_RCVTIMEO, &five, sizeof five);
    c->WriteRaw("PUT " + target + " HTTP/1.1\r\nHost: x\r\nContent-Length: 300000\r\n\r\nzzzz");
    return c;
  };
  std::vector<std::unique_ptr<http::testing::Client>> holders;  // their bodies trickle: they hold every slot
  for (size_t i = 0; i < kUploadSlots; ++i) holders.push_back(start(put));
  for (int i = 0; i < 200 && uploads_->in_flight() < kUploadSlots; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(uploads_->in_flight(), kUploadSlots);
  auto busy = start(put)->Read();
  EXPECT_EQ(busy.result_int(), 503u) << busy.body();
  EXPECT_EQ(busy[bhttp::field::retry_after], "1");
  std::string forged = put;
  forged.back() = forged.back() == '0' ? '1' : '0';
  EXPECT_EQ(start(forged)->Read().result_int(), HttpStatusOf(ErrorCode::kDenied));
  holders[0]->WriteRaw(data.substr(4));
  EXPECT_EQ(holders[0]->Read().result_int(), 200u);
}

TEST_F(GitApi, LfsBatchAnswersEachObjectOrRefusesTheBatch) {
  const Headers lfs{{"Content-Type", "application/vnd.git-lfs+json"},
                    {"Accept", "application/vnd.git-lfs+json"}};
  const std::string oid(64, 'a');
  const std::string download =
      R"({"operation":"download","transfers":["basic"],"objects":[{"oid":")" + oid + R"(","size":5}]})";
  auto r = Send(bhttp::verb::post, "/alice/open.git/info/lfs/objects/batch", lfs, download);
  ASSERT_EQ(r.result_int(), 200u) << r.body();
  EXPECT_EQ(r[bhttp::field::content_type], "application/vnd.git-lfs+json");
  EXPECT_EQ(
      r.body(),
      R"({"transfer":"basic","objects":[{"oid":")" + oid +
          R"(","size":5,"error":{"code":404,"message":"Object does not exist"}}],"hash_algo":"sha256"})");
  // The repository's rules before the body's: anonymous and private (or missing) is 401.
  EXPECT_EQ(Send(bhttp::verb::post, "/alice/secret.git/info/lfs/objects/batch", lfs, download).result_int(),
            401u);
  EXPECT_EQ(
      Send(bhttp::verb::post, "/datasets/alice/data.git/info/lfs/objects/batch", lfs, download).result_int(),
      200u);
  const auto status = [&](const std::string& body) {
    return Send(bhttp::verb::post, "/alice/open.git/info/lfs/objects/batch", lfs, body).result_int();
  };
  EXPECT_EQ(status("{}"), 422u);
  EXPECT_EQ(status(R"({"operation":"download","objects":[{"oid":"XYZ","size":1}]})"), 422u);
  EXPECT_EQ(status(R"({"operation":"download","transfers":["tus"],"objects":[]})"), 422u);
  EXPECT_EQ(status(R"({"operation":"download","hash_algo":"sha512","objects":[]})"), 409u);
  EXPECT_EQ(status(R"({"operation":"upload","objects":[]})"), 401u);  // an upload needs credentials
}

TEST_F(GitApi, LfsUploadsGoThroughSignedLinks) {
  const Headers anon{{"Content-Type", "application/vnd.git-lfs+json"}};
  Headers lfs = anon;
  lfs["Authorization"] = Basic(MintToken("alice", http::Permission::kWrite));
  const std::string data(300000, 'x');
  const std::string oid =
      ingest::ShardSha256Of({reinterpret_cast<const uint8_t*>(data.data()), data.size()}).hex();
  const std::string batch = R"({"operation":"upload","transfers":["basic","multipart"],"objects":[{"oid":")" +
                            oid + R"(","size":)" + std::to_string(data.size()) + "}]}";
  const std::string path = "/alice/open.git/info/lfs/objects/batch";
  EXPECT_EQ(Send(bhttp::verb::post, path, anon, batch).result_int(), 401u);
  Headers read = anon;
  read["Authorization"] = Basic(MintToken("alice", http::Permission::kRead));
  EXPECT_EQ(Send(bhttp::verb::post, path, read, batch).result_int(), 403u);

  auto r = Send(bhttp::verb::post, path, lfs, batch);
  ASSERT_EQ(r.result_int(), 200u) << r.body();
  const auto answer = boost::json::parse(r.body()).as_object();
  EXPECT_EQ(answer.at("transfer"), "basic");
  const auto& actions = answer.at("objects").as_array()[0].as_object().at("actions").as_object();
  const std::string upload(actions.at("upload").at("href").as_string());
  const std::string verify(actions.at("verify").at("href").as_string());
  ASSERT_TRUE(upload.starts_with(base_ + "/v1/lfs/" + oid + "?")) << upload;
  const std::string put = upload.substr(base_.size());
  const std::string check = verify.substr(base_.size());
  const std::string object = R"({"oid":")" + oid + R"(","size":300000})";

  EXPECT_EQ(Send(bhttp::verb::post, check, {}, object).result_int(), 404u);  // not yet
  EXPECT_EQ(Send(bhttp::verb::put, put, {}, std::string(data.size(), 'y')).result_int(),
            HttpStatusOf(ErrorCode::kHashMismatch));
  EXPECT_EQ(Send(bhttp::verb::put, put, {}, data.substr(1)).result_int(),
            HttpStatusOf(ErrorCode::kMalformed));
  std::string forged = put;
  forged[forged.size() - 1] = forged.back() == '0' ? '1' : '0';
  EXPECT_EQ(Send(bhttp::verb::put, forged, {}, data).result_int(), HttpStatusOf(ErrorCode::kDenied));
  EXPECT_EQ(Send(bhttp::verb::put, "/v1/lfs/" + oid, {}, data).result_int(),
            HttpStatusOf(ErrorCode::kMalformed));
  auto stored = Send(bhttp::verb::put, put, {}, data);
  ASSERT_EQ(stored.result_int(), 200u) << stored.body();
  EXPECT_EQ(Send(bhttp::verb::post, check, {}, object).result_int(), 200u);
  EXPECT_EQ(Send(bhttp::verb::post, check, {}, "{}").result_int(), 422u);
  // Asked again: held already, so no actions.
  auto again = boost::json::parse(Send(bhttp::verb::post, path, lfs, batch).body()).as_object();
  EXPECT_FALSE(again.at("objects").as_array()[0].as_object().contains("actions"));
  // A client offering Xet is sent to the CAS.
  std::string xet = batch;
  xet.replace(xet.find(R"("multipart"])"), 12, R"("multipart","xet"])");
  auto x = boost::json::parse(Send(bhttp::verb::post, path, lfs, xet).body()).as_object();
  EXPECT_EQ(x.at("transfer"), "xet");
  // Parts and their completion: refused when out of range or malformed.
  const std::string query = put.substr(put.find('?'));
  EXPECT_EQ(Send(bhttp::verb::put, "/v1/lfs/" + oid + "/parts/0" + query, {}, data).result_int(),
            HttpStatusOf(ErrorCode::kMalformed));
  EXPECT_EQ(Send(bhttp::verb::put, "/v1/lfs/" + oid + "/parts/x" + query, {}, data).result_int(), 400u);
  EXPECT_EQ(Send(bhttp::verb::post, put, {}, "nonsense").result_int(), 422u);
  EXPECT_EQ(Send(bhttp::verb::post, put, {}, R"({"oid":")" + oid + R"(","parts":[]})").result_int(),
            HttpStatusOf(ErrorCode::kMalformed));
  // git-lfs's lock check before a push: no locks, for a writer.
  auto locks = Send(bhttp::verb::post, "/alice/open.git/info/lfs/locks/verify", lfs, "{}");
  EXPECT_EQ(locks.result_int(), 200u);
  EXPECT_EQ(locks.body(), R"({"ours":[],"theirs":[]})");
  EXPECT_EQ(Send(bhttp::verb::post, "/alice/open.git/info/lfs/locks/verify", anon, "{}").result_int(), 401u);
}

TEST_F(GitApi, AGzippedRequestIsInflatedWithinItsBound) {
  const Headers gz{{"Content-Type", "application/x-git-upload-pack-request"},
                   {"Git-Protocol", "version=2"},
                   {"Content-Encoding", "gzip"}};
  auto r = Send(bhttp::verb::post, "/alice/open/git-upload-pack", gz,
                git::testing::Gzip(FetchRequest(Head("alice", "open"))));
  ASSERT_EQ(r.result_int(), 200u);
  EXPECT_TRUE(r.body().starts_with("000dpackfile\n"));
  // 16 MiB of zeros in 16 KiB: refused at the bound (1 MiB here), having inflated no more than it.
  auto bomb = Send(bhttp::verb::post, "/alice/open/git-upload-pack", gz,
                   git::testing::Gzip(std::string(16 << 20, '\0')));
  ASSERT_EQ(bomb.result_int(), 200u);
  EXPECT_NE(bomb.body().find("ERR the request inflates past"), std::string::npos) << bomb.body();
  auto broken = Send(bhttp::verb::post, "/alice/open/git-upload-pack", gz, "not gzip");
  EXPECT_NE(broken.body().find("ERR the request's gzip stream is broken"), std::string::npos)
      << broken.body();
}

}  // namespace
}  // namespace cairn::api
