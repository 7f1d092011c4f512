// Admitting a request: its id, its route and client, the caps and the admission gate (http/admit.h), and the
// 100 Continue a waiting client is sent before its body is read.
#include <cstring>
#include <random>
#include <string>
#include <string_view>
#include <utility>

#include "common/hex.h"
#include "http/session.h"

namespace cairn::http {
namespace {

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

void Session::BeginRequest(const bhttp::request_parser<bhttp::empty_body>::value_type* h) {
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

Admitted Session::Admit(const bhttp::request_parser<bhttp::empty_body>::value_type& h) {
  Arrival arrival{peer_, via_proxy_, peer_remote_, request_id_, std::nullopt, header_parser_->chunked()};
  if (auto len = header_parser_->content_length()) arrival.content_length = *len;
  Admitted a = AdmitRequest(AdmitContext{&srv_.router, srv_.auth.get(), &srv_.forwarded,
                                         &srv_.opts.trusted_proxies, srv_.opts.content_host},
                            h, arrival);
  client_ = std::move(a.client);
  remote_ = std::move(a.remote);
  path_ = a.request.path;  // empty when the target did not parse
  if (a.per_client_refused) srv_.rejected.Inc({"per_client"});
  if (a.route != nullptr) {
    route_ = a.route;
    route_name_ = route_->options.name;
  }
  ticket_ = std::move(a.ticket);
  if (ticket_) WatchPreemption();
  if (a.close) {
    body_done_ = false;  // its end is unknown: what follows is discarded, never read as a request
    keep_alive_ = false;
  }
  return a;
}

// Preempted (a slow body, or a tenant over its share, while the gate is full): end the body as its rate
// timeout would, with 408.
void Session::WatchPreemption() {
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

void Session::MaybeContinue(bool expect_continue, std::function<void()> next) {
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

}  // namespace cairn::http
