// In-process tests of the server: a real Server on an ephemeral port, a small Beast client.
#include "http/server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "http/admission.h"
#include "http/range.h"
#include "http/test_util.h"

namespace cairn::http {
namespace {

using namespace std::chrono_literals;
using testing::Client;
using testing::MakeJwt;
using testing::RandomBytes;
namespace bhttp = boost::beast::http;
using namespace std::string_literals;

const std::string kKey(64, 'k');

// What the server sent on `c`'s connection until it closed it (`closed`), or until `wait` passed.
struct RawAnswer {
  std::string bytes;
  bool closed = false;
};
RawAnswer ReadUntilClosed(Client& c, std::chrono::milliseconds wait = 3s) {
  RawAnswer out;
  const int fd = c.socket().native_handle();
  const auto until = std::chrono::steady_clock::now() + wait;
  char buf[4096];
  while (true) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
    pollfd p{fd, POLLIN, 0};
    if (left <= 0ms || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) return out;
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) {
      out.closed = true;  // EOF, or a reset
      return out;
    }
    out.bytes.append(buf, static_cast<size_t>(n));
  }
}

// How many times `needle` occurs in `haystack`, ignoring case.
int CountOf(std::string haystack, std::string needle) {
  for (auto* s : {&haystack, &needle})
    for (char& ch : *s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  int n = 0;
  for (size_t at = haystack.find(needle); at != std::string::npos; at = haystack.find(needle, at + 1)) ++n;
  return n;
}

// The log lines spdlog writes while it is installed as the default logger (restored when it goes).
class CapturedLog {
 public:
  CapturedLog() : sink_(std::make_shared<Sink>()), previous_(spdlog::default_logger()) {
    spdlog::set_default_logger(std::make_shared<spdlog::logger>("captured", sink_));
  }
  ~CapturedLog() { spdlog::set_default_logger(previous_); }
  CapturedLog(const CapturedLog&) = delete;
  CapturedLog& operator=(const CapturedLog&) = delete;
  std::string text() const { return sink_->text(); }

 private:
  class Sink final : public spdlog::sinks::base_sink<std::mutex> {
   public:
    std::string text() {
      std::lock_guard lock(mutex_);
      return text_;
    }

   protected:
    void sink_it_(const spdlog::details::log_msg& msg) override {
      spdlog::memory_buf_t out;
      formatter_->format(msg, out);
      text_.append(out.data(), out.size());
    }
    void flush_() override {}

   private:
    std::string text_;
  };
  std::shared_ptr<Sink> sink_;
  std::shared_ptr<spdlog::logger> previous_;
};

// Collects a streamed body and answers it back.
class EchoSink : public BodySink {
 public:
  void OnData(std::span<const uint8_t> data, Next next) override {
    got_.append(reinterpret_cast<const char*>(data.data()), data.size());
    if (++pieces_ % 2 == 0) {
      next(Ok{});  // inline
    } else {
      std::thread([n = std::move(next)] { n(Ok{}); }).detach();  // from another thread
    }
  }
  void OnEnd(std::shared_ptr<Exchange> ex) override { ex->Respond(Response::Binary(200, std::move(got_))); }

 private:
  std::string got_;
  size_t pieces_ = 0;
};

// Bytes read with blocking calls (as from an object store), failing from `fail_at` on; with `streams`, read
// through a stream per range (as one GET of an object store), which counts reads that overlapped another.
class StringSource final : public ByteSource {
 public:
  StringSource(std::string data, uint64_t fail_at, bool streams)
      : data_(std::move(data)), fail_at_(fail_at), streams_(streams) {}
  Status ReadAt(uint64_t offset, std::span<uint8_t> out) const override {
    if (offset + out.size() > fail_at_) return Unavailable("the store went away");
    std::memcpy(out.data(), data_.data() + offset, out.size());
    ++reads_;
    return Ok{};
  }
  std::unique_ptr<ByteStream> Stream(uint64_t offset, uint64_t length) const override {
    if (!streams_) return nullptr;
    ++streams_opened_;
    return std::make_unique<Sequential>(*this, offset, offset + length);
  }
  int reads() const { return reads_.load(); }
  int streams_opened() const { return streams_opened_.load(); }
  int overlaps() const { return overlaps_.load(); }

 private:
  class Sequential final : public ByteStream {
   public:
    Sequential(const StringSource& s, uint64_t at, uint64_t end) : s_(s), at_(at), end_(end) {}
    Status Read(std::span<uint8_t> out) override {
      if (busy_.exchange(true)) ++s_.overlaps_;
      if (out.size() > end_ - at_) return IoError("read past the range");
      auto st = s_.ReadAt(at_, out);
      at_ += out.size();
      busy_ = false;
      return st;
    }

   private:
    const StringSource& s_;
    uint64_t at_;
    const uint64_t end_;
    std::atomic<bool> busy_{false};
  };

  std::string data_;
  uint64_t fail_at_;
  bool streams_;
  mutable std::atomic<int> reads_{0}, streams_opened_{0}, overlaps_{0};
};

class ServerTest : public ::testing::Test {
 protected:
  void SetUp() override { StartServer({}); }
  void TearDown() override {
    if (server_) {
      server_->Stop(2s);
      server_->Wait();
    }
    std::filesystem::remove(file_path_);
  }

  void StartServer(ServerOptions o) {
    o.host = "127.0.0.1";
    o.port = 0;
    o.io_threads = 2;
    o.worker_threads = 2;
    server_ = std::make_unique<Server>(o, std::make_shared<Authenticator>(kKey));
    file_path_ =
        (std::filesystem::temp_directory_path() / ("cairn-http-test-" + std::to_string(::getpid()))).string();
    file_data_ = RandomBytes(3 << 20, 7);
    std::ofstream(file_path_, std::ios::binary) << file_data_;
    Register(server_->router());
    ASSERT_TRUE(server_->Listen().ok());
    server_->Start();
    port_ = server_->port();
    ASSERT_NE(port_, 0);
  }

  void Register(Router& r) {
    r.Handle(Verb::get, "/echo/{a}/{b}", {}, [](const std::shared_ptr<Exchange>& ex) {
      const auto& q = ex->request();
      ex->Respond(Response::Json(200, "{\"a\":\"" + q.Param("a") + "\",\"b\":\"" + q.Param("b") +
                                          "\",\"x\":\"" + std::string(q.Query("x").value_or("")) + "\"}"));
    });
    r.Handle(Verb::post, "/small", RouteOptions().MaxBody(1024), [](const std::shared_ptr<Exchange>& ex) {
      ex->Respond(Response::Text(200, std::to_string(ex->request().body.size())));
    });
    r.HandleStream(Verb::post, "/upload", RouteOptions().MaxBody(64 << 20),
                   [](const std::shared_ptr<Exchange>&) -> Result<std::unique_ptr<BodySink>> {
                     return std::unique_ptr<BodySink>(std::make_unique<EchoSink>());
                   });
    r.HandleStream(Verb::post, "/reject", RouteOptions().MaxBody(64 << 20),
                   [](const std::shared_ptr<Exchange>&) -> Result<std::unique_ptr<BodySink>> {
                     return Malformed("bad hash in path");
                   });
    r.Handle(Verb::get, "/ndjson", {}, [](const std::shared_ptr<Exchange>& ex) {
      auto stream = ex->StartStream(200, {{"Content-Type", "application/x-ndjson"}});
      ex->Offload([stream] {
        for (int i = 0; i < 100; ++i) {
          stream->Write("{\"i\":" + std::to_string(i) + "}\n");
          if (i % 25 == 0) std::this_thread::sleep_for(5ms);
        }
        stream->Finish();
      });
    });
    r.Handle(Verb::get, "/file", {}, [this](const std::shared_ptr<Exchange>& ex) {
      auto file = File::Open(file_path_);
      if (!file) return ex->Fail(file.error());
      const uint64_t size = (*file)->size();
      std::vector<ByteRange> ranges;
      if (auto h = ex->request().Header("Range"); !h.empty()) {
        auto parsed = ParseRange(h, size);
        if (!parsed) return ex->Fail(parsed.error());
        ranges = std::move(*parsed);
      }
      ex->Respond(RangeResponse(*file, 0, size, ranges, "application/octet-stream"));
    });
    source_data_ = RandomBytes(10 << 20, 9);
    for (const auto& [path, fail_at] : {std::pair<std::string, uint64_t>{"/source", UINT64_MAX},
                                        std::pair<std::string, uint64_t>{"/broken-source", 5 << 20},
                                        std::pair<std::string, uint64_t>{"/stream-source", UINT64_MAX},
                                        std::pair<std::string, uint64_t>{"/broken-stream-source", 5 << 20}}) {
      auto source =
          std::make_shared<const StringSource>(source_data_, fail_at, path.find("stream") != path.npos);
      sources_[path] = source;
      r.Handle(
          Verb::get, path, {}, [source, size = source_data_.size()](const std::shared_ptr<Exchange>& ex) {
            std::vector<ByteRange> ranges;
            if (auto h = ex->request().Header("Range"); !h.empty()) ranges = *ParseRange(h, size);
            ex->Respond(
                RangeResponse(std::shared_ptr<const ByteSource>(source), size, ranges, "application/x-test"));
          });
    }
    r.Handle(Verb::get, "/read", RouteOptions().Auth(Permission::kRead),
             [](const std::shared_ptr<Exchange>& ex) {
               ex->Respond(Response::Text(200, ex->request().principal->scope));
             });
    r.Handle(Verb::post, "/write", RouteOptions().Auth(Permission::kWrite),
             [](const std::shared_ptr<Exchange>& ex) {
               ex->Respond(Response::Text(200, "wrote to " + ex->request().principal->scope));
             });
    r.Handle(Verb::get, "/slow", {}, [](const std::shared_ptr<Exchange>& ex) {
      ex->Offload([] { std::this_thread::sleep_for(400ms); },
                  [ex] { ex->Respond(Response::Text(200, "done")); });
    });
    r.Handle(Verb::get, "/forgetful", {}, [](const std::shared_ptr<Exchange>&) {});
  }

  std::unique_ptr<Server> server_;
  uint16_t port_ = 0;
  std::string file_path_, file_data_, source_data_;
  std::map<std::string, std::shared_ptr<const StringSource>> sources_;
};

TEST_F(ServerTest, HealthzAndRequestId) {
  Client c(port_);
  auto res = c.Get("/healthz");
  EXPECT_EQ(res.result_int(), 200u);
  EXPECT_NE(res.body().find("ok"), std::string::npos);
  EXPECT_EQ(res["X-Request-Id"].size(), 16u);
  EXPECT_EQ(res[bhttp::field::server], "cairn");

  bhttp::request<bhttp::string_body> req{bhttp::verb::get, "/healthz", 11};
  req.set("X-Request-Id", "client-chosen-id.1");
  EXPECT_EQ(c.Send(req)["X-Request-Id"], "client-chosen-id.1");
  req.set("X-Request-Id", "bad id with spaces");
  EXPECT_EQ(c.Send(req)["X-Request-Id"].size(), 16u);
}

TEST_F(ServerTest, CapturesAndQuery) {
  Client c(port_);
  auto res = c.Get("/echo/default/ab%2Fc?x=1%202");
  EXPECT_EQ(res.result_int(), 200u);
  EXPECT_EQ(res.body(), R"({"a":"default","b":"ab/c","x":"1 2"})");
}

TEST_F(ServerTest, UnknownRouteIs404Json) {
  Client c(port_);
  auto res = c.Get("/v1/nothing/here");
  EXPECT_EQ(res.result_int(), 404u);
  EXPECT_EQ(res[bhttp::field::content_type], "application/json");
  EXPECT_EQ(res.body(), R"({"error":"not found"})");
  EXPECT_EQ(c.Get("//healthz").result_int(), 404u);
  EXPECT_TRUE(res.keep_alive());
  EXPECT_EQ(c.Get("/healthz").result_int(), 200u);  // same connection still usable
}

TEST_F(ServerTest, WrongMethodIs405) {
  Client c(port_);
  auto res = c.Post("/healthz", "");
  EXPECT_EQ(res.result_int(), 405u);
  EXPECT_EQ(res[bhttp::field::allow], "GET, HEAD");
  EXPECT_NE(res.body().find("\"error\""), std::string::npos);
  res = c.Head("/write");  // a POST-only route
  EXPECT_EQ(res.result_int(), 405u);
  EXPECT_EQ(res[bhttp::field::allow], "POST");
}

// HEAD answers with the GET answer's header, Content-Length included, and no body: the next request on the
// same connection parses cleanly only if no body bytes were sent (also for a sendfile body).
TEST_F(ServerTest, HeadIsTheGetHeaderWithoutItsBody) {
  Client c(port_);
  const auto get = c.Get("/healthz");
  auto head = c.Head("/healthz");
  EXPECT_EQ(head.result_int(), 200u);
  EXPECT_EQ(head[bhttp::field::content_length], std::to_string(get.body().size()));
  EXPECT_EQ(head[bhttp::field::content_type], get[bhttp::field::content_type]);
  EXPECT_TRUE(head.body().empty());
  EXPECT_EQ(c.Get("/healthz").body(), get.body());

  head = c.Head("/file");
  EXPECT_EQ(head.result_int(), 200u);
  EXPECT_EQ(head[bhttp::field::content_length], std::to_string(file_data_.size()));
  EXPECT_EQ(c.Get("/file").body(), file_data_);
  EXPECT_EQ(c.Head("/nothing").result_int(), 404u);
}

TEST_F(ServerTest, KeepAliveReusesTheConnection) {
  const double before = server_->metrics().Counter("cairn_http_connections_total", "").Value({});
  Client c(port_);
  for (int i = 0; i < 5; ++i) {
    auto res = c.Get("/echo/x/" + std::to_string(i));
    EXPECT_EQ(res.result_int(), 200u);
    EXPECT_TRUE(res.keep_alive());
  }
  EXPECT_EQ(c.Post("/small", "abc").body(), "3");
  EXPECT_EQ(server_->metrics().Counter("cairn_http_connections_total", "").Value({}), before + 1);
}

TEST_F(ServerTest, BodyOverTheLimitIs413) {
  {
    Client c(port_);
    auto res = c.Post("/small", std::string(2000, 'a'));
    EXPECT_EQ(res.result_int(), 413u);
    EXPECT_FALSE(res.keep_alive());
  }
  {
    Client c(port_);  // chunked: the limit is found while reading
    std::string raw = "POST /small HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
    for (int i = 0; i < 3; ++i) raw += "200\r\n" + std::string(512, 'b') + "\r\n";
    raw += "0\r\n\r\n";
    c.WriteRaw(raw);
    EXPECT_EQ(c.Read().result_int(), 413u);
  }
  Client c(port_);
  EXPECT_EQ(c.Post("/small", std::string(1024, 'a')).body(), "1024");
}

TEST_F(ServerTest, StreamedBodyArrivesCompleteAndInOrder) {
  Client c(port_);
  const std::string data = RandomBytes(5 << 20, 1);
  auto res = c.Post("/upload", data);
  ASSERT_EQ(res.result_int(), 200u);
  EXPECT_TRUE(res.body() == data);
  // Chunked transfer encoding, and the connection is reusable afterwards.
  c.WriteRaw(
      "POST /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n "
      "world\r\n0\r\n\r\n");
  res = c.Read();
  EXPECT_EQ(res.body(), "hello world");
  EXPECT_EQ(c.Post("/upload", "").body(), "");
  EXPECT_EQ(c.Get("/healthz").result_int(), 200u);
}

TEST_F(ServerTest, StreamHandlerCanRejectBeforeTheBody) {
  Client c(port_);
  auto res = c.Post("/reject", std::string(1 << 20, 'z'));
  EXPECT_EQ(res.result_int(), 400u);
  EXPECT_EQ(res.body(), R"({"error":"bad hash in path"})");
  EXPECT_FALSE(res.keep_alive());
}

TEST_F(ServerTest, ChunkedResponseArrivesComplete) {
  Client c(port_);
  auto res = c.Get("/ndjson");
  ASSERT_EQ(res.result_int(), 200u);
  EXPECT_TRUE(res.chunked());
  EXPECT_EQ(res[bhttp::field::content_type], "application/x-ndjson");
  std::string expect;
  for (int i = 0; i < 100; ++i) expect += "{\"i\":" + std::to_string(i) + "}\n";
  EXPECT_EQ(res.body(), expect);
  EXPECT_EQ(c.Get("/healthz").result_int(), 200u);
}

// A client that goes away while a file is sent to it with sendfile(2): the write fails with EPIPE, which
// raises SIGPIPE — by default the end of the process (this test's too). The server ignores it and serves on.
TEST_F(ServerTest, AClientGoneWhileAFileIsSentLeavesTheServerServing) {
  struct sigaction before {};
  ASSERT_EQ(::sigaction(SIGPIPE, nullptr, &before), 0);
  EXPECT_EQ(before.sa_handler, SIG_IGN);  // set by the server itself, not by this test
  for (int i = 0; i < 3; ++i) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_GE(fd, 0);
    const int small = 4096;  // the server fills this window, then waits to send the rest
    ASSERT_EQ(::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small), 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port_);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr), 0);
    const std::string req = "GET /file HTTP/1.1\r\nHost: x\r\n\r\n";
    ASSERT_EQ(::write(fd, req.data(), req.size()), static_cast<ssize_t>(req.size()));
    char head[1024];
    ASSERT_GT(::read(fd, head, sizeof head), 0);
    const linger reset{.l_onoff = 1, .l_linger = 0};  // close with a reset: every later write fails
    ASSERT_EQ(::setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, sizeof reset), 0);
    ::close(fd);
    std::this_thread::sleep_for(100ms);
  }
  Client c(port_);
  EXPECT_EQ(c.Get("/healthz").result_int(), 200u);
  EXPECT_EQ(c.Get("/file").body(), file_data_);
}

TEST_F(ServerTest, FileRanges) {
  Client c(port_);
  auto whole = c.Get("/file");
  ASSERT_EQ(whole.result_int(), 200u);
  EXPECT_TRUE(whole.body() == file_data_);

  bhttp::request<bhttp::string_body> req{bhttp::verb::get, "/file", 11};
  req.set(bhttp::field::range, "bytes=1000-1999");
  auto one = c.Send(req);
  ASSERT_EQ(one.result_int(), 206u);
  EXPECT_EQ(one[bhttp::field::content_range], "bytes 1000-1999/" + std::to_string(file_data_.size()));
  EXPECT_TRUE(one.body() == file_data_.substr(1000, 1000));

  req.set(bhttp::field::range, "bytes=10-14,2000000-2000009");
  auto multi = c.Send(req);
  ASSERT_EQ(multi.result_int(), 206u);
  const std::string ct(multi[bhttp::field::content_type]);
  ASSERT_EQ(ct.rfind("multipart/byteranges; boundary=", 0), 0u) << ct;
  const std::string boundary = ct.substr(ct.find('=') + 1);
  const std::string expect =
      "--" + boundary + "\r\nContent-Type: application/octet-stream\r\nContent-Range: bytes 10-14/" +
      std::to_string(file_data_.size()) + "\r\n\r\n" + file_data_.substr(10, 5) + "\r\n--" + boundary +
      "\r\nContent-Type: application/octet-stream\r\nContent-Range: bytes 2000000-2000009/" +
      std::to_string(file_data_.size()) + "\r\n\r\n" + file_data_.substr(2000000, 10) + "\r\n--" + boundary +
      "--\r\n";
  EXPECT_TRUE(multi.body() == expect);

  req.set(bhttp::field::range, "bytes=99999999-");
  EXPECT_EQ(c.Send(req).result_int(), 416u);
}

// A body read through a ByteSource (a store without files) arrives whole, in blocks read ahead of the socket,
// whole or in ranges, multipart included; a source failing after the header cuts the response short (the
// client sees the connection close before Content-Length bytes, never a wrong byte).
TEST_F(ServerTest, SourceRanges) {
  for (const std::string kind : {"source", "stream-source"}) {
    SCOPED_TRACE(kind);
    const std::string path = "/" + kind;
    Client c(port_);
    auto whole = c.Get(path);
    ASSERT_EQ(whole.result_int(), 200u);
    EXPECT_EQ(whole[bhttp::field::content_type], "application/x-test");
    EXPECT_TRUE(whole.body() == source_data_);

    bhttp::request<bhttp::string_body> req{bhttp::verb::get, path, 11};
    req.set(bhttp::field::range, "bytes=4194300-8388700");
    auto one = c.Send(req);
    ASSERT_EQ(one.result_int(), 206u);
    EXPECT_TRUE(one.body() == source_data_.substr(4194300, 8388700 - 4194300 + 1));

    req.set(bhttp::field::range, "bytes=0-0,9000000-9000099");
    auto multi = c.Send(req);
    ASSERT_EQ(multi.result_int(), 206u);
    EXPECT_NE(multi.body().find(source_data_.substr(9000000, 100)), std::string::npos);
    EXPECT_NE(multi.body().find("Content-Range: bytes 0-0/" + std::to_string(source_data_.size())),
              std::string::npos);

    auto head = c.Head(path);  // the header alone, with the body's length
    EXPECT_EQ(head[bhttp::field::content_length], std::to_string(source_data_.size()));

    Client broken(port_);
    broken.WriteRaw("GET /broken-" + kind + " HTTP/1.1\r\nHost: x\r\n\r\n");
    bhttp::response_parser<bhttp::string_body> parser;
    parser.body_limit(1ull << 30);
    boost::beast::flat_buffer buf;
    boost::beast::error_code ec;
    bhttp::read(broken.socket(), buf, parser, ec);
    EXPECT_TRUE(ec) << "a response cut short must not look complete";
    EXPECT_TRUE(parser.is_header_done());
    EXPECT_LT(parser.get().body().size(), source_data_.size());
    EXPECT_TRUE(source_data_.starts_with(parser.get().body()));
  }
  // A streaming source is read through one stream per range (whole, one range, two ranges: four), one block
  // at a time and in order.
  EXPECT_EQ(sources_["/stream-source"]->streams_opened(), 4);
  EXPECT_EQ(sources_["/stream-source"]->overlaps(), 0);
  EXPECT_EQ(sources_["/source"]->streams_opened(), 0);
}

TEST_F(ServerTest, Auth) {
  Client c(port_);
  const int64_t now = UnixNow();
  const auto read = *MintToken(kKey, {"org/repo", Permission::kRead}, 1h);
  const auto write = *MintToken(kKey, {"org/repo", Permission::kWrite}, 1h);
  const std::string claims = R"({"scope":"s","perm":"write","exp":)" + std::to_string(now + 3600);

  auto res = c.Get("/read", "Bearer " + read);
  EXPECT_EQ(res.result_int(), 200u);
  EXPECT_EQ(res.body(), "org/repo");
  EXPECT_EQ(c.Post("/write", "x", "Bearer " + write).result_int(), 200u);
  EXPECT_EQ(c.Get("/read", "Bearer " + write).result_int(), 200u);

  const std::vector<std::pair<std::string, std::string>> unauthorized = {
      {"missing", ""},
      {"malformed", "Bearer not-a-jwt"},
      {"not bearer", "Basic dXNlcjpwYXNz"},
      {"expired", "Bearer " + *MintToken(kKey, {"s", Permission::kWrite}, 1h, now - 7200)},
      {"nbf future",
       "Bearer " + MakeJwt(JWT_ALG_HS256, kKey, claims + R"(,"nbf":)" + std::to_string(now + 600) + "}")},
      {"hs512 same key", "Bearer " + MakeJwt(JWT_ALG_HS512, kKey, claims + "}")},
      {"alg none", "Bearer " + MakeJwt(JWT_ALG_NONE, "", claims + "}")},
      {"bad signature", "Bearer " + MakeJwt(JWT_ALG_HS256, std::string(64, 'x'), claims + "}")},
  };
  for (const auto& [what, header] : unauthorized) {
    Client fresh(port_);
    auto r = fresh.Post("/write", "body", header);
    EXPECT_EQ(r.result_int(), 401u) << what;
    EXPECT_NE(r.body().find("\"error\""), std::string::npos) << what;
  }
  Client fresh(port_);
  auto forbidden = fresh.Post("/write", "body", "Bearer " + read);
  EXPECT_EQ(forbidden.result_int(), 403u);
}

TEST_F(ServerTest, MetricsCountRequestsByRoute) {
  Client c(port_);
  c.Get("/echo/a/b");
  c.Get("/echo/c/d");
  c.Get("/nope");
  auto res = c.Get("/metrics");
  ASSERT_EQ(res.result_int(), 200u);
  const std::string& text = res.body();
  EXPECT_NE(text.find("cairn_http_requests_total{route=\"/echo/{a}/{b}\",method=\"GET\",status=\"200\"} 2"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("cairn_http_requests_total{route=\"unmatched\",method=\"GET\",status=\"404\"} 1"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("cairn_http_request_duration_seconds_count{route=\"/echo/{a}/{b}\"} 2"),
            std::string::npos);
  EXPECT_NE(text.find("cairn_http_response_bytes_total{route=\"/echo/{a}/{b}\"}"), std::string::npos);
}

TEST_F(ServerTest, HandlerWithoutAnswerGives500) {
  Client c(port_);
  auto res = c.Get("/forgetful");
  EXPECT_EQ(res.result_int(), 500u);
  EXPECT_EQ(c.Get("/healthz").result_int(), 200u);
}

TEST_F(ServerTest, StopDrainsInFlightRequests) {
  Client idle(port_);
  EXPECT_EQ(idle.Get("/healthz").result_int(), 200u);  // an idle keep-alive connection
  Client busy(port_);
  bhttp::request<bhttp::string_body> req{bhttp::verb::get, "/slow", 11};
  req.set(bhttp::field::host, "x");
  bhttp::write(busy.socket(), req);
  std::this_thread::sleep_for(100ms);  // the request is in the handler now
  server_->Stop(5s);
  auto res = busy.Read();
  EXPECT_EQ(res.result_int(), 200u);
  EXPECT_EQ(res.body(), "done");
  EXPECT_FALSE(res.keep_alive());
  EXPECT_TRUE(idle.ClosedByPeer());
  server_->Wait();
  EXPECT_THROW(Client{port_}, boost::system::system_error);  // no longer listening
}

// A connection that has sent nothing yet (a browser opens them ahead of its requests) is idle: a stop closes
// it at once instead of waiting out the grace for a request that may never come.
TEST_F(ServerTest, StopClosesAConnectionThatSentNothingYet) {
  Client fresh(port_);
  std::this_thread::sleep_for(50ms);  // accepted, waiting for its first bytes
  const auto t0 = std::chrono::steady_clock::now();
  server_->Stop(30s);
  EXPECT_TRUE(fresh.ClosedByPeer());
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 10s) << "closed at the stop, not after the 30 s grace";
  server_->Wait();
}

TEST_F(ServerTest, StopAbandonsWhatOutlivesTheGrace) {
  Client busy(port_);
  bhttp::request<bhttp::string_body> req{bhttp::verb::get, "/slow", 11};
  req.set(bhttp::field::host, "x");
  bhttp::write(busy.socket(), req);
  std::this_thread::sleep_for(50ms);
  const auto t0 = std::chrono::steady_clock::now();
  server_->Stop(50ms);
  server_->Wait();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 350ms);
}

TEST(ServerTimeouts, SlowBodyIs408) {
  ServerOptions o;
  o.body_min_rate = 4096;
  testing::ExpectSlowBodyIs408(o, [](uint16_t port) { return std::make_unique<Client>(port); });
}

TEST(ServerTimeouts, IdleKeepAliveConnectionIsClosed) {
  ServerOptions o;
  o.port = 0;
  o.io_threads = 1;
  o.idle_timeout = 200ms;
  Server server(o, nullptr);
  ASSERT_TRUE(server.Listen().ok());
  server.Start();
  Client c(server.port());
  EXPECT_EQ(c.Get("/healthz").result_int(), 200u);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(c.ClosedByPeer());
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s);
}

// The refusal observer hears of each request a route refused with 401, 403 or 404, once: refused by the
// route's own token check before the body, or by the handler (from a worker); not an answer that is no
// refusal, nor a path no route knows.
TEST(ServerRefusals, TheObserverHearsOfEachRefusalOnce) {
  ServerOptions o;
  o.port = 0;
  o.io_threads = 1;
  Server server(o, std::make_shared<Authenticator>(kKey));
  std::mutex mu;
  std::vector<std::string> heard;
  server.ObserveRefusals([&](const Request& req, unsigned status) {
    std::lock_guard lock(mu);
    heard.push_back(req.route + " " + std::to_string(status));
  });
  server.router().Handle(Verb::post, "/write", RouteOptions().Name("write").Auth(Permission::kWrite),
                         [](const std::shared_ptr<Exchange>& ex) { ex->Respond(Response::Text(200, "ok")); });
  server.router().Handle(Verb::get, "/deny", RouteOptions().Name("deny"),
                         [](const std::shared_ptr<Exchange>& ex) {
                           ex->Offload([ex] { ex->Respond(Response::ErrorJson(404, "not yours")); });
                         });
  ASSERT_TRUE(server.Listen().ok());
  server.Start();
  const auto read = *MintToken(kKey, {"org/repo", Permission::kRead}, 1h);
  const auto write = *MintToken(kKey, {"org/repo", Permission::kWrite}, 1h);
  Client c(server.port());
  EXPECT_EQ(c.Post("/write", "x", "Bearer " + read).result_int(), 403u);
  Client c2(server.port());
  EXPECT_EQ(c2.Post("/write", "x", "").result_int(), 401u);
  Client c3(server.port());
  EXPECT_EQ(c3.Post("/write", "x", "Bearer " + write).result_int(), 200u);
  EXPECT_EQ(c3.Get("/deny").result_int(), 404u);
  EXPECT_EQ(c3.Get("/nowhere").result_int(), 404u);
  server.Stop(1s);
  server.Wait();
  std::sort(heard.begin(), heard.end());
  EXPECT_EQ(heard, (std::vector<std::string>{"deny 404", "write 401", "write 403"}));
}

// A server with the given caps and two routes: /whoami answers the client address the request was taken
// from, /slow holds its request for 400 ms.
class ServerCaps : public ::testing::Test {
 protected:
  void Start(ServerOptions o) {
    o.port = 0;
    o.io_threads = 1;
    server_ = std::make_unique<Server>(o, nullptr);
    server_->router().Handle(Verb::get, "/whoami", {}, [](const std::shared_ptr<Exchange>& ex) {
      ex->Respond(Response::Text(200, ex->request().remote));
    });
    server_->router().Handle(Verb::get, "/slow", {}, [](const std::shared_ptr<Exchange>& ex) {
      ex->Offload([] { std::this_thread::sleep_for(400ms); },
                  [ex] { ex->Respond(Response::Text(200, "done")); });
    });
    ASSERT_TRUE(server_->Listen().ok());
    server_->Start();
  }
  void TearDown() override {
    server_->Stop(2s);
    server_->Wait();
  }
  // A request on a new connection; 0 when the connection was closed without an answer.
  unsigned GetOnce(const std::string& target, const std::string& forwarded_for = {}) {
    Client c(server_->port());
    bhttp::request<bhttp::string_body> req{bhttp::verb::get, target, 11};
    if (!forwarded_for.empty()) req.set("X-Forwarded-For", forwarded_for);
    return c.Send(std::move(req)).result_int();
  }
  std::unique_ptr<Server> server_;
};

TEST_F(ServerCaps, ConnectionsPastTheTotalCapAre503AndClosed) {
  ServerOptions o;
  o.max_connections = 2;
  o.max_connections_per_client = 0;
  Start(o);
  auto a = std::make_unique<Client>(server_->port());
  Client b(server_->port());
  EXPECT_EQ(a->Get("/whoami").result_int(), 200u);
  EXPECT_EQ(b.Get("/whoami").result_int(), 200u);
  Client c(server_->port());
  auto busy = c.Get("/whoami");
  EXPECT_EQ(busy.result_int(), 503u);
  EXPECT_EQ(busy["Retry-After"], "1");
  EXPECT_TRUE(c.ClosedByPeer());
  // A connection closing makes room (once the server has seen it go).
  a.reset();
  unsigned status = 0;
  for (int i = 0; i < 100 && status != 200; ++i) {
    std::this_thread::sleep_for(10ms);
    status = GetOnce("/whoami");
  }
  EXPECT_EQ(status, 200u);
  EXPECT_EQ(b.Get("/whoami").result_int(), 200u);  // the connections it kept were never touched
}

TEST_F(ServerCaps, OneClientAddressHoldsAtMostItsShare) {
  ServerOptions o;
  o.max_connections_per_client = 2;
  Start(o);
  Client a(server_->port()), b(server_->port());
  EXPECT_EQ(a.Get("/whoami").result_int(), 200u);
  EXPECT_EQ(b.Get("/whoami").result_int(), 200u);
  EXPECT_EQ(GetOnce("/whoami"), 503u);
}

TEST_F(ServerCaps, ClientsBehindATrustedProxyAreNamedAndCappedByTheirForwardedAddress) {
  ServerOptions o;
  o.max_connections_per_client = 1;
  o.trusted_proxies = *AddressSet::Parse({"127.0.0.1"});
  Start(o);
  // The proxy's own connections are not capped per address; each request names its client.
  Client a(server_->port()), b(server_->port()), c(server_->port());
  const auto ask = [](Client& cl, const std::string& target, const std::string& xff) {
    bhttp::request<bhttp::string_body> req{bhttp::verb::get, target, 11};
    req.set("X-Forwarded-For", xff);
    return cl.Send(std::move(req));
  };
  auto who = ask(a, "/whoami", "6.6.6.6, 198.51.100.4");
  EXPECT_EQ(who.result_int(), 200u);
  EXPECT_EQ(who.body(), "198.51.100.4");  // the client's own claim (6.6.6.6) is not believed
  // One request in flight per client: a second from the same client is 429, another client's goes through.
  std::thread slow([&] { EXPECT_EQ(ask(a, "/slow", "198.51.100.4").result_int(), 200u); });
  std::this_thread::sleep_for(150ms);
  auto refused = ask(b, "/whoami", "198.51.100.4");
  EXPECT_EQ(refused.result_int(), 429u);
  EXPECT_EQ(refused["Retry-After"], "1");
  EXPECT_EQ(ask(c, "/whoami", "198.51.100.5").result_int(), 200u);
  slow.join();
  EXPECT_EQ(ask(b, "/whoami", "198.51.100.4").result_int(), 200u);  // its request ended: room again
}

// A request whose Transfer-Encoding cairn cannot frame its body by is answered 400 (501 for a coding it does
// not decode before chunked) and the connection closed: the bytes after its header are never read as the
// next request (request smuggling: a proxy that framed the body otherwise would see two different streams).
TEST_F(ServerTest, TransferEncodingOtherThanChunkedIsRefusedAndTheConnectionClosed) {
  const std::string chunked_body = "5\r\nhello\r\n0\r\n\r\n";
  const std::string next = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
  struct Case {
    std::string what, request_line, fields;
    unsigned status;
  };
  const std::vector<Case> cases = {
      {"gzip", "POST /small HTTP/1.1", "Transfer-Encoding: gzip\r\n", 400},
      {"xchunked", "POST /small HTTP/1.1", "Transfer-Encoding: xchunked\r\n", 400},
      {"identity", "POST /small HTTP/1.1", "Transfer-Encoding: identity\r\n", 400},
      {"chunked, identity", "POST /small HTTP/1.1", "Transfer-Encoding: chunked, identity\r\n", 400},
      {"chunked twice", "POST /small HTTP/1.1", "Transfer-Encoding: chunked, chunked\r\n", 400},
      {"chunked with a parameter", "POST /small HTTP/1.1", "Transfer-Encoding: chunked;x=1\r\n", 400},
      {"empty", "POST /small HTTP/1.1", "Transfer-Encoding: \r\n", 400},
      {"gzip then Content-Length", "POST /small HTTP/1.1",
       "Transfer-Encoding: gzip\r\nContent-Length: 14\r\n", 400},
      {"streamed route", "POST /upload HTTP/1.1", "Transfer-Encoding: gzip\r\n", 400},
      {"HTTP/1.0", "POST /small HTTP/1.0", "Transfer-Encoding: chunked\r\n", 400},
      {"gzip, chunked", "POST /small HTTP/1.1", "Transfer-Encoding: gzip, chunked\r\n", 501},
      {"two fields", "POST /small HTTP/1.1", "Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n",
       501},
      {"on a GET", "GET /healthz HTTP/1.1", "Transfer-Encoding: gzip\r\n", 400},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    Client client(port_);
    std::string raw = c.request_line;
    raw.append("\r\nHost: x\r\n").append(c.fields).append("\r\n").append(chunked_body).append(next);
    client.WriteRaw(raw);
    const RawAnswer got = ReadUntilClosed(client);
    EXPECT_TRUE(got.bytes.starts_with("HTTP/1.1 " + std::to_string(c.status) + " ")) << got.bytes;
    EXPECT_EQ(CountOf(got.bytes, "\r\nConnection: close\r\n"), 1) << got.bytes;
    EXPECT_EQ(CountOf(got.bytes, "HTTP/1.1 "), 1) << "the bytes after the header ran as a request";
    EXPECT_TRUE(got.closed);
  }
}

TEST_F(ServerTest, ChunkedAloneStillFramesTheBody) {
  for (const std::string& te : {"chunked"s, "Chunked"s, "  chunked  "s, ", chunked"s}) {
    SCOPED_TRACE(te);
    for (const std::string& path : {"/small"s, "/upload"s}) {
      Client c(port_);
      std::string raw = "POST " + path;
      raw.append(" HTTP/1.1\r\nHost: x\r\nTransfer-Encoding:")
          .append(te)
          .append("\r\n\r\n5\r\nhello\r\n0\r\n\r\nGET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
      c.WriteRaw(raw);
      auto res = c.Read();
      EXPECT_EQ(res.result_int(), 200u);
      EXPECT_EQ(res.body(), path == "/small" ? "5" : "hello");
      EXPECT_TRUE(res.keep_alive());
      EXPECT_EQ(c.Read().result_int(), 200u);  // the pipelined request, read after the body
    }
  }
}

// Framing the parser itself refuses (Content-Length beside chunked, two lengths): the connection closes
// unanswered, and nothing after the header runs as a request.
TEST_F(ServerTest, ConflictingBodyLengthsCloseTheConnection) {
  for (const std::string& fields :
       {"Content-Length: 14\r\nTransfer-Encoding: chunked\r\n"s,
        "Transfer-Encoding: chunked\r\nContent-Length: 14\r\n"s,
        "Content-Length: 14\r\nContent-Length: 15\r\n"s, "Content-Length: 14, 15\r\n"s}) {
    SCOPED_TRACE(fields);
    Client c(port_);
    c.WriteRaw("POST /small HTTP/1.1\r\nHost: x\r\n" + fields +
               "\r\n5\r\nhello\r\n0\r\n\r\nGET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
    const RawAnswer got = ReadUntilClosed(c);
    EXPECT_EQ(CountOf(got.bytes, " 200 "), 0) << got.bytes;
    EXPECT_TRUE(got.closed);
  }
}

// A response header is written once, whatever the handler did (Header twice, the list pushed onto by hand,
// the server's own names), and never carries CR, LF or NUL: the client sees no header it did not set. Each
// refused name is logged once, without its value.
TEST(ServerHeaders, AnAnswerCarriesEachHeaderOnceAndNoneSplit) {
  CapturedLog log;
  ServerOptions o;
  o.port = 0;
  o.io_threads = 1;
  auto server = std::make_unique<Server>(o, nullptr);
  server->router().Handle(Verb::get, "/twice", {}, [](const std::shared_ptr<Exchange>& ex) {
    Response r = Response::Text(200, "ok");
    r.Header("Content-Type", "text/csv");
    ex->Respond(std::move(r));
  });
  server->router().Handle(Verb::get, "/forged", {}, [](const std::shared_ptr<Exchange>& ex) {
    Response r = Response::Text(200, "ok");
    r.Header("X-A", "text/plain\r\nX-Injected: crlf")
        .Header("X-B", "text/plain\nX-Injected: lf")
        .Header("X-C", "text/plain\0X-Injected: nul"s)
        .Header("X-C", "again\r\n");
    r.headers.emplace_back("X-D", "a\r\nX-Injected: pushed");
    r.headers.emplace_back("X-Injected: pushed\r\nX-E", "v");
    r.headers.emplace_back("content-type", "text/tab-separated-values");  // the later value wins
    for (const char* owned : {"Content-Length", "Connection", "Server", "X-Request-Id", "Transfer-Encoding"})
      r.headers.emplace_back(owned, "forged");
    ex->Respond(std::move(r));
  });
  server->router().Handle(Verb::get, "/stream", {}, [](const std::shared_ptr<Exchange>& ex) {
    auto stream = ex->StartStream(
        200, {{"Content-Type", "a/b"}, {"content-type", "c/d"}, {"X-A", "x\r\nX-Injected: stream"}});
    stream->Write("ok");
    stream->Finish();
  });
  ASSERT_TRUE(server->Listen().ok());
  server->Start();
  const auto fetch = [&](const std::string& path) {
    Client c(server->port());
    c.WriteRaw("GET " + path + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    RawAnswer got = ReadUntilClosed(c);
    EXPECT_TRUE(got.closed);
    return got.bytes;
  };
  const std::string twice = fetch("/twice");
  EXPECT_EQ(CountOf(twice, "\r\nContent-Type:"), 1) << twice;
  EXPECT_EQ(CountOf(twice, "\r\nContent-Type: text/csv\r\n"), 1) << twice;

  for (const std::string& path : {"/forged"s, "/stream"s}) {
    SCOPED_TRACE(path);
    const std::string got = fetch(path);
    const std::string head = got.substr(0, got.find("\r\n\r\n") + 2);
    EXPECT_EQ(CountOf(got, "X-Injected"), 0) << got;
    EXPECT_EQ(got.find('\0'), std::string::npos);
    EXPECT_EQ(CountOf(head, "\n"), CountOf(head, "\r\n"));  // no bare LF
    EXPECT_EQ(CountOf(head, "\r\nContent-Type: "), 1) << head;
    EXPECT_EQ(CountOf(head, "\r\nServer: cairn\r\n"), 1) << head;
    EXPECT_EQ(CountOf(head, "\r\nServer:"), 1) << head;
    EXPECT_EQ(CountOf(head, "\r\nX-Request-Id:"), 1) << head;
    EXPECT_EQ(CountOf(head, "\r\nConnection: close\r\n"), 1) << head;
    EXPECT_EQ(CountOf(head, "\r\nConnection:"), 1) << head;
    EXPECT_EQ(CountOf(head, "forged"), 0) << head;
    if (path == "/forged") {
      EXPECT_EQ(CountOf(head, "\r\nContent-Type: text/tab-separated-values\r\n"), 1) << head;
      EXPECT_EQ(CountOf(head, "\r\nContent-Length: 2\r\n"), 1) << head;
      EXPECT_EQ(CountOf(head, "\r\nContent-Length:"), 1) << head;
      EXPECT_EQ(CountOf(head, "Transfer-Encoding"), 0) << head;
      EXPECT_TRUE(got.ends_with("\r\n\r\nok"));
    } else {
      EXPECT_EQ(CountOf(head, "\r\nContent-Type: c/d\r\n"), 1) << head;
      EXPECT_EQ(CountOf(head, "\r\nTransfer-Encoding: chunked\r\n"), 1) << head;
      EXPECT_EQ(CountOf(head, "Content-Length"), 0) << head;
    }
  }
  server->Stop(1s);
  server->Wait();
  server.reset();
  const std::string text = log.text();
  EXPECT_EQ(CountOf(text, "response header \"X-A\" refused"), 2) << text;  // once per answer (two had it)
  EXPECT_EQ(CountOf(text, "response header \"X-C\" refused"), 1) << text;  // refused twice, logged once
  for (const char* name : {"\"X-B\"", "\"X-D\"", "\"X-Injected: pushed\\x0d\\x0aX-E\""})
    EXPECT_EQ(CountOf(text, "response header "s + name + " refused"), 1) << name << "\n" << text;
  for (const char* value : {"crlf", "X-Injected: lf", "nul", "again", "a\r\n"})
    EXPECT_EQ(CountOf(text, value), 0) << value << "\n" << text;
}

// One tenant holding every slot of a gate with bodies still arriving gives one up to another tenant: its
// newest request ends with 408 (as a slow body's does) and the other's is admitted and answered.
TEST(ServerAdmission, ATenantHoldingEverySlotGivesOneUpToAnother) {
  ServerOptions o;
  o.port = 0;
  o.io_threads = 1;
  auto server = std::make_unique<Server>(o, nullptr);
  auto gate = std::make_shared<AdmissionGate>(2);
  server->router().HandleStream(
      Verb::post, "/t/{tenant}",
      RouteOptions().MaxBody(1 << 20).AdmitPer(gate, [](const Request& r) { return r.Param("tenant"); }),
      [](const std::shared_ptr<Exchange>&) -> Result<std::unique_ptr<BodySink>> {
        return std::unique_ptr<BodySink>(std::make_unique<EchoSink>());
      });
  ASSERT_TRUE(server->Listen().ok());
  server->Start();
  const auto await_in_flight = [&](size_t n) {
    for (int i = 0; i < 200 && gate->in_flight() != n; ++i) std::this_thread::sleep_for(10ms);
    return gate->in_flight();
  };
  const std::string trickle = "POST /t/a HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n0123456789";
  auto older = std::make_unique<Client>(server->port());
  older->WriteRaw(trickle);
  ASSERT_EQ(await_in_flight(1), 1u);
  Client newer(server->port());
  newer.WriteRaw(trickle);
  ASSERT_EQ(await_in_flight(2), 2u);
  Client again(server->port());  // tenant a at its full gate: nobody gives way to it
  EXPECT_EQ(again.Post("/t/a", "x").result_int(), 503u);

  Client other(server->port());
  const auto res = other.Post("/t/b", "hello");
  EXPECT_EQ(res.result_int(), 200u);
  EXPECT_EQ(res.body(), "hello");
  EXPECT_EQ(newer.Read().result_int(), 408u);
  EXPECT_EQ(gate->fair_preempted(), 1u);
  EXPECT_EQ(gate->preempted(), 0u);
  EXPECT_EQ(await_in_flight(1), 1u);  // the older upload still holds its slot
  older.reset();
  EXPECT_EQ(await_in_flight(0), 0u);
  server->Stop(1s);
  server->Wait();
}

// A sink that keeps each piece's `next` until the test lets it go: the request's body is then not being read.
class HoldingSink : public BodySink {
 public:
  struct Shared {
    std::mutex mu;
    std::vector<Next> held;           // in arrival order
    std::vector<std::string> aborts;  // why each aborted request ended
  };
  explicit HoldingSink(std::shared_ptr<Shared> shared) : shared_(std::move(shared)) {}
  void OnData(std::span<const uint8_t>, Next next) override {
    std::lock_guard lock(shared_->mu);
    shared_->held.push_back(std::move(next));
  }
  void OnEnd(std::shared_ptr<Exchange> ex) override { ex->Respond(Response::Text(200, "done")); }
  void OnAbort(const Error& why) override {
    std::lock_guard lock(shared_->mu);
    shared_->aborts.push_back(why.message);
  }

 private:
  std::shared_ptr<Shared> shared_;
};

// A preemption that lands while the preempted request's body is not being read (its sink still busy with the
// last piece, so there is no read to cancel) ends it as soon as the sink is done, not at its body deadline a
// minute later; the tenant's other request keeps its slot.
TEST(ServerAdmission, APreemptionWhileTheSinkIsBusyEndsTheRequestWhenItIsDone) {
  ServerOptions o;
  o.port = 0;
  o.io_threads = 1;
  o.body_grace = 60s;
  auto server = std::make_unique<Server>(o, nullptr);
  auto gate = std::make_shared<AdmissionGate>(2);
  auto shared = std::make_shared<HoldingSink::Shared>();
  server->router().HandleStream(
      Verb::post, "/t/{tenant}",
      RouteOptions().MaxBody(1 << 20).AdmitPer(gate, [](const Request& r) { return r.Param("tenant"); }),
      [shared](const std::shared_ptr<Exchange>& ex) -> Result<std::unique_ptr<BodySink>> {
        if (ex->request().Param("tenant") == "b")
          return std::unique_ptr<BodySink>(std::make_unique<EchoSink>());
        return std::unique_ptr<BodySink>(std::make_unique<HoldingSink>(shared));
      });
  ASSERT_TRUE(server->Listen().ok());
  server->Start();
  const auto wait_for = [](const std::function<bool()>& done) {
    for (int i = 0; i < 1000 && !done(); ++i) std::this_thread::sleep_for(10ms);
    return done();
  };
  const auto held = [&] {
    std::lock_guard lock(shared->mu);
    return shared->held.size();
  };
  const std::string trickle = "POST /t/a HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n0123456789";
  auto older = std::make_unique<Client>(server->port());
  older->WriteRaw(trickle);
  ASSERT_TRUE(wait_for([&] { return held() == 1; }));
  Client newer(server->port());
  newer.WriteRaw(trickle);
  ASSERT_TRUE(wait_for([&] { return held() == 2; }));  // both sinks busy: no body read in flight
  ASSERT_EQ(gate->in_flight(), 2u);

  Client other(server->port());  // tenant b: tenant a gives up its newest
  const auto res = other.Post("/t/b", "hello");
  EXPECT_EQ(res.result_int(), 200u);
  EXPECT_EQ(gate->fair_preempted(), 1u);
  BodySink::Next newer_next;
  {
    std::lock_guard lock(shared->mu);
    newer_next = std::move(shared->held[1]);
  }
  newer_next(Ok{});  // the sink is done with the piece: the preemption ends the request now
  EXPECT_TRUE(wait_for([&] {
    std::lock_guard lock(shared->mu);
    return !shared->aborts.empty();
  })) << "the preempted request went on reading its body";
  EXPECT_EQ(newer.Read().result_int(), 408u);
  // The slot is given back when the exchange ends, which may be just after its answer is on the wire.
  EXPECT_TRUE(wait_for([&] { return gate->in_flight() == 1; })) << "the older request still holds its slot";

  BodySink::Next older_next;
  {
    std::lock_guard lock(shared->mu);
    older_next = std::move(shared->held[0]);
  }
  older_next(Ok{});
  older.reset();
  EXPECT_TRUE(wait_for([&] { return gate->in_flight() == 0; }));
  server->Stop(1s);
  server->Wait();
}

}  // namespace
}  // namespace cairn::http
