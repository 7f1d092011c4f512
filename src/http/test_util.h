// Helpers shared by the http tests: hand-made tokens and a tiny synchronous Beast client.
#pragma once

#include <gtest/gtest.h>
#include <jwt.h>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>

#include "http/server.h"

namespace cairn::http::testing {

// `n` pseudo-random bytes, the same for the same seed.
inline std::string RandomBytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(rng());
  return s;
}

// A token with exactly these claims (JSON object text), signed with `alg` and `key`.
inline std::string MakeJwt(jwt_alg_t alg, const std::string& key, const std::string& claims_json) {
  jwt_t* jwt = nullptr;
  jwt_new(&jwt);
  jwt_add_grants_json(jwt, claims_json.c_str());
  if (alg == JWT_ALG_NONE) {
    jwt_set_alg(jwt, JWT_ALG_NONE, nullptr, 0);
  } else {
    jwt_set_alg(jwt, alg, reinterpret_cast<const unsigned char*>(key.data()), static_cast<int>(key.size()));
  }
  char* s = jwt_encode_str(jwt);
  std::string out = s != nullptr ? s : "";
  free(s);  // NOLINT(cppcoreguidelines-no-malloc)
  jwt_free(jwt);
  return out;
}

namespace net = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;

// One keep-alive connection to 127.0.0.1:port.
class Client {
 public:
  explicit Client(uint16_t port) : socket_(ioc_) {
    socket_.connect({net::ip::make_address("127.0.0.1"), port});
  }

  // A HEAD request's answer is read as a header alone (whatever its Content-Length says).
  // The request's own Host when it names one (a test of another host), else 127.0.0.1.
  bhttp::response<bhttp::string_body> Send(bhttp::request<bhttp::string_body> req) {
    req.version(11);
    if (req.find(bhttp::field::host) == req.end()) req.set(bhttp::field::host, "127.0.0.1");
    req.prepare_payload();
    bhttp::write(socket_, req);
    return Read(/*head=*/req.method() == bhttp::verb::head);
  }

  bhttp::response<bhttp::string_body> Get(const std::string& target, const std::string& auth = {}) {
    bhttp::request<bhttp::string_body> req{bhttp::verb::get, target, 11};
    if (!auth.empty()) req.set(bhttp::field::authorization, auth);
    return Send(std::move(req));
  }

  bhttp::response<bhttp::string_body> Post(const std::string& target, std::string body,
                                           const std::string& auth = {}) {
    bhttp::request<bhttp::string_body> req{bhttp::verb::post, target, 11};
    if (!auth.empty()) req.set(bhttp::field::authorization, auth);
    req.body() = std::move(body);
    return Send(std::move(req));
  }

  // A HEAD request: the answer's header alone (no body is read, whatever Content-Length says).
  bhttp::response<bhttp::string_body> Head(const std::string& target) {
    bhttp::request<bhttp::string_body> req{bhttp::verb::head, target, 11};
    req.set(bhttp::field::host, "127.0.0.1");
    bhttp::write(socket_, req);
    return Read(/*head=*/true);
  }

  bhttp::response<bhttp::string_body> Read(bool head = false) {
    bhttp::response_parser<bhttp::string_body> parser;
    parser.skip(head);
    parser.body_limit(1ull << 30);
    bhttp::read(socket_, buffer_, parser);
    return parser.release();
  }

  void WriteRaw(const std::string& bytes) { net::write(socket_, net::buffer(bytes)); }

  // True when the server closed the connection (EOF on read).
  bool ClosedByPeer() {
    beast::error_code ec;
    char c = 0;
    socket_.read_some(net::buffer(&c, 1), ec);
    return ec == net::error::eof || ec == net::error::connection_reset;
  }

  net::ip::tcp::socket& socket() { return socket_; }

 private:
  net::io_context ioc_;
  net::ip::tcp::socket socket_;
  beast::flat_buffer buffer_;
};

// The slow-body check, over any client with WriteRaw and Read (plain TCP or TLS): a POST that sends 10 of its
// 100,000 bytes is answered 408 once the body deadline (200 ms grace, then `o.body_min_rate`) passes, within
// 2 s.
template <class Connect>
void ExpectSlowBodyIs408(ServerOptions o, Connect connect) {
  using namespace std::chrono_literals;
  o.port = 0;
  o.io_threads = 1;
  o.body_grace = 200ms;
  Server server(o, nullptr);
  server.router().Handle(
      Verb::post, "/small", RouteOptions().MaxBody(1 << 20),
      [](const std::shared_ptr<Exchange>& ex) { ex->Respond(Response::Text(200, "late")); });
  ASSERT_TRUE(server.Listen().ok());
  server.Start();
  auto c = connect(server.port());
  c->WriteRaw("POST /small HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n0123456789");
  const auto t0 = std::chrono::steady_clock::now();
  auto res = c->Read();
  EXPECT_EQ(res.result_int(), 408u);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s);
  server.Stop(1s);
  server.Wait();
}

}  // namespace cairn::http::testing
