// A person's tokens on the pages (people/people_service.h): GET /settings/tokens lists them (never their
// text), POST /settings/tokens makes one and shows its text once, POST /settings/tokens/revoke revokes one of
// the person's own. Signed-in people only (others are sent to sign in); every post carries the session's form
// token from cairn's origin.
#include <algorithm>
#include <chrono>
#include <utility>

#include "common/percent_encode.h"
#include "http/form.h"
#include "web/page_context.h"

namespace cairn::web {

namespace {

using http::Exchange;
using http::Verb;

constexpr int64_t kAllowedDays[] = {7, 30, 90, 365};

View TokenRows(const PageContext& ctx, const Signed& who, bool& any) {
  View rows{View::type::list};
  auto tokens = ctx.options.people->Tokens(who.visitor.user);
  const int64_t now =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  for (const people::TokenRecord& t : tokens ? *tokens : std::vector<people::TokenRecord>{}) {
    View row;
    const bool live = t.revoked_at == 0 && t.expires_at > now;
    row.set("name", t.name);
    row.set("id", t.id);
    row.set("role", std::string(people::TokenRoleName(t.role)));
    row.set("state", std::string(t.revoked_at != 0 ? "revoked" : (live ? "live" : "expired")));
    row.set("expires", DateText(t.expires_at));
    row.set("used", t.last_used_at == 0 ? std::string("never") : DateText(t.last_used_at));
    row.set("live", live);
    row.set("csrf", who.visitor.csrf);
    rows.push_back(row);
    any = true;
  }
  return rows;
}

http::Response TokensPage(const PageContext& ctx, unsigned status, const Signed& who, View v) {
  bool any = false;
  v.set("tokens", TokenRows(ctx, who, any));
  v.set("has_tokens", any);
  v.set("user", who.visitor.user);
  v.set("csrf", who.visitor.csrf);
  http::Response r = PageAnswer(status, "Access tokens", Render("tokens.html", v), who.visitor);
  r.Header("Cache-Control", "no-store");
  return r;
}

void Create(const PageContext& ctx, const std::shared_ptr<Exchange>& ex, const Signed& who,
            const http::FormFields& form) {
  View v;
  const auto role = people::ParseTokenRole(http::FormField(form, "role"));
  int64_t days = 0;
  for (const int64_t allowed : kAllowedDays) {
    if (http::FormField(form, "days") == std::to_string(allowed)) days = allowed;
  }
  if (!role || *role == people::TokenRole::kFineGrained || days == 0) {
    v.set("error", std::string("Choose a role (read or write) and a lifetime from the lists."));
    return ex->Respond(TokensPage(ctx, 400, who, v));
  }
  const people::Actor actor{
      .actor = who.visitor.user, .token_id = who.caller.token_id, .client = ex->request().remote};
  auto made = ctx.options.people->CreateToken(actor, who.visitor.user, http::FormField(form, "name"), *role,
                                              {}, std::chrono::seconds(days * 86400));
  if (!made) {
    v.set("error", made.error().message);
    return ex->Respond(TokensPage(ctx, http::HttpStatusOf(made.error().code), who, v));
  }
  View created;
  created.set("text", made->text);
  v.set("created", created);
  ex->Respond(TokensPage(ctx, 200, who, v));
}

void Revoke(const PageContext& ctx, const std::shared_ptr<Exchange>& ex, const Signed& who,
            const http::FormFields& form) {
  View v;
  const std::string_view id = http::FormField(form, "id");
  auto mine = ctx.options.people->Tokens(who.visitor.user);
  if (!mine)
    return ex->Respond(ErrorPage(http::HttpStatusOf(mine.error().code), mine.error().message, who.visitor));
  const bool owned =
      std::any_of(mine->begin(), mine->end(), [&](const people::TokenRecord& t) { return t.id == id; });
  if (!owned) {
    v.set("error", std::string("No such token of yours."));
    return ex->Respond(TokensPage(ctx, 404, who, v));
  }
  const people::Actor actor{
      .actor = who.visitor.user, .token_id = who.caller.token_id, .client = ex->request().remote};
  auto revoked = ctx.options.people->Revoke(actor, id);
  if (!revoked)
    return ex->Respond(
        ErrorPage(http::HttpStatusOf(revoked.error().code), revoked.error().message, who.visitor));
  v.set("done", "Revoked token " + std::string(id) + ": every node refuses it within the refresh interval.");
  ex->Respond(TokensPage(ctx, 200, who, v));
}

}  // namespace

void RegisterTokenPages(const std::shared_ptr<const PageContext>& ctx) {
  if (ctx->options.people == nullptr) return;  // a server that keeps no people: these paths are 404s
  auto& r = ctx->server.router();
  r.Handle(Verb::get, "/settings/tokens", http::RouteOptions().Name("page_tokens"),
           [ctx](const std::shared_ptr<Exchange>& ex) {
             AsSignedIn(ctx, ex, false, [ctx, ex](const Signed& who, const http::FormFields&) {
               ex->Respond(TokensPage(*ctx, 200, who, View{}));
             });
           });
  r.Handle(Verb::post, "/settings/tokens", http::RouteOptions().Name("page_tokens").MaxBody(16 << 10),
           [ctx](const std::shared_ptr<Exchange>& ex) {
             AsSignedIn(ctx, ex, true, [ctx, ex](const Signed& who, const http::FormFields& form) {
               Create(*ctx, ex, who, form);
             });
           });
  r.Handle(Verb::post, "/settings/tokens/revoke", http::RouteOptions().Name("page_tokens").MaxBody(16 << 10),
           [ctx](const std::shared_ptr<Exchange>& ex) {
             AsSignedIn(ctx, ex, true, [ctx, ex](const Signed& who, const http::FormFields& form) {
               Revoke(*ctx, ex, who, form);
             });
           });
}

}  // namespace cairn::web
