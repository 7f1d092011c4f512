// The plain-file routes in process: a real http::Server serving RegisterCasRoutes and RegisterFileRoutes over
// a real CasService and FileService (local-disk store, SQLite index), every route and every status it
// answers.
#include "api/file_routes.h"

#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <filesystem>
#include <set>

#include "api/api_test_server.h"
#include "api/cas_routes.h"
#include "cas/test_backend.h"
#include "http/test_util.h"
#include "ingest/upload_builder.h"
#include "xet/test_support.h"

namespace cairn::api {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;
namespace json = boost::json;
namespace bhttp = boost::beast::http;
using Bytes = std::vector<uint8_t>;
using Res = bhttp::response<bhttp::string_body>;

std::string Str(const Bytes& b) {
  return {reinterpret_cast<const char*>(b.data()), b.size()};
}

class FileApi : public testing::ApiServerTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(OpenServer("cairn-file-api"));
    cas_ = service_.get();
    files::FileServiceOptions fo = FileOptions();
    fo.read_ahead = {2, 256 << 10, 8 << 20};
    files_ = std::make_unique<files::FileService>(*cas_, *index_, fo);
    RegisterCasRoutes(*server_, *cas_);
    RegisterFileRoutes(*server_, *files_, *index_, {.public_url = base_});
    server_->Start();

    // Three files: 3 MiB over several xorbs, 1000 bytes, and an empty one.
    data_ = {xet::testing::SplitMix64Bytes(1, (3 << 20) + 17), xet::testing::SplitMix64Bytes(2, 1000), {}};
    std::vector<std::span<const uint8_t>> spans(data_.begin(), data_.end());
    ingest::BuildOptions bo;
    bo.max_xorb_bytes = 1 << 20;
    built_ = ingest::BuildUpload(spans, bo);
    for (const auto& x : built_.xorbs) ASSERT_TRUE(cas_->PutXorb(x.hash, x.body).ok());
    ASSERT_TRUE(cas_->PutShard(built_.shard_bytes, "org/repo").ok());
    url_ = "/v1/files/" + built_.file_hashes[0].hex();
  }

  void TearDown() override {
    StopServer();  // before what its routes use
    files_.reset();
    ApiServerTest::TearDown();
  }

  Res Send(bhttp::verb verb, const std::string& target,
           const std::map<std::string, std::string>& headers = {}, std::string body = {}) {
    http::testing::Client c(port_);
    bhttp::request<bhttp::string_body> req{verb, target, 11};
    for (const auto& [k, v] : headers) req.set(k, v);
    if (verb == bhttp::verb::post) req.body() = std::move(body);
    return c.Send(std::move(req));
  }
  std::string Token(const std::string& scope = "org/repo") {
    return "Bearer " + MintToken(scope, http::Permission::kRead);
  }
  std::map<std::string, std::string> Auth(std::map<std::string, std::string> more = {}) {
    more["Authorization"] = Token();
    return more;
  }
  std::map<std::string, std::string> Writer(const std::string& scope = "org/repo") {
    return {{"Authorization", "Bearer " + MintToken(scope, http::Permission::kWrite)}};
  }
  // The hashes GET /v1/files lists for a read token of `scope`, and its totals' file count.
  std::pair<std::set<std::string>, uint64_t> Listed(const std::string& scope = "org/repo") {
    auto r = Send(bhttp::verb::get, "/v1/files", {{"Authorization", Token(scope)}});
    EXPECT_EQ(r.result_int(), 200u) << r.body();
    if (r.result_int() != 200) return {};
    const json::object page = json::parse(r.body()).as_object();
    std::set<std::string> hashes;
    for (const auto& f : page.at("files").as_array()) hashes.emplace(f.at("hash").as_string());
    return {hashes, page.at("totals").at("files").to_number<uint64_t>()};
  }

  cas::CasService* cas_ = nullptr;  // the base's service_
  std::unique_ptr<files::FileService> files_;
  std::vector<Bytes> data_;
  ingest::BuiltUpload built_;
  std::string url_;
};

TEST_F(FileApi, WholeFilesRangesAndHead) {
  auto r = Send(bhttp::verb::get, url_, Auth());
  ASSERT_EQ(r.result_int(), 200u) << r.body();
  EXPECT_EQ(r.body(), Str(data_[0]));
  EXPECT_EQ(r["ETag"], "\"" + built_.file_hashes[0].hex() + "\"");
  EXPECT_EQ(r["Accept-Ranges"], "bytes");
  r = Send(bhttp::verb::get, url_, Auth({{"Range", "bytes=1048570-1048580"}}));
  ASSERT_EQ(r.result_int(), 206u);
  EXPECT_EQ(r.body(), Str(data_[0]).substr(1048570, 11));
  EXPECT_EQ(r["Content-Range"], "bytes 1048570-1048580/" + std::to_string(data_[0].size()));
  r = Send(bhttp::verb::get, url_, Auth({{"Range", "bytes=0-1,-3"}}));
  ASSERT_EQ(r.result_int(), 206u);
  EXPECT_EQ(std::string(r["Content-Type"]).rfind("multipart/byteranges; boundary=", 0), 0u);
  EXPECT_NE(r.body().find(Str(data_[0]).substr(0, 2)), std::string::npos);
  EXPECT_NE(r.body().find(Str(data_[0]).substr(data_[0].size() - 3)), std::string::npos);
  r = Send(bhttp::verb::head, url_, Auth());
  EXPECT_EQ(r.result_int(), 200u);
  EXPECT_EQ(r["Content-Length"], std::to_string(data_[0].size()));
  EXPECT_TRUE(r.body().empty());
  // By SHA-256 (the shard's, as the builder computed it).
  const auto& sha = built_.shard.files[1].sha256;
  ASSERT_TRUE(sha.has_value());
  r = Send(bhttp::verb::get, "/v1/files/by-sha256/" + sha->hex(), Auth());
  ASSERT_EQ(r.result_int(), 200u) << r.body();
  EXPECT_EQ(r.body(), Str(data_[1]));
  EXPECT_EQ(Send(bhttp::verb::get, "/v1/files/by-sha256/" + std::string(64, 'a'), Auth()).result_int(), 404u);
  // The empty file: 200 with no body; any range of it is unsatisfiable.
  const std::string empty = "/v1/files/" + built_.file_hashes[2].hex();
  r = Send(bhttp::verb::get, empty, Auth());
  EXPECT_EQ(r.result_int(), 200u) << r.body();
  EXPECT_TRUE(r.body().empty());
  EXPECT_EQ(Send(bhttp::verb::get, empty, Auth({{"Range", "bytes=0-"}})).result_int(), 416u);
  EXPECT_EQ(Send(bhttp::verb::get, "/v1/files/by-sha256/nope", Auth()).result_int(), 400u);
}

TEST_F(FileApi, ConditionalRequests) {
  const std::string etag = "\"" + built_.file_hashes[0].hex() + "\"";
  EXPECT_EQ(Send(bhttp::verb::get, url_, Auth({{"If-None-Match", etag}})).result_int(), 304u);
  EXPECT_EQ(Send(bhttp::verb::get, url_, Auth({{"If-None-Match", "*"}})).result_int(), 304u);
  EXPECT_EQ(Send(bhttp::verb::get, url_, Auth({{"If-None-Match", "\"other\""}})).result_int(), 200u);
  auto r = Send(bhttp::verb::get, url_, Auth({{"Range", "bytes=0-9"}, {"If-Range", etag}}));
  EXPECT_EQ(r.result_int(), 206u);
  r = Send(bhttp::verb::get, url_, Auth({{"Range", "bytes=0-9"}, {"If-Range", "\"other\""}}));
  EXPECT_EQ(r.result_int(), 200u);
  EXPECT_EQ(r.body().size(), data_[0].size());
}

TEST_F(FileApi, ErrorStatuses) {
  EXPECT_EQ(Send(bhttp::verb::get, url_).result_int(), 401u);
  EXPECT_EQ(Send(bhttp::verb::get, url_, {{"Authorization", "Bearer nope"}}).result_int(), 401u);
  EXPECT_EQ(Send(bhttp::verb::get, url_, {{"Authorization", Token("org/other")}}).result_int(), 404u);
  EXPECT_EQ(Send(bhttp::verb::get, "/v1/files/" + std::string(64, 'b'), Auth()).result_int(), 404u);
  EXPECT_EQ(Send(bhttp::verb::get, "/v1/files/xyz", Auth()).result_int(), 400u);
  EXPECT_EQ(Send(bhttp::verb::get, url_, Auth({{"Range", "bytes=x-y"}})).result_int(), 400u);
  auto r = Send(bhttp::verb::get, url_, Auth({{"Range", "bytes=99999999-"}}));
  EXPECT_EQ(r.result_int(), 416u);
  EXPECT_EQ(r["Content-Range"], "bytes */" + std::to_string(data_[0].size()));
  EXPECT_EQ(Send(bhttp::verb::post, url_, Auth()).result_int(), 405u);
}

TEST_F(FileApi, LinksAreMintedCheckedAndExpire) {
  const std::string body =
      R"({"file_hash":")" + built_.file_hashes[1].hex() + R"(","ttl_seconds":60,"name":"a b.bin"})";
  auto r = Send(bhttp::verb::post, "/v1/links", Auth(), body);
  ASSERT_EQ(r.result_int(), 201u) << r.body();
  const std::string url = std::string(json::parse(r.body()).at("url").as_string());
  ASSERT_EQ(url.rfind(base_, 0), 0u);
  const std::string target = url.substr(base_.size());
  r = Send(bhttp::verb::get, target);
  ASSERT_EQ(r.result_int(), 200u) << r.body();
  EXPECT_EQ(r.body(), Str(data_[1]));
  EXPECT_EQ(r["Content-Disposition"], "attachment; filename=\"a b.bin\"; filename*=UTF-8''a%20b.bin");
  // Tampered: another file under the same signature; a changed signature.
  EXPECT_EQ(
      Send(bhttp::verb::get, "/v1/files/" + built_.file_hashes[0].hex() + target.substr(target.find('?')))
          .result_int(),
      403u);
  EXPECT_EQ(Send(bhttp::verb::get, target.substr(0, target.size() - 1) + (target.back() == '0' ? "1" : "0"))
                .result_int(),
            403u);
  EXPECT_EQ(Send(bhttp::verb::get, url_ + "?s=00").result_int(),
            400u);  // a link without its other parameters
  clock_.Advance(61);
  EXPECT_EQ(Send(bhttp::verb::get, target).result_int(), 403u);  // expired
  // Minting: bad bodies, too long a life, a file the scope does not see, no token.
  EXPECT_EQ(Send(bhttp::verb::post, "/v1/links", Auth(), "{").result_int(), 400u);
  EXPECT_EQ(Send(bhttp::verb::post, "/v1/links", Auth(), R"({"file_hash":"zz"})").result_int(), 400u);
  EXPECT_EQ(Send(bhttp::verb::post, "/v1/links", Auth(),
                 R"({"file_hash":")" + built_.file_hashes[1].hex() + R"(","ttl_seconds":999999999})")
                .result_int(),
            400u);
  EXPECT_EQ(Send(bhttp::verb::post, "/v1/links", {{"Authorization", Token("org/other")}}, body).result_int(),
            404u);
  EXPECT_EQ(Send(bhttp::verb::post, "/v1/links", {}, body).result_int(), 401u);
}

TEST_F(FileApi, Listing) {
  auto r = Send(bhttp::verb::get, "/v1/files?limit=1", Auth());
  ASSERT_EQ(r.result_int(), 200u) << r.body();
  const json::object first = json::parse(r.body()).as_object();
  EXPECT_EQ(first.at("files").as_array().size(), 1u);
  EXPECT_EQ(first.at("totals").at("files").to_number<uint64_t>(), 3u);
  EXPECT_EQ(first.at("totals").at("bytes").to_number<uint64_t>(), data_[0].size() + data_[1].size());
  const std::string cursor(first.at("next_cursor").as_string());
  r = Send(bhttp::verb::get, "/v1/files?limit=2&cursor=" + cursor, Auth());
  const json::object second = json::parse(r.body()).as_object();
  EXPECT_EQ(second.at("files").as_array().size(), 2u);
  EXPECT_TRUE(second.at("next_cursor").is_null());
  EXPECT_FALSE(second.contains("totals"));
  EXPECT_EQ(Send(bhttp::verb::get, "/v1/files?cursor=12", Auth()).result_int(), 400u);
  EXPECT_EQ(Send(bhttp::verb::get, "/v1/files?limit=10000", Auth()).result_int(), 400u);
  EXPECT_EQ(Send(bhttp::verb::get, "/v1/files").result_int(), 401u);
}

// DELETE takes a file from the token's scope alone: 204 (no body), then 404 as for a file never stored; the
// scope's listing, totals and downloads lose it, another scope keeps it. What is refused changes nothing.
TEST_F(FileApi, DeleteTakesAFileFromTheTokensScopeOnly) {
  const std::string h0 = built_.file_hashes[0].hex();
  ASSERT_TRUE(cas_->PutShard(built_.shard_bytes, "org/other").ok());
  EXPECT_EQ(Send(bhttp::verb::delete_, url_).result_int(), 401u);
  auto r = Send(bhttp::verb::delete_, url_, Auth());  // a read token
  EXPECT_EQ(r.result_int(), 403u) << r.body();
  r = Send(bhttp::verb::delete_, "/v1/files/xyz", Writer());
  EXPECT_EQ(r.result_int(), 400u) << r.body();
  EXPECT_EQ(json::parse(r.body()).at("error").as_string(), "file hash must be 64 hex digits");
  const auto never = Send(bhttp::verb::delete_, "/v1/files/" + std::string(64, 'b'), Writer());
  EXPECT_EQ(never.result_int(), 404u) << never.body();
  EXPECT_EQ(Listed().first.count(h0), 1u);

  r = Send(bhttp::verb::delete_, url_, Writer());
  EXPECT_EQ(r.result_int(), 204u) << r.body();
  EXPECT_TRUE(r.body().empty());
  EXPECT_EQ(r.count(bhttp::field::content_length), 0u);  // RFC 9110 8.6
  r = Send(bhttp::verb::delete_, url_, Writer());
  EXPECT_EQ(r.result_int(), 404u) << r.body();
  EXPECT_EQ(json::parse(r.body()).at("error").as_string(), "file " + h0 + " is unknown");

  const auto [hashes, files] = Listed();
  EXPECT_EQ(hashes, (std::set<std::string>{built_.file_hashes[1].hex(), built_.file_hashes[2].hex()}));
  EXPECT_EQ(files, 2u);
  EXPECT_EQ(Send(bhttp::verb::get, url_, Auth()).result_int(), 404u);
  EXPECT_EQ(Send(bhttp::verb::get, url_, {{"Authorization", Token("org/other")}}).result_int(), 200u);
  EXPECT_EQ(Listed("org/other").first.count(h0), 1u);
}

// A repository's scopes, write and read, are refused with 409 whatever the file: their files leave with
// commits and with the repository, and stay visible here.
TEST_F(FileApi, DeleteRefusesARepositorysScopes) {
  index::NewRepo repo;
  repo.ns = "alice";
  repo.name = "m";
  repo.scope = "repo-write";
  repo.read_scope = "repo-read";
  ASSERT_TRUE(index_->CreateRepo(repo).ok());
  ASSERT_TRUE(cas_->PutShard(built_.shard_bytes, repo.scope).ok());
  ASSERT_TRUE(index_->ShareFile(built_.file_hashes[0], repo.read_scope).ok());
  for (const std::string& scope : {repo.scope, repo.read_scope}) {
    SCOPED_TRACE(scope);
    for (const std::string& target : {url_, "/v1/files/" + std::string(64, 'b')}) {
      auto r = Send(bhttp::verb::delete_, target, Writer(scope));
      EXPECT_EQ(r.result_int(), 409u) << r.body();
      EXPECT_NE(json::parse(r.body()).at("error").as_string().find("repository"), std::string::npos);
    }
    EXPECT_TRUE(*index_->FileVisibleTo(built_.file_hashes[0], scope));
  }
}

TEST_F(FileApi, CorruptFirstChunkIsA500BeforeAnyHeader) {
  const auto& x = built_.xorbs[0];
  const fs::path path = store_->PathOf(store::BlobKind::kXorb, x.hash);
  ASSERT_TRUE(xet::testing::FlipByte(path, xet::kChunkHeaderSize + 3, 0x55));
  auto r = Send(bhttp::verb::get, url_, Auth());
  EXPECT_EQ(r.result_int(), 500u);
  EXPECT_NE(r.body().find("corrupt"), std::string::npos) << r.body();
  EXPECT_GE(files_->corrupt_chunks(), 1u);
  EXPECT_NE(Send(bhttp::verb::get, "/metrics").body().find("cairn_file_corrupt_chunks 1"), std::string::npos);
}

// A xorb the index names but the store lost is damage (500), not an unknown file (404): the same store
// "not found" that a transfer URL for an unstored xorb answers 404 with.
TEST_F(FileApi, AXorbGoneFromTheStoreIsA500NotA404) {
  const auto& x = built_.xorbs[0];
  ASSERT_TRUE(fs::remove(store_->PathOf(store::BlobKind::kXorb, x.hash)));
  auto r = Send(bhttp::verb::get, url_, Auth());
  EXPECT_EQ(r.result_int(), 500u);
  EXPECT_NE(r.body().find("is missing"), std::string::npos) << r.body();
}

}  // namespace
}  // namespace cairn::api
