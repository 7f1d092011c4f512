// The response writer against a port that records what reaches the "socket": header fields, framing, HEAD,
// chunked bodies, files and sources read on the worker pool in order, a failed read cutting the answer short,
// and the pending-byte count returning to zero. (Sockets, TLS and sendfile(2) are server_test's and
// tls_test's.)
#include "http/response_writer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>

namespace cairn::http {
namespace {

namespace asio = boost::asio;

// Records every write; runs every callback on one io_context (the strand).
class RecordingPort final : public ResponseWriter::Port {
 public:
  void Write(const std::vector<asio::const_buffer>& bufs,
             std::function<void(boost::beast::error_code, size_t)> done) override {
    size_t n = 0;
    for (const auto& b : bufs) {
      wire.append(static_cast<const char*>(b.data()), b.size());
      n += b.size();
    }
    asio::post(ioc, [done = std::move(done), n] { done({}, n); });
  }
  asio::ip::tcp::socket& socket() override { return socket_; }
  std::shared_ptr<void> Hold() override { return life; }
  void Dispatch(std::function<void()> fn) override { asio::post(ioc, std::move(fn)); }
  WorkQueue& workers() override { return pool; }
  void Fail() override { ++failed; }
  void Complete() override { ++completed; }

  asio::io_context ioc;
  WorkQueue pool{1, 16};
  std::shared_ptr<int> life = std::make_shared<int>(0);
  std::string wire;
  int failed = 0;
  int completed = 0;

 private:
  asio::ip::tcp::socket socket_{ioc};
};

// A source of `size` bytes whose byte i is 'a' + i % 26; fails reads at or past `fail_from`.
class Letters final : public ByteSource {
 public:
  explicit Letters(uint64_t fail_from = UINT64_MAX) : fail_from_(fail_from) {}
  Status ReadAt(uint64_t offset, std::span<uint8_t> out) const override {
    if (offset >= fail_from_) return IoError("the disk is gone");
    for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<uint8_t>('a' + (offset + i) % 26);
    return Ok{};
  }

 private:
  uint64_t fail_from_;
};

std::string LettersFrom(uint64_t offset, uint64_t n) {
  std::string s;
  for (uint64_t i = 0; i < n; ++i) s.push_back(static_cast<char>('a' + (offset + i) % 26));
  return s;
}

class ResponseWriterTest : public ::testing::Test {
 protected:
  RecordingPort port_;
  ResponseWriter writer_{port_, /*tls=*/true, port_.ioc.get_executor(), std::chrono::seconds(5)};

  // Runs the strand until the answer is complete or failed (the pool's reads post back to it).
  void Run() {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (port_.completed + port_.failed == 0 && std::chrono::steady_clock::now() < until) {
      port_.ioc.restart();
      port_.ioc.run_for(std::chrono::milliseconds(10));
    }
    port_.ioc.restart();
    port_.ioc.poll();
  }
  std::string Body() const { return port_.wire.substr(port_.wire.find("\r\n\r\n") + 4); }
};

TEST_F(ResponseWriterTest, TheServerOwnsItsFieldsAndRefusedNamesAreDropped) {
  writer_.Begin(false, "rid-1");
  HeaderList h = {{"Content-Length", "1"}, {"X-Request-Id", "forged"}, {"Server", "x"},
                  {"X-Ok", "yes"},         {"Bad Name", "v"},          {"X-Crlf", "a\r\nInjected: 1"}};
  auto res = writer_.Header(201, std::move(h), {}, /*keep_alive=*/false);
  writer_.Send(std::move(res), {std::string("hello")}, 5);
  Run();
  const std::string& w = port_.wire;
  EXPECT_EQ(w.rfind("HTTP/1.1 201 Created\r\n", 0), 0u) << w;
  EXPECT_NE(w.find("X-Ok: yes\r\n"), std::string::npos);
  EXPECT_NE(w.find("X-Request-Id: rid-1\r\n"), std::string::npos);
  EXPECT_NE(w.find("Server: cairn\r\n"), std::string::npos);
  EXPECT_NE(w.find("Content-Length: 5\r\n"), std::string::npos);
  EXPECT_EQ(w.find("forged"), std::string::npos);
  EXPECT_EQ(w.find("Bad Name"), std::string::npos);
  EXPECT_EQ(w.find("Injected"), std::string::npos);
  EXPECT_NE(w.find("Connection: close\r\n"), std::string::npos);
  EXPECT_EQ(Body(), "hello");
  EXPECT_EQ(port_.completed, 1);
  EXPECT_EQ(writer_.pending(), 0u);
  EXPECT_EQ(writer_.bytes_out(), w.size());
}

TEST_F(ResponseWriterTest, HeadKeepsTheLengthAndSendsNoBody) {
  writer_.Begin(/*head=*/true, "rid");
  writer_.Send(writer_.Header(200, {}, {}, true), {std::string("0123456789")}, 10);
  Run();
  EXPECT_NE(port_.wire.find("Content-Length: 10\r\n"), std::string::npos);
  EXPECT_EQ(Body(), "");
  EXPECT_EQ(port_.completed, 1);
  EXPECT_EQ(writer_.pending(), 0u);
}

TEST_F(ResponseWriterTest, NoContentCarriesNoLengthAndNoBody) {
  writer_.Begin(false, "rid");
  writer_.Send(writer_.Header(204, {}, {}, true), {std::string("stray")}, 5);
  Run();
  EXPECT_EQ(port_.wire.rfind("HTTP/1.1 204 No Content\r\n", 0), 0u) << port_.wire;
  EXPECT_EQ(port_.wire.find("Content-Length"), std::string::npos) << port_.wire;
  EXPECT_EQ(Body(), "");
  EXPECT_EQ(port_.completed, 1);
  EXPECT_EQ(writer_.pending(), 0u);
}

TEST_F(ResponseWriterTest, ChunkedBodiesAreFramedAndEnded) {
  writer_.Begin(false, "rid");
  writer_.StartChunked(writer_.Header(200, {}, {}, true));
  for (std::string piece : {std::string(26, 'x'), std::string("yz")}) {
    writer_.Reserve(piece.size());
    writer_.Chunk(std::move(piece));
  }
  writer_.EndChunked();
  Run();
  EXPECT_NE(port_.wire.find("Transfer-Encoding: chunked\r\n"), std::string::npos);
  EXPECT_EQ(Body(), "1a\r\n" + std::string(26, 'x') + "\r\n2\r\nyz\r\n0\r\n\r\n");
  EXPECT_EQ(port_.completed, 1);
  EXPECT_EQ(writer_.pending(), 0u);
  // A chunk after the end is dropped, and its reserved bytes with it.
  writer_.Reserve(4);
  writer_.Chunk("late");
  EXPECT_EQ(writer_.pending(), 0u) << "what was reserved for it is given back";
  EXPECT_EQ(Body().find("late"), std::string::npos);
}

TEST_F(ResponseWriterTest, PartsGoOutInOrderSourcesAndFilesReadOnThePool) {
  const auto path = std::filesystem::temp_directory_path() / ("cairn-writer-" + std::to_string(::getpid()));
  {
    std::ofstream f(path, std::ios::binary);
    f << "FILEBYTES";
  }
  auto file = File::Open(path.string());
  std::filesystem::remove(path);
  ASSERT_TRUE(file.ok());
  const uint64_t big = (9ull << 20) + 7;  // three blocks of the source, the last one short
  std::vector<BodyPart> body;
  body.emplace_back(std::string("<"));
  body.emplace_back(SourceSegment{std::make_shared<Letters>(), 3, big, nullptr});
  body.emplace_back(FileSegment{*file, 4, 5});  // under TLS: read on the pool too
  body.emplace_back(std::string(">"));
  writer_.Begin(false, "rid");
  writer_.Send(writer_.Header(200, {}, {}, true), std::move(body), 1 + big + 5 + 1);
  Run();
  const std::string got = Body();
  ASSERT_EQ(got.size(), 1 + big + 5 + 1);
  EXPECT_EQ(got.front(), '<');
  EXPECT_TRUE(got.compare(1, big, LettersFrom(3, big)) == 0);
  EXPECT_EQ(got.substr(1 + big), "BYTES>");
  EXPECT_EQ(port_.completed, 1);
  EXPECT_EQ(port_.failed, 0);
  EXPECT_EQ(writer_.pending(), 0u);
}

TEST_F(ResponseWriterTest, AFailedReadCutsTheAnswerShortAndFailsTheConnection) {
  writer_.Begin(false, "rid");
  std::vector<BodyPart> body;
  body.emplace_back(
      SourceSegment{std::make_shared<Letters>(/*fail_from=*/4ull << 20), 0, 8ull << 20, nullptr});
  writer_.Send(writer_.Header(200, {}, {}, true), std::move(body), 8ull << 20);
  Run();
  EXPECT_EQ(port_.failed, 1);
  EXPECT_EQ(port_.completed, 0);
  EXPECT_EQ(Body().size(), 4ull << 20) << "the first block went out before the failure";
}

}  // namespace
}  // namespace cairn::http
