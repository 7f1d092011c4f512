// The audit log through the API (hub_context.h): GET /api/audit, newest first, filtered by `since` (unix
// seconds), `user` (the actor), `ns` and `repo` (the repository's path: "acme/model", "datasets/acme/data"),
// paged by `before` (an event id; the Link header names the next page) and `limit` (at most 1,000). A site
// operator reads every event; anyone else only their namespace's or an organization's they are an admin of,
// and must name it (`ns`); others 403, a scope token too (it is no person), and without a token 401.
#include <charconv>

#include "api/hub_context.h"
#include "common/percent_encode.h"

namespace cairn::api::hub_routes {
namespace {

json::object EventAnswer(const index::AuditEvent& e) {
  return json::object{
      {"id", e.id},         {"at", IsoDate(e.at)}, {"actor", e.actor}, {"tokenId", e.token_id},
      {"client", e.client}, {"action", e.action},  {"ns", e.ns},       {"target", e.target},
      {"detail", e.detail}};
}

std::optional<int64_t> NumberOf(std::optional<std::string_view> text) {
  if (!text) return std::nullopt;
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), v);
  if (ec != std::errc() || end != text->data() + text->size() || v < 0) return std::nullopt;
  return v;
}

// The filter and page the query asks for; an error names the parameter that is wrong.
struct AuditQuery {
  index::AuditFilter filter;
  std::optional<int64_t> before;
  size_t limit = 100;
};
Result<AuditQuery> ParseAuditQuery(const http::Request& req) {
  AuditQuery q;
  const auto number = [&](std::string_view key, std::optional<int64_t>* out) -> Status {
    auto v = req.Query(key);
    if (!v) return Ok{};
    *out = NumberOf(v);
    if (!*out) return Malformed(std::string(key) + " must be a non-negative integer");
    return Ok{};
  };
  if (auto st = number("since", &q.filter.since); !st) return st.error();
  if (auto st = number("before", &q.before); !st) return st.error();
  std::optional<int64_t> limit;
  if (auto st = number("limit", &limit); !st) return st.error();
  if (limit) {
    if (*limit == 0 || *limit > static_cast<int64_t>(index::AuditIndex::kMaxListed))
      return Malformed("limit must be 1 to 1000");
    q.limit = static_cast<size_t>(*limit);
  }
  if (auto v = req.Query("user")) q.filter.actor = std::string(*v);
  if (auto v = req.Query("ns")) q.filter.ns = std::string(*v);
  if (auto v = req.Query("repo")) q.filter.target = std::string(*v);
  return q;
}

// The next page's URL: the same query, older than the last event given.
std::string NextPage(const HubContext& c, const AuditQuery& q, int64_t last) {
  std::string next = c.options.public_url + "/api/audit?limit=" + std::to_string(q.limit) +
                     "&before=" + std::to_string(last);
  if (q.filter.since) next += "&since=" + std::to_string(*q.filter.since);
  if (q.filter.actor) next += "&user=" + PercentEncode(*q.filter.actor);
  if (q.filter.ns) next += "&ns=" + PercentEncode(*q.filter.ns);
  if (q.filter.target) next += "&repo=" + PercentEncode(*q.filter.target);
  return next;
}

void ListAudit(const HubContext& c, const std::shared_ptr<Exchange>& ex) {
  if (c.options.audit == nullptr)
    return ex->Respond(HubErrorResponse(404, "", "this server keeps no audit log"));
  auto caller = PeopleCaller(c, ex);
  if (!caller) return;
  auto query = ParseAuditQuery(ex->request());
  if (!query) return ex->Respond(HubErrorResponse(400, "", query.error().message));
  auto person = caller->person() ? c.options.people->Verify(BearerToken(ex->request()))
                                 : Result<people::Person>(Denied("a scope token is no person"));
  const bool operator_ = person && person->is_operator;
  const bool admin = caller->person() && query->filter.ns &&
                     hub::AccessToNamespace(*caller, *query->filter.ns) == Access::kAdmin;
  if (!operator_ && !admin) {
    return ex->Respond(HubErrorResponse(
        403, "", "the audit log is for the site's operators, and for a namespace's admins with ns=<it>"));
  }
  ex->Offload([&c, ex, q = std::move(*query)] {
    auto events = c.options.audit->ListAudit(q.filter, q.before, q.limit);
    if (!events) return ex->Respond(HubErrorResponse(events.error()));
    json::array out;
    for (const auto& e : *events) out.push_back(EventAnswer(e));
    Response r = JsonAnswer(out);
    if (events->size() == q.limit)
      r.Header("Link", "<" + NextPage(c, q, events->back().id) + ">; rel=\"next\"");
    ex->Respond(std::move(r));
  });
}

}  // namespace

void RegisterAuditRoutes(const std::shared_ptr<const HubContext>& ctx) {
  ctx->server.router().Handle(Verb::get, "/api/audit", RouteOptions().Name("hub_audit"),
                              Bind(ctx, &ListAudit));
}

}  // namespace cairn::api::hub_routes
