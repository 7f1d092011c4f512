// The parts of the S3 client that compute rather than talk: canonical query strings and presigned URLs,
// checked against the example of AWS's own documentation ("Authenticating Requests: Using Query Parameters").
#include "store/s3_client.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <deque>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "common/local_servers.h"

namespace cairn::store {
namespace {

TEST(S3QueryStringTest, SortsAndEncodesAsSigV4Wants) {
  EXPECT_EQ(S3QueryString({{"uploads", ""}}), "uploads=");
  EXPECT_EQ(S3QueryString({{"uploadId", "a/b+c=d"}, {"partNumber", "7"}}),
            "partNumber=7&uploadId=a%2Fb%2Bc%3Dd");
  EXPECT_EQ(S3QueryString({{"prefix", "x/y z~"}, {"list-type", "2"}, {"continuation-token", "t"}}),
            "continuation-token=t&list-type=2&prefix=x%2Fy%20z~");
}

TEST(S3XmlValueTest, ReadsFlatValuesInOrder) {
  const std::string doc = "<R><Key>a</Key><IsTruncated>true</IsTruncated><Key>b</Key><Key></Key><Key>c";
  size_t at = 0;
  EXPECT_EQ(S3XmlValue(doc, "Key", &at), "a");
  EXPECT_EQ(S3XmlValue(doc, "Key", &at), "b");
  EXPECT_EQ(S3XmlValue(doc, "Key", &at), "");  // empty element
  EXPECT_EQ(S3XmlValue(doc, "Key", &at), "");  // unterminated: nothing
  EXPECT_EQ(S3XmlValue(doc, "IsTruncated"), "true");
  EXPECT_EQ(S3XmlValue(doc, "Code"), "");
}

S3Options AwsExample() {
  S3Options o;
  o.endpoint = "https://s3.amazonaws.com";
  o.region = "us-east-1";
  o.bucket = "examplebucket";
  o.access_key = "AKIAIOSFODNN7EXAMPLE";
  o.secret_key = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
  return o;
}

TEST(PresignGetTest, MatchesTheAwsDocumentationExample) {
  auto client = S3Client::Create(AwsExample());
  ASSERT_TRUE(client.ok()) << client.error().message;
  // 2013-05-24T00:00:00Z, valid for 86400 s.
  const std::string url = PresignGet(**client, "test.txt", 1369353600, 86400);
  EXPECT_EQ(url,
            "https://examplebucket.s3.amazonaws.com/test.txt?X-Amz-Algorithm=AWS4-HMAC-SHA256"
            "&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request"
            "&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&X-Amz-SignedHeaders=host"
            "&X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404");
  // The same signing key serves a later call of the same day; another day derives its own.
  EXPECT_EQ(PresignGet(**client, "test.txt", 1369353600, 86400), url);
  EXPECT_NE(PresignGet(**client, "test.txt", 1369353600 + 86400, 86400), url);
}

TEST(PresignGetTest, TagsAreSignedAndTellRangesApart) {
  auto client = S3Client::Create(AwsExample());
  ASSERT_TRUE(client.ok());
  const std::string a = PresignGet(**client, "k", 1369353600, 60, "0-99");
  const std::string b = PresignGet(**client, "k", 1369353600, 60, "100-199");
  EXPECT_NE(a.find("&x-cairn-tag=0-99&X-Amz-Signature="), std::string::npos) << a;
  EXPECT_NE(a.substr(a.find("X-Amz-Signature=")), b.substr(b.find("X-Amz-Signature=")));
}

TEST(S3ClientTest, PathStyleAndVirtualHostedUrls) {
  auto o = AwsExample();
  auto hosted = S3Client::Create(o);
  ASSERT_TRUE(hosted.ok());
  EXPECT_EQ((*hosted)->Url("a/b", "x=1"), "https://examplebucket.s3.amazonaws.com/a/b?x=1");
  o.endpoint = "http://127.0.0.1:8333/";
  o.path_style = true;
  auto path = S3Client::Create(o);
  ASSERT_TRUE(path.ok());
  EXPECT_EQ((*path)->Url("a/b"), "http://127.0.0.1:8333/examplebucket/a/b");
  EXPECT_EQ((*path)->Describe(), "s3://examplebucket at http://127.0.0.1:8333");
}

TEST(S3ClientTest, RefusesOptionsItCannotUse) {
  auto o = AwsExample();
  o.bucket = "";
  EXPECT_FALSE(S3Client::Create(o).ok());
  o = AwsExample();
  o.bucket = "bad bucket";
  EXPECT_FALSE(S3Client::Create(o).ok());
  o = AwsExample();
  o.endpoint = "ftp://x";
  EXPECT_FALSE(S3Client::Create(o).ok());
  o = AwsExample();
  o.secret_key.clear();
  auto e = S3Client::Create(o);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.error().message.find("AWS_SECRET_ACCESS_KEY"), std::string::npos);
}

// A test HTTP server on a loopback port: one thread accepts connections and hands each to Serve. Derived
// classes call Begin() at the end of their constructor and End() first in their destructor.
class LoopbackServer {
 public:
  virtual ~LoopbackServer() = default;
  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }

 protected:
  void Begin() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    EXPECT_EQ(::listen(fd_, 16), 0);
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] {
      while (!stop_) {
        const int c = ::accept(fd_, nullptr, nullptr);
        if (c < 0) return;
        Serve(c);
        ::close(c);
      }
    });
  }
  void End() {
    stop_ = true;
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    thread_.join();
  }
  virtual void Serve(int connection) = 0;

  std::atomic<bool> stop_{false};

 private:
  int fd_ = -1;
  uint16_t port_ = 0;
  std::thread thread_;
};

// A scripted HTTP server for fault injection (SeaweedFS cannot be told to answer 503): answers each request
// with the next status of its script (then 200), keeping connections alive, and counts what it got.
class ScriptedServer final : public LoopbackServer {
 public:
  explicit ScriptedServer(std::deque<int> script) : script_(std::move(script)) { Begin(); }
  ~ScriptedServer() override { End(); }
  int requests() const { return requests_.load(); }

 private:
  void Serve(int c) override {
    std::string buf;
    char chunk[65536];
    for (;;) {
      const size_t head_end = buf.find("\r\n\r\n");
      if (head_end != std::string::npos) {
        size_t body = 0;
        const size_t cl = buf.find("Content-Length: ");
        if (cl != std::string::npos && cl < head_end) body = std::stoul(buf.substr(cl + 16));
        if (buf.size() >= head_end + 4 + body) {
          buf.erase(0, head_end + 4 + body);
          ++requests_;
          int status = 200;
          {
            std::lock_guard lock(mu_);
            if (!script_.empty()) {
              status = script_.front();
              script_.pop_front();
            }
          }
          const std::string answer =
              "HTTP/1.1 " + std::to_string(status) + " X\r\nContent-Length: 0\r\nETag: \"e\"\r\n\r\n";
          if (::send(c, answer.data(), answer.size(), MSG_NOSIGNAL) < 0) return;
          continue;
        }
      }
      const ssize_t n = ::recv(c, chunk, sizeof chunk, 0);
      if (n <= 0) return;
      buf.append(chunk, static_cast<size_t>(n));
    }
  }

  std::mutex mu_;
  std::deque<int> script_;
  std::atomic<int> requests_{0};
};

S3Options Against(const std::string& endpoint) {
  S3Options o = AwsExample();
  o.endpoint = endpoint;
  o.path_style = true;
  o.backoff_base = std::chrono::milliseconds(1);
  o.backoff_cap = std::chrono::milliseconds(5);
  return o;
}

TEST(S3ClientRetryTest, ThrottlingAndServerErrorsAreRetriedThenAnswered) {
  ScriptedServer store({503, 500, 429});
  auto client = S3Client::Create(Against(store.endpoint()));
  ASSERT_TRUE(client.ok());
  const std::vector<uint8_t> body(1000, 7);
  S3Request put;
  put.method = "PUT";
  put.key = "k";
  put.body = body;
  auto res = (*client)->Send(put);
  ASSERT_TRUE(res.ok()) << res.error().message;
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(store.requests(), 4);  // three refusals, each body sent again whole, then the success
}

TEST(S3ClientRetryTest, AStoreThatKeepsFailingIsUnavailable) {
  ScriptedServer store({503, 503, 503, 503, 503, 503});
  auto o = Against(store.endpoint());
  o.max_attempts = 4;
  auto client = S3Client::Create(o);
  ASSERT_TRUE(client.ok());
  S3Request head;
  head.method = "HEAD";
  head.key = "k";
  auto res = (*client)->Send(head);
  ASSERT_FALSE(res.ok());
  EXPECT_EQ(res.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(res.error().message.find("4 times"), std::string::npos) << res.error().message;
  EXPECT_EQ(store.requests(), 4);
}

TEST(S3ClientRetryTest, ClientErrorsAreAnsweredAtOnce) {
  ScriptedServer store({404, 403});
  auto client = S3Client::Create(Against(store.endpoint()));
  ASSERT_TRUE(client.ok());
  S3Request get;
  get.key = "k";
  EXPECT_EQ((*client)->Send(get)->status, 404);
  EXPECT_EQ((*client)->Send(get)->status, 403);
  EXPECT_EQ(store.requests(), 2);
}

TEST(S3ClientRetryTest, NoServerIsUnavailable) {
  auto port = FreeLoopbackPort();
  ASSERT_TRUE(port.has_value());
  auto client = S3Client::Create(Against("http://127.0.0.1:" + std::to_string(*port)));
  ASSERT_TRUE(client.ok());
  S3Request get;
  get.key = "k";
  auto res = (*client)->Send(get);
  ASSERT_FALSE(res.ok());
  EXPECT_EQ(res.error().code, ErrorCode::kUnavailable);
}

// A store that serves ranges of one object, but cuts its first answer after `cut` bytes of the body (the
// connection closes, as when a store node dies mid-answer) or, with `stall`, stops sending and waits.
class CuttingServer final : public LoopbackServer {
 public:
  CuttingServer(std::string object, size_t cut, bool stall)
      : object_(std::move(object)), cut_(cut), stall_(stall) {
    Begin();
  }
  ~CuttingServer() override { End(); }
  std::vector<std::string> ranges() {
    std::lock_guard lock(mu_);
    return ranges_;
  }

 private:
  void Serve(int c) override {
    std::string buf;
    char chunk[4096];
    for (;;) {
      const size_t head_end = buf.find("\r\n\r\n");
      if (head_end != std::string::npos) {
        const std::string head = buf.substr(0, head_end);
        buf.erase(0, head_end + 4);
        const size_t r = head.find("Range: bytes=");
        const std::string spec = head.substr(r + 13, head.find("\r\n", r) - r - 13);
        {
          std::lock_guard lock(mu_);
          ranges_.push_back(spec);
        }
        const size_t start = std::stoul(spec);
        const size_t end = std::stoul(spec.substr(spec.find('-') + 1));
        const std::string body = object_.substr(start, end - start + 1);
        const std::string answer =
            "HTTP/1.1 206 Partial Content\r\nContent-Length: " + std::to_string(body.size()) +
            "\r\nContent-Range: bytes " + std::to_string(start) + "-" + std::to_string(end) + "/" +
            std::to_string(object_.size()) + "\r\n\r\n";
        const bool cut = std::exchange(first_, false);
        const std::string sent = answer + (cut ? body.substr(0, cut_) : body);
        if (::send(c, sent.data(), sent.size(), MSG_NOSIGNAL) < 0) return;
        if (cut) {
          if (stall_) {
            while (!stop_ && ::recv(c, chunk, sizeof chunk, MSG_DONTWAIT) != 0) usleep(10000);
          }
          return;  // closes the connection
        }
        continue;
      }
      const ssize_t n = ::recv(c, chunk, sizeof chunk, 0);
      if (n <= 0) return;
      buf.append(chunk, static_cast<size_t>(n));
    }
  }

  const std::string object_;
  const size_t cut_;
  const bool stall_;
  bool first_ = true;
  std::mutex mu_;
  std::vector<std::string> ranges_;
};

std::string Pattern(size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 131 + i / 7) & 0xff);
  return s;
}

std::string ReadAll(S3RangeReader& reader, size_t length, std::vector<size_t> pieces) {
  std::string out(length, '\0');
  size_t at = 0;
  for (size_t i = 0; at < length; ++i) {
    const size_t n = std::min(pieces[i % pieces.size()], length - at);
    auto st = reader.Read({reinterpret_cast<uint8_t*>(out.data() + at), n});
    EXPECT_TRUE(st.ok()) << st.error().message;
    if (!st.ok()) return {};
    at += n;
  }
  return out;
}

TEST(S3RangeReaderTest, AnAnswerCutShortIsResumedWhereItStopped) {
  const std::string object = Pattern(3 << 20);
  CuttingServer store(object, 700'000, /*stall=*/false);
  auto client = S3Client::Create(Against(store.endpoint()));
  ASSERT_TRUE(client.ok());
  auto reader = (*client)->OpenRange("k", 1000, 2'000'000);
  EXPECT_EQ(ReadAll(*reader, 2'000'000, {1, 65536, 1 << 20, 333}), object.substr(1000, 2'000'000));
  const auto ranges = store.ranges();
  ASSERT_EQ(ranges.size(), 2U);
  EXPECT_EQ(ranges[0], "1000-2000999");
  EXPECT_EQ(ranges[1], "701000-2000999");  // from the first byte not received
  uint8_t more = 0;
  auto past = reader->Read({&more, 1});
  ASSERT_FALSE(past.ok());
  EXPECT_EQ(past.error().code, ErrorCode::kInconsistent);
}

TEST(S3RangeReaderTest, AStalledAnswerIsAbandonedAndResumed) {
  const std::string object = Pattern(1 << 20);
  CuttingServer store(object, 100'000, /*stall=*/true);
  auto o = Against(store.endpoint());
  o.stall_timeout = std::chrono::seconds(1);
  auto client = S3Client::Create(o);
  ASSERT_TRUE(client.ok());
  auto reader = (*client)->OpenRange("k", 0, object.size());
  EXPECT_EQ(ReadAll(*reader, object.size(), {300'000}), object);
  const auto ranges = store.ranges();
  ASSERT_EQ(ranges.size(), 2U);
  EXPECT_EQ(ranges[1], "100000-1048575");
}

TEST(S3RangeReaderTest, AStoreThatCannotBeReachedIsUnavailable) {
  auto port = FreeLoopbackPort();
  ASSERT_TRUE(port.has_value());
  auto o = Against("http://127.0.0.1:" + std::to_string(*port));
  o.max_attempts = 3;
  auto client = S3Client::Create(o);
  ASSERT_TRUE(client.ok());
  auto reader = (*client)->OpenRange("k", 0, 10);
  uint8_t out[10];
  auto st = reader->Read(out);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(st.error().message.find("3 times"), std::string::npos) << st.error().message;
}

}  // namespace
}  // namespace cairn::store
