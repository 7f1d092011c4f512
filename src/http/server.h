// The HTTP/1.1 server: Boost.Beast on Asio, a fixed set of I/O threads, one session object per connection
// (keep-alive, pipelining-free), explicit timeouts and limits, routing, bearer-token auth, request ids,
// per-request logs and metrics, graceful shutdown.
//
// Timeouts and limits (ServerOptions): the first request's header must arrive within header_timeout; between
// keep-alive requests the connection may idle for idle_timeout; a request body must keep up with
// body_min_rate bytes/s after a body_grace head start (else 408 and close); a write making no progress for
// write_timeout closes the connection. Header size is capped globally (max_header_bytes, 431) and per route
// (RouteOptions::max_header); body size per route (413).
//
// Connections: at most max_connections open at once, and at most max_connections_per_client from one client
// address; a connection past either is answered 503 with Retry-After (over TLS: not answered) and closed at
// once (nothing is queued). Connections from trusted_proxies are not counted per address: their client is
// read from X-Forwarded-For (client_limits.h), and the same cap bounds the requests in flight per forwarded
// client (429, Retry-After).
//
// TLS: with tls_cert and tls_key set the server speaks only HTTPS (tls.h: TLS 1.2+, modern ciphers),
// keep-alive as over plain TCP; responses that plain HTTP sends with sendfile(2) are read into memory and
// encrypted instead. ReloadTls() swaps in the files' current contents for new connections; open ones keep
// theirs.
//
// Built-in routes: GET /healthz (200 {"status":"ok"}) and GET /metrics (Prometheus text).
//
// Lifecycle: construct, register routes on router(), Listen(), Start(), then Stop() from any thread (or
// StopOnSignals()) and Wait(). Stop closes the listener, closes idle connections, lets in-flight requests
// finish (their connections then close) and, after `grace`, abandons what is left. The destructor stops and
// waits.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "common/work_queue.h"
#include "http/auth.h"
#include "http/client_limits.h"
#include "http/metrics.h"
#include "http/result.h"
#include "http/router.h"

namespace cairn::http {

// What Server::ObserveRefusals calls: the request and the status it was refused with.
using RefusalObserver = std::function<void(const Request&, unsigned status)>;

struct ServerOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 8080;  // 0: an ephemeral port (see Server::port())
  size_t io_threads = 2;
  size_t worker_threads = 4;
  size_t worker_queue = 4096;  // tasks waiting for a worker before Offload answers 503
  std::chrono::milliseconds header_timeout{30'000};
  std::chrono::milliseconds idle_timeout{75'000};
  std::chrono::milliseconds write_timeout{60'000};
  std::chrono::milliseconds body_grace{10'000};
  uint64_t body_min_rate = 4096;  // bytes per second
  size_t max_header_bytes = 64 << 10;
  std::chrono::milliseconds shutdown_grace{30'000};
  size_t max_connections = 8192;
  size_t max_connections_per_client = 1024;  // 0: no cap
  AddressSet trusted_proxies;                // empty: X-Forwarded-For is never read
  // The host of the user-content origin ("files.example.com", with ":port" when not the scheme's), as its
  // requests' Host header names it: those reach only routes marked UserContent() and are 404 elsewhere, so
  // nothing of cairn's own (its pages, the API) answers there. Empty: no such origin.
  std::string content_host;
  std::string tls_cert;  // PEM certificate chain; empty (with tls_key): plain HTTP
  std::string tls_key;   // PEM private key
};

class Server {
 public:
  // `auth` may be null when no route requires a permission.
  Server(ServerOptions options, std::shared_ptr<const Authenticator> auth);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  Router& router();
  MetricsRegistry& metrics();
  WorkQueue& workers();
  const ServerOptions& options() const;
  const Authenticator* authenticator() const;

  // Loads the TLS files if set, binds and listens on options().host:port. Error: 500 with the reason (address
  // in use, a certificate that does not load...).
  Status Listen();
  // Reads the TLS files again (after Listen); on success new connections use them, open ones are unaffected.
  // Error (the old certificate stays in use): the reason. Thread-safe; reads two small files.
  Status ReloadTls();
  bool tls() const;
  // The bound port (after Listen).
  uint16_t port() const;
  // Starts the I/O threads; returns at once.
  void Start();
  // SIGINT and SIGTERM call Stop(options().shutdown_grace).
  void StopOnSignals();
  // SIGHUP calls `reload` (on an I/O thread: it must not block), until the server stops.
  void ReloadOnSignal(std::function<void()> reload);
  // `observe` is told of every request a route refused with 401, 403 or 404 (its own check, or the
  // handler's answer; not an unknown path), on the thread answering it (an I/O thread, a worker): it must
  // not block. Set it
  // before Start; for what a refusal should leave behind (the audit log's refused write attempts).
  void ObserveRefusals(RefusalObserver observe);
  // Graceful stop; thread-safe, idempotent.
  void Stop(std::chrono::milliseconds grace);
  // Blocks until the server stopped and the I/O threads exited.
  void Wait();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace cairn::http
