// Reading a request: its header, then its body, whole (a string) or streamed to the route's BodySink under
// the body's pace deadline.
#include <algorithm>
#include <exception>
#include <string>
#include <utility>

#include "http/session.h"

namespace cairn::http {
namespace {

constexpr size_t kStreamPiece = 64 << 10;    // bytes per BodySink::OnData
constexpr size_t kBodyReadSize = 256 << 10;  // bytes per read of a buffered body, at most

}  // namespace

void Session::ReadRequest() {
  if (state_ == State::kClosed) return;
  state_ = State::kIdle;
  if (draining_) return Close();
  header_parser_.emplace();
  header_parser_->header_limit(static_cast<uint32_t>(srv_.opts.max_header_bytes));
  header_parser_->body_limit(boost::none);  // checked against the route's limit once the route is known
  if (buffer_.size() == 0) {
    // Wait for the request's first bytes as an idle connection, which a stop closes at once: between
    // keep-alive requests under the idle timeout, and before the first under the header's (a browser opens
    // connections ahead of the requests it may send on them).
    tcp().expires_after(first_request_ ? srv_.opts.header_timeout : srv_.opts.idle_timeout);
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

void Session::ReadHeader() {
  if (state_ == State::kClosed) return;
  state_ = State::kReadingHeader;
  tcp().expires_after(srv_.opts.header_timeout);
  Io([this](auto& s) {
    bhttp::async_read_header(
        s, buffer_, *header_parser_,
        [self = shared_from_this()](beast::error_code ec, size_t) { self->OnHeader(ec); });
  });
}

void Session::OnHeader(beast::error_code ec) {
  if (state_ == State::kClosed) return;
  first_request_ = false;
  if (ec == bhttp::error::header_limit) {
    BeginRequest(nullptr);
    return EarlyResponse(Response::ErrorJson(431, "request header too large"));
  }
  if (ec) return Close();  // EOF, reset, or the header timeout (tcp_stream has closed the socket then)
  auto& h = header_parser_->get();
  BeginRequest(&h);
  body_done_ = header_parser_->is_done();
  Admitted a = Admit(h);
  if (a.refusal) {
    if (a.route != nullptr) srv_.NoteRefusal(a.request, a.refusal->status);
    return EarlyResponse(std::move(*a.refusal));
  }
  if (route_->streamed()) return StartStreamed(std::move(a.request), a.body_limit, a.expect_continue);
  StartBuffered(std::move(a.request), a.body_limit, a.expect_continue);
}

void Session::StartStreamed(Request req, uint64_t limit, bool expect_continue) {
  stream_parser_.emplace(std::move(*header_parser_));
  header_parser_.reset();
  stream_parser_->body_limit(limit);
  exchange_ = std::make_shared<Exchange>(shared_from_this(), gen_, std::move(req));
  current_ = exchange_;
  Result<std::unique_ptr<BodySink>> sink = IoError("no sink");
  try {
    sink = route_->stream_handler(exchange_);
  } catch (const std::exception& e) {
    sink = IoError(std::string("handler failed: ") + e.what());
  }
  if (!sink || !*sink) {
    auto ex = std::move(exchange_);
    keep_alive_ = false;
    ex->Fail(sink ? IoError("handler returned no sink") : sink.error());
    return;
  }
  sink_ = std::move(*sink);
  if (exchange_->answered()) return;  // the handler answered without wanting the body
  MaybeContinue(expect_continue, [this] {
    if (stream_parser_->is_done()) return FinishStreamBody();
    ReadStreamBody();
  });
}

void Session::StartBuffered(Request req, uint64_t limit, bool expect_continue) {
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

void Session::SetBodyDeadline() {
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

void Session::BodyReadDone(beast::error_code& ec) {
  reading_ = false;
  ++body_seq_;
  body_timer_.cancel();
  if (body_timed_out_) {
    body_timed_out_ = false;
    ec = beast::error::timeout;
  }
}

bool Session::PreemptedBetweenReads() {
  if (!body_timed_out_) return false;
  body_timed_out_ = false;
  BodyReadFailed(beast::error::timeout);
  return true;
}

void Session::BodyReadFailed(beast::error_code ec) {
  if (ec == bhttp::error::end_of_stream || ec == asio::error::eof || ec == asio::error::operation_aborted ||
      ec == asio::error::connection_reset) {
    if (sink_) sink_->OnAbort(Malformed("client closed the connection"));
    return Close();
  }
  // The answers of HTTP itself (413, 408) are the server's own: the sink learns why in the common codes.
  unsigned status = 400;
  Error why = Malformed("malformed request body: " + ec.message());
  if (ec == bhttp::error::body_limit) {
    status = 413;
    why = LimitExceeded("request body too large");
  } else if (ec == beast::error::timeout) {
    status = 408;
    why = Malformed("request body arrived too slowly");
  }
  if (sink_) sink_->OnAbort(why);
  EarlyResponse(Response::ErrorJson(status, why.message));
}

void Session::ReadBufferedBody() {
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

void Session::OnBufferedBody(beast::error_code ec, size_t n) {
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

void Session::CallHandler() {
  if (ticket_) ticket_->BodyComplete();
  auto ex = std::make_shared<Exchange>(shared_from_this(), gen_, std::move(pending_request_));
  current_ = ex;
  try {
    route_->handler(ex);
  } catch (const std::exception& e) {
    ex->Fail(IoError(std::string("handler failed: ") + e.what()));
  }
}

void Session::ReadStreamBody() {
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

void Session::OnStreamBody(beast::error_code ec) {
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

void Session::FinishStreamBody() {
  if (ticket_) ticket_->BodyComplete();
  body_done_ = true;
  tcp().expires_never();
  auto ex = std::move(exchange_);
  try {
    sink_->OnEnd(ex);
  } catch (const std::exception& e) {
    ex->Fail(IoError(std::string("handler failed: ") + e.what()));
  }
}

}  // namespace cairn::http
