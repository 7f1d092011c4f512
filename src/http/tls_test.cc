// The server over TLS, in process: requests and keep-alive, streamed bodies, file and source responses (which
// TLS cannot sendfile), a certificate reload that leaves open connections alone, and the load errors.
#include "http/tls.h"

#include <gtest/gtest.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <unistd.h>

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "http/range.h"
#include "http/server.h"
#include "http/test_util.h"

namespace cairn::http {
namespace {

namespace net = boost::asio;
namespace ssl = boost::asio::ssl;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using namespace std::chrono_literals;

using testing::RandomBytes;

// A temporary directory with self-signed certificates made by the openssl CLI (ECDSA P-256, SAN 127.0.0.1).
class Certs {
 public:
  Certs()
      : dir_(std::filesystem::temp_directory_path() /
             ("cairn-tls-test-" + std::to_string(::getpid()) + "-" + std::to_string(next_++))) {
    std::filesystem::create_directories(dir_);
  }
  ~Certs() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  Certs(const Certs&) = delete;
  Certs& operator=(const Certs&) = delete;

  // Makes <name>.pem and <name>.key; false if openssl failed.
  bool Make(const std::string& name, const std::string& common_name) {
    const std::string cmd =
        "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 "
        "-subj /CN=" +
        common_name + " -addext subjectAltName=IP:127.0.0.1 -keyout " + Key(name) + " -out " + Cert(name) +
        " >/dev/null 2>&1";
    return std::system(cmd.c_str()) == 0;  // NOLINT(concurrency-mt-unsafe): tests run one at a time
  }
  std::string Cert(const std::string& name) const { return (dir_ / (name + ".pem")).string(); }
  std::string Key(const std::string& name) const { return (dir_ / (name + ".key")).string(); }
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }

 private:
  static inline int next_ = 0;
  std::filesystem::path dir_;
};

// One keep-alive TLS connection that trusts `ca` (the server's self-signed certificate).
class TlsClient {
 public:
  TlsClient(uint16_t port, const std::string& ca) : ctx_(ssl::context::tls_client), stream_(ioc_, ctx_) {
    ctx_.load_verify_file(ca);
    stream_.set_verify_mode(ssl::verify_peer);
    beast::get_lowest_layer(stream_).connect({net::ip::make_address("127.0.0.1"), port});
    stream_.handshake(ssl::stream_base::client);
  }

  bhttp::response<bhttp::string_body> Send(bhttp::request<bhttp::string_body> req) {
    req.version(11);
    req.set(bhttp::field::host, "127.0.0.1");
    req.prepare_payload();
    bhttp::write(stream_, req);
    return Read();
  }
  void WriteRaw(const std::string& bytes) { net::write(stream_, net::buffer(bytes)); }
  bhttp::response<bhttp::string_body> Read() {
    bhttp::response_parser<bhttp::string_body> parser;
    parser.body_limit(1ull << 30);
    bhttp::read(stream_, buffer_, parser);
    return parser.release();
  }
  bhttp::response<bhttp::string_body> Get(const std::string& target, const std::string& range = {}) {
    bhttp::request<bhttp::string_body> req{bhttp::verb::get, target, 11};
    if (!range.empty()) req.set(bhttp::field::range, range);
    return Send(std::move(req));
  }

  // The common name of the certificate the server presented.
  std::string PeerName() {
    X509* cert = SSL_get1_peer_certificate(stream_.native_handle());
    if (cert == nullptr) return "";
    char buf[256] = {};
    X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, buf, sizeof buf);
    X509_free(cert);
    return buf;
  }

 private:
  net::io_context ioc_;
  ssl::context ctx_;
  ssl::stream<net::ip::tcp::socket> stream_;
  beast::flat_buffer buffer_;
};

// Serves `data` through ReadAt, as a store does.
class StoredBytes final : public ByteSource {
 public:
  explicit StoredBytes(std::string data) : data_(std::move(data)) {}
  Status ReadAt(uint64_t offset, std::span<uint8_t> out) const override {
    std::copy_n(data_.data() + offset, out.size(), out.data());
    return Ok{};
  }

 private:
  std::string data_;
};

class TlsServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(certs_.Make("first", "first.test")) << "the openssl CLI is needed (scripts/bootstrap.sh)";
    ASSERT_TRUE(certs_.Make("second", "second.test"));
    // The files the server reads: "live", replaced in place for the reload test.
    std::filesystem::copy_file(certs_.Cert("first"), certs_.Path("live.pem"));
    std::filesystem::copy_file(certs_.Key("first"), certs_.Path("live.key"));
    file_data_ = RandomBytes(9 << 20, 1);
    std::ofstream(certs_.Path("data.bin"), std::ios::binary) << file_data_;
    source_data_ = RandomBytes(5 << 20, 2);

    ServerOptions o;
    o.port = 0;
    o.tls_cert = certs_.Path("live.pem");
    o.tls_key = certs_.Path("live.key");
    server_ = std::make_unique<Server>(o, nullptr);
    Router& r = server_->router();
    r.Handle(Verb::post, "/echo", RouteOptions().MaxBody(64 << 20), [](const std::shared_ptr<Exchange>& ex) {
      ex->Respond(Response::Text(200, ex->request().body));
    });
    r.Handle(Verb::get, "/file", {}, [this](const std::shared_ptr<Exchange>& ex) {
      auto file = File::Open(certs_.Path("data.bin"));
      if (!file) return ex->Fail(file.error());
      std::vector<ByteRange> ranges;
      if (auto h = ex->request().Header("Range"); !h.empty()) ranges = *ParseRange(h, (*file)->size());
      ex->Respond(RangeResponse(*file, 0, (*file)->size(), ranges, "application/octet-stream"));
    });
    auto source = std::make_shared<const StoredBytes>(source_data_);
    r.Handle(
        Verb::get, "/source", {}, [source, n = source_data_.size()](const std::shared_ptr<Exchange>& ex) {
          ex->Respond(RangeResponse(std::shared_ptr<const ByteSource>(source), n, {}, "application/x-test"));
        });
    ASSERT_TRUE(server_->Listen().ok());
    ASSERT_TRUE(server_->tls());
    server_->Start();
    port_ = server_->port();
  }
  void TearDown() override {
    server_->Stop(2s);
    server_->Wait();
  }

  std::string Ca(const std::string& name) const { return certs_.Cert(name); }

  Certs certs_;
  std::unique_ptr<Server> server_;
  uint16_t port_ = 0;
  std::string file_data_, source_data_;
};

TEST_F(TlsServerTest, RequestsBodiesFilesAndSourcesOverOneKeepAliveConnection) {
  TlsClient c(port_, Ca("first"));
  EXPECT_EQ(c.PeerName(), "first.test");
  EXPECT_EQ(c.Get("/healthz").result_int(), 200u);

  bhttp::request<bhttp::string_body> post{bhttp::verb::post, "/echo", 11};
  post.body() = RandomBytes(6 << 20, 3);
  const std::string sent = post.body();
  auto echoed = c.Send(std::move(post));
  ASSERT_EQ(echoed.result_int(), 200u);
  EXPECT_TRUE(echoed.body() == sent);

  // A file (sendfile(2) over plain TCP) is read and encrypted instead: whole, a range, several ranges.
  auto whole = c.Get("/file");
  ASSERT_EQ(whole.result_int(), 200u);
  EXPECT_TRUE(whole.body() == file_data_);
  auto part = c.Get("/file", "bytes=5000000-5999999");
  ASSERT_EQ(part.result_int(), 206u);
  EXPECT_TRUE(part.body() == file_data_.substr(5000000, 1000000));
  auto multi = c.Get("/file", "bytes=0-9,8000000-8000009");
  ASSERT_EQ(multi.result_int(), 206u);
  EXPECT_NE(multi.body().find(file_data_.substr(8000000, 10)), std::string::npos);

  auto source = c.Get("/source");
  ASSERT_EQ(source.result_int(), 200u);
  EXPECT_TRUE(source.body() == source_data_);
  EXPECT_EQ(c.Get("/nowhere").result_int(), 404u);
}

TEST_F(TlsServerTest, AReloadServesTheNewCertificateToNewConnectionsOnly) {
  TlsClient before(port_, Ca("first"));
  EXPECT_EQ(before.Get("/healthz").result_int(), 200u);

  std::filesystem::copy_file(certs_.Cert("second"), certs_.Path("live.pem"),
                             std::filesystem::copy_options::overwrite_existing);
  std::filesystem::copy_file(certs_.Key("second"), certs_.Path("live.key"),
                             std::filesystem::copy_options::overwrite_existing);
  ASSERT_TRUE(server_->ReloadTls().ok());

  TlsClient after(port_, Ca("second"));
  EXPECT_EQ(after.PeerName(), "second.test");
  EXPECT_EQ(after.Get("/healthz").result_int(), 200u);
  // The connection made before the reload carries on, with the certificate it was given.
  EXPECT_EQ(before.PeerName(), "first.test");
  EXPECT_EQ(before.Get("/healthz").result_int(), 200u);

  // A renewal gone wrong (the first key beside the second certificate): refused, the second stays.
  std::filesystem::copy_file(certs_.Key("first"), certs_.Path("live.key"),
                             std::filesystem::copy_options::overwrite_existing);
  auto st = server_->ReloadTls();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("does not match"), std::string::npos) << st.error().message;
  TlsClient still(port_, Ca("second"));
  EXPECT_EQ(still.PeerName(), "second.test");
}

// The body deadline cancels a read inside the TLS stream; the 408 must still go out over it, encrypted.
TEST(TlsTimeouts, ASlowBodyIs408OverTls) {
  Certs certs;
  ASSERT_TRUE(certs.Make("a", "a.test"));
  ServerOptions o;
  o.body_min_rate = 1 << 20;
  o.tls_cert = certs.Cert("a");
  o.tls_key = certs.Key("a");
  testing::ExpectSlowBodyIs408(
      o, [&](uint16_t port) { return std::make_unique<TlsClient>(port, certs.Cert("a")); });
}

TEST(TlsContext, LoadErrorsNameTheFileAndTheReason) {
  Certs certs;
  ASSERT_TRUE(certs.Make("a", "a.test"));
  ASSERT_TRUE(certs.Make("b", "b.test"));
  EXPECT_TRUE(LoadTlsContext({certs.Cert("a"), certs.Key("a")}).ok());
  const auto message = [](const TlsFiles& f) {
    auto r = LoadTlsContext(f);
    return r ? std::string("loaded") : r.error().message;
  };
  EXPECT_NE(message({certs.Cert("a"), certs.Key("b")}).find("does not match the certificate"),
            std::string::npos);
  EXPECT_NE(message({certs.Path("none.pem"), certs.Key("a")}).find("cannot load the certificate chain"),
            std::string::npos);
  EXPECT_NE(message({certs.Cert("a"), certs.Path("none.key")}).find("cannot read the private key"),
            std::string::npos);
  EXPECT_NE(message({certs.Cert("a"), certs.Cert("a")}).find("cannot load the private key"),
            std::string::npos);

  // The server refuses to start without both files, or with files that do not load.
  ServerOptions o;
  o.port = 0;
  o.tls_cert = certs.Cert("a");
  Server only_cert(o, nullptr);
  EXPECT_FALSE(only_cert.Listen().ok());
  o.tls_key = certs.Key("b");
  Server mismatched(o, nullptr);
  EXPECT_FALSE(mismatched.Listen().ok());
  EXPECT_FALSE(mismatched.tls());
}

}  // namespace
}  // namespace cairn::http
