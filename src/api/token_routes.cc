// A person's own tokens through the API (hub_context.h), what the web page and scripts use: list them
// (GET /api/settings/tokens), make one (POST, the text answered once), revoke one (DELETE
// /api/settings/tokens/{id}). Only a person's read or write token manages tokens, and only its owner's: a
// scope token or a fine-grained one is refused (403). A token made here never reaches further than the one
// that makes it (a read token makes read tokens and read-only fine-grained ones) nor outlives it; what it
// reaches is the owner's rights at each use (people/reach.h). A revocation is seen by this node at once and
// by the others within their refresh (people/directory.h).
#include <algorithm>

#include "api/hub_context.h"
#include "common/printable.h"

namespace cairn::api::hub_routes {
namespace {

json::value TimeOrNull(int64_t unix_seconds) {
  return unix_seconds == 0 ? json::value(nullptr) : json::value(IsoDate(unix_seconds));
}

json::object TokenAnswer(const people::TokenRecord& t) {
  json::object out{{"id", t.id},
                   {"name", t.name},
                   {"role", people::TokenRoleName(t.role)},
                   {"createdAt", IsoDate(t.created_at)},
                   {"expiresAt", IsoDate(t.expires_at)},
                   {"lastUsedAt", TimeOrNull(t.last_used_at)},
                   {"revokedAt", TimeOrNull(t.revoked_at)}};
  if (t.role == people::TokenRole::kFineGrained) {
    json::array scoped;
    if (auto grants = people::ParseGrants(t.grants)) {
      for (const auto& g : *grants)
        scoped.push_back(json::object{{"scope", g.scope}, {"permission", g.write ? "write" : "read"}});
    }
    out["scoped"] = std::move(scoped);
  }
  return out;
}

// The person whose read or write token the request carries, and who the audit log says they are; answers the
// request itself otherwise.
struct Manager {
  people::Person person;
  people::Actor by;
};
std::optional<Manager> TokenManager(const HubContext& c, const std::shared_ptr<Exchange>& ex) {
  auto caller = PeopleCaller(c, ex);
  if (!caller) return std::nullopt;
  if (!caller->person()) {
    ex->Respond(HubErrorResponse(403, "", "a scope token holds no person's tokens: use a user's token"));
    return std::nullopt;
  }
  auto person = c.options.people->Verify(BearerToken(ex->request()));
  if (!person) {
    ex->Respond(HubErrorResponse(401, "", "Invalid credentials in Authorization header"));
    return std::nullopt;
  }
  if (person->role == people::TokenRole::kFineGrained) {
    ex->Respond(
        HubErrorResponse(403, "", "a fine-grained token manages no tokens: use a read or write token"));
    return std::nullopt;
  }
  return Manager{.person = std::move(*person), .by = caller->Actor()};
}

void ListTokens(const HubContext& c, const std::shared_ptr<Exchange>& ex) {
  auto manager = TokenManager(c, ex);
  if (!manager) return;
  ex->Offload([&c, ex, user = manager->person.user] {
    auto tokens = c.options.people_service->Tokens(user);
    if (!tokens) return ex->Respond(HubErrorResponse(tokens.error()));
    json::array out;
    for (const auto& t : *tokens) out.push_back(TokenAnswer(t));
    ex->Respond(JsonAnswer(out));
  });
}

// What the making token allows of the body: nothing further than itself, no longer than itself.
Result<std::chrono::seconds> Allowed(const people::Person& maker, const TokenBody& body, int64_t now) {
  if (maker.role == people::TokenRole::kRead) {
    const bool writes =
        body.role == people::TokenRole::kWrite ||
        std::any_of(body.grants.begin(), body.grants.end(), [](const auto& g) { return g.write; });
    if (writes) return Denied("a read token makes only tokens that read");
  }
  const int64_t left = maker.expires - now;
  constexpr int64_t kDefaultLife = 30LL * 24 * 3600;
  const int64_t life = body.expires_in.value_or(std::min(kDefaultLife, left));
  if (life <= 0) return Malformed("expiresIn must be positive");
  if (life > left) {
    return Malformed("a token cannot outlive the one that makes it: at most " + std::to_string(left) +
                     " seconds");
  }
  return std::chrono::seconds(life);
}

void CreateToken(const HubContext& c, const std::shared_ptr<Exchange>& ex) {
  auto manager = TokenManager(c, ex);
  if (!manager) return;
  auto body = ParseTokenBody(ex->request().body);
  if (!body) return ex->Respond(HubErrorResponse(400, "", body.error().message));
  auto life = Allowed(manager->person, *body, c.server.authenticator()->now());
  if (!life) return ex->Respond(HubErrorResponse(life.error()));
  ex->Offload([&c, ex, m = std::move(*manager), body = std::move(*body), life = *life] {
    auto made =
        c.options.people_service->CreateToken(m.by, m.person.user, body.name, body.role, body.grants, life);
    if (!made) return ex->Respond(HubErrorResponse(made.error()));
    json::object out = TokenAnswer(made->record);
    out["token"] = made->text;  // the only time it is shown
    ex->Respond(JsonAnswer(out));
  });
}

void RevokeToken(const HubContext& c, const std::shared_ptr<Exchange>& ex) {
  auto manager = TokenManager(c, ex);
  if (!manager) return;
  ex->Offload([&c, ex, m = std::move(*manager), id = ex->request().Param("id")] {
    auto tokens = c.options.people_service->Tokens(m.person.user);
    if (!tokens) return ex->Respond(HubErrorResponse(tokens.error()));
    const bool theirs =
        std::any_of(tokens->begin(), tokens->end(), [&](const people::TokenRecord& t) { return t.id == id; });
    // Another person's token is as absent as one that never was.
    if (!theirs) return ex->Respond(HubErrorResponse(404, "", "no token " + Printable(id, 32) + " of yours"));
    auto revoked = c.options.people_service->Revoke(m.by, id);
    if (!revoked) return ex->Respond(HubErrorResponse(revoked.error()));
    ex->Respond(JsonAnswer(json::object{{"id", id}, {"revoked", *revoked}}));
  });
}

}  // namespace

void RegisterTokenRoutes(const std::shared_ptr<const HubContext>& ctx) {
  auto& r = ctx->server.router();
  r.Handle(Verb::get, "/api/settings/tokens", RouteOptions().Name("hub_tokens"), Bind(ctx, &ListTokens));
  r.Handle(Verb::post, "/api/settings/tokens", RouteOptions().Name("hub_token_create").MaxBody(64 << 10),
           Bind(ctx, &CreateToken));
  r.Handle(Verb::delete_, "/api/settings/tokens/{id}", RouteOptions().Name("hub_token_revoke"),
           Bind(ctx, &RevokeToken));
}

}  // namespace cairn::api::hub_routes
