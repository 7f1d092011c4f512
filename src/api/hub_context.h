// What the Hub API's route files share (hub_routes.h is their entry point): the services and options every
// handler reads (HubContext), who asks and which repository the route names, and the answers several
// resources give alike (JSON, dates, {} for a change, a create's 409). Each of those files registers one
// resource's routes through its Register* function below; RegisterHubRoutes calls them in the order given,
// which matters: the router takes the first route registered that matches (http/router.h).
//
// Thread safety: a HubContext is made once, before the server starts, and only read afterwards; every route
// holds it (shared_ptr) as long as the router lives. Failures answer the request (HubErrorResponse) and
// return; nothing here throws.
#pragma once

#include <boost/json.hpp>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "api/errors.h"
#include "api/hub_routes.h"
#include "api/person_tokens.h"
#include "api/requests.h"
#include "http/form.h"
#include "http/server.h"

namespace cairn::api::hub_routes {

// The names every route file of the Hub uses.
using http::Exchange;
using http::Response;
using http::RouteOptions;
using http::Verb;
namespace json = boost::json;

// {"...": ...} as application/json.
http::Response JsonAnswer(const boost::json::value& v, unsigned status = 200);

// "2026-12-01T19:18:42.123Z": the only form huggingface_hub parses.
std::string IsoDateMs(int64_t unix_ms);
std::string IsoDate(int64_t unix_seconds);

// The token of an Authorization header ("Bearer TOKEN"), blanks trimmed; empty without one.
std::string_view BearerToken(const http::Request& req);
// Who asks: a token is optional on reads; a bad one is refused rather than ignored, and so is a CAS token
// (a CAS scope's credential, accepted by the CAS routes alone: it speaks for nobody here).
http::Result<hub::Caller> CallerOf(const http::Server& server, const http::Request& req);

// The caller of a route about people (their tokens, an organization's members); answers the request itself,
// 404 when the server keeps no people, 401 without a valid token, and returns nullopt.
struct HubContext;
std::optional<hub::Caller> PeopleCaller(const HubContext& c, const std::shared_ptr<http::Exchange>& ex);

struct RepoRequest {
  hub::Caller caller;
  hub::RepoId id;
};

// The caller and the repository named by the route's {types}/{ns}/{name} (types: "models" when absent);
// answers the request itself when there is none.
std::optional<RepoRequest> RepoOf(const http::Server& server, const std::shared_ptr<http::Exchange>& ex);

// An OAuth error answer (RFC 6749 §5.2: {error, error_description}), never cached, like the tokens; from an
// Error: its reason is the OAuth error (400), kUnavailable temporarily_unavailable (503), else server_error.
http::Response OAuthError(unsigned status, std::string_view error, std::string_view description);
http::Response OAuthError(const Error& e);

// POST /oauth/token with a form asking for a device code's or a refresh token's grant (hf auth login):
// answers it and returns true; false for any other grant (the token exchange's).
struct HubContext;
bool DeviceGrantAsked(const HubContext& c, const std::shared_ptr<http::Exchange>& ex,
                      const http::FormFields& form);  // device_routes.cc

// ?key=1, true or True.
bool QueryTrue(const http::Request& req, std::string_view key);

// The answer to a change that returns nothing: {} or the error.
http::Response Done(const Status& st);

// The answer to a create: `out` (the url), or when the name is taken a 409 that carries the url as well:
// huggingface_hub reads it with exist_ok.
http::Response CreatedAnswer(const Result<hub::Repo>& made, boost::json::object out);

// The tenant a commit (a bucket batch when `bucket`) enters the commit gate as. The slots are shared fairly
// between namespaces (admission.h): a request counts for the namespace it may write, known from the token
// and the URL alone; a token that cannot write there (it will be refused once the repository is looked up)
// counts for one pool of all such requests, so no set of tokens of other scopes gains shares.
std::function<std::string(const http::Request&)> CommitTenant(bool bucket);

struct HubContext {
  http::Server& server;
  hub::HubService& hub;
  hub::BucketService& buckets;
  files::FileService& files;
  HubRouteOptions options;  // public_url without a trailing '/'
  // Commits, bucket batches and history rewrites in flight (max_concurrent_commits): their bodies are
  // buffered.
  std::shared_ptr<http::AdmissionGate> commits;

  // Runs `fn(request, repo)` on a worker with the repository opened for reading or writing.
  template <typename Fn>
  void WithRepo(const std::shared_ptr<http::Exchange>& ex, bool write, Fn fn) const;
  // The same for a request whose caller and repository are known (RepoOf, or a download link's).
  template <typename Fn>
  void WithRepo(const std::shared_ptr<http::Exchange>& ex, RepoRequest rr, bool write, Fn fn) const;

  // A revision to read at: a mirrored repository's names as its upstream has them (mirror_service.h).
  Result<hub::ObjectId> ResolveIn(const hub::Repo& repo, std::string_view revision) const;

  std::string RepoUrl(const hub::RepoId& id) const { return options.public_url + "/" + hub::RepoPath(id); }

  // Answers with a CAS token for one of `repo`'s scopes (a repository's or a bucket's), as hf_xet asks for
  // it: for writing, refused when its namespace's quota is used up.
  void MintCasToken(const std::shared_ptr<http::Exchange>& ex, const hub::Caller& caller,
                    const hub::Repo& repo, bool write) const;
};

template <typename Fn>
void HubContext::WithRepo(const std::shared_ptr<http::Exchange>& ex, bool write, Fn fn) const {
  auto rr = RepoOf(server, ex);
  if (!rr) return;
  WithRepo(ex, std::move(*rr), write, std::move(fn));
}

template <typename Fn>
void HubContext::WithRepo(const std::shared_ptr<http::Exchange>& ex, RepoRequest rr, bool write,
                          Fn fn) const {
  ex->Offload([this, ex, write, rr = std::move(rr), fn = std::move(fn)] {
    // Reads go through the mirror when there is one: it copies a repository this server does not hold.
    auto repo = (options.mirror != nullptr && !write) ? options.mirror->Open(rr.caller, rr.id)
                                                      : hub.Open(rr.caller, rr.id, write);
    if (!repo && repo.error().code == ErrorCode::kNotFound && options.mirror != nullptr) {
      // Renamed upstream: the client is sent to the new name, as the Hub sends it.
      if (auto to = options.mirror->RenamedTo(rr.id)) {
        if (auto target = RenamedTarget(ex->request().target, rr.id, *to)) {
          http::Response moved = HubErrorResponse(307, "", "moved to " + to->str());
          moved.Header("Location", *target);
          return ex->Respond(std::move(moved));
        }
      }
    }
    if (!repo) return ex->Respond(HubErrorResponse(repo.error()));
    fn(rr, *repo);
  });
}

// A route's handler: `fn` given the context (which the route holds) and `args`.
template <typename... Args>
http::Handler Bind(const std::shared_ptr<const HubContext>& ctx,
                   void (*fn)(const HubContext&, const std::shared_ptr<http::Exchange>&, Args...),
                   Args... args) {
  return [ctx, fn, args...](const std::shared_ptr<http::Exchange>& ex) { fn(*ctx, ex, args...); };
}

// One resource's routes each, registered in this order (hub_routes.cc).
void RegisterAccountRoutes(const std::shared_ptr<const HubContext>& ctx);    // account_routes.cc
void RegisterBucketRoutes(const std::shared_ptr<const HubContext>& ctx);     // bucket_routes.cc
void RegisterRepoRoutes(const std::shared_ptr<const HubContext>& ctx);       // repo_routes.cc
void RegisterRevisionRoutes(const std::shared_ptr<const HubContext>& ctx);   // revision_routes.cc
void RegisterCommitRoutes(const std::shared_ptr<const HubContext>& ctx);     // commit_routes.cc
void RegisterResolveRoutes(const std::shared_ptr<const HubContext>& ctx);    // resolve_routes.cc
void RegisterTokenRoutes(const std::shared_ptr<const HubContext>& ctx);      // token_routes.cc
void RegisterOrgRoutes(const std::shared_ptr<const HubContext>& ctx);        // org_routes.cc
void RegisterAuditRoutes(const std::shared_ptr<const HubContext>& ctx);      // audit_routes.cc
void RegisterDeviceRoutes(const std::shared_ptr<const HubContext>& ctx);     // device_routes.cc
void RegisterPublisherRoutes(const std::shared_ptr<const HubContext>& ctx);  // publisher_routes.cc

}  // namespace cairn::api::hub_routes
