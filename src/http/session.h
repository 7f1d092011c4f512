// Internal to the server: the listening side (Server::Impl: the acceptor, the connection caps, the sessions
// open, the metrics) and one connection's Session, which reads requests (session_read.cc), admits them
// (session_admit.cc: the route, the caps per client, the admission gate, 100 Continue) and writes the answers
// (session_write.cc, through its ResponseWriter), each in its own place. server.cc accepts and stops;
// session.cc starts a connection and takes the handlers' calls (detail::Connection).
//
// Included by those sources alone. Thread-safety: Server::Impl's fields under its mutex where it says so;
// a Session's members on its strand alone (below).
#pragma once

#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "common/work_queue.h"
#include "http/admission.h"
#include "http/admit.h"
#include "http/handler.h"
#include "http/metrics.h"
#include "http/response_writer.h"
#include "http/router.h"
#include "http/server.h"
#include "http/tls.h"

namespace cairn::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace ssl = boost::asio::ssl;
using tcp = asio::ip::tcp;
using TlsStream = beast::ssl_stream<beast::tcp_stream>;
using Clock = std::chrono::steady_clock;

class Session;

struct Server::Impl {
  Impl(ServerOptions o, std::shared_ptr<const Authenticator> a)
      : opts(std::move(o)),
        auth(std::move(a)),
        requests(metrics.Counter("cairn_http_requests_total",
                                 "HTTP requests answered, by route, method and status",
                                 {"route", "method", "status"})),
        latency(metrics.Histogram("cairn_http_request_duration_seconds",
                                  "Time from request header to the end of the response, by route", {"route"},
                                  MetricsRegistry::LatencyBuckets())),
        bytes_in(metrics.Counter("cairn_http_request_body_bytes_total",
                                 "Request body bytes received, by route", {"route"})),
        bytes_out(metrics.Counter("cairn_http_response_bytes_total",
                                  "Response bytes sent (with headers), by route", {"route"})),
        connections(metrics.Counter("cairn_http_connections_total", "Connections accepted")),
        rejected(metrics.Counter("cairn_http_connections_rejected_total",
                                 "Connections and requests turned away by the connection caps, by cap",
                                 {"cap"})),
        per_client(opts.max_connections_per_client),
        forwarded(opts.max_connections_per_client),
        acceptor(ioc),
        accept_pause(ioc),
        deadline(ioc),
        workers(std::make_unique<WorkQueue>(opts.worker_threads, opts.worker_queue)) {}

  ~Impl();

  void Accept();
  // Answers 503 on a connection the caps turn away, and closes it.
  void Reject(tcp::socket& socket, std::string_view cap);
  void DoStop(std::chrono::milliseconds grace);
  void Register(uint64_t id, const std::shared_ptr<Session>& s);
  void Unregister(uint64_t id);
  size_t ActiveSessions() {
    std::lock_guard lock(mu);
    return sessions.size();
  }

  ServerOptions opts;
  std::shared_ptr<const Authenticator> auth;
  Router router;
  MetricsRegistry metrics;
  CounterFamily& requests;
  HistogramFamily& latency;
  CounterFamily& bytes_in;
  CounterFamily& bytes_out;
  CounterFamily& connections;
  CounterFamily& rejected;
  PerKeyLimiter per_client;               // open connections per peer address (not trusted proxies)
  PerKeyLimiter forwarded;                // requests in flight per client behind a trusted proxy
  std::unique_ptr<TlsContextHolder> tls;  // null: plain HTTP
  RefusalObserver refusals;               // set before Start; then only read
  // Tells `refusals` of `req` when `status` is a refusal it hears of.
  void NoteRefusal(const Request& req, unsigned status) const {
    if (refusals && (status == 401 || status == 403 || status == 404)) refusals(req, status);
  }

  std::mutex mu;  // guards the fields below
  std::map<uint64_t, std::weak_ptr<Session>> sessions;
  uint64_t next_session = 0;
  bool stopping = false;
  bool destroying = false;

  asio::io_context ioc;
  tcp::acceptor acceptor;
  asio::steady_timer accept_pause;  // after a failed accept
  asio::steady_timer deadline;
  std::optional<asio::signal_set> signals;
  std::optional<asio::signal_set> reload_signals;
  std::function<void()> on_reload;

  void AwaitReload() {
    reload_signals->async_wait([this](beast::error_code ec, int) {
      if (ec) return;
      on_reload();
      AwaitReload();
    });
  }
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> guard;
  std::unique_ptr<WorkQueue> workers;  // destroyed before the io_context: its tasks may hold sessions
  std::vector<std::thread> threads;
};

// One connection. Every member is touched only on the connection's strand, except the atomics and the
// thread-safe Connection entry points (which post to the strand).
class Session : public detail::Connection,
                public ResponseWriter::Port,
                public std::enable_shared_from_this<Session> {
 public:
  // `counted`: the connection holds a unit of srv.per_client for `peer`; `via_proxy`: `peer` is a trusted
  // proxy, whose requests name their client in X-Forwarded-For.
  // `tls`: the context of a TLS connection (held while it lives); null for plain HTTP.
  Session(Server::Impl& srv, tcp::socket socket, uint64_t id, asio::ip::address peer, bool counted,
          bool via_proxy, std::shared_ptr<ssl::context> tls);
  ~Session() override;
  void Start();
  void OnServerStop();

  // detail::Connection
  void SendResponse(uint64_t gen, Response r) override;
  void StartChunked(uint64_t gen, unsigned status, HeaderList headers) override;
  void SendChunk(uint64_t gen, std::string data) override;
  void AbortChunked(uint64_t gen) override;
  void EndChunked(uint64_t gen) override;
  void Dispatch(std::function<void()> fn) override;
  WorkQueue& workers() override { return *srv_.workers; }
  bool open() const override { return open_.load(); }
  uint64_t pending_bytes() const override { return writer_.pending(); }
  void Answering(const Request& req, unsigned status) override { srv_.NoteRefusal(req, status); }

 private:
  enum class State { kIdle, kReadingHeader, kActive, kClosed };

  // The TCP stream under the connection (timeouts, the socket), whether or not TLS runs over it.
  beast::tcp_stream& tcp() { return tls_ ? beast::get_lowest_layer(*tls_) : *plain_; }
  // Calls `io` with the stream requests and responses go through: TLS, or the TCP stream itself.
  template <class F>
  void Io(F&& io) {
    if (tls_)
      io(*tls_);
    else
      io(*plain_);
  }

  // A TLS connection's handshake, under the header timeout (it comes before the first request's header).
  void Handshake();

  // ---- reading (session_read.cc) -------------------------------------------------------------------------

  // The next request on the connection: its header, then (once admitted) its body, whole or streamed.
  void ReadRequest();
  void ReadHeader();
  void OnHeader(beast::error_code ec);
  // An admitted request whose route streams its body to a BodySink, or takes it whole.
  void StartStreamed(Request req, uint64_t limit, bool expect_continue);
  void StartBuffered(Request req, uint64_t limit, bool expect_continue);

  // The body must keep pace: byte b must arrive by body_start + grace + b / rate. A timer of our own (not the
  // tcp_stream's, which closes the socket) cancels the read, so a 408 can still be written.
  void SetBodyDeadline();

  // A body read completed: the deadline no longer applies; a cancelled read caused by it is a timeout.
  void BodyReadDone(beast::error_code& ec);

  // A preemption that came while no body read was in flight (the sink busy with the last piece, the 100
  // Continue being written) had no read to cancel: it ends the body here, before the next read, as the
  // cancelled read would have. True when it did.
  bool PreemptedBetweenReads();

  // A body read failed: answer what can be answered, then close.
  void BodyReadFailed(beast::error_code ec);
  void ReadBufferedBody();
  void OnBufferedBody(beast::error_code ec, size_t n);
  void CallHandler();
  void ReadStreamBody();
  void OnStreamBody(beast::error_code ec);
  void FinishStreamBody();

  // ---- admission (session_admit.cc) ----------------------------------------------------------------------

  // A new request (h null: its header was too large to read): the per-request state reset, its id taken.
  void BeginRequest(const bhttp::request_parser<bhttp::empty_body>::value_type* h);
  // Routes the request, takes its client's and the route's admission (a ticket that may preempt the body),
  // and says how its body may be read; a refusal is in the answer's `refusal`.
  Admitted Admit(const bhttp::request_parser<bhttp::empty_body>::value_type& h);
  void WatchPreemption();
  // Sends 100 Continue first when the client waits for it, then reads the body (`next`).
  void MaybeContinue(bool expect_continue, std::function<void()> next);

  // ---- writing (session_write.cc) ------------------------------------------------------------------------

  void EarlyError(const Error& e) { EarlyResponse(Response::FromError(e)); }

  // An answer from the server itself (routing, limits, auth, body errors).
  void EarlyResponse(Response r);

  // The answer's header (ResponseWriter::Header): from now on the request is being answered.
  bhttp::response<bhttp::empty_body> HeaderFor(unsigned status, HeaderList headers,
                                               std::vector<std::string> refused);
  void DoSendResponse(uint64_t gen, Response r);
  void DoStartChunked(uint64_t gen, unsigned status, HeaderList headers);
  void DoSendChunk(uint64_t gen, std::string data);
  void DoEndChunked(uint64_t gen);

  // ResponseWriter::Port
  void Write(const std::vector<asio::const_buffer>& bufs,
             std::function<void(beast::error_code, size_t)> done) override;
  tcp::socket& socket() override { return tcp().socket(); }
  std::shared_ptr<void> Hold() override { return shared_from_this(); }
  void Fail() override { Close(); }
  void Complete() override { FinishExchange(); }

  // The response is fully written.
  void FinishExchange();

  // Closes after an answer that left request bytes unread: half-close, then read and discard for a moment so
  // the peer sees the answer instead of a reset caused by the unread data.
  void LingerClose();
  void Discard();
  void Log();
  void Close();

  Server::Impl& srv_;
  asio::steady_timer body_timer_;
  uint64_t body_seq_ = 0;
  bool body_timed_out_ = false;
  std::shared_ptr<AdmissionGate::Ticket> ticket_;  // the route's admission ticket for this request
  bool reading_ = false;                           // a body read is in flight
  beast::flat_buffer buffer_;
  const uint64_t id_;
  std::string remote_;       // for logs: "ip:port", or behind a proxy "client via=ip:port"
  std::string peer_remote_;  // the peer's "ip:port"
  asio::ip::address peer_;
  const bool counted_;
  const bool via_proxy_;
  const std::shared_ptr<ssl::context> tls_context_;  // outlives tls_ (declared first)
  std::optional<beast::tcp_stream> plain_;           // one of the two
  std::optional<TlsStream> tls_;
  std::string client_;  // behind a proxy: the client holding a unit of srv_.forwarded for this request
  State state_ = State::kIdle;
  bool first_request_ = true;
  bool draining_ = false;

  // The current request.
  uint64_t gen_ = 0;
  bool in_request_ = false;
  Clock::time_point start_;
  std::string request_id_, method_, path_, route_name_;
  const Route* route_ = nullptr;
  uint64_t bytes_in_ = 0;
  unsigned status_ = 0;
  std::string error_;  // the answer's error message, logged with the request
  bool keep_alive_ = false;
  bool body_done_ = false;
  bool responding_ = false;
  std::optional<bhttp::request_parser<bhttp::empty_body>> header_parser_;
  std::optional<bhttp::request_parser<bhttp::string_body>> string_parser_;
  std::optional<bhttp::request_parser<bhttp::buffer_body>> stream_parser_;
  Request pending_request_;
  std::vector<uint8_t> body_buf_;  // a streamed body's pieces, unless the sink receives them in place
  std::span<uint8_t> piece_;       // where the piece being read goes
  std::unique_ptr<BodySink> sink_;
  std::weak_ptr<Exchange> current_;     // the request's exchange, wherever its handler keeps it
  std::shared_ptr<Exchange> exchange_;  // held while a streamed body is read
  Clock::time_point body_start_;
  uint64_t body_bytes_ = 0;
  Clock::time_point linger_until_;
  uint64_t discarded_ = 0;

  std::atomic<bool> open_{true};
  ResponseWriter writer_;  // declared after tls_context_, which it is made from
};

}  // namespace cairn::http
