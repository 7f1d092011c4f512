#include "http/server.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>
#include <csignal>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "common/hex.h"
#include "common/printable.h"
#include "http/admit.h"
#include "http/response_writer.h"
#include "http/tls.h"

namespace cairn::http {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace ssl = boost::asio::ssl;
using tcp = asio::ip::tcp;
using TlsStream = beast::ssl_stream<beast::tcp_stream>;
using Clock = std::chrono::steady_clock;

constexpr size_t kStreamPiece = 64 << 10;    // bytes per BodySink::OnData
constexpr size_t kBodyReadSize = 256 << 10;  // bytes per read of a buffered body, at most

// asio::async_write's default completion condition hands the socket at most 64 KiB per write_some, so a 4 MiB
// block cost 64 trips through the reactor (and the stream's timer): a third of loopback's rate. Each
// write_some here offers everything left; the kernel takes what fits its send buffer.
std::size_t WriteAll(const beast::error_code& ec, std::size_t /*transferred*/) {
  return ec ? 0 : std::numeric_limits<std::size_t>::max();
}

std::string NewRequestId() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  const uint64_t v = rng();
  uint8_t bytes[sizeof v];
  std::memcpy(bytes, &v, sizeof v);
  return HexEncode(bytes);
}

bool ValidRequestId(std::string_view id) {
  if (id.empty() || id.size() > 128) return false;
  for (char c : id) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
                    c == '_' || c == '.' || c == ':';
    if (!ok) return false;
  }
  return true;
}

}  // namespace

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
  ~Session() override {
    if (counted_) srv_.per_client.Release(peer_.to_string());
    srv_.Unregister(id_);
  }

  void Start() {
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

  void OnServerStop() {
    draining_ = true;
    if (state_ == State::kIdle) Close();
  }

  // detail::Connection
  void SendResponse(uint64_t gen, Response r) override {
    Dispatch([this, gen, r = std::move(r)]() mutable { DoSendResponse(gen, std::move(r)); });
  }
  void StartChunked(uint64_t gen, unsigned status, HeaderList headers) override {
    Dispatch(
        [this, gen, status, h = std::move(headers)]() mutable { DoStartChunked(gen, status, std::move(h)); });
  }
  void SendChunk(uint64_t gen, std::string data) override {
    writer_.Reserve(data.size());
    Dispatch([this, gen, d = std::move(data)]() mutable { DoSendChunk(gen, std::move(d)); });
  }
  void AbortChunked(uint64_t gen) override {
    Dispatch([this, gen] {
      if (gen == gen_) Close();
    });
  }
  void EndChunked(uint64_t gen) override {
    Dispatch([this, gen] { DoEndChunked(gen); });
  }
  void Dispatch(std::function<void()> fn) override {
    asio::post(tcp().get_executor(), [self = shared_from_this(), f = std::move(fn)] { f(); });
  }
  WorkQueue& workers() override { return *srv_.workers; }
  bool open() const override { return open_.load(); }
  uint64_t pending_bytes() const override { return writer_.pending(); }

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
  void Handshake() {
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

  // ---- reading -------------------------------------------------------------------------------------------

  void ReadRequest() {
    if (state_ == State::kClosed) return;
    state_ = State::kIdle;
    if (draining_) return Close();
    header_parser_.emplace();
    header_parser_->header_limit(static_cast<uint32_t>(srv_.opts.max_header_bytes));
    header_parser_->body_limit(boost::none);  // checked against the route's limit once the route is known
    if (buffer_.size() == 0 && !first_request_) {
      // Keep-alive: wait for the next request's first bytes under the idle timeout.
      tcp().expires_after(srv_.opts.idle_timeout);
      Io([this](auto& s) {
        s.async_read_some(buffer_.prepare(8192), [self = shared_from_this()](beast::error_code ec, size_t n) {
          if (ec) return self->Close();
          self->buffer_.commit(n);
          self->ReadHeader();
        });
      });
      return;
    }
    ReadHeader();
  }

  void ReadHeader() {
    if (state_ == State::kClosed) return;
    state_ = State::kReadingHeader;
    tcp().expires_after(srv_.opts.header_timeout);
    Io([this](auto& s) {
      bhttp::async_read_header(
          s, buffer_, *header_parser_,
          [self = shared_from_this()](beast::error_code ec, size_t) { self->OnHeader(ec); });
    });
  }

  void OnHeader(beast::error_code ec) {
    if (state_ == State::kClosed) return;
    first_request_ = false;
    if (ec == bhttp::error::header_limit) {
      BeginRequest(nullptr);
      return EarlyError({431, "request header too large"});
    }
    if (ec) return Close();  // EOF, reset, or the header timeout (tcp_stream has closed the socket then)
    auto& h = header_parser_->get();
    BeginRequest(&h);
    body_done_ = header_parser_->is_done();
    Arrival arrival{peer_, via_proxy_, peer_remote_, request_id_, std::nullopt, header_parser_->chunked()};
    if (auto len = header_parser_->content_length()) arrival.content_length = *len;
    Admitted a = AdmitRequest(
        AdmitContext{&srv_.router, srv_.auth.get(), &srv_.forwarded, &srv_.opts.trusted_proxies}, h, arrival);
    client_ = std::move(a.client);
    remote_ = std::move(a.remote);
    path_ = a.request.path;  // empty when the target did not parse
    if (a.per_client_refused) srv_.rejected.Inc({"per_client"});
    if (a.route != nullptr) {
      route_ = a.route;
      route_name_ = route_->options.name;
    }
    ticket_ = std::move(a.ticket);
    if (ticket_) {
      // Preempted (a slow body, or a tenant over its share, while the gate is full): end the body as its
      // rate timeout would, with 408.
      ticket_->OnPreempt([weak = weak_from_this(), gen = gen_] {
        auto self = weak.lock();
        if (!self) return;
        self->Dispatch([raw = self.get(), gen] {
          if (raw->gen_ != gen || raw->body_done_ || raw->state_ == State::kClosed) return;
          raw->body_timed_out_ = true;
          beast::error_code ignored;
          raw->tcp().socket().cancel(ignored);
        });
      });
    }
    if (a.close) {
      body_done_ = false;  // its end is unknown: what follows is discarded, never read as a request
      keep_alive_ = false;
    }
    if (a.refusal) return EarlyResponse(std::move(*a.refusal));
    Request req = std::move(a.request);
    const uint64_t limit = a.body_limit;
    const bool expect_continue = a.expect_continue;

    if (route_->streamed()) {
      stream_parser_.emplace(std::move(*header_parser_));
      header_parser_.reset();
      stream_parser_->body_limit(limit);
      exchange_ = std::make_shared<Exchange>(shared_from_this(), gen_, std::move(req));
      current_ = exchange_;
      Result<std::unique_ptr<BodySink>> sink = InternalError("no sink");
      try {
        sink = route_->stream_handler(exchange_);
      } catch (const std::exception& e) {
        sink = InternalError(std::string("handler failed: ") + e.what());
      }
      if (!sink || !*sink) {
        auto ex = std::move(exchange_);
        keep_alive_ = false;
        ex->Fail(sink ? InternalError("handler returned no sink") : sink.error());
        return;
      }
      sink_ = std::move(*sink);
      if (exchange_->answered()) return;  // the handler answered without wanting the body
      return MaybeContinue(expect_continue, [this] {
        if (stream_parser_->is_done()) return FinishStreamBody();
        ReadStreamBody();
      });
    }
    pending_request_ = std::move(req);
    if (header_parser_->is_done()) {
      body_done_ = true;
      return CallHandler();
    }
    string_parser_.emplace(std::move(*header_parser_));
    header_parser_.reset();
    string_parser_->body_limit(limit);
    MaybeContinue(expect_continue, [this] { ReadBufferedBody(); });
  }

  void BeginRequest(const bhttp::request_parser<bhttp::empty_body>::value_type* h) {
    ++gen_;
    state_ = State::kActive;
    in_request_ = true;
    start_ = Clock::now();
    bytes_in_ = 0;
    status_ = 0;
    error_.clear();
    route_ = nullptr;
    route_name_ = "unmatched";
    path_.clear();
    body_done_ = false;
    responding_ = false;
    keep_alive_ = false;
    request_id_.clear();
    method_ = "-";
    if (h != nullptr) {
      keep_alive_ = h->keep_alive();
      method_ = std::string(h->method_string());
      const auto incoming = (*h)["X-Request-Id"];
      if (ValidRequestId(std::string_view(incoming.data(), incoming.size())))
        request_id_ = std::string(incoming);
    }
    if (request_id_.empty()) request_id_ = NewRequestId();
    writer_.Begin(h != nullptr && h->method() == bhttp::verb::head, request_id_);
  }

  void MaybeContinue(bool expect_continue, std::function<void()> next) {
    body_start_ = Clock::now();
    body_bytes_ = 0;
    if (!expect_continue) return next();
    static const std::string kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
    tcp().expires_after(srv_.opts.write_timeout);
    Io([this, &next](auto& s) {
      asio::async_write(s, asio::buffer(kContinue),
                        [self = shared_from_this(), n = std::move(next)](beast::error_code ec, size_t) {
                          if (ec) return self->Close();
                          self->body_start_ = Clock::now();
                          n();
                        });
    });
  }

  // The body must keep pace: byte b must arrive by body_start + grace + b / rate. A timer of our own (not the
  // tcp_stream's, which closes the socket) cancels the read, so a 408 can still be written.
  void SetBodyDeadline() {
    const auto owed =
        std::chrono::milliseconds(body_bytes_ * 1000 / std::max<uint64_t>(srv_.opts.body_min_rate, 1));
    tcp().expires_never();
    body_timer_.expires_at(body_start_ + srv_.opts.body_grace + owed);
    body_timer_.async_wait([self = shared_from_this(), seq = ++body_seq_](beast::error_code ec) {
      if (ec || seq != self->body_seq_ || self->state_ == State::kClosed) return;
      self->body_timed_out_ = true;
      beast::error_code ignored;
      self->tcp().socket().cancel(ignored);
    });
  }

  // A body read completed: the deadline no longer applies; a cancelled read caused by it is a timeout.
  void BodyReadDone(beast::error_code& ec) {
    reading_ = false;
    ++body_seq_;
    body_timer_.cancel();
    if (body_timed_out_) {
      body_timed_out_ = false;
      ec = beast::error::timeout;
    }
  }

  // A preemption that came while no body read was in flight (the sink busy with the last piece, the 100
  // Continue being written) had no read to cancel: it ends the body here, before the next read, as the
  // cancelled read would have. True when it did.
  bool PreemptedBetweenReads() {
    if (!body_timed_out_) return false;
    body_timed_out_ = false;
    BodyReadFailed(beast::error::timeout);
    return true;
  }

  // A body read failed: answer what can be answered, then close.
  void BodyReadFailed(beast::error_code ec) {
    Error e;
    if (ec == bhttp::error::body_limit) {
      e = {413, "request body too large"};
    } else if (ec == beast::error::timeout) {
      e = {408, "request body arrived too slowly"};
    } else if (ec == bhttp::error::end_of_stream || ec == asio::error::eof ||
               ec == asio::error::operation_aborted || ec == asio::error::connection_reset) {
      if (sink_) sink_->OnAbort({400, "client closed the connection"});
      return Close();
    } else {
      e = BadRequest("malformed request body: " + ec.message());
    }
    if (sink_) sink_->OnAbort(e);
    EarlyError(e);
  }

  void ReadBufferedBody() {
    if (state_ == State::kClosed) return;
    if (PreemptedBetweenReads()) return;
    // Beast reads at most the buffer's free capacity (512 bytes at worst): a 64 MiB body would take
    // 130,000 reads. Keep room for large reads (measured: 800 ms → 370 ms for a 35 MB xorb, api_bench).
    buffer_.reserve(buffer_.size() + kBodyReadSize);
    SetBodyDeadline();
    reading_ = true;
    Io([this](auto& s) {
      bhttp::async_read_some(
          s, buffer_, *string_parser_,
          [self = shared_from_this()](beast::error_code ec, size_t n) { self->OnBufferedBody(ec, n); });
    });
  }

  void OnBufferedBody(beast::error_code ec, size_t n) {
    if (state_ == State::kClosed) return;
    BodyReadDone(ec);
    bytes_in_ += n;
    body_bytes_ += n;
    if (ticket_) ticket_->AddBodyBytes(n);
    if (ec) return BodyReadFailed(ec);
    if (!string_parser_->is_done()) return ReadBufferedBody();
    body_done_ = true;
    tcp().expires_never();
    pending_request_.body = std::move(string_parser_->get().body());
    string_parser_.reset();
    CallHandler();
  }

  void CallHandler() {
    if (ticket_) ticket_->BodyComplete();
    auto ex = std::make_shared<Exchange>(shared_from_this(), gen_, std::move(pending_request_));
    current_ = ex;
    try {
      route_->handler(ex);
    } catch (const std::exception& e) {
      ex->Fail(InternalError(std::string("handler failed: ") + e.what()));
    }
  }

  void ReadStreamBody() {
    if (state_ == State::kClosed || responding_) return;
    if (PreemptedBetweenReads()) return;
    piece_ = sink_->ReceiveBuffer();
    if (piece_.empty()) {
      body_buf_.resize(kStreamPiece);
      piece_ = body_buf_;
    }
    buffer_.reserve(buffer_.size() + kBodyReadSize);  // as in ReadBufferedBody
    auto& body = stream_parser_->get().body();
    body.data = piece_.data();
    body.size = piece_.size();
    SetBodyDeadline();
    reading_ = true;
    Io([this](auto& s) {
      bhttp::async_read_some(
          s, buffer_, *stream_parser_,
          [self = shared_from_this()](beast::error_code ec, size_t) { self->OnStreamBody(ec); });
    });
  }

  void OnStreamBody(beast::error_code ec) {
    if (state_ == State::kClosed) return;
    BodyReadDone(ec);
    if (ec == bhttp::error::need_buffer) ec = {};
    if (responding_) return;  // answered meanwhile; the connection closes after the answer
    if (ec) return BodyReadFailed(ec);
    const size_t got = piece_.size() - stream_parser_->get().body().size;
    bytes_in_ += got;
    body_bytes_ += got;
    if (ticket_) ticket_->AddBodyBytes(got);
    const bool done = stream_parser_->is_done();
    if (got == 0) return done ? FinishStreamBody() : ReadStreamBody();
    tcp().expires_never();
    const auto paused = Clock::now();
    const uint64_t gen = gen_;
    auto self = shared_from_this();
    sink_->OnData(piece_.first(got), [self, gen, done, paused](Status st) {
      self->Dispatch([self, gen, done, paused, st = std::move(st)] {
        if (gen != self->gen_ || self->state_ == State::kClosed || self->responding_) return;
        self->body_start_ += Clock::now() - paused;  // time the sink took does not count against the client
        if (!st) {
          self->sink_->OnAbort(st.error());
          return self->EarlyError(st.error());
        }
        if (done) return self->FinishStreamBody();
        self->ReadStreamBody();
      });
    });
  }

  void FinishStreamBody() {
    if (ticket_) ticket_->BodyComplete();
    body_done_ = true;
    tcp().expires_never();
    auto ex = std::move(exchange_);
    try {
      sink_->OnEnd(ex);
    } catch (const std::exception& e) {
      ex->Fail(InternalError(std::string("handler failed: ") + e.what()));
    }
  }

  // ---- writing -------------------------------------------------------------------------------------------

  void EarlyError(const Error& e) { EarlyResponse(Response::FromError(e)); }

  // An answer from the server itself (routing, limits, auth, body errors).
  void EarlyResponse(Response r) {
    if (exchange_) {
      auto ex = std::move(exchange_);
      ex->Respond(std::move(r));  // posts; claims the exchange so it does not answer 500 later
      if (!body_done_) keep_alive_ = false;
      return;
    }
    DoSendResponse(gen_, std::move(r));
  }

  // The answer's header (ResponseWriter::Header): from now on the request is being answered.
  bhttp::response<bhttp::empty_body> HeaderFor(unsigned status, HeaderList headers,
                                               std::vector<std::string> refused) {
    responding_ = true;
    status_ = status;
    if (!body_done_ || draining_) keep_alive_ = false;
    return writer_.Header(status, std::move(headers), std::move(refused), keep_alive_);
  }

  void DoSendResponse(uint64_t gen, Response r) {
    if (gen != gen_ || state_ == State::kClosed || responding_ || !in_request_) return;
    auto res = HeaderFor(r.status, std::move(r.headers), std::move(r.refused_headers));
    error_ = std::move(r.error);
    const uint64_t length = r.ContentLength();
    writer_.Send(std::move(res), std::move(r.body), length);
  }

  void DoStartChunked(uint64_t gen, unsigned status, HeaderList headers) {
    if (gen != gen_ || state_ == State::kClosed || responding_ || !in_request_) return;
    writer_.StartChunked(HeaderFor(status, std::move(headers), {}));
  }

  void DoSendChunk(uint64_t gen, std::string data) {
    if (gen != gen_) {
      writer_.Unreserve(data.size());
      return;
    }
    writer_.Chunk(std::move(data));
  }

  void DoEndChunked(uint64_t gen) {
    if (gen != gen_) return;
    writer_.EndChunked();
  }

  // ResponseWriter::Port
  void Write(const std::vector<asio::const_buffer>& bufs,
             std::function<void(beast::error_code, size_t)> done) override {
    tcp().expires_after(srv_.opts.write_timeout);
    Io([&bufs, &done](auto& s) { asio::async_write(s, bufs, WriteAll, std::move(done)); });
  }
  tcp::socket& socket() override { return tcp().socket(); }
  std::shared_ptr<void> Hold() override { return shared_from_this(); }
  void Fail() override { Close(); }
  void Complete() override { FinishExchange(); }

  // The response is fully written.
  void FinishExchange() {
    Log();
    ticket_.reset();
    // The request's copy too: a handler's worker may hold the exchange a moment longer, and the slot is free
    // once the answer is written (a client's next upload must not meet its own last one).
    if (auto ex = current_.lock()) ex->request().admission.reset();
    sink_.reset();
    exchange_.reset();
    string_parser_.reset();
    stream_parser_.reset();
    if (!keep_alive_ || draining_) return LingerClose();
    ReadRequest();
  }

  // Closes after an answer that left request bytes unread: half-close, then read and discard for a moment so
  // the peer sees the answer instead of a reset caused by the unread data.
  void LingerClose() {
    if (state_ == State::kClosed) return;
    if ((body_done_ && buffer_.size() == 0) || reading_) return Close();
    state_ = State::kIdle;  // nothing in flight: a stop may cut this short
    beast::error_code ec;
    tcp().socket().shutdown(tcp::socket::shutdown_send, ec);  // TLS too: the records written go first
    linger_until_ = Clock::now() + std::chrono::seconds(2);
    Discard();
  }

  void Discard() {
    buffer_.clear();
    tcp().expires_at(linger_until_);
    tcp().async_read_some(buffer_.prepare(64 << 10),  // raw bytes, TLS or not: they are thrown away
                          [self = shared_from_this()](beast::error_code ec, size_t) {
                            if (ec || self->discarded_ > (64u << 20)) return self->Close();
                            self->discarded_ += 64u << 10;
                            self->Discard();
                          });
  }

  void Log() {
    if (!in_request_) return;
    in_request_ = false;
    if (!client_.empty()) srv_.forwarded.Release(std::exchange(client_, {}));
    const double seconds = std::chrono::duration<double>(Clock::now() - start_).count();
    const std::string status = status_ == 0 ? "0" : std::to_string(status_);
    srv_.requests.Inc({route_name_, method_, status});
    srv_.latency.Observe({route_name_}, seconds);
    srv_.bytes_in.Inc({route_name_}, static_cast<double>(bytes_in_));
    srv_.bytes_out.Inc({route_name_}, static_cast<double>(writer_.bytes_out()));
    // Why a request failed is in the log beside it: a 503 names what was unavailable.
    spdlog::info("request id={} remote={} method={} path={} status={} in={} out={} ms={:.3f}{}{}",
                 request_id_, remote_, method_, Printable(path_, 4096), status, bytes_in_,
                 writer_.bytes_out(), seconds * 1000, error_.empty() ? "" : " error=",
                 error_.empty() ? "" : boost::json::serialize(boost::json::value(error_)));
  }

  void Close() {
    if (state_ == State::kClosed) return;
    if (in_request_ && status_ == 0) status_ = 499;  // nothing answered: the client (or a timeout) ended it
    Log();
    state_ = State::kClosed;
    open_ = false;
    if (sink_ && !body_done_) sink_->OnAbort({400, "connection closed"});
    beast::error_code ec;
    tcp().socket().shutdown(tcp::socket::shutdown_both, ec);
    tcp().close();
    writer_.Abort();
    body_timer_.cancel();
    exchange_.reset();
    sink_.reset();
    ticket_.reset();
  }

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
const Authenticator* Server::authenticator() const {
  return impl_->auth.get();
}

Status Server::Listen() {
  if (!impl_->opts.tls_cert.empty() || !impl_->opts.tls_key.empty()) {
    if (impl_->opts.tls_cert.empty() || impl_->opts.tls_key.empty())
      return InternalError("TLS needs both a certificate chain and a private key");
    auto holder = std::make_unique<TlsContextHolder>(TlsFiles{impl_->opts.tls_cert, impl_->opts.tls_key});
    if (auto st = holder->Reload(); !st) return st;
    impl_->tls = std::move(holder);
  }
  beast::error_code ec;
  const auto address = asio::ip::make_address(impl_->opts.host, ec);
  if (ec) return InternalError("invalid listen address " + impl_->opts.host + ": " + ec.message());
  const tcp::endpoint ep{address, impl_->opts.port};
  auto& acc = impl_->acceptor;
  if (acc.open(ep.protocol(), ec); ec) return InternalError("cannot open socket: " + ec.message());
  if (acc.set_option(asio::socket_base::reuse_address(true), ec); ec)
    return InternalError("cannot set SO_REUSEADDR: " + ec.message());
  if (acc.bind(ep, ec); ec)
    return InternalError("cannot bind " + impl_->opts.host + ":" + std::to_string(impl_->opts.port) + ": " +
                         ec.message());
  if (acc.listen(asio::socket_base::max_listen_connections, ec); ec)
    return InternalError("cannot listen: " + ec.message());
  return Ok{};
}

Status Server::ReloadTls() {
  if (!impl_->tls) return InternalError("TLS is not configured");
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
