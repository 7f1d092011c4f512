// The operator's page (GET /admin): what the dedup saves, what namespaces are charged, when the collector
// last ran, whether this node's dependencies answer, the mirror's counters and the audit log's latest events.
// Operators only: anybody else signed in gets the 404 page (the page of a path that is not theirs), and a
// visitor without a session is sent to sign in first. Every figure is read when the page is shown; the costs
// are bounded (one totals read, one page of quotas, one page of events, one check per dependency).
#include <fmt/format.h>

#include <utility>

#include "web/page_context.h"

namespace cairn::web {

namespace {

using http::Exchange;

constexpr size_t kQuotasShown = 100;
constexpr size_t kEventsShown = 30;
constexpr size_t kEventsSearched = 1000;  // for the collector's last run

std::string Count(uint64_t n) {
  std::string digits = std::to_string(n);
  for (size_t i = digits.size(); i > 3; i -= 3) digits.insert(i - 3, ",");
  return digits;
}

void Storage(const index::IndexStats& s, View& v) {
  v.set("files", Count(s.files));
  v.set("logical", HumanSize(s.file_bytes));
  v.set("unpacked", HumanSize(s.unpacked_bytes));
  v.set("stored", HumanSize(s.stored_bytes));
  v.set("ratio", s.unpacked_bytes == 0 ? std::string("—") : fmt::format("{:.2f}×", s.dedup_ratio()));
  v.set("xorbs", Count(s.xorbs));
  v.set("shards", Count(s.shards));
  v.set("chunks", Count(s.chunks));
}

void Quotas(index::Index& ix, View& v) {
  View rows{View::type::list};
  auto quotas = ix.ListQuotas(std::nullopt, kQuotasShown);
  for (const index::QuotaRecord& q : quotas ? *quotas : std::vector<index::QuotaRecord>{}) {
    View row;
    row.set("ns", q.ns);
    row.set("used", HumanSize(q.exact() ? q.used : q.charged()));
    row.set("exact", q.exact());
    row.set("limit", q.limit ? HumanSize(*q.limit) : std::string("none"));
    row.set("measured", q.measured_at == 0 ? std::string("never") : DateText(q.measured_at));
    rows.push_back(row);
  }
  v.set("has_quotas", !rows.is_empty_list());
  v.set("quotas", rows);
}

void Events(index::Index& ix, View& v) {
  auto events = ix.ListAudit({}, std::nullopt, kEventsSearched);
  const std::vector<index::AuditEvent> none;
  const auto& all = events ? *events : none;
  View rows{View::type::list};
  for (size_t i = 0; i < all.size() && i < kEventsShown; ++i) {
    const index::AuditEvent& e = all[i];
    View row;
    row.set("at", DateText(e.at));
    row.set("iso", IsoTime(e.at));
    row.set("actor", e.actor);
    row.set("action", e.action);
    row.set("target", e.target);
    row.set("detail", e.detail);
    rows.push_back(row);
  }
  v.set("has_events", !rows.is_empty_list());
  v.set("events", rows);
  for (const index::AuditEvent& e : all) {  // newest first
    if (e.action != "gc.run") continue;
    v.set("gc_at", DateText(e.at));
    v.set("gc_iso", IsoTime(e.at));
    v.set("gc_detail", e.detail);
    break;
  }
}

void Node(const PageOptions& o, View& v) {
  View health{View::type::list};
  for (const auto& [name, check] : o.health) {
    View row;
    row.set("name", name);
    const Status st = check();
    row.set("ok", st.ok());
    if (!st.ok()) row.set("error", st.error().message);
    health.push_back(row);
  }
  v.set("health", health);
  if (!o.mirror_counters) return;
  View mirror{View::type::list};
  for (const auto& [name, value] : o.mirror_counters()) {
    View row;
    row.set("name", name);
    row.set("value", Count(value));
    mirror.push_back(row);
  }
  v.set("has_mirror", true);
  v.set("mirror", mirror);
}

void ShowOperatorPage(const PageContext& ctx, const std::shared_ptr<Exchange>& ex, const Signed& who) {
  if (!who.visitor.is_operator) return ex->Respond(ErrorPage(404, "No such page.", who.visitor));
  index::Index& ix = *ctx.options.index;
  auto stats = ix.Stats();
  if (!stats) {
    return ex->Respond(ErrorPage(http::HttpStatusOf(stats.error().code),
                                 "The index does not answer: " + stats.error().message, who.visitor));
  }
  View v;
  Storage(*stats, v);
  Quotas(ix, v);
  Events(ix, v);
  Node(ctx.options, v);
  http::Response r = PageAnswer(200, "Operator", Render("operator.html", v), who.visitor);
  r.Header("Cache-Control", "no-store");
  ex->Respond(std::move(r));
}

}  // namespace

void RegisterOperatorPages(const std::shared_ptr<const PageContext>& ctx) {
  if (ctx->options.index == nullptr || ctx->options.sign_in == nullptr) return;
  ctx->server.router().Handle(http::Verb::get, "/admin", http::RouteOptions().Name("page_operator"),
                              [ctx](const std::shared_ptr<Exchange>& ex) {
                                AsSignedIn(ctx, ex, false,
                                           [ctx, ex](const Signed& who, const http::FormFields&) {
                                             ShowOperatorPage(*ctx, ex, who);
                                           });
                              });
}

}  // namespace cairn::web
