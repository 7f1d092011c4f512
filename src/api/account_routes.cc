// The Hub's routes about the caller (hub_context.h): who it is, as huggingface_hub's whoami reads it
// (GET /api/whoami-v2), its namespace's storage quota and usage (GET /api/quotas/{ns},
// quota/quota_service.h), and the repositories of its namespace or of an organization it belongs to, with
// what each stores (GET /api/settings/repositories, /api/organizations/{ns}/settings/repositories).
//
// Both answer 401 to an anonymous caller or a bad token. A quota is for a token of its namespace or of one of
// its repositories (403 otherwise), and answers 404 on a server that keeps no quotas; measuring runs on a
// worker. Handlers only read the shared HubContext.
#include <optional>

#include "api/hub_context.h"
#include "common/percent_encode.h"
#include "common/printable.h"
#include "publish/exchange.h"

namespace cairn::api::hub_routes {
namespace {

// What a fine-grained token covers, as the Hub words it: each entity (a user, an organization or a
// repository) with the permissions granted on it.
json::object FineGrainedAnswer(const std::vector<people::Grant>& grants,
                               const std::vector<std::pair<people::AccountRecord, people::OrgRole>>& orgs) {
  json::array scoped;
  for (const people::Grant& g : grants) {
    const bool repo = g.scope.find('/') != std::string::npos;
    std::string type = "user";
    if (repo) {
      type = "model";
      for (auto [plural, singular] :
           {std::pair{"datasets/", "dataset"}, {"spaces/", "space"}, {"buckets/", "bucket"}})
        if (g.scope.starts_with(plural)) type = singular;
    } else {
      for (const auto& [org, role] : orgs)
        if (org.name == g.scope) type = "org";
    }
    json::array perms{"repo.content.read"};
    if (g.write) perms.push_back("repo.write");
    scoped.push_back(json::object{{"entity", {{"type", type}, {"name", g.scope}}}, {"permissions", perms}});
  }
  return json::object{{"canReadGatedRepos", false}, {"global", json::array()}, {"scoped", std::move(scoped)}};
}

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
  if (p.role == people::TokenRole::kFineGrained) token["fineGrained"] = FineGrainedAnswer(p.grants, p.orgs);
  return json::object{{"type", "user"},
                      {"id", p.user},
                      {"name", p.user},
                      {"fullname", p.full_name.empty() ? p.user : p.full_name},
                      {"isOperator", p.is_operator},
                      {"orgs", std::move(orgs)},
                      {"auth", {{"type", "access_token"}, {"accessToken", std::move(token)}}}};
}

// whoami-v2 for a trusted publisher's exchanged token: its policy is who it is, a fine-grained token of one
// resource.
json::object PublisherAnswer(const hub::Caller& caller) {
  json::object token{{"displayName", "trusted publisher " + caller.user},
                     {"role", people::TokenRoleName(people::TokenRole::kFineGrained)},
                     {"fineGrained", FineGrainedAnswer({{caller.scope, caller.write}}, {})}};
  return json::object{
      {"type", "user"},        {"id", caller.user},
      {"name", caller.user},   {"fullname", caller.user},
      {"orgs", json::array()}, {"auth", {{"type", "access_token"}, {"accessToken", std::move(token)}}}};
}

void Whoami(const HubContext& c, const std::shared_ptr<Exchange>& ex) {
  auto caller = CallerOf(c.server, ex->request());
  if (!caller || caller->anonymous()) {
    return ex->Respond(HubErrorResponse(401, "", "Invalid credentials in Authorization header"));
  }
  if (publish::PolicyOfHolder(caller->user)) return ex->Respond(JsonAnswer(PublisherAnswer(*caller)));
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
  if (!hub::ValidName(ns) || hub::AccessToNamespace(*caller, ns) < Access::kRead) {
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

// The repository types in the order a namespace's repositories are listed, with huggingface_hub's names.
constexpr std::pair<hub::RepoType, std::string_view> kListedTypes[] = {{hub::RepoType::kModel, "model"},
                                                                       {hub::RepoType::kDataset, "dataset"},
                                                                       {hub::RepoType::kSpace, "space"},
                                                                       {hub::RepoType::kBucket, "bucket"}};

// What every repository of `ns` the caller may read stores: what each one's share is of.
Result<uint64_t> NamespaceStorage(const HubContext& c, const hub::Caller& caller, const std::string& ns) {
  uint64_t total = 0;
  for (const auto& [type, name] : kListedTypes) {
    std::optional<std::string> after;
    for (;;) {
      auto page = c.hub.ListRepos(caller, type, ns, after, index::Index::kMaxListedRepos);
      if (!page) return page.error();
      for (const auto& repo : *page) {
        auto files = c.files.Totals(repo.record.read_scope);
        if (!files) return files.error();
        total += files->bytes;
      }
      if (page->size() < index::Index::kMaxListedRepos) break;
      after = ns + "/" + page->back().record.name;
    }
  }
  return total;
}

// One repository as list_user_repos reads it (RepoStorageInfo), with its share of `total`.
Result<json::object> StorageAnswer(const HubContext& c, const hub::Repo& repo, std::string_view type,
                                   uint64_t total) {
  auto storage = c.hub.StorageOf(repo);
  if (!storage) return storage.error();
  const double percent =
      total == 0 ? 0.0 : 100.0 * static_cast<double>(storage->bytes) / static_cast<double>(total);
  return json::object{{"id", repo.record.ns + "/" + repo.record.name},
                      {"type", type},
                      {"updatedAt", IsoDate(storage->updated_at)},
                      {"visibility", repo.record.is_private ? "private" : "public"},
                      {"storage", storage->bytes},
                      {"storagePercent", percent}};
}

// A page of the repositories of namespace `ns` the caller may read, every type, after `cursor`
// ("<type>:<name>"); the next page's cursor when this one is full.
Result<std::pair<json::array, std::optional<std::string>>> StoragePage(const HubContext& c,
                                                                       const hub::Caller& caller,
                                                                       const std::string& ns,
                                                                       std::string_view cursor) {
  constexpr size_t kPage = 100;
  json::array out;
  std::string_view from_type = "model";
  std::optional<std::string> after;
  if (const size_t colon = cursor.find(':'); colon != std::string_view::npos) {
    from_type = cursor.substr(0, colon);
    after = ns + "/" + std::string(cursor.substr(colon + 1));
  }
  auto total = NamespaceStorage(c, caller, ns);
  if (!total) return total.error();
  bool started = false;
  for (const auto& [type, name] : kListedTypes) {
    started = started || name == from_type;
    if (!started) continue;
    if (name != from_type) after.reset();
    auto page = c.hub.ListRepos(caller, type, ns, after, kPage - out.size());
    if (!page) return page.error();
    for (const auto& repo : *page) {
      auto answer = StorageAnswer(c, repo, name, *total);
      if (!answer) return answer.error();
      out.push_back(std::move(*answer));
    }
    if (out.size() == kPage) {
      return std::pair{std::move(out),
                       std::optional<std::string>(std::string(name) + ":" + page->back().record.name)};
    }
  }
  if (!started) return Malformed("bad cursor");
  return std::pair{std::move(out), std::optional<std::string>()};
}

// list_user_repos (hf repos ls): the caller's own namespace's repositories, or an organization's
// (/api/organizations/{ns}/settings/repositories) for a token that reaches the organization; paged by Link.
void RepositoriesOf(const HubContext& c, const std::shared_ptr<Exchange>& ex, bool organization) {
  auto caller = CallerOf(c.server, ex->request());
  if (!caller || caller->anonymous()) {
    return ex->Respond(HubErrorResponse(401, "", "Invalid credentials in Authorization header"));
  }
  std::string ns = organization ? ex->request().Param("ns") : caller->Who();
  if (!hub::ValidName(ns) || hub::AccessToNamespace(*caller, ns) < Access::kRead) {
    return ex->Respond(HubErrorResponse(403, "", "this token does not reach namespace " + Printable(ns, 96)));
  }
  std::string cursor(ex->request().Query("cursor").value_or(""));
  ex->Offload([&c, ex, caller = std::move(*caller), ns = std::move(ns), cursor, organization] {
    auto page = StoragePage(c, caller, ns, cursor);
    if (!page) return ex->Respond(HubErrorResponse(page.error()));
    Response r = JsonAnswer(std::move(page->first));
    if (page->second) {
      const std::string path = organization ? "/api/organizations/" + ns + "/settings/repositories"
                                            : std::string("/api/settings/repositories");
      r.Header("Link", "<" + c.options.public_url + path + "?cursor=" + PercentEncode(*page->second) +
                           ">; rel=\"next\"");
    }
    ex->Respond(std::move(r));
  });
}

}  // namespace

void RegisterAccountRoutes(const std::shared_ptr<const HubContext>& ctx) {
  auto& r = ctx->server.router();
  r.Handle(Verb::get, "/api/whoami-v2", RouteOptions().Name("hub_whoami"), Bind(ctx, &Whoami));
  r.Handle(Verb::get, "/api/quotas/{ns}", RouteOptions().Name("hub_quota"), Bind(ctx, &Quota));
  r.Handle(Verb::get, "/api/settings/repositories", RouteOptions().Name("hub_own_repos"),
           Bind(ctx, &RepositoriesOf, false));
  r.Handle(Verb::get, "/api/organizations/{ns}/settings/repositories", RouteOptions().Name("hub_org_repos"),
           Bind(ctx, &RepositoriesOf, true));
}

}  // namespace cairn::api::hub_routes
