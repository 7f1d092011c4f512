#include "http/admit.h"

#include <boost/beast/core/string.hpp>
#include <boost/url/parse.hpp>
#include <boost/url/url_view.hpp>
#include <string_view>
#include <utility>
#include <vector>

namespace cairn::http {

namespace bhttp = boost::beast::http;

// The fields make one comma list; the one coding cairn decodes is chunked, alone and last. Anything else is
// answered before closing, since where the body ends is then unknown and the bytes after the header must not
// run as another request (smuggling).
unsigned TransferEncodingStatus(const bhttp::fields& h, unsigned version, bool chunked) {
  std::vector<std::string_view> codings;
  bool present = false;
  for (auto [it, end] = h.equal_range(bhttp::field::transfer_encoding); it != end; ++it) {
    present = true;
    std::string_view list(it->value().data(), it->value().size());
    while (!list.empty()) {
      const size_t comma = std::min(list.find(','), list.size());
      std::string_view coding = list.substr(0, comma);
      list.remove_prefix(std::min(comma + 1, list.size()));
      while (!coding.empty() && (coding.front() == ' ' || coding.front() == '\t')) coding.remove_prefix(1);
      while (!coding.empty() && (coding.back() == ' ' || coding.back() == '\t')) coding.remove_suffix(1);
      if (!coding.empty()) codings.push_back(coding);  // empty list elements are ignored (RFC 9110 §5.6.1)
    }
  }
  if (!present) return 0;
  if (version < 11) return 400;  // HTTP/1.0 has no transfer codings
  if (codings.empty() || !boost::beast::iequals(codings.back(), "chunked") || !chunked) return 400;
  codings.pop_back();
  for (const auto coding : codings)
    if (boost::beast::iequals(coding, "chunked")) return 400;  // chunked twice
  return codings.empty() ? 0 : 501;  // gzip, chunked: a coding cairn does not decode
}

namespace {

// Whether the request is for the user-content origin: its Host is that host (compared without case).
bool OnContentHost(const Request& req, std::string_view content_host) {
  return !content_host.empty() && boost::beast::iequals(req.Header("Host"), content_host);
}

}  // namespace

Admitted AdmitRequest(const AdmitContext& ctx, const bhttp::request<bhttp::empty_body>& h,
                      const Arrival& arrival) {
  Admitted out;
  out.remote = arrival.peer_remote;
  const auto refuse = [&out](Response r) {
    out.refusal = std::move(r);
    return std::move(out);
  };
  if (const unsigned te = TransferEncodingStatus(h, h.version(), arrival.chunked); te != 0) {
    out.close = true;
    return refuse(Response::ErrorJson(te, te == 501
                                              ? "transfer coding not implemented (cairn decodes chunked only)"
                                              : "malformed Transfer-Encoding"));
  }

  Request& req = out.request;
  req.method = h.method();
  req.target = std::string(h.target());
  req.request_id = arrival.request_id;
  auto url = boost::urls::parse_origin_form(h.target());
  if (!url) return refuse(Response::ErrorJson(400, "malformed request target"));
  req.path = url->path();
  if (arrival.via_proxy) {
    // The client behind the proxy: what the request is logged and limited as.
    const auto xff = h["X-Forwarded-For"];
    std::string client =
        ClientAddress(arrival.peer, std::string_view(xff.data(), xff.size()), *ctx.trusted_proxies);
    out.remote = client + " via=" + arrival.peer_remote;
    if (!ctx.forwarded->TryAcquire(client)) {
      out.per_client_refused = true;
      Response busy = Response::ErrorJson(429, "too many requests in flight from this address (" +
                                                   std::to_string(ctx.forwarded->cap()) + ")");
      busy.Header("Retry-After", "1");
      return refuse(std::move(busy));
    }
    out.client = std::move(client);
  }
  req.remote = arrival.via_proxy ? out.client : arrival.peer_remote;
  std::vector<std::string> segments;
  for (auto seg : url->segments()) segments.push_back(seg);
  for (auto p : url->params()) req.query.emplace_back(p.key, p.value);
  req.headers = static_cast<const bhttp::fields&>(h);

  auto match = ctx.router->Find(req.method, segments);
  if (match.route == nullptr) {
    Response r = Response::ErrorJson(match.status, match.status == 405 ? "method not allowed" : "not found");
    if (!match.allow.empty()) r.Header("Allow", match.allow);
    return refuse(std::move(r));
  }
  const Route& route = *match.route;
  if (!route.options.user_content && OnContentHost(req, ctx.content_host))
    return refuse(Response::ErrorJson(404, "not found"));
  out.route = &route;
  req.route = route.options.name;
  req.params = std::move(match.params);

  size_t header_bytes = h.target().size() + 16;
  for (const auto& f : h) header_bytes += f.name_string().size() + f.value().size() + 4;
  if (header_bytes > route.options.max_header)
    return refuse(Response::ErrorJson(431, "request header too large"));

  if (route.options.auth != Permission::kNone) {
    if (ctx.auth == nullptr) return refuse(Response::ErrorJson(500, "authentication is not configured"));
    auto who = ctx.auth->Authenticate(req.Header("Authorization"), route.options.auth, route.options.tokens);
    if (!who) return refuse(Response::FromError(who.error()));
    req.principal = std::move(*who);
  }
  if (route.options.check) {
    if (auto refused = route.options.check(req)) return refuse(std::move(*refused));
  }
  if (route.options.admission) {
    const std::string tenant = route.options.tenant ? route.options.tenant(req) : std::string();
    out.ticket = route.options.admission->TryEnter(tenant);
    req.admission = out.ticket;
    if (!out.ticket) {
      return refuse(Response::ErrorJson(503, "too many " + route.options.name + " requests in flight (" +
                                                 std::to_string(route.options.admission->limit()) +
                                                 "); retry shortly"));
    }
  }
  out.body_limit = route.options.max_body;
  if (arrival.content_length && *arrival.content_length > out.body_limit)
    return refuse(
        Response::ErrorJson(413, "request body larger than " + std::to_string(out.body_limit) + " bytes"));
  out.expect_continue = boost::beast::iequals(h[bhttp::field::expect], "100-continue");
  return out;
}

}  // namespace cairn::http
