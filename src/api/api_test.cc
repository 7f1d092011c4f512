// The CAS HTTP API end to end in process: a real http::Server on an ephemeral port serving RegisterCasRoutes
// over a real CasService (local-disk store and SQLite index in a temporary directory), driven by a small
// Beast client. Uploads are built as the stock client builds them; downloads go through reconstruction
// answers and transfer URLs, and decoded bytes are compared with the originals.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <boost/json.hpp>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "api/api_test_server.h"
#include "api/cas_routes.h"
#include "api/ops_routes.h"
#include "cas/relay.h"
#include "cas/test_backend.h"
#include "common/unique_fd.h"
#include "http/test_util.h"
#include "index/sqlite/sqlite_index.h"
#include "ingest/upload_builder.h"
#include "store/local_disk_store.h"
#include "xet/hashing.h"
#include "xet/shard.h"
#include "xet/test_support.h"
#include "xet/xorb.h"

namespace cairn::api {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;
namespace json = boost::json;
namespace bhttp = boost::beast::http;
using Bytes = std::vector<uint8_t>;
using Res = bhttp::response<bhttp::string_body>;
using http::Permission;
using http::testing::Client;

const std::string& kJwtKey = testing::kTestJwtKey;
constexpr uint64_t kUrlTtl = 3600;  // ServiceOptions' default transfer_url_ttl_seconds
const std::string kZeroHex(64, '0');

std::string Str(std::span<const uint8_t> b) {
  return {reinterpret_cast<const char*>(b.data()), b.size()};
}
Bytes ToBytes(std::string_view s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), reinterpret_cast<const uint8_t*>(s.data()) + s.size()};
}
Bytes Slice(const Bytes& b, uint64_t first, uint64_t last) {  // inclusive
  return {b.begin() + static_cast<std::ptrdiff_t>(first), b.begin() + static_cast<std::ptrdiff_t>(last + 1)};
}
// The server's error body: {"error": message}.
std::string Err(std::string_view message) {
  json::object o;
  o["error"] = message;
  return json::serialize(o);
}
// Tokens outlive the transfer URLs (1 h) by far, so the answers' expiries are the service's clock + 1 h
// exactly (a token's remaining life caps them: HubApi.GoingPrivateOrAwayCutsOffEveryEarlierReadToken).
std::string RangeHeader(uint64_t first, uint64_t last) {
  return "bytes=" + std::to_string(first) + "-" + std::to_string(last);
}

// Decodes a run of whole chunks (header + payload each), one vector per chunk.
std::vector<Bytes> DecodeChunks(std::string_view data) {
  const auto bytes = std::span(reinterpret_cast<const uint8_t*>(data.data()), data.size());
  xet::ChunkDecoder decoder;
  std::vector<Bytes> out;
  size_t pos = 0;
  while (pos < bytes.size()) {
    auto stored = xet::StoredChunk::Parse(bytes.subspan(pos));
    if (!stored.ok()) {
      ADD_FAILURE() << "bad chunk at " << pos << ": " << stored.error().message;
      return out;
    }
    Bytes chunk(stored->header.uncompressed_length);
    auto s = decoder.Decode(stored->header, stored->payload, chunk);
    if (!s.ok()) {
      ADD_FAILURE() << "chunk at " << pos << " does not decode: " << s.error().message;
      return out;
    }
    out.push_back(std::move(chunk));
    pos += stored->stored_size();
  }
  return out;
}

Bytes Concat(const std::vector<Bytes>& parts) {
  Bytes out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

// Which chunks of a single-term file a byte range [first, last] needs: [k, l) and the offset of `first` in
// chunk k. Computed from the layout alone, independently of the server's planner.
struct ChunkSpan {
  uint32_t k = 0;
  uint32_t l = 0;
  uint64_t offset = 0;
  uint64_t unpacked = 0;
};
ChunkSpan SpanFor(const xet::XorbLayout& layout, uint64_t first, uint64_t last) {
  const uint64_t size = layout.unpacked_size();
  const uint64_t end = std::min(last, size - 1) + 1;  // exclusive
  ChunkSpan s;
  uint64_t pos = 0;
  bool started = false;
  for (uint32_t i = 0; i < layout.chunks.size(); ++i) {
    const uint64_t next = pos + layout.chunks[i].unpacked_size;
    if (!started && next > first) {
      started = true;
      s.k = i;
      s.offset = first - pos;
    }
    if (started) {
      s.unpacked += layout.chunks[i].unpacked_size;
      if (next >= end) {
        s.l = i + 1;
        break;
      }
    }
    pos = next;
  }
  return s;
}

class CasApi : public testing::ApiServerTest {
 protected:
  void SetUp() override {
    http::ServerOptions o;
    o.io_threads = 2;
    o.worker_threads = 2;
    ASSERT_NO_FATAL_FAILURE(OpenServer("cairn-api", o));
    RegisterCasRoutes(*server_, *service_, Routes());
    server_->Start();
  }

  virtual CasRouteOptions Routes() const { return {}; }

  // Waits (up to 5 s) until /metrics reports `n` uploads in flight.
  bool AwaitUploadsInFlight(int n) {
    const std::string line = "\ncairn_uploads_in_flight " + std::to_string(n) + "\n";
    for (int i = 0; i < 500; ++i) {
      if (Get("/metrics").body().find(line) != std::string::npos) return true;
      std::this_thread::sleep_for(10ms);
    }
    return false;
  }

  // ---- requests (a fresh connection each: error answers may close theirs)

  Res Send(bhttp::verb verb, const std::string& target, const std::string& auth,
           const std::string& range = {}, std::string body = {}) {
    Client c(port_);
    bhttp::request<bhttp::string_body> req{verb, target, 11};
    if (!auth.empty()) req.set(bhttp::field::authorization, auth);
    if (!range.empty()) req.set(bhttp::field::range, range);
    if (verb == bhttp::verb::post) req.body() = std::move(body);
    return c.Send(std::move(req));
  }
  Res Get(const std::string& target, const std::string& auth = {}, const std::string& range = {}) {
    return Send(bhttp::verb::get, target, auth, range);
  }
  Res Post(const std::string& target, std::string body, const std::string& auth = {}) {
    return Send(bhttp::verb::post, target, auth, {}, std::move(body));
  }
  // A transfer URL from an answer: no Authorization header, as the stock client sends it.
  Res Fetch(const std::string& url, const std::string& range = {}) {
    EXPECT_EQ(url.rfind(base_ + "/v1/transfer/", 0), 0u) << url;
    return Get(url.substr(base_.size()), {}, range);
  }

  std::string Read(const std::string& scope = "org/repo") { return Bearer(scope, Permission::kRead); }
  std::string Write(const std::string& scope = "org/repo") { return Bearer(scope, Permission::kWrite); }
  std::string Bearer(const std::string& scope, Permission perm) {
    return "Bearer " + MintToken(scope, perm, 24h);
  }

  // ---- uploads

  static ingest::BuiltUpload Build(const std::vector<Bytes>& files,
                                   uint64_t max_xorb_bytes = xet::kMaxXorbUnpacked) {
    std::vector<std::span<const uint8_t>> spans(files.begin(), files.end());
    ingest::BuildOptions o;
    o.max_xorb_bytes = max_xorb_bytes;
    return ingest::BuildUpload(spans, o);
  }

  void Upload(const ingest::BuiltUpload& up, const std::string& scope = "org/repo") {
    for (const auto& x : up.xorbs) {
      auto r = Post("/v1/xorbs/default/" + x.hash.hex(), Str(x.body), Write(scope));
      ASSERT_EQ(r.result_int(), 200u) << r.body();
      ASSERT_EQ(r.body(), R"({"was_inserted":true})");
    }
    auto r = Post("/v1/shards", Str(up.shard_bytes), Write(scope));
    ASSERT_EQ(r.result_int(), 200u) << r.body();
    ASSERT_EQ(r.body(), R"({"result":1})");
  }

  // ---- downloads through HTTP: reconstruction, then every range through its URL, then chunk decoding.

  Bytes Download(const xet::FileHash& file, cas::ApiVersion v, std::optional<cas::ByteRange> range = {},
                 const std::string& scope = "org/repo") {
    const std::string prefix = v == cas::ApiVersion::kV2 ? "/v2/reconstructions/" : "/v1/reconstructions/";
    auto res = Get(prefix + file.hex(), Read(scope), range ? RangeHeader(range->start, range->end) : "");
    EXPECT_EQ(res.result_int(), 200u) << res.body();
    EXPECT_EQ(res[bhttp::field::content_type], "application/json");
    if (res.result_int() != 200) return {};
    const json::object o = json::parse(res.body()).as_object();
    std::map<std::pair<std::string, uint64_t>, Bytes> chunks;  // (xorb hex, chunk index) → decoded bytes
    const auto fetch = [&](const std::string& hex, const std::string& url, uint64_t c0, uint64_t c1,
                           uint64_t b0, uint64_t b1) {
      EXPECT_NE(url.find("/v1/transfer/" + hex + "?"), std::string::npos) << url;
      auto r = Fetch(url, RangeHeader(b0, b1));
      ASSERT_EQ(r.result_int(), 206u) << r.body();
      ASSERT_EQ(r.body().size(), b1 - b0 + 1);
      EXPECT_EQ(std::string(r[bhttp::field::content_range]).rfind(RangeHeader(b0, b1).replace(5, 1, " "), 0),
                0u);
      auto decoded = DecodeChunks(r.body());
      ASSERT_EQ(decoded.size(), c1 - c0);
      for (uint64_t c = c0; c < c1; ++c) chunks[{hex, c}] = std::move(decoded[c - c0]);
    };
    if (v == cas::ApiVersion::kV2) {
      EXPECT_FALSE(o.contains("fetch_info"));
      for (const auto& [hex, entries] : o.at("xorbs").as_object()) {
        for (const auto& e : entries.as_array()) {
          for (const auto& r : e.at("ranges").as_array()) {
            fetch(std::string(hex), std::string(e.at("url").as_string()),
                  r.at("chunks").at("start").to_number<uint64_t>(),
                  r.at("chunks").at("end").to_number<uint64_t>(),
                  r.at("bytes").at("start").to_number<uint64_t>(),
                  r.at("bytes").at("end").to_number<uint64_t>());
          }
        }
      }
    } else {
      EXPECT_FALSE(o.contains("xorbs"));
      for (const auto& [hex, entries] : o.at("fetch_info").as_object()) {
        for (const auto& e : entries.as_array()) {
          fetch(std::string(hex), std::string(e.at("url").as_string()),
                e.at("range").at("start").to_number<uint64_t>(),
                e.at("range").at("end").to_number<uint64_t>(),
                e.at("url_range").at("start").to_number<uint64_t>(),
                e.at("url_range").at("end").to_number<uint64_t>());
        }
      }
    }
    Bytes out;
    for (const auto& t : o.at("terms").as_array()) {
      const std::string hex(t.at("hash").as_string());
      uint64_t got = 0;
      for (auto c = t.at("range").at("start").to_number<uint64_t>();
           c < t.at("range").at("end").to_number<uint64_t>(); ++c) {
        auto it = chunks.find({hex, c});
        if (it == chunks.end()) {
          ADD_FAILURE() << "no fetched range covers chunk " << c << " of xorb " << hex;
          return {};
        }
        out.insert(out.end(), it->second.begin(), it->second.end());
        got += it->second.size();
      }
      EXPECT_EQ(got, t.at("unpacked_length").to_number<uint64_t>());
    }
    const auto offset = o.at("offset_into_first_range").to_number<uint64_t>();
    EXPECT_LE(offset, out.size());
    out.erase(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(std::min<uint64_t>(offset, out.size())));
    if (range && range->end - range->start < out.size()) out.resize(range->end - range->start + 1);
    return out;
  }

  // The exact answer for chunks [s.k, s.l) of a single-xorb, single-term file.
  std::string ExpectedAnswer(const ingest::BuiltXorb& x, const ChunkSpan& s, cas::ApiVersion v) const {
    const uint64_t b0 = x.layout.begin_offset(s.k);
    const uint64_t b1 = x.layout.chunks[s.l - 1].end_offset - 1;
    const std::string url = Signer().Url(x.hash, {{b0, b1}}, Now() + kUrlTtl);
    const std::string hex = x.hash.hex();
    const std::string chunks = "{\"start\":" + std::to_string(s.k) + ",\"end\":" + std::to_string(s.l) + "}";
    const std::string bytes = "{\"start\":" + std::to_string(b0) + ",\"end\":" + std::to_string(b1) + "}";
    std::string out = "{\"offset_into_first_range\":" + std::to_string(s.offset) +
                      ",\"terms\":[{\"hash\":\"" + hex +
                      "\",\"unpacked_length\":" + std::to_string(s.unpacked) + ",\"range\":" + chunks + "}],";
    if (v == cas::ApiVersion::kV1) {
      out += "\"fetch_info\":{\"" + hex + "\":[{\"range\":" + chunks + ",\"url\":\"" + url +
             "\",\"url_range\":" + bytes + "}]}}";
    } else {
      out += "\"xorbs\":{\"" + hex + "\":[{\"url\":\"" + url + "\",\"ranges\":[{\"chunks\":" + chunks +
             ",\"bytes\":" + bytes + "}]}]}}";
    }
    return out;
  }

  // The metrics text once it contains every line in `want` (request counters are updated once a response is
  // fully written, which may be just after the client read it).
  std::string MetricsWith(const std::vector<std::string>& want) {
    std::string text;
    for (int attempt = 0; attempt < 100; ++attempt) {
      auto r = Get("/metrics");
      EXPECT_EQ(r.result_int(), 200u);
      text = r.body();
      bool all = true;
      for (const auto& w : want) all = all && text.find(w) != std::string::npos;
      if (all) break;
      std::this_thread::sleep_for(20ms);
    }
    return text;
  }
};

// ---------------------------------------------------------------------------------------------------------------
// POST /v1/xorbs/{prefix}/{hash}

TEST_F(CasApi, XorbUploadInsertsOnceThenReportsExisting) {
  const auto up = Build({xet::testing::TextLikeBytes(1, 300000)});
  ASSERT_EQ(up.xorbs.size(), 1u);
  const auto& x = up.xorbs[0];
  auto first = Post("/v1/xorbs/default/" + x.hash.hex(), Str(x.body), Write());
  EXPECT_EQ(first.result_int(), 200u);
  EXPECT_EQ(first[bhttp::field::content_type], "application/json");
  EXPECT_EQ(first.body(), R"({"was_inserted":true})");
  auto again = Post("/v1/xorbs/default/" + x.hash.hex(), Str(x.body), Write("another/scope"));
  EXPECT_EQ(again.result_int(), 200u);
  EXPECT_EQ(again.body(), R"({"was_inserted":false})");
  EXPECT_TRUE(*index_->HasXorb(x.hash));
}

class CasApiOneUpload : public CasApi {
 protected:
  CasRouteOptions Routes() const override { return {.max_concurrent_uploads = 1}; }
};

// An upload holds its slot from its header to its answer; past max_concurrent_uploads, uploads answer 503
// with Retry-After (hf_xet retries it) while reads go on.
TEST_F(CasApiOneUpload, UploadsPastTheLimitAre503UntilOneFinishes) {
  const auto up = Build({xet::testing::TextLikeBytes(2, 300000)});
  ASSERT_EQ(up.xorbs.size(), 1u);
  const std::string body = Str(up.xorbs[0].body);
  Client slow(port_);
  slow.WriteRaw("POST /v1/xorbs/default/" + up.xorbs[0].hash.hex() +
                " HTTP/1.1\r\nHost: x\r\nAuthorization: " + Write() + "\r\nContent-Length: " +
                std::to_string(body.size()) + "\r\n\r\n" + body.substr(0, body.size() / 2));
  // Once the server has read that header, the only slot is taken.
  ASSERT_TRUE(AwaitUploadsInFlight(1));
  const Res busy = Post("/v1/shards", "not a shard", Write());
  ASSERT_EQ(busy.result_int(), 503u);
  EXPECT_EQ(busy[bhttp::field::retry_after], "1");
  EXPECT_EQ(busy.body(), Err("too many shard_v1 requests in flight (1); retry shortly"));
  EXPECT_EQ(Get("/v2/reconstructions/" + std::string(64, '0'), Read()).result_int(), 200u);

  slow.WriteRaw(body.substr(body.size() / 2));
  const auto done = slow.Read();
  EXPECT_EQ(done.result_int(), 200u);
  EXPECT_EQ(done.body(), R"({"was_inserted":true})");
  // The slot is free again once the answer is out (the exchange may be released just after it is sent).
  Res after;
  for (int i = 0; i < 500; ++i) {
    after = Post("/v1/shards", "not a shard", Write());
    if (after.result_int() != 503) break;
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_EQ(after.result_int(), 400u);
}

// A client that goes away mid-body leaves nothing behind: no blob, no temporary file, no index entry, and its
// upload slot back.
// The server checks tokens by the clock the services count from: moving it past a token's expiry turns the
// token away at once, with no sleeping.
TEST_F(CasApi, TokensExpireWhenTheServersClockPassesThem) {
  const std::string brief = "Bearer " + MintToken("org/repo", Permission::kWrite, 100s);
  const auto up = Build({xet::testing::TextLikeBytes(3, 1000)});
  const auto& x = up.xorbs[0];
  const std::string target = "/v1/xorbs/default/" + x.hash.hex();
  EXPECT_EQ(Post(target, Str(x.body), brief).body(), R"({"was_inserted":true})");
  clock_.Advance(99);
  EXPECT_EQ(Post(target, Str(x.body), brief).body(), R"({"was_inserted":false})") << "one second left";
  clock_.Advance(1);
  auto late = Post(target, Str(x.body), brief);
  EXPECT_EQ(late.result_int(), 401u);
  EXPECT_EQ(late.body(), Err("token expired"));
}

TEST_F(CasApi, XorbUploadCutShortLeavesNothing) {
  const auto up = Build({xet::testing::TextLikeBytes(3, 300000)});
  ASSERT_EQ(up.xorbs.size(), 1u);
  const std::string body = Str(up.xorbs[0].body);
  {
    Client c(port_);
    c.WriteRaw("POST /v1/xorbs/default/" + up.xorbs[0].hash.hex() +
               " HTTP/1.1\r\nHost: x\r\nAuthorization: " + Write() + "\r\nContent-Length: " +
               std::to_string(body.size()) + "\r\n\r\n" + body.substr(0, body.size() / 2));
    ASSERT_TRUE(AwaitUploadsInFlight(1));
  }  // closes the connection
  EXPECT_TRUE(AwaitUploadsInFlight(0));
  EXPECT_FALSE(*index_->HasXorb(up.xorbs[0].hash));
  EXPECT_FALSE(store_->Stat(store::BlobKind::kXorb, up.xorbs[0].hash)->exists);
  size_t files = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir_ / "blobs")) files += e.is_regular_file() ? 1 : 0;
  EXPECT_EQ(files, 0u);
}

TEST_F(CasApi, XorbUploadErrors) {
  const auto up =
      Build({xet::testing::TextLikeBytes(2, 300000), xet::testing::SplitMix64Bytes(3, 300000)}, 200000);
  ASSERT_GE(up.xorbs.size(), 2u);
  const auto& x = up.xorbs[0];
  const auto& y = up.xorbs[1];
  const std::string target = "/v1/xorbs/default/" + x.hash.hex();

  auto bad_hex = Post("/v1/xorbs/default/not-a-hash", Str(x.body), Write());
  EXPECT_EQ(bad_hex.result_int(), 400u);
  EXPECT_EQ(bad_hex.body(), Err("xorb hash must be 64 hex digits"));
  auto short_hex = Post("/v1/xorbs/default/" + x.hash.hex().substr(2), Str(x.body), Write());
  EXPECT_EQ(short_hex.result_int(), 400u);
  EXPECT_EQ(short_hex.body(), Err("xorb hash must be 64 hex digits"));

  // The body of another xorb under this hash.
  auto mismatch = Post(target, Str(y.body), Write());
  EXPECT_EQ(mismatch.result_int(), 400u);
  auto mismatch_json = json::parse(mismatch.body()).as_object();
  EXPECT_EQ(mismatch_json.size(), 1u);
  EXPECT_FALSE(mismatch_json.at("error").as_string().empty());

  // Truncated in the middle of a chunk, and a corrupted chunk header.
  auto truncated = Post(target, Str(x.body).substr(0, x.body.size() - 100), Write());
  EXPECT_EQ(truncated.result_int(), 400u);
  EXPECT_TRUE(json::parse(truncated.body()).as_object().contains("error")) << truncated.body();
  Bytes corrupt = x.body;
  corrupt[0] = 0xff;  // chunk header version byte
  auto bad_header = Post(target, Str(corrupt), Write());
  EXPECT_EQ(bad_header.result_int(), 400u);
  EXPECT_TRUE(json::parse(bad_header.body()).as_object().contains("error")) << bad_header.body();
  Bytes flipped = x.body;
  flipped[flipped.size() / 2] ^= 0x55;  // payload damage: the hash (or decoding) fails
  auto bad_payload = Post(target, Str(flipped), Write());
  EXPECT_EQ(bad_payload.result_int(), 400u);
  auto empty = Post(target, "", Write());
  EXPECT_EQ(empty.result_int(), 400u);

  // Authentication and permission.
  auto no_token = Post(target, Str(x.body));
  EXPECT_EQ(no_token.result_int(), 401u);
  EXPECT_EQ(no_token.body(), Err("missing Authorization header"));
  auto garbage = Post(target, Str(x.body), "Bearer not.a.jwt");
  EXPECT_EQ(garbage.result_int(), 401u);
  EXPECT_EQ(garbage.body(), Err("invalid token (malformed or bad signature)"));
  auto expired_token =
      http::MintToken(kJwtKey, {"org/repo", Permission::kWrite}, 1h, clock_.UnixSeconds() - 7200);
  auto expired = Post(target, Str(x.body), "Bearer " + *expired_token);
  EXPECT_EQ(expired.result_int(), 401u);
  EXPECT_EQ(expired.body(), Err("token expired"));
  auto wrong_key = http::MintToken(std::string(64, 'x'), {"org/repo", Permission::kWrite}, 1h);
  EXPECT_EQ(Post(target, Str(x.body), "Bearer " + *wrong_key).result_int(), 401u);
  auto read_only = Post(target, Str(x.body), Read());
  EXPECT_EQ(read_only.result_int(), 403u);
  EXPECT_EQ(read_only.body(), Err("token grants read access only; this call needs write"));

  // Nothing of the failed attempts was kept: the real upload is new.
  EXPECT_FALSE(*index_->HasXorb(x.hash));
  auto ok = Post(target, Str(x.body), Write());
  EXPECT_EQ(ok.result_int(), 200u);
  EXPECT_EQ(ok.body(), R"({"was_inserted":true})");
}

// The limit is checked from Content-Length before the body is read; the whole body is sent anyway, as a
// client that does not wait for an early answer would.
TEST_F(CasApi, XorbUploadOverTheLimitIs413) {
  const uint64_t limit = xet::kMaxXorbUploadBytes;
  const std::string target = "/v1/xorbs/default/" + std::string(64, 'a');
  const std::string body(limit + 1, 'z');
  {
    Client c(port_);
    c.WriteRaw("POST " + target + " HTTP/1.1\r\nHost: x\r\nAuthorization: " + Write() +
               "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n");
    std::thread writer([&] {
      boost::system::error_code ec;
      boost::asio::write(c.socket(), boost::asio::buffer(body), ec);  // may fail once the server closes
    });
    auto res = c.Read();
    writer.join();
    EXPECT_EQ(res.result_int(), 413u);
    EXPECT_EQ(res.body(), Err("request body larger than " + std::to_string(limit) + " bytes"));
    EXPECT_FALSE(res.keep_alive());
  }
  {
    // Chunked: the limit is found while reading the body.
    Client c(port_);
    c.WriteRaw("POST " + target + " HTTP/1.1\r\nHost: x\r\nAuthorization: " + Write() +
               "\r\nTransfer-Encoding: chunked\r\n\r\n");
    std::thread writer([&] {
      boost::system::error_code ec;
      const std::string piece(1 << 20, 'z');
      char size_line[32];
      (void)std::snprintf(size_line, sizeof(size_line), "%zx\r\n", piece.size());
      for (uint64_t sent = 0; sent <= limit && !ec; sent += piece.size()) {
        boost::asio::write(c.socket(), boost::asio::buffer(std::string(size_line) + piece + "\r\n"), ec);
      }
      if (!ec) boost::asio::write(c.socket(), boost::asio::buffer(std::string("0\r\n\r\n")), ec);
    });
    auto res = c.Read();
    writer.join();
    EXPECT_EQ(res.result_int(), 413u);
    EXPECT_EQ(res.body(), Err("request body too large"));
  }
  {
    // With Expect: 100-continue the size check answers before any body byte: exactly the limit may be sent
    // (100 Continue), one byte more may not.
    for (const uint64_t length : {limit, limit + 1}) {
      Client c(port_);
      c.WriteRaw("POST " + target + " HTTP/1.1\r\nHost: x\r\nAuthorization: " + Write() +
                 "\r\nExpect: 100-continue\r\nContent-Length: " + std::to_string(length) + "\r\n\r\n");
      auto res = c.Read();
      EXPECT_EQ(res.result_int(), length == limit ? 100u : 413u) << length;
    }
  }
}

// ---------------------------------------------------------------------------------------------------------------
// POST /v1/shards, /v2/shards

TEST_F(CasApi, ShardV1RegistersOnceThenReportsExisting) {
  const auto up = Build({xet::testing::TextLikeBytes(4, 500000)}, 200000);
  for (const auto& x : up.xorbs)
    ASSERT_EQ(Post("/v1/xorbs/default/" + x.hash.hex(), Str(x.body), Write()).result_int(), 200u);
  auto first = Post("/v1/shards", Str(up.shard_bytes), Write());
  EXPECT_EQ(first.result_int(), 200u);
  EXPECT_EQ(first[bhttp::field::content_type], "application/json");
  EXPECT_EQ(first.body(), R"({"result":1})");
  auto again = Post("/v1/shards", Str(up.shard_bytes), Write());
  EXPECT_EQ(again.result_int(), 200u);
  EXPECT_EQ(again.body(), R"({"result":0})");
  EXPECT_EQ(Get("/v2/reconstructions/" + up.file_hashes[0].hex(), Read()).result_int(), 200u);
}

TEST_F(CasApi, ShardV1Errors) {
  auto up = Build({xet::testing::TextLikeBytes(5, 500000)}, 200000);
  ASSERT_GE(up.xorbs.size(), 2u);
  const std::string file_hex = up.file_hashes[0].hex();

  auto garbage = Post("/v1/shards", std::string(1000, 'g'), Write());
  EXPECT_EQ(garbage.result_int(), 400u);
  EXPECT_TRUE(json::parse(garbage.body()).as_object().contains("error")) << garbage.body();
  auto truncated = Post("/v1/shards", Str(up.shard_bytes).substr(0, up.shard_bytes.size() / 2), Write());
  EXPECT_EQ(truncated.result_int(), 400u);
  auto empty = Post("/v1/shards", "", Write());
  EXPECT_EQ(empty.result_int(), 400u);

  // The first xorb is missing.
  for (size_t i = 1; i < up.xorbs.size(); ++i)
    ASSERT_EQ(
        Post("/v1/xorbs/default/" + up.xorbs[i].hash.hex(), Str(up.xorbs[i].body), Write()).result_int(),
        200u);
  auto missing = Post("/v1/shards", Str(up.shard_bytes), Write());
  EXPECT_EQ(missing.result_int(), 400u);
  EXPECT_EQ(missing.body(),
            Err("file " + file_hex + " term 0: xorb " + up.xorbs[0].hash.hex() + " is not stored"));

  ASSERT_EQ(Post("/v1/xorbs/default/" + up.xorbs[0].hash.hex(), Str(up.xorbs[0].body), Write()).result_int(),
            200u);
  auto tampered = up.shard;
  tampered.files[0].verification[0].bytes[3] ^= 1;
  auto wrong_verification = Post("/v1/shards", Str(ingest::ShardUploadForm(tampered)), Write());
  EXPECT_EQ(wrong_verification.result_int(), 400u);
  const std::string message(json::parse(wrong_verification.body()).at("error").as_string());
  EXPECT_NE(message.find("file " + file_hex + " term 0"), std::string::npos) << message;

  auto no_token = Post("/v1/shards", Str(up.shard_bytes));
  EXPECT_EQ(no_token.result_int(), 401u);
  EXPECT_EQ(no_token.body(), Err("missing Authorization header"));
  auto bad_token = Post("/v1/shards", Str(up.shard_bytes), "Bearer x.y.z");
  EXPECT_EQ(bad_token.result_int(), 401u);
  auto read_only = Post("/v1/shards", Str(up.shard_bytes), Read());
  EXPECT_EQ(read_only.result_int(), 403u);
  EXPECT_EQ(read_only.body(), Err("token grants read access only; this call needs write"));

  // None of it registered the file; the real shard does.
  EXPECT_EQ(Get("/v1/reconstructions/" + file_hex, Read()).result_int(), 404u);
  auto ok = Post("/v1/shards", Str(up.shard_bytes), Write());
  EXPECT_EQ(ok.result_int(), 200u);
  EXPECT_EQ(ok.body(), R"({"result":1})");
}

std::vector<std::string> Lines(const std::string& body) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < body.size()) {
    const size_t nl = body.find('\n', pos);
    EXPECT_NE(nl, std::string::npos) << "frame not newline-terminated";
    if (nl == std::string::npos) break;
    out.push_back(body.substr(pos, nl - pos));
    pos = nl + 1;
  }
  return out;
}

TEST_F(CasApi, ShardV2StreamsProgressThenResult) {
  const auto up =
      Build({xet::testing::TextLikeBytes(6, 300000), xet::testing::TextLikeBytes(7, 300000)}, 200000);
  for (const auto& x : up.xorbs)
    ASSERT_EQ(Post("/v1/xorbs/default/" + x.hash.hex(), Str(x.body), Write()).result_int(), 200u);
  const size_t total = up.shard.files.size() + up.shard.xorbs.size();
  ASSERT_EQ(up.shard.files.size(), 2u);
  ASSERT_LT(total, 64u);  // every step is reported below 64

  auto res = Post("/v2/shards", Str(up.shard_bytes), Write());
  ASSERT_EQ(res.result_int(), 200u);
  EXPECT_EQ(res[bhttp::field::content_type], "application/x-ndjson");
  EXPECT_TRUE(res.chunked());
  std::vector<std::string> want{R"({"type":"validating","verified":0,"total":0})"};
  for (size_t i = 0; i <= total; ++i)
    want.push_back(R"({"type":"validating","verified":)" + std::to_string(i) +
                   ",\"total\":" + std::to_string(total) + "}");
  want.emplace_back(R"({"type":"committing","stage":"uploading"})");
  want.emplace_back(R"({"type":"committing","stage":"syncing"})");
  want.emplace_back(R"({"type":"result"})");
  const auto lines = Lines(res.body());
  EXPECT_EQ(lines, want);
  for (const auto& l : lines) EXPECT_TRUE(json::parse(l).is_object()) << l;

  // Registered: the v1 route now says it existed, and the files reconstruct.
  EXPECT_EQ(Post("/v1/shards", Str(up.shard_bytes), Write()).body(), R"({"result":0})");
  EXPECT_EQ(Download(up.file_hashes[1], cas::ApiVersion::kV2), xet::testing::TextLikeBytes(7, 300000));
}

TEST_F(CasApi, ShardV2ReportsFailuresAsAnErrorFrame) {
  const auto up = Build({xet::testing::TextLikeBytes(8, 300000)}, 200000);
  const auto last_frame = [](const Res& res) {
    const auto lines = Lines(res.body());
    return lines.empty() ? json::object() : json::parse(lines.back()).as_object();
  };

  // Malformed: the same message as /v1/shards gives, in a final error frame.
  const std::string garbage(1000, 'g');
  const auto v1 = Post("/v1/shards", garbage, Write());
  ASSERT_EQ(v1.result_int(), 400u);
  auto res = Post("/v2/shards", garbage, Write());
  ASSERT_EQ(res.result_int(), 200u);
  EXPECT_EQ(res[bhttp::field::content_type], "application/x-ndjson");
  auto lines = Lines(res.body());
  ASSERT_EQ(lines.size(), 2u) << res.body();
  EXPECT_EQ(lines[0], R"({"type":"validating","verified":0,"total":0})");
  json::object want{{"type", "error"}, {"message", json::parse(v1.body()).at("error")}, {"retryable", false}};
  EXPECT_EQ(last_frame(res), want);

  // A missing xorb: found while validating, after progress frames.
  res = Post("/v2/shards", Str(up.shard_bytes), Write());
  ASSERT_EQ(res.result_int(), 200u);
  lines = Lines(res.body());
  ASSERT_GE(lines.size(), 3u) << res.body();
  EXPECT_EQ(lines[1], R"({"type":"validating","verified":0,"total":)" +
                          std::to_string(up.shard.files.size() + up.shard.xorbs.size()) + "}");
  const json::object missing_want{{"type", "error"},
                                  {"message", "file " + up.file_hashes[0].hex() + " term 0: xorb " +
                                                  up.xorbs[0].hash.hex() + " is not stored"},
                                  {"retryable", false}};
  EXPECT_EQ(last_frame(res), missing_want);
  for (const auto& l : lines) EXPECT_NE(json::parse(l).at("type").as_string(), "result");

  // Auth failures come before the stream: plain statuses.
  auto no_token = Post("/v2/shards", Str(up.shard_bytes));
  EXPECT_EQ(no_token.result_int(), 401u);
  EXPECT_EQ(no_token.body(), Err("missing Authorization header"));
  auto read_only = Post("/v2/shards", Str(up.shard_bytes), Read());
  EXPECT_EQ(read_only.result_int(), 403u);
}

// ---------------------------------------------------------------------------------------------------------------
// GET /v{1,2}/reconstructions/{file}

TEST_F(CasApi, ReconstructionAnswersHaveTheExactShapes) {
  const Bytes file = xet::testing::TextLikeBytes(9, 400000);
  const auto up = Build({file});
  ASSERT_EQ(up.xorbs.size(), 1u);
  ASSERT_EQ(up.shard.files[0].terms.size(), 1u);
  ASSERT_GE(up.xorbs[0].layout.chunks.size(), 4u);
  Upload(up);
  const auto& x = up.xorbs[0];
  const std::string hex = up.file_hashes[0].hex();
  const uint64_t size = file.size();

  for (auto v : {cas::ApiVersion::kV2, cas::ApiVersion::kV1}) {
    const std::string prefix = v == cas::ApiVersion::kV2 ? "/v2/reconstructions/" : "/v1/reconstructions/";
    SCOPED_TRACE(prefix);
    auto whole = Get(prefix + hex, Read());
    ASSERT_EQ(whole.result_int(), 200u) << whole.body();
    EXPECT_EQ(whole[bhttp::field::content_type], "application/json");
    EXPECT_EQ(whole.body(), ExpectedAnswer(x, SpanFor(x.layout, 0, size - 1), v));

    // Trimmed to the chunks a range needs; the offset locates the range's first byte.
    for (auto [first, last] : std::vector<std::pair<uint64_t, uint64_t>>{
             {100000, 250000}, {0, 0}, {size - 1, size - 1}, {150000, size + 12345}, {1, size - 2}}) {
      SCOPED_TRACE(RangeHeader(first, last));
      auto r = Get(prefix + hex, Read(), RangeHeader(first, last));
      ASSERT_EQ(r.result_int(), 200u) << r.body();
      EXPECT_EQ(r.body(), ExpectedAnswer(x, SpanFor(x.layout, first, last), v));
    }
    auto open = Get(prefix + hex, Read(), "bytes=200000-");
    ASSERT_EQ(open.result_int(), 200u);
    EXPECT_EQ(open.body(), ExpectedAnswer(x, SpanFor(x.layout, 200000, size - 1), v));

    // 416 from the first byte past the end.
    auto past = Get(prefix + hex, Read(), RangeHeader(size, size + 10));
    EXPECT_EQ(past.result_int(), 416u);
    EXPECT_EQ(past.body(),
              Err("range starts at or past the end of the file (" + std::to_string(size) + " bytes)"));
    EXPECT_EQ(Get(prefix + hex, Read(), "bytes=" + std::to_string(size) + "-").result_int(), 416u);
    auto malformed = Get(prefix + hex, Read(), "bytes=10-5");
    EXPECT_EQ(malformed.result_int(), 416u);
    EXPECT_EQ(malformed.body(), Err("malformed Range header"));
  }
}

TEST_F(CasApi, ReconstructionErrors) {
  const auto up = Build({xet::testing::TextLikeBytes(10, 100000)});
  Upload(up, "alice/model");
  const std::string hex = up.file_hashes[0].hex();
  xet::FileHash unknown = up.file_hashes[0];
  unknown.bytes[0] ^= 1;

  for (const std::string& prefix : std::vector<std::string>{"/v2/reconstructions/", "/v1/reconstructions/"}) {
    SCOPED_TRACE(prefix);
    EXPECT_EQ(Get(prefix + hex, Read("alice/model")).result_int(), 200u);
    auto missing = Get(prefix + unknown.hex(), Read("alice/model"));
    EXPECT_EQ(missing.result_int(), 404u);
    EXPECT_EQ(missing.body(), Err("file " + unknown.hex() + " is unknown"));
    // Registered by another scope: invisible, indistinguishable from unknown.
    auto other_scope = Get(prefix + hex, Read("bob/model"));
    EXPECT_EQ(other_scope.result_int(), 404u);
    EXPECT_EQ(other_scope.body(), Err("file " + hex + " is unknown"));
    auto bad_hex = Get(prefix + "xyz", Read("alice/model"));
    EXPECT_EQ(bad_hex.result_int(), 400u);
    EXPECT_EQ(bad_hex.body(), Err("file id must be 64 hex digits"));
    EXPECT_EQ(Get(prefix + hex.substr(1) + "g", Read("alice/model")).result_int(), 400u);
    auto no_token = Get(prefix + hex);
    EXPECT_EQ(no_token.result_int(), 401u);
    EXPECT_EQ(no_token.body(), Err("missing Authorization header"));
    auto expired =
        http::MintToken(kJwtKey, {"alice/model", Permission::kRead}, 1h, clock_.UnixSeconds() - 7200);
    auto expired_res = Get(prefix + hex, "Bearer " + *expired);
    EXPECT_EQ(expired_res.result_int(), 401u);
    EXPECT_EQ(expired_res.body(), Err("token expired"));
    EXPECT_EQ(Get(prefix + hex, "Basic dXNlcjpwYXNz").result_int(), 401u);
  }
  // Once the other scope registers the same shard, it sees the file too.
  ASSERT_EQ(Post("/v1/shards", Str(up.shard_bytes), Write("bob/model")).body(), R"({"result":0})");
  EXPECT_EQ(Get("/v2/reconstructions/" + hex, Read("bob/model")).result_int(), 200u);
}

TEST_F(CasApi, EmptyFileReconstructsForEveryone) {
  auto v2 = Get("/v2/reconstructions/" + kZeroHex, Read("anyone"));
  EXPECT_EQ(v2.result_int(), 200u);
  EXPECT_EQ(v2.body(), R"({"offset_into_first_range":0,"terms":[],"xorbs":{}})");
  auto v1 = Get("/v1/reconstructions/" + kZeroHex, Read("anyone"));
  EXPECT_EQ(v1.result_int(), 200u);
  EXPECT_EQ(v1.body(), R"({"offset_into_first_range":0,"terms":[],"fetch_info":{}})");
  // F == 0 and S == 0 is the one range at the end that is satisfiable.
  auto ranged = Get("/v2/reconstructions/" + kZeroHex, Read("anyone"), "bytes=0-100");
  EXPECT_EQ(ranged.result_int(), 200u);
  EXPECT_EQ(ranged.body(), R"({"offset_into_first_range":0,"terms":[],"xorbs":{}})");
  EXPECT_EQ(Get("/v2/reconstructions/" + kZeroHex, Read("anyone"), "bytes=1-100").result_int(), 416u);
  EXPECT_EQ(Get("/v2/reconstructions/" + kZeroHex).result_int(), 401u);
}

// GET /v1/reconstructions?file_id=...

TEST_F(CasApi, BatchReconstruction) {
  const Bytes a = xet::testing::TextLikeBytes(11, 200000);
  const Bytes b = xet::testing::TextLikeBytes(12, 150000);
  const auto up = Build({a, b});
  ASSERT_EQ(up.xorbs.size(), 1u);
  Upload(up);
  const auto& x = up.xorbs[0];
  const std::string hex = x.hash.hex();
  const auto& ta = up.shard.files[0].terms;
  const auto& tb = up.shard.files[1].terms;
  ASSERT_EQ(ta.size(), 1u);
  ASSERT_EQ(tb.size(), 1u);
  ASSERT_EQ(ta[0].chunk_end, tb[0].chunk_start);  // adjacent: one merged fetch range
  const auto term = [&](const xet::FileTerm& t) {
    return "[{\"hash\":\"" + hex + "\",\"unpacked_length\":" + std::to_string(t.unpacked_bytes) +
           ",\"range\":{\"start\":" + std::to_string(t.chunk_start) +
           ",\"end\":" + std::to_string(t.chunk_end) + "}}]";
  };
  const uint32_t n = tb[0].chunk_end;
  const uint64_t b1 = x.layout.chunks[n - 1].end_offset - 1;
  const std::string url = Signer().Url(x.hash, {{0, b1}}, Now() + kUrlTtl);
  const std::string fetch_info = "\"fetch_info\":{\"" + hex +
                                 "\":[{\"range\":{\"start\":0,\"end\":" + std::to_string(n) + "},\"url\":\"" +
                                 url + "\",\"url_range\":{\"start\":0,\"end\":" + std::to_string(b1) + "}}]}";

  auto res = Get("/v1/reconstructions?file_id=" + up.file_hashes[0].hex() +
                     "&file_id=" + up.file_hashes[1].hex() + "&file_id=" + kZeroHex,
                 Read());
  ASSERT_EQ(res.result_int(), 200u) << res.body();
  EXPECT_EQ(res[bhttp::field::content_type], "application/json");
  EXPECT_EQ(res.body(), "{\"files\":{\"" + up.file_hashes[0].hex() + "\":" + term(ta[0]) + ",\"" +
                            up.file_hashes[1].hex() + "\":" + term(tb[0]) + ",\"" + kZeroHex + "\":[]}," +
                            fetch_info + "}");

  auto none = Get("/v1/reconstructions", Read());
  EXPECT_EQ(none.result_int(), 400u);
  EXPECT_EQ(none.body(), Err("give 1 to 1000 file_id values"));
  auto other_key = Get("/v1/reconstructions?id=" + up.file_hashes[0].hex(), Read());
  EXPECT_EQ(other_key.result_int(), 400u);
  EXPECT_EQ(other_key.body(), Err("give 1 to 1000 file_id values"));
  auto bad_hex = Get("/v1/reconstructions?file_id=abc", Read());
  EXPECT_EQ(bad_hex.result_int(), 400u);
  EXPECT_EQ(bad_hex.body(), Err("file_id must be 64 hex digits"));
  xet::FileHash unknown = up.file_hashes[0];
  unknown.bytes[5] ^= 1;
  auto missing =
      Get("/v1/reconstructions?file_id=" + up.file_hashes[0].hex() + "&file_id=" + unknown.hex(), Read());
  EXPECT_EQ(missing.result_int(), 404u);
  EXPECT_EQ(missing.body(), Err("file " + unknown.hex() + " is unknown"));
  EXPECT_EQ(Get("/v1/reconstructions?file_id=" + up.file_hashes[0].hex(), Read("other/scope")).result_int(),
            404u);
  auto no_token = Get("/v1/reconstructions?file_id=" + up.file_hashes[0].hex());
  EXPECT_EQ(no_token.result_int(), 401u);
}

// ---------------------------------------------------------------------------------------------------------------
// GET /v1/chunks/{prefix}/{chunk}

TEST_F(CasApi, DedupAnswersAreKeyedShards) {
  const auto up = Build({xet::testing::TextLikeBytes(13, 400000)});
  ASSERT_EQ(up.xorbs.size(), 1u);
  Upload(up);
  const auto& layout = up.xorbs[0].layout;
  const xet::ChunkHash first = layout.chunks[0].hash;
  for (const std::string& prefix : std::vector<std::string>{"default", "default-merkledb"}) {
    SCOPED_TRACE(prefix);
    auto res = Get("/v1/chunks/" + prefix + "/" + first.hex(), Read());
    ASSERT_EQ(res.result_int(), 200u) << res.body();
    EXPECT_EQ(res[bhttp::field::content_type], "application/octet-stream");
    const Bytes body = ToBytes(res.body());
    auto shard = xet::ParseShard(body);
    ASSERT_TRUE(shard.ok()) << shard.error().message;
    ASSERT_TRUE(shard->footer.has_value());
    EXPECT_FALSE(shard->footer->chunk_hash_hmac_key.is_zero());
    EXPECT_GT(shard->footer->key_expiry, Now());
    EXPECT_TRUE(shard->files.empty());
    ASSERT_EQ(shard->xorbs.size(), 1u);
    EXPECT_EQ(shard->xorbs[0].hash, up.xorbs[0].hash);
    ASSERT_EQ(shard->xorbs[0].chunks.size(), layout.chunks.size());
    for (size_t i = 0; i < layout.chunks.size(); ++i) {
      EXPECT_EQ(shard->xorbs[0].chunks[i].hash,
                xet::HmacChunkHash(shard->footer->chunk_hash_hmac_key, layout.chunks[i].hash));
      EXPECT_EQ(shard->xorbs[0].chunks[i].size, layout.chunks[i].unpacked_size);
    }
  }
  // A chunk that is neither a file's first chunk nor a global-dedup chunk is not indexed.
  std::optional<xet::ChunkHash> plain;
  for (size_t i = 1; i < layout.chunks.size() && !plain; ++i)
    if (layout.chunks[i].hash.mod(xet::kGlobalDedupModulus) != 0) plain = layout.chunks[i].hash;
  ASSERT_TRUE(plain.has_value());
  auto miss = Get("/v1/chunks/default/" + plain->hex(), Read());
  EXPECT_EQ(miss.result_int(), 404u);
  EXPECT_EQ(miss.body(), Err("chunk " + plain->hex() + " is not indexed"));
  auto other_scope = Get("/v1/chunks/default/" + first.hex(), Read("someone/else"));
  EXPECT_EQ(other_scope.result_int(), 404u);
  EXPECT_EQ(other_scope.body(), Err("chunk " + first.hex() + " is not indexed"));
  auto bad_hex = Get("/v1/chunks/default/" + first.hex() + "00", Read());
  EXPECT_EQ(bad_hex.result_int(), 400u);
  EXPECT_EQ(bad_hex.body(), Err("chunk hash must be 64 hex digits"));
  auto no_token = Get("/v1/chunks/default/" + first.hex());
  EXPECT_EQ(no_token.result_int(), 401u);
  EXPECT_EQ(no_token.body(), Err("missing Authorization header"));
}

// ---------------------------------------------------------------------------------------------------------------
// Transfer URLs

TEST_F(CasApi, TransferUrlsServeExactlyTheSignedBytes) {
  const Bytes file = xet::testing::TextLikeBytes(14, 400000);
  const auto up = Build({file});
  ASSERT_EQ(up.xorbs.size(), 1u);
  Upload(up);
  const auto& x = up.xorbs[0];
  const uint64_t region = x.body.size();
  auto answer = Get("/v1/reconstructions/" + up.file_hashes[0].hex(), Read());
  ASSERT_EQ(answer.result_int(), 200u);
  const auto entry =
      json::parse(answer.body()).at("fetch_info").at(x.hash.hex()).as_array().at(0).as_object();
  const std::string url(entry.at("url").as_string());
  ASSERT_EQ(entry.at("url_range").at("start").to_number<uint64_t>(), 0u);
  ASSERT_EQ(entry.at("url_range").at("end").to_number<uint64_t>(), region - 1);

  // The whole signed range: the stored chunk region, which decodes to the file.
  auto whole = Fetch(url, RangeHeader(0, region - 1));
  ASSERT_EQ(whole.result_int(), 206u) << whole.body();
  EXPECT_EQ(whole[bhttp::field::content_type], "application/octet-stream");
  const std::string content_range(whole[bhttp::field::content_range]);
  const std::string prefix = "bytes 0-" + std::to_string(region - 1) + "/";
  ASSERT_EQ(content_range.rfind(prefix, 0), 0u) << content_range;
  const uint64_t stored = std::stoull(content_range.substr(prefix.size()));
  EXPECT_GT(stored, region);  // the stored blob ends with cairn's footer, never sent
  EXPECT_TRUE(whole.body() == Str(x.body));
  EXPECT_EQ(Concat(DecodeChunks(whole.body())), file);

  // One chunk exactly, and an arbitrary sub-range.
  const uint64_t c1 = x.layout.begin_offset(1);
  const uint64_t c2 = x.layout.chunks[1].end_offset - 1;
  auto chunk = Fetch(url, RangeHeader(c1, c2));
  ASSERT_EQ(chunk.result_int(), 206u);
  EXPECT_EQ(ToBytes(chunk.body()), Slice(x.body, c1, c2));
  const auto decoded = DecodeChunks(chunk.body());
  ASSERT_EQ(decoded.size(), 1u);
  EXPECT_EQ(decoded[0], Slice(file, x.layout.chunks[0].unpacked_size,
                              x.layout.chunks[0].unpacked_size + x.layout.chunks[1].unpacked_size - 1));
  auto sub = Fetch(url, RangeHeader(8, 100));
  ASSERT_EQ(sub.result_int(), 206u);
  EXPECT_EQ(sub[bhttp::field::content_range], "bytes 8-100/" + std::to_string(stored));
  EXPECT_EQ(ToBytes(sub.body()), Slice(x.body, 8, 100));

  // Two sub-ranges: multipart/byteranges.
  auto multi = Fetch(url, "bytes=10-14,1000-1999");
  ASSERT_EQ(multi.result_int(), 206u);
  const std::string ct(multi[bhttp::field::content_type]);
  ASSERT_EQ(ct.rfind("multipart/byteranges; boundary=", 0), 0u) << ct;
  const std::string boundary = ct.substr(ct.find('=') + 1);
  const std::string total = std::to_string(stored);
  const std::string expect =
      "--" + boundary + "\r\nContent-Type: application/octet-stream\r\nContent-Range: bytes 10-14/" + total +
      "\r\n\r\n" + Str(Slice(x.body, 10, 14)) + "\r\n--" + boundary +
      "\r\nContent-Type: application/octet-stream\r\nContent-Range: bytes 1000-1999/" + total + "\r\n\r\n" +
      Str(Slice(x.body, 1000, 1999)) + "\r\n--" + boundary + "--\r\n";
  EXPECT_TRUE(multi.body() == expect);

  // No Range header: every granted range.
  auto no_range = Fetch(url);
  ASSERT_EQ(no_range.result_int(), 206u);
  EXPECT_TRUE(no_range.body() == Str(x.body));

  // Outside the signed ranges: refused (403), even when the bytes exist (the footer).
  for (const std::string& range :
       std::vector<std::string>{RangeHeader(0, region), RangeHeader(region, region + 10),
                                "bytes=0-10," + std::to_string(region) + "-" + std::to_string(region),
                                "bytes=" + std::to_string(region) + "-", "bytes=-10"}) {
    auto outside = Fetch(url, range);
    EXPECT_EQ(outside.result_int(), 403u) << range;
    EXPECT_EQ(outside.body(), Err("range outside the signed ranges")) << range;
  }
  // Past the end of the stored object: unsatisfiable.
  auto beyond = Fetch(url, RangeHeader(stored, stored + 5));
  EXPECT_EQ(beyond.result_int(), 416u);
  EXPECT_EQ(beyond.body(), Err("unsatisfiable Range header"));
}

TEST_F(CasApi, TransferUrlsRefuseTamperingExpiryAndMalformedQueries) {
  const auto up = Build({xet::testing::TextLikeBytes(15, 200000)});
  ASSERT_EQ(up.xorbs.size(), 1u);
  Upload(up);
  const auto& x = up.xorbs[0];
  auto answer = Get("/v2/reconstructions/" + up.file_hashes[0].hex(), Read());
  ASSERT_EQ(answer.result_int(), 200u);
  const auto entry = json::parse(answer.body()).at("xorbs").at(x.hash.hex()).as_array().at(0).as_object();
  const std::string url(entry.at("url").as_string());
  const std::string range = RangeHeader(0, 99);
  ASSERT_EQ(Fetch(url, range).result_int(), 206u);

  const size_t s = url.find("&s=");
  ASSERT_NE(s, std::string::npos);
  std::string bad_sig = url;
  bad_sig.back() = bad_sig.back() == '0' ? '1' : '0';
  auto tampered = Fetch(bad_sig, range);
  EXPECT_EQ(tampered.result_int(), 403u);
  EXPECT_EQ(tampered.body(), Err("transfer URL signature does not match"));
  // Widening the granted range breaks the signature too.
  std::string wider = url;
  const size_t r = wider.find("?r=0-");
  ASSERT_NE(r, std::string::npos);
  wider.insert(r + 5, "9");
  EXPECT_EQ(Fetch(wider, range).body(), Err("transfer URL signature does not match"));
  // Another xorb under the same signature.
  xet::XorbHash other = x.hash;
  other.bytes[0] ^= 1;
  std::string moved = url;
  moved.replace(moved.find(x.hash.hex()), 64, other.hex());
  EXPECT_EQ(Fetch(moved, range).result_int(), 403u);
  // A valid signature for a xorb that is not stored.
  auto unstored = Fetch(Signer().Url(other, {{0, 99}}, Now() + 60), range);
  EXPECT_EQ(unstored.result_int(), 404u);
  EXPECT_TRUE(json::parse(unstored.body()).as_object().contains("error"));

  // Malformed URLs.
  const std::string path = url.substr(base_.size());
  for (const std::string& target : std::vector<std::string>{
           path.substr(0, path.find("&s=")), path.substr(0, path.find('?')),
           path.substr(0, path.find("&s=")) + "&s=zz", "/v1/transfer/nothex" + path.substr(path.find('?')),
           path.substr(0, path.find("?r=")) + "?r=x-y" + path.substr(path.find("&x="))}) {
    auto res = Get(target, {}, range);
    EXPECT_EQ(res.result_int(), 400u) << target;
    EXPECT_EQ(res.body(), Err("malformed transfer URL")) << target;
  }

  // Valid through the expiry second, refused after it (403, so the client asks for fresh URLs).
  clock_.Advance(kUrlTtl);
  EXPECT_EQ(Fetch(url, range).result_int(), 206u);
  clock_.Advance(1);
  auto expired = Fetch(url, range);
  EXPECT_EQ(expired.result_int(), 403u);
  EXPECT_EQ(expired.body(), Err("transfer URL expired; request a fresh reconstruction"));
  // A fresh answer works again.
  EXPECT_EQ(Download(up.file_hashes[0], cas::ApiVersion::kV2), xet::testing::TextLikeBytes(15, 200000));
}

// A relay's ranges, as the mirror's would be: one whose bytes arrived and verified (in a file, from byte 5
// on), one whose bytes did not.
class CasApiRelaying : public CasApi {
 protected:
  class Range final : public cas::RelayedRange {
   public:
    Range(std::string bytes, bool verified) : bytes_(std::move(bytes)), verified_(verified) {}
    uint64_t length() const override { return bytes_.size(); }
    Result<cas::RelayedBytes> AwaitBytes() const override {
      if (!verified_) return Unavailable("upstream's bytes of this range did not verify");
      UniqueFd fd(::memfd_create("relayed", MFD_CLOEXEC));
      const std::string file = "junk!" + bytes_;
      if (!fd.valid() || ::write(fd.get(), file.data(), file.size()) != static_cast<ssize_t>(file.size()))
        return IoError("memfd");
      return cas::RelayedBytes{.fd = std::move(fd), .offset = 5};
    }

   private:
    std::string bytes_;
    bool verified_;
  };

  CasApiRelaying() {
    good_.bytes.fill(1);
    bad_.bytes.fill(2);
  }
  CasRouteOptions Routes() const override { return {.relay = &relay_}; }

  xet::XorbHash good_, bad_;
  const std::string bytes_ = std::string(60, 'a') + std::string(40, 'b');
  mutable cas::FunctionRelay relay_{
      [](const xet::FileHash&, const std::string&, std::optional<cas::ByteRange>) {
        return std::optional<cas::ReconstructionPlan>();
      },
      [this](const xet::XorbHash& x, uint64_t first,
             uint64_t last) -> std::shared_ptr<const cas::RelayedRange> {
        if (x == good_ && first == 100 && last == 199) return std::make_shared<const Range>(bytes_, true);
        if (x == bad_) return std::make_shared<const Range>(std::string(last - first + 1, 'x'), false);
        return nullptr;
      }};
};

// A relayed range is sent from the file its relay gives once its bytes verified; one whose bytes did not is a
// 503 before any header went out (the client asks again), never a 206 cut short.
TEST_F(CasApiRelaying, ARelayedRangeIsSentOnceVerifiedAndA503WhenItDidNotVerify) {
  auto sent = Fetch(Signer().Url(good_, {{100, 199}}, Now() + 60), RangeHeader(100, 199));
  ASSERT_EQ(sent.result_int(), 206u) << sent.body();
  EXPECT_EQ(sent[bhttp::field::content_range], "bytes 100-199/*");
  EXPECT_EQ(sent.body(), bytes_);
  auto whole_grant = Fetch(Signer().Url(good_, {{100, 199}}, Now() + 60));  // no Range header: the grant
  ASSERT_EQ(whole_grant.result_int(), 206u);
  EXPECT_EQ(whole_grant.body(), bytes_);

  auto failed = Fetch(Signer().Url(bad_, {{0, 99}}, Now() + 60), RangeHeader(0, 99));
  EXPECT_EQ(failed.result_int(), 503u);
  EXPECT_EQ(failed.body(), Err("upstream's bytes of this range did not verify"));

  // A range the relay does not hold (its transfer is over): 403, so the client asks for the file again.
  auto gone = Fetch(Signer().Url(good_, {{0, 99}}, Now() + 60), RangeHeader(0, 99));
  EXPECT_EQ(gone.result_int(), 403u);
}

// ---------------------------------------------------------------------------------------------------------------
// Full downloads

TEST_F(CasApi, FullDownloadsThroughHttpMatchTheOriginals) {
  const std::vector<Bytes> files{xet::testing::TextLikeBytes(16, 3 << 20),
                                 xet::testing::SplitMix64Bytes(17, 700000), Bytes(1, 'x')};
  const auto up = Build(files, 1 << 20);
  ASSERT_GT(up.xorbs.size(), 2u);
  Upload(up);
  for (size_t i = 0; i < files.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_TRUE(Download(up.file_hashes[i], cas::ApiVersion::kV2) == files[i]);
    EXPECT_TRUE(Download(up.file_hashes[i], cas::ApiVersion::kV1) == files[i]);
  }
  // Ranges across xorb boundaries, and ranges running past the end.
  const Bytes& big = files[0];
  for (auto [first, last] : std::vector<std::pair<uint64_t, uint64_t>>{
           {100000, 2'500'000}, {1'048'575, 1'048'577}, {3'000'000, 99'999'999}}) {
    SCOPED_TRACE(RangeHeader(first, last));
    const Bytes want = Slice(big, first, std::min<uint64_t>(last, big.size() - 1));
    EXPECT_TRUE(Download(up.file_hashes[0], cas::ApiVersion::kV2, cas::ByteRange{first, last}) == want);
    EXPECT_TRUE(Download(up.file_hashes[0], cas::ApiVersion::kV1, cas::ByteRange{first, last}) == want);
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Everything else

// /readyz answers 200 while every check passes and 503 naming the first that fails; no token needed. The
// index's gauges are on /metrics.
TEST_F(CasApi, ReadinessFollowsItsChecksAndIndexMetrics) {
  std::atomic<bool> store_ok{true};
  RegisterReadiness(*server_,
                    {{"index", [this] { return index_->Ping(); }}, {"store", [&store_ok]() -> Status {
                                                                      if (store_ok) return Ok{};
                                                                      return Unavailable("not answering");
                                                                    }}});
  RegisterIndexMetrics(*server_, *index_);
  auto ready = Get("/readyz");
  EXPECT_EQ(ready.result_int(), 200u);
  EXPECT_EQ(ready.body(), R"({"status":"ready"})");
  store_ok = false;
  auto down = Get("/readyz");
  EXPECT_EQ(down.result_int(), 503u);
  EXPECT_EQ(down.body(), Err("store: not answering"));
  store_ok = true;
  EXPECT_EQ(Get("/readyz").result_int(), 200u);

  Upload(Build({xet::testing::TextLikeBytes(19, 50000)}));
  const std::string metrics = Get("/metrics").body();
  EXPECT_NE(metrics.find("\ncairn_stored_xorbs 1\n"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("\ncairn_index_write_requests 2\n"), std::string::npos) << metrics;  // xorb + shard
  EXPECT_NE(metrics.find("\ncairn_index_writes_queued 0\n"), std::string::npos) << metrics;
}

// hf_xet 1.8 asks for a grant before each xorb and falls back to POST /v1/xorbs at once on a 404 (on nothing
// else: a 405 or 501 fails the upload). cairn offers no grants: a writer gets that 404, and the xorb then
// uploads.
TEST_F(CasApi, XorbGrantRequestsAreAnswered404SoTheStockClientPostsTheXorb) {
  const auto up = Build({xet::testing::TextLikeBytes(23, 50000)});
  const std::string grant = "/v1/xorb-grants/default/" + up.xorbs[0].hash.hex();
  const std::string body = R"({"length":)" + std::to_string(up.xorbs[0].body.size()) +
                           R"(,"checksum":{"algo":"crc64nvme","value":"18446744073709551615"}})";
  auto r = Post(grant, body, Write());
  EXPECT_EQ(r.result_int(), 404u);
  EXPECT_NE(r.body().find("POST the xorb to /v1/xorbs/"), std::string::npos) << r.body();
  EXPECT_EQ(Post(grant, body).result_int(), 401u);          // no token
  EXPECT_EQ(Post(grant, body, Read()).result_int(), 403u);  // a read token uploads nothing either
  EXPECT_EQ(Post(grant, std::string(5000, ' '), Write()).result_int(), 413u);
  Upload(up);  // the fallback the client takes
  const std::string metrics = Get("/metrics").body();
  EXPECT_NE(metrics.find(R"(cairn_http_requests_total{route="xorb_grant",method="POST",status="404"} 1)"),
            std::string::npos)
      << metrics;
}

TEST_F(CasApi, TelemetryHealthMetricsAndRouting) {
  const std::string telemetry =
      R"({"time":"2026-01-01T00:00:00Z","event":"xet_upload_summary","session_id":"s","user_agent":"u","metrics":{}})";
  auto t = Post("/v1/telemetry", telemetry, Read());
  EXPECT_EQ(t.result_int(), 200u);
  EXPECT_EQ(t.body(), "{}");
  EXPECT_EQ(Post("/v1/telemetry", telemetry).result_int(), 401u);

  auto health = Get("/healthz");
  EXPECT_EQ(health.result_int(), 200u);
  EXPECT_EQ(health.body(), R"({"status":"ok"})");

  auto nope = Get("/v1/nope", Read());
  EXPECT_EQ(nope.result_int(), 404u);
  EXPECT_EQ(nope.body(), Err("not found"));
  EXPECT_EQ(Get("/v3/reconstructions/" + kZeroHex, Read()).result_int(), 404u);
  EXPECT_EQ(Get("/v2/file-chunk-hashes/" + kZeroHex, Read()).result_int(), 404u);

  auto wrong_method = Get("/v1/shards", Read());
  EXPECT_EQ(wrong_method.result_int(), 405u);
  EXPECT_EQ(wrong_method[bhttp::field::allow], "POST");
  EXPECT_EQ(wrong_method.body(), Err("method not allowed"));
  auto get_xorb = Get("/v1/xorbs/default/" + kZeroHex, Read());
  EXPECT_EQ(get_xorb.result_int(), 405u);
  EXPECT_EQ(get_xorb[bhttp::field::allow], "POST");
  auto post_recon = Post("/v2/reconstructions/" + kZeroHex, "", Read());
  EXPECT_EQ(post_recon.result_int(), 405u);
  EXPECT_EQ(post_recon[bhttp::field::allow], "GET, HEAD");

  // Request counters by route name and status for the CAS routes.
  const auto up = Build({xet::testing::TextLikeBytes(18, 100000)});
  Upload(up);
  EXPECT_EQ(Get("/v1/reconstructions/" + up.file_hashes[0].hex(), Read()).result_int(), 200u);
  EXPECT_EQ(Get("/v1/chunks/default/" + kZeroHex, Read()).result_int(), 404u);
  const std::vector<std::string> want{
      R"(cairn_http_requests_total{route="xorb_upload",method="POST",status="200"} 1)",
      R"(cairn_http_requests_total{route="shard_v1",method="POST",status="200"} 1)",
      R"(cairn_http_requests_total{route="reconstruction_v1",method="GET",status="200"} 1)",
      R"(cairn_http_requests_total{route="dedup",method="GET",status="404"} 1)",
      R"(cairn_http_requests_total{route="telemetry",method="POST",status="200"} 1)",
      R"(cairn_http_requests_total{route="telemetry",method="POST",status="401"} 1)",
      R"(cairn_http_requests_total{route="unmatched",method="GET",status="404"} 3)",
      R"(cairn_http_request_duration_seconds_count{route="shard_v1"} 1)",
  };
  const std::string text = MetricsWith(want);
  for (const auto& w : want) EXPECT_NE(text.find(w), std::string::npos) << w << "\n" << text;
}

}  // namespace
}  // namespace cairn::api
