#include "http/server.h"

#include <spdlog/spdlog.h>

#include <csignal>
#include <string_view>
#include <utility>
#include <vector>

#include "http/session.h"
#include "http/tls.h"

namespace cairn::http {

// ---- Server::Impl -----------------------------------------------------------------------------------------

Server::Impl::~Impl() {
  std::lock_guard lock(mu);
  destroying = true;
}

void Server::Impl::Accept() {
  acceptor.async_accept(asio::make_strand(ioc), [this](beast::error_code ec, tcp::socket socket) {
    if (!acceptor.is_open() || ec == asio::error::operation_aborted) return;
    if (ec) {
      // Out of descriptors (or memory) most likely: accepting again at once would spin. Pause, then retry.
      spdlog::warn("accept failed: {}; retrying in 100 ms", ec.message());
      accept_pause.expires_after(std::chrono::milliseconds(100));
      accept_pause.async_wait([this](beast::error_code wait_ec) {
        if (!wait_ec && acceptor.is_open()) Accept();
      });
      return;
    }
    {
      connections.Inc({});
      beast::error_code peer_ec;
      const auto peer = socket.remote_endpoint(peer_ec).address();
      const bool via_proxy = !peer_ec && opts.trusted_proxies.Contains(peer);
      if (ActiveSessions() >= opts.max_connections) {
        Reject(socket, "total");
      } else if (!via_proxy && !per_client.TryAcquire(peer.to_string())) {
        Reject(socket, "per_client");
      } else {
        uint64_t id = 0;
        {
          std::lock_guard lock(mu);
          id = ++next_session;
        }
        auto s = std::make_shared<Session>(*this, std::move(socket), id, peer, !via_proxy, via_proxy,
                                           tls ? tls->Current() : nullptr);
        Register(id, s);
        s->Start();
      }
    }
    Accept();
  });
}

void Server::Impl::Reject(tcp::socket& socket, std::string_view cap) {
  rejected.Inc({std::string(cap)});
  // A fresh socket's send buffer is empty: this short answer goes out at once, without waiting.
  static constexpr std::string_view kBusy =
      "HTTP/1.1 503 Service Unavailable\r\nServer: cairn\r\nRetry-After: 1\r\nConnection: close\r\n"
      "Content-Type: application/json\r\nContent-Length: 40\r\n\r\n{\"error\": \"too many connections; "
      "retry\"}";
  beast::error_code ec;
  socket.non_blocking(true, ec);
  // Over TLS a plain answer would be noise before the handshake (and a handshake would cost what the cap
  // saves): the connection is only closed.
  if (!tls) asio::write(socket, asio::buffer(kBusy.data(), kBusy.size()), ec);
  socket.shutdown(tcp::socket::shutdown_both, ec);
  socket.close(ec);
}

void Server::Impl::Register(uint64_t id, const std::shared_ptr<Session>& s) {
  std::lock_guard lock(mu);
  sessions[id] = s;
}

void Server::Impl::Unregister(uint64_t id) {
  std::lock_guard lock(mu);
  sessions.erase(id);
  if (stopping && sessions.empty() && !destroying) {
    asio::post(ioc, [this] {
      deadline.cancel();
      guard.reset();
    });
  }
}

void Server::Impl::DoStop(std::chrono::milliseconds grace) {
  std::vector<std::shared_ptr<Session>> live;
  {
    std::lock_guard lock(mu);
    if (stopping) return;
    stopping = true;
    for (auto& [id, weak] : sessions)
      if (auto s = weak.lock()) live.push_back(std::move(s));
  }
  spdlog::info("stopping: {} connection(s) open, grace {} ms", live.size(), grace.count());
  beast::error_code ec;
  acceptor.close(ec);
  accept_pause.cancel();
  if (signals) signals->cancel(ec);
  if (reload_signals) reload_signals->cancel(ec);
  for (auto& s : live) {
    auto* raw = s.get();
    raw->Dispatch([raw] { raw->OnServerStop(); });
  }
  live.clear();  // a session may end right here; Unregister then sees stopping
  deadline.expires_after(grace);
  deadline.async_wait([this](beast::error_code wait_ec) {
    if (wait_ec) return;
    if (ActiveSessions() > 0)
      spdlog::warn("stop: grace period over with {} connection(s) open; abandoning them", ActiveSessions());
    ioc.stop();
  });
  std::lock_guard lock(mu);
  if (sessions.empty()) {
    asio::post(ioc, [this] {
      deadline.cancel();
      guard.reset();
    });
  }
}

// ---- Server -----------------------------------------------------------------------------------------------

Server::Server(ServerOptions options, std::shared_ptr<const Authenticator> auth)
    : impl_(std::make_unique<Impl>(std::move(options), std::move(auth))) {
  // A client that goes away while sendfile(2) writes to it gets the write EPIPE and, by default, the whole
  // process SIGPIPE: any client could end the server by closing early. The failed write is handled as an
  // error.
  (void)std::signal(SIGPIPE, SIG_IGN);
  Impl* impl = impl_.get();
  impl->router.Handle(
      Verb::get, "/healthz", RouteOptions().Name("healthz"),
      [](const std::shared_ptr<Exchange>& ex) { ex->Respond(Response::Json(200, R"({"status":"ok"})")); });
  impl->router.Handle(
      Verb::get, "/metrics", RouteOptions().Name("metrics"), [impl](const std::shared_ptr<Exchange>& ex) {
        ex->Respond(Response::Text(200, impl->metrics.Render(), "text/plain; version=0.0.4; charset=utf-8"));
      });
  impl->metrics.Gauge("cairn_http_open_connections", "Connections currently open",
                      [impl] { return static_cast<double>(impl->ActiveSessions()); });
  impl->metrics.Gauge("cairn_worker_queue_depth", "Tasks waiting for a worker thread",
                      [impl] { return static_cast<double>(impl->workers->queued()); });
}

Server::~Server() {
  Stop(std::chrono::milliseconds(0));
  Wait();
}

Router& Server::router() {
  return impl_->router;
}
MetricsRegistry& Server::metrics() {
  return impl_->metrics;
}
WorkQueue& Server::workers() {
  return *impl_->workers;
}
const ServerOptions& Server::options() const {
  return impl_->opts;
}
void Server::ObserveRefusals(RefusalObserver observe) {
  impl_->refusals = std::move(observe);
}

const Authenticator* Server::authenticator() const {
  return impl_->auth.get();
}

Status Server::Listen() {
  if (!impl_->opts.tls_cert.empty() || !impl_->opts.tls_key.empty()) {
    if (impl_->opts.tls_cert.empty() || impl_->opts.tls_key.empty())
      return IoError("TLS needs both a certificate chain and a private key");
    auto holder = std::make_unique<TlsContextHolder>(TlsFiles{impl_->opts.tls_cert, impl_->opts.tls_key});
    if (auto st = holder->Reload(); !st) return st;
    impl_->tls = std::move(holder);
  }
  beast::error_code ec;
  const auto address = asio::ip::make_address(impl_->opts.host, ec);
  if (ec) return IoError("invalid listen address " + impl_->opts.host + ": " + ec.message());
  const tcp::endpoint ep{address, impl_->opts.port};
  auto& acc = impl_->acceptor;
  if (acc.open(ep.protocol(), ec); ec) return IoError("cannot open socket: " + ec.message());
  if (acc.set_option(asio::socket_base::reuse_address(true), ec); ec)
    return IoError("cannot set SO_REUSEADDR: " + ec.message());
  if (acc.bind(ep, ec); ec)
    return IoError("cannot bind " + impl_->opts.host + ":" + std::to_string(impl_->opts.port) + ": " +
                   ec.message());
  if (acc.listen(asio::socket_base::max_listen_connections, ec); ec)
    return IoError("cannot listen: " + ec.message());
  return Ok{};
}

Status Server::ReloadTls() {
  if (!impl_->tls) return IoError("TLS is not configured");
  return impl_->tls->Reload();
}

bool Server::tls() const {
  return impl_->tls != nullptr;
}

uint16_t Server::port() const {
  beast::error_code ec;
  auto ep = impl_->acceptor.local_endpoint(ec);
  return ec ? 0 : ep.port();
}

void Server::Start() {
  Impl* impl = impl_.get();
  impl->guard.emplace(impl->ioc.get_executor());
  impl->Accept();
  const size_t n = std::max<size_t>(impl->opts.io_threads, 1);
  for (size_t i = 0; i < n; ++i) impl->threads.emplace_back([impl] { impl->ioc.run(); });
}

void Server::StopOnSignals() {
  Impl* impl = impl_.get();
  impl->signals.emplace(impl->ioc, SIGINT, SIGTERM);
  impl->signals->async_wait([impl](beast::error_code ec, int signal) {
    if (ec) return;
    spdlog::info("signal {}: shutting down", signal);
    impl->DoStop(impl->opts.shutdown_grace);
  });
}

void Server::ReloadOnSignal(std::function<void()> reload) {
  Impl* impl = impl_.get();
  impl->on_reload = std::move(reload);
  impl->reload_signals.emplace(impl->ioc, SIGHUP);
  impl->AwaitReload();
}

void Server::Stop(std::chrono::milliseconds grace) {
  Impl* impl = impl_.get();
  if (impl->threads.empty()) {  // never started
    std::lock_guard lock(impl->mu);
    impl->stopping = true;
    return;
  }
  asio::post(impl->ioc, [impl, grace] { impl->DoStop(grace); });
}

void Server::Wait() {
  for (auto& t : impl_->threads)
    if (t.joinable()) t.join();
  impl_->threads.clear();
}

}  // namespace cairn::http
