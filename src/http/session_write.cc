// Writing the answers: the server's own (routing, limits, body errors) and the handlers', through the
// connection's ResponseWriter; then the log line and metrics, keep-alive, a lingering close.
#include <spdlog/spdlog.h>

#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>
#include <limits>
#include <string>
#include <utility>

#include "common/printable.h"
#include "http/session.h"

namespace cairn::http {
namespace {

// asio::async_write's default completion condition hands the socket at most 64 KiB per write_some, so a 4 MiB
// block cost 64 trips through the reactor (and the stream's timer): a third of loopback's rate. Each
// write_some here offers everything left; the kernel takes what fits its send buffer.
std::size_t WriteAll(const beast::error_code& ec, std::size_t /*transferred*/) {
  return ec ? 0 : std::numeric_limits<std::size_t>::max();
}

}  // namespace

void Session::EarlyResponse(Response r) {
  if (exchange_) {
    auto ex = std::move(exchange_);
    ex->Respond(std::move(r));  // posts; claims the exchange so it does not answer 500 later
    if (!body_done_) keep_alive_ = false;
    return;
  }
  DoSendResponse(gen_, std::move(r));
}

bhttp::response<bhttp::empty_body> Session::HeaderFor(unsigned status, HeaderList headers,
                                                      std::vector<std::string> refused) {
  responding_ = true;
  status_ = status;
  if (!body_done_ || draining_) keep_alive_ = false;
  return writer_.Header(status, std::move(headers), std::move(refused), keep_alive_);
}

void Session::DoSendResponse(uint64_t gen, Response r) {
  if (gen != gen_ || state_ == State::kClosed || responding_ || !in_request_) return;
  auto res = HeaderFor(r.status, std::move(r.headers), std::move(r.refused_headers));
  error_ = std::move(r.error);
  const uint64_t length = r.ContentLength();
  writer_.Send(std::move(res), std::move(r.body), length);
}

void Session::DoStartChunked(uint64_t gen, unsigned status, HeaderList headers) {
  if (gen != gen_ || state_ == State::kClosed || responding_ || !in_request_) return;
  writer_.StartChunked(HeaderFor(status, std::move(headers), {}));
}

void Session::DoSendChunk(uint64_t gen, std::string data) {
  if (gen != gen_) {
    writer_.Unreserve(data.size());
    return;
  }
  writer_.Chunk(std::move(data));
}

void Session::DoEndChunked(uint64_t gen) {
  if (gen != gen_) return;
  writer_.EndChunked();
}

void Session::Write(const std::vector<asio::const_buffer>& bufs,
                    std::function<void(beast::error_code, size_t)> done) {
  tcp().expires_after(srv_.opts.write_timeout);
  Io([&bufs, &done](auto& s) { asio::async_write(s, bufs, WriteAll, std::move(done)); });
}

void Session::FinishExchange() {
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

void Session::LingerClose() {
  if (state_ == State::kClosed) return;
  if ((body_done_ && buffer_.size() == 0) || reading_) return Close();
  state_ = State::kIdle;  // nothing in flight: a stop may cut this short
  beast::error_code ec;
  tcp().socket().shutdown(tcp::socket::shutdown_send, ec);  // TLS too: the records written go first
  linger_until_ = Clock::now() + std::chrono::seconds(2);
  Discard();
}

void Session::Discard() {
  buffer_.clear();
  tcp().expires_at(linger_until_);
  tcp().async_read_some(buffer_.prepare(64 << 10),  // raw bytes, TLS or not: they are thrown away
                        [self = shared_from_this()](beast::error_code ec, size_t) {
                          if (ec || self->discarded_ > (64u << 20)) return self->Close();
                          self->discarded_ += 64u << 10;
                          self->Discard();
                        });
}

void Session::Log() {
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
  spdlog::info("request id={} remote={} method={} path={} status={} in={} out={} ms={:.3f}{}{}", request_id_,
               remote_, method_, Printable(path_, 4096), status, bytes_in_, writer_.bytes_out(),
               seconds * 1000, error_.empty() ? "" : " error=",
               error_.empty() ? "" : boost::json::serialize(boost::json::value(error_)));
}

void Session::Close() {
  if (state_ == State::kClosed) return;
  if (in_request_ && status_ == 0) status_ = 499;  // nothing answered: the client (or a timeout) ended it
  Log();
  state_ = State::kClosed;
  open_ = false;
  if (sink_ && !body_done_) sink_->OnAbort(Malformed("connection closed"));
  beast::error_code ec;
  tcp().socket().shutdown(tcp::socket::shutdown_both, ec);
  tcp().close();
  writer_.Abort();
  body_timer_.cancel();
  exchange_.reset();
  sink_.reset();
  ticket_.reset();
}

}  // namespace cairn::http
