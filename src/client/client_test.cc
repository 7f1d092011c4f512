// cairn's own client (`cairn put` / `cairn get`) against the CAS routes in process: uploads that dedup within
// themselves and against the server, downloads verified whole and by range with one connection or several,
// and the failures a script sees (an unknown file, a refused token, a path that is not there); and what the
// HTTP client's requests carry (a DELETE no body).
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "api/api_test_server.h"
#include "api/cas_routes.h"
#include "client/downloader.h"
#include "client/uploader.h"
#include "net/http_client.h"
#include "xet/test_support.h"

namespace cairn::client {
using net::HttpClient;
namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<uint8_t>;

class ClientTest : public api::testing::ApiServerTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(OpenServer("cairn-client"));
    api::RegisterCasRoutes(*server_, *service_);
    server_->Start();
    files_ = dir_ / "files";
    fs::create_directories(files_);
  }

  std::string Token(http::Permission p) { return MintToken("org/repo", p); }
  std::string Write(const std::string& name, const Bytes& b) {
    const fs::path p = files_ / name;
    std::ofstream(p, std::ios::binary)
        .write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
    return p.string();
  }
  static Bytes ReadBack(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }
  UploadOptions Put(std::vector<std::string> paths) {
    UploadOptions o;
    o.endpoint = base_;
    o.token = Token(http::Permission::kWrite);
    o.paths = std::move(paths);
    o.attempts = 2;
    return o;
  }
  DownloadOptions Get(const xet::FileHash& file, const std::string& out, size_t parallel = 8) {
    DownloadOptions o;
    o.endpoint = base_;
    o.token = Token(http::Permission::kRead);
    o.file = file;
    o.output = out;
    o.parallel = parallel;
    o.attempts = 2;
    return o;
  }

  fs::path files_;
};

TEST_F(ClientTest, PutThenGetRoundTripsAndARepeatSendsNothing) {
  const Bytes noise = xet::testing::SplitMix64Bytes(1, (5 << 20) + 11);
  const Bytes text = xet::testing::TextLikeBytes(2, 3 << 20);
  Bytes repeats;  // its later parts are its first: dedup within the upload, terms naming one xorb's chunks
  const Bytes a = xet::testing::SplitMix64Bytes(3, 2 << 20);
  for (int i = 0; i < 5; ++i) {
    repeats.insert(repeats.end(), a.begin(), a.end());
    const Bytes gap = xet::testing::SplitMix64Bytes(10 + i, 300'000);
    repeats.insert(repeats.end(), gap.begin(), gap.end());
  }
  const std::vector<Bytes> contents = {noise, text, repeats, Bytes{}};
  std::vector<std::string> paths;
  for (size_t i = 0; i < contents.size(); ++i) paths.push_back(Write("f" + std::to_string(i), contents[i]));
  auto up = Upload(Put(paths));
  ASSERT_TRUE(up.ok()) << up.error().message;
  ASSERT_EQ(up->files.size(), contents.size());
  EXPECT_TRUE(up->shard_registered);
  EXPECT_GT(up->chunks_deduped, 0U);
  // The repeats were sent once (text compresses; noise does not).
  EXPECT_EQ(up->bytes_read, noise.size() + text.size() + repeats.size());
  EXPECT_LT(up->xorb_bytes_sent, noise.size() + text.size() + repeats.size() / 2);
  for (size_t i = 0; i < contents.size(); ++i) {
    EXPECT_EQ(up->files[i].size, contents[i].size());
    for (const size_t parallel : {size_t{1}, size_t{8}}) {
      const fs::path out = files_ / ("got" + std::to_string(i) + "-" + std::to_string(parallel));
      auto got = Download(Get(up->files[i].hash, out.string(), parallel));
      ASSERT_TRUE(got.ok()) << got.error().message;
      EXPECT_TRUE(got->verified);
      EXPECT_EQ(ReadBack(out), contents[i]) << "file " << i << ", " << parallel << " connections";
      EXPECT_FALSE(fs::exists(out.string() + ".cairn-part"));
    }
  }
  // A range, cut at no particular boundary.
  auto ranged = Get(up->files[2].hash, (files_ / "range").string());
  ranged.range = {{1'000'003, 7'654'321}};
  ASSERT_TRUE(Download(ranged).ok());
  EXPECT_EQ(ReadBack(files_ / "range"), Bytes(repeats.begin() + 1'000'003, repeats.begin() + 7'654'322));
  // The same files again: the server has every chunk, so no xorb is sent.
  auto again = Upload(Put(paths));
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_EQ(again->xorbs_sent, 0U);
  EXPECT_EQ(again->xorb_bytes_sent, 0U);
  for (size_t i = 0; i < contents.size(); ++i) EXPECT_EQ(again->files[i].hash, up->files[i].hash);
}

TEST_F(ClientTest, FailuresAScriptCanTellApart) {
  auto missing = Upload(Put({(files_ / "nothing-here").string()}));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
  // A read token cannot upload: the server's refusal, not a retry loop.
  auto opts = Put({Write("x", xet::testing::SplitMix64Bytes(4, 100'000))});
  opts.token = Token(http::Permission::kRead);
  auto refused = Upload(opts);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, ErrorCode::kMalformed) << refused.error().message;
  // A file the server does not have.
  xet::FileHash unknown;
  unknown.bytes.fill(0x5a);
  auto absent = Download(Get(unknown, (files_ / "absent").string()));
  ASSERT_FALSE(absent.ok());
  EXPECT_EQ(absent.error().code, ErrorCode::kNotFound) << absent.error().message;
  EXPECT_FALSE(fs::exists(files_ / "absent"));
}

// HttpClient's requests as a server sees them, from a route that answers with what came.
class HttpClientTest : public api::testing::ApiServerTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(OpenServer("cairn-http-client"));
    for (const auto verb : {http::Verb::delete_, http::Verb::post}) {
      server_->router().Handle(
          verb, "/echo", http::RouteOptions().Name("echo"), [](const std::shared_ptr<http::Exchange>& ex) {
            const http::Request& req = ex->request();
            ex->Respond(http::Response::Text(200, std::string(req.Header("Content-Length")) + "|" +
                                                      std::string(req.Header("Content-Type")) + "|" +
                                                      req.body));
          });
    }
    server_->Start();
  }
};

// A DELETE without a body sends none (libcurl would add Content-Length: 0 and a form Content-Type); a POST
// without one still says it is empty, and a body given goes with any method.
TEST_F(HttpClientTest, ABodyGoesOnlyWhereOneIsGivenOrExpected) {
  HttpClient http;
  auto r = http.Send("DELETE", base_ + "/echo", {});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "||");
  r = http.Send("POST", base_ + "/echo", {});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->body.substr(0, 2), "0|");
  r = http.Send("DELETE", base_ + "/echo", {"Content-Type: text/plain"}, "why");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->body, "3|text/plain|why");
}

}  // namespace
}  // namespace cairn::client
