#include "api/hub_routes.h"

#include <memory>
#include <utility>

#include "api/hub_context.h"
#include "api/refusal_audit.h"

namespace cairn::api {
namespace {

using http::Exchange;
using http::RouteOptions;
using http::Verb;
namespace json = boost::json;

// Two requests huggingface_hub makes that cairn has nothing to say to (docs/hub.md): a model card's metadata
// is always valid (cairn keeps none), and there are no agent harnesses (every huggingface_hub process asks).
void RegisterFixedAnswers(http::Router& r) {
  const uint64_t small = 1 << 20;
  r.Handle(Verb::post, "/api/validate-yaml", RouteOptions().Name("hub_validate_yaml").MaxBody(small),
           [](const std::shared_ptr<Exchange>& ex) {
             ex->Respond(hub_routes::JsonAnswer(
                 json::object{{"errors", json::array()}, {"warnings", json::array()}}));
           });
  r.Handle(Verb::get, "/api/agent-harnesses", RouteOptions().Name("hub_agent_harnesses"),
           [](const std::shared_ptr<Exchange>& ex) {
             ex->Respond(hub_routes::JsonAnswer(
                 json::object{{"standardEnvVars", json::array()}, {"harnesses", json::object{}}}));
           });
}

}  // namespace

void RegisterHubRoutes(http::Server& server, hub::HubService& hub, hub::BucketService& buckets,
                       files::FileService& files, const HubRouteOptions& options) {
  HubRouteOptions trimmed = options;
  while (!trimmed.public_url.empty() && trimmed.public_url.back() == '/') trimmed.public_url.pop_back();
  auto commits = std::make_shared<http::AdmissionGate>(trimmed.max_concurrent_commits);
  const auto ctx = std::make_shared<const hub_routes::HubContext>(
      hub_routes::HubContext{server, hub, buckets, files, std::move(trimmed), std::move(commits)});
  // The router takes the first route that matches: literal segments before captures. Buckets come before
  // the repositories' routes, whose {types} would take "buckets"; downloads come last, since their first
  // segments are all captures.
  hub_routes::RegisterAccountRoutes(ctx);
  hub_routes::RegisterTokenRoutes(ctx);
  hub_routes::RegisterOrgRoutes(ctx);
  hub_routes::RegisterAuditRoutes(ctx);
  hub_routes::RegisterDeviceRoutes(ctx);
  hub_routes::RegisterPublisherRoutes(ctx);
  RegisterFixedAnswers(server.router());
  hub_routes::RegisterBucketRoutes(ctx);
  hub_routes::RegisterRepoRoutes(ctx);
  hub_routes::RegisterRevisionRoutes(ctx);
  hub_routes::RegisterCommitRoutes(ctx);
  hub_routes::RegisterResolveRoutes(ctx);
  if (options.audit != nullptr) {
    // Every route's refusals, the CAS, git and LFS routes' too: the observer is the server's.
    auto refusals = std::make_shared<RefusalAudit>(server, *options.audit, options.people, Clock::System());
    server.ObserveRefusals(
        [refusals](const http::Request& req, unsigned status) { refusals->Observe(req, status); });
  }
}

}  // namespace cairn::api
