// The Hub's routes about the caller (hub_context.h): who it is, as huggingface_hub's whoami reads it
// (GET /api/whoami-v2), and its namespace's storage quota and usage (GET /api/quotas/{ns},
// quota/quota_service.h).
//
// Both answer 401 to an anonymous caller or a bad token. A quota is for a token of its namespace or of one of
// its repositories (403 otherwise), and answers 404 on a server that keeps no quotas; measuring runs on a
// worker. Handlers only read the shared HubContext.
#include <optional>

#include "api/hub_context.h"
#include "common/printable.h"

namespace cairn::api::hub_routes {
namespace {

// whoami-v2 for a person's token: the user, their organizations with their roles (huggingface_hub builds an
// Organization of each: avatarUrl, name, fullname, roleInOrg), and the token's name and role.
json::object PersonAnswer(const people::Person& p) {
  json::array orgs;
  for (const auto& [org, role] : p.orgs) {
    orgs.push_back(json::object{{"type", "org"},
                                {"id", org.name},
                                {"name", org.name},
                                {"fullname", org.full_name.empty() ? org.name : org.full_name},
                                {"avatarUrl", ""},
                                {"roleInOrg", people::OrgRoleName(role)}});
  }
  json::object token{{"displayName", p.token_name}, {"role", people::TokenRoleName(p.role)}};
  return json::object{{"type", "user"},
                      {"id", p.user},
                      {"name", p.user},
                      {"fullname", p.full_name.empty() ? p.user : p.full_name},
                      {"isOperator", p.is_operator},
                      {"orgs", std::move(orgs)},
                      {"auth", {{"type", "access_token"}, {"accessToken", std::move(token)}}}};
}

void Whoami(const HubContext& c, const std::shared_ptr<Exchange>& ex) {
  auto caller = CallerOf(c.server, ex->request());
  if (!caller || caller->anonymous()) {
    return ex->Respond(HubErrorResponse(401, "", "Invalid credentials in Authorization header"));
  }
  if (c.options.people != nullptr && !caller->user.empty()) {
    // The token was verified just now; asked again for what the caller does not carry (the organizations).
    auto person = c.options.people->Verify(BearerToken(ex->request()));
    if (!person) return ex->Respond(HubErrorResponse(401, "", "Invalid credentials in Authorization header"));
    return ex->Respond(JsonAnswer(PersonAnswer(*person)));
  }
  const std::string ns = hub::NamespaceOf(caller->scope);
  json::object token{{"displayName", "cairn token for " + caller->scope},
                     {"role", caller->write ? "write" : "read"}};
  json::object out{{"type", "user"},
                   {"id", ns},
                   {"name", ns},
                   {"fullname", ns},
                   {"orgs", json::array()},
                   {"auth", {{"type", "access_token"}, {"accessToken", std::move(token)}}}};
  ex->Respond(JsonAnswer(out));
}

// A namespace's storage quota and usage, for a token of the namespace or of one of its repositories:
// measured now (with what it is made of) when asked (?measure=true) or when the recorded usage is not
// current.
void Quota(const HubContext& c, const std::shared_ptr<Exchange>& ex) {
  auto caller = CallerOf(c.server, ex->request());
  if (!caller || caller->anonymous()) {
    return ex->Respond(HubErrorResponse(401, "", "Invalid credentials in Authorization header"));
  }
  const std::string ns = ex->request().Param("ns");
  if (!hub::ValidName(ns) || hub::NamespaceOf(caller->scope) != ns) {
    return ex->Respond(
        HubErrorResponse(403, "", "this token does not speak for namespace " + Printable(ns, 96)));
  }
  if (c.options.quota == nullptr)
    return ex->Respond(HubErrorResponse(404, "", "this server keeps no quotas"));
  const auto measure = ex->request().Query("measure");
  const bool asked = measure && (*measure == "true" || *measure == "1");
  ex->Offload([&c, ex, ns, asked] {
    auto recorded = c.options.quota->Recorded(ns);
    if (!recorded) return ex->Respond(ErrorResponse(recorded.error()));
    std::optional<quota::Usage> usage;
    if (!asked && *recorded && (*recorded)->exact) {
      usage = std::move(**recorded);
    } else {
      auto measured = c.options.quota->Measure(ns);
      if (!measured) return ex->Respond(ErrorResponse(measured.error()));
      usage = std::move(*measured);
    }
    json::object out{{"namespace", ns},
                     {"used", usage->used},
                     {"exact", usage->exact},
                     {"measuredAt", usage->measured_at}};
    out["limit"] = usage->limit ? json::value(*usage->limit) : json::value(nullptr);
    if (usage->measured_at != 0 &&
        usage->repos + usage->files + usage->chunk_bytes + usage->object_bytes > 0) {
      out["repos"] = usage->repos;
      out["files"] = usage->files;
      out["chunkBytes"] = usage->chunk_bytes;
      out["objectBytes"] = usage->object_bytes;
    }
    ex->Respond(JsonAnswer(out));
  });
}

}  // namespace

void RegisterAccountRoutes(const std::shared_ptr<const HubContext>& ctx) {
  auto& r = ctx->server.router();
  r.Handle(Verb::get, "/api/whoami-v2", RouteOptions().Name("hub_whoami"), Bind(ctx, &Whoami));
  r.Handle(Verb::get, "/api/quotas/{ns}", RouteOptions().Name("hub_quota"), Bind(ctx, &Quota));
}

}  // namespace cairn::api::hub_routes
