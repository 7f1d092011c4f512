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

// A scripted HTTP server for fault injection (SeaweedFS cannot be told to answer 503): answers each request
// with the next status of its script (then 200), keeping connections alive, and counts what it got.
class ScriptedServer {
 public:
  explicit ScriptedServer(std::deque<int> script) : script_(std::move(script)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    EXPECT_EQ(::listen(fd_, 16), 0);
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { Run(); });
  }
  ~ScriptedServer() {
    stop_ = true;
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    thread_.join();
  }
  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int requests() const { return requests_.load(); }

 private:
  void Run() {
    while (!stop_) {
      const int c = ::accept(fd_, nullptr, nullptr);
      if (c < 0) return;
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
            if (::send(c, answer.data(), answer.size(), MSG_NOSIGNAL) < 0) break;
            continue;
          }
        }
        const ssize_t n = ::recv(c, chunk, sizeof chunk, 0);
        if (n <= 0) break;
        buf.append(chunk, static_cast<size_t>(n));
      }
      ::close(c);
    }
  }

  int fd_ = -1;
  uint16_t port_ = 0;
  std::mutex mu_;
  std::deque<int> script_;
  std::atomic<int> requests_{0};
  std::atomic<bool> stop_{false};
  std::thread thread_;
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
  EXPECT_EQ(res.error().code, xet::ErrorCode::kUnavailable);
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
  EXPECT_EQ(res.error().code, xet::ErrorCode::kUnavailable);
}

}  // namespace
}  // namespace cairn::store
