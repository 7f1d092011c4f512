// A connection's start, its TLS handshake and the handlers' calls into it (detail::Connection).
#include "http/session.h"

#include <spdlog/spdlog.h>

#include <utility>

namespace cairn::http {

Session::Session(Server::Impl& srv, tcp::socket socket, uint64_t id, asio::ip::address peer, bool counted,
                 bool via_proxy, std::shared_ptr<ssl::context> tls)
    : srv_(srv),
      body_timer_(socket.get_executor()),
      id_(id),
      peer_(std::move(peer)),
      counted_(counted),
      via_proxy_(via_proxy),
      tls_context_(std::move(tls)),
      writer_(*this, tls_context_ != nullptr, socket.get_executor(), srv_.opts.write_timeout) {
  if (tls_context_)
    tls_.emplace(std::move(socket), *tls_context_);
  else
    plain_.emplace(std::move(socket));
}

Session::~Session() {
  if (counted_) srv_.per_client.Release(peer_.to_string());
  srv_.Unregister(id_);
}

void Session::Start() {
  beast::error_code ec;
  auto ep = tcp().socket().remote_endpoint(ec);
  if (!ec) remote_ = ep.address().to_string() + ":" + std::to_string(ep.port());
  peer_remote_ = remote_;
  tcp().socket().set_option(tcp::no_delay(true), ec);
  if (!tls_) {
    tcp().socket().native_non_blocking(true, ec);  // for sendfile(2)
    return Dispatch([this] { ReadRequest(); });
  }
  Dispatch([this] { Handshake(); });
}

void Session::OnServerStop() {
  draining_ = true;
  if (state_ == State::kIdle) Close();
}

void Session::SendResponse(uint64_t gen, Response r) {
  Dispatch([this, gen, r = std::move(r)]() mutable { DoSendResponse(gen, std::move(r)); });
}

void Session::StartChunked(uint64_t gen, unsigned status, HeaderList headers) {
  Dispatch(
      [this, gen, status, h = std::move(headers)]() mutable { DoStartChunked(gen, status, std::move(h)); });
}

void Session::SendChunk(uint64_t gen, std::string data) {
  writer_.Reserve(data.size());
  Dispatch([this, gen, d = std::move(data)]() mutable { DoSendChunk(gen, std::move(d)); });
}

void Session::AbortChunked(uint64_t gen) {
  Dispatch([this, gen] {
    if (gen == gen_) Close();
  });
}

void Session::EndChunked(uint64_t gen) {
  Dispatch([this, gen] { DoEndChunked(gen); });
}

void Session::Dispatch(std::function<void()> fn) {
  asio::post(tcp().get_executor(), [self = shared_from_this(), f = std::move(fn)] { f(); });
}

void Session::Handshake() {
  tcp().expires_after(srv_.opts.header_timeout);
  tls_->async_handshake(ssl::stream_base::server, [self = shared_from_this()](beast::error_code ec) {
    if (ec) {
      // Port scanners, plain HTTP sent to the HTTPS port, clients that distrust the certificate: not the
      // server's problem, so not a warning.
      spdlog::debug("TLS handshake with {} failed: {}", self->remote_, ec.message());
      return self->Close();
    }
    self->ReadRequest();
  });
}

}  // namespace cairn::http
