// The admission step: what the server decides from a request's header alone, before it reads a byte of the
// body. In order: the transfer coding (smuggling), the target, the client behind a trusted proxy (its cap of
// requests in flight), the route, the route's header limit, the token, the route's admission gate, the body
// limit. The first check that fails gives the answer; a request that passes them all carries what its
// handler sees (Request) and the limits its body is read under.
//
// No socket and no I/O: the session calls it once per request header, tests call it with a header they
// build. Side effects are the two a refusal must undo, both handed back in the result for the caller to hold
// until the request ends: a unit of `forwarded` taken for the client (`client`) and an admission ticket.
// Thread-safety: as the context's parts (the router and authenticator are read only; the limiter and the
// gates are thread-safe).
#pragma once

#include <boost/asio/ip/address.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/message.hpp>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "http/admission.h"
#include "http/auth.h"
#include "http/client_limits.h"
#include "http/handler.h"
#include "http/router.h"

namespace cairn::http {

// The server's parts the step reads. Every pointer outlives the call.
struct AdmitContext {
  const Router* router = nullptr;
  const Authenticator* auth = nullptr;  // null: a route that needs a token answers 500
  PerKeyLimiter* forwarded = nullptr;   // requests in flight per client behind a trusted proxy
  const AddressSet* trusted_proxies = nullptr;
  // The user-content origin's host as a Host header names it (ServerOptions::content_host); empty: none.
  std::string_view content_host = {};
};

// What the connection knows of the request besides its header.
struct Arrival {
  boost::asio::ip::address peer;           // the connection's peer
  bool via_proxy = false;                  // the peer is a trusted proxy: the client is in X-Forwarded-For
  std::string peer_remote;                 // the peer's "ip:port", for logs
  std::string request_id;                  // what the answer and the log carry
  std::optional<uint64_t> content_length;  // as the parser framed the body
  bool chunked = false;                    // as the parser framed the body
};

struct Admitted {
  // The answer when the request goes no further (nullopt: it goes to `route`'s handler with `request`).
  std::optional<Response> refusal;
  // The connection cannot be kept: where the body ends is unknown (a refused Transfer-Encoding).
  bool close = false;
  // A unit of AdmitContext::forwarded for this client, taken; release it when the request ends (refused or
  // not). Empty when none was taken.
  std::string client;
  bool per_client_refused = false;  // refused by the proxied client's cap (counted by the caller)
  std::string remote;               // for logs: the peer, or behind a proxy "client via=peer"
  const Route* route = nullptr;     // the matched route (also when refused after the match)
  Request request;                  // what the handler gets (method, target, path, query, headers, params...)
  std::shared_ptr<AdmissionGate::Ticket> ticket;  // the route's admission, held until the request ends
  uint64_t body_limit = 0;                        // the route's max body
  bool expect_continue = false;                   // the client waits for 100 Continue before the body
};

Admitted AdmitRequest(const AdmitContext& ctx,
                      const boost::beast::http::request<boost::beast::http::empty_body>& h,
                      const Arrival& arrival);

// What a request's Transfer-Encoding fields allow (RFC 9112 §6.1, §6.3): 0 to go on, else the status to
// answer before closing. `chunked`: what the parser framed the body by, which must agree.
unsigned TransferEncodingStatus(const boost::beast::http::fields& h, unsigned version, bool chunked);

}  // namespace cairn::http
