// Routes: method + path pattern → handler, with per-route limits and required permission.
//
// Patterns are absolute paths whose segments are literals or captures: "/v1/xorbs/{prefix}/{hash}". A capture
// matches one whole non-empty segment (percent-decoded); a last capture "{path...}" matches every remaining
// segment (at least one, none empty), joined by '/'. The first route registered that matches wins. An unknown
// path answers 404 {"error": ...}; a known path with another method answers 405 with an Allow header.
//
// Thread-safety: register every route before Server::Start; afterwards the router is only read.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "http/admission.h"
#include "http/handler.h"

namespace cairn::http {

struct RouteOptions {
  std::string name;                          // label in metrics and logs; default: the pattern
  Permission auth = Permission::kNone;       // required token permission (checked before the body is read)
  TokenKinds tokens = kAccessTokens;         // the kinds of token `auth` accepts (auth.h)
  uint64_t max_body = 1 << 20;               // bytes; larger bodies answer 413
  size_t max_header = 16 << 10;              // bytes of request line + fields; larger answer 431
  std::shared_ptr<AdmissionGate> admission;  // when set, requests past its limit answer 503
  // The tenant a request enters `admission` as (admission.h), called once the request is authenticated and
  // routed (principal and params set); empty: every request is the one tenant "".
  std::function<std::string(const Request&)> tenant;
  // A check of the header the route makes itself, after the token and before the admission gate and the
  // body: a refusal it returns is the answer, and not a byte of the body is read. For what a route reads
  // from the header in its own way (git's Basic credentials). May set the request's principal.
  std::function<std::optional<Response>(Request&)> check;
  // The route answers on the user-content origin too (ServerOptions::content_host): stored files' routes.
  bool user_content = false;

  // Chainable setters: RouteOptions().Auth(Permission::kWrite).MaxBody(64 << 20). (GCC warns about designated
  // initializers that skip leading members, so prefer these.)
  RouteOptions& Name(std::string n) {
    name = std::move(n);
    return *this;
  }
  // A token granting `p`, of a kind `accepted` names (access tokens unless told: CAS tokens only where a
  // route serves what a CAS scope holds).
  RouteOptions& Auth(Permission p, TokenKinds accepted = kAccessTokens) {
    auth = p;
    tokens = accepted;
    return *this;
  }
  RouteOptions& MaxBody(uint64_t bytes) {
    max_body = bytes;
    return *this;
  }
  // Requests enter `gate` as one tenant.
  RouteOptions& Admit(std::shared_ptr<AdmissionGate> gate) {
    admission = std::move(gate);
    tenant = nullptr;
    return *this;
  }
  // Requests enter `gate` as the tenant `tenant_of` names, which shares it fairly with the others.
  RouteOptions& AdmitPer(std::shared_ptr<AdmissionGate> gate,
                         std::function<std::string(const Request&)> tenant_of) {
    admission = std::move(gate);
    tenant = std::move(tenant_of);
    return *this;
  }
  RouteOptions& Check(std::function<std::optional<Response>(Request&)> fn) {
    check = std::move(fn);
    return *this;
  }
  RouteOptions& UserContent() {
    user_content = true;
    return *this;
  }
  RouteOptions& MaxHeader(size_t bytes) {
    max_header = bytes;
    return *this;
  }
};

struct Route {
  Verb method = Verb::unknown;
  std::string pattern;
  std::vector<std::string> segments;  // "{name}" for captures
  RouteOptions options;
  Handler handler;               // buffered body
  StreamHandler stream_handler;  // streamed body
  bool streamed() const { return static_cast<bool>(stream_handler); }
};

class Router {
 public:
  void Handle(Verb method, std::string_view pattern, RouteOptions options, Handler handler);
  void HandleStream(Verb method, std::string_view pattern, RouteOptions options, StreamHandler handler);

  struct Match {
    const Route* route = nullptr;  // null: status says why
    unsigned status = 404;         // 404 no such path, 405 path exists with other methods
    std::string allow;             // for 405
    std::map<std::string, std::string, std::less<>> params;
  };
  // `segments`: the decoded path segments ("/a/b" → {"a","b"}).
  Match Find(Verb method, const std::vector<std::string>& segments) const;

  const std::vector<Route>& routes() const { return routes_; }

 private:
  // A new route with everything but its handler (pattern split; an unnamed route named by its pattern).
  Route& Add(Verb method, std::string_view pattern, RouteOptions options);
  std::vector<Route> routes_;
};

}  // namespace cairn::http
