// Trusted publishers through the API (hub_context.h). A CI job exchanges its OpenID Connect id token for a
// short-lived token at POST /oauth/token (RFC 8693, as huggingface_hub's HF_OIDC_RESOURCE sends it; no
// credential but the id token): {access_token, issued_token_type, token_type, expires_in}, or the OAuth error
// (400 {error, error_description}: invalid_request, invalid_target, unsupported_grant_type; 503
// temporarily_unavailable when the issuer's keys could not be fetched). The token it gets is signed by this
// server, reaches the one resource at the policy's role (never admin), lives until the id token expires (at
// most an hour), and works only while its policy stands (http::TokenVerifier::Admits). Each exchange, and
// each refusal of a genuine id token (its signature verified), is in the audit log.
//
// A namespace's admins manage its trust policies: GET /api/publishers/{ns}, POST (publishers.h's fields),
// DELETE /api/publishers/{ns}/{id}; 404 to anyone who is no admin of it.
#include <openssl/rand.h>
#include <spdlog/spdlog.h>

#include <array>

#include "api/hub_context.h"
#include "common/hex.h"
#include "common/printable.h"
#include "http/form.h"
#include "oidc/id_token.h"
#include "publish/exchange.h"

namespace cairn::api::hub_routes {
namespace {

constexpr std::string_view kTokenExchange = "urn:ietf:params:oauth:grant-type:token-exchange";
constexpr std::string_view kIdTokenType = "urn:ietf:params:oauth:token-type:id_token";
constexpr std::string_view kJwtType = "urn:ietf:params:oauth:token-type:jwt";
constexpr std::string_view kAccessTokenType = "urn:ietf:params:oauth:token-type:access_token";

Result<std::string> NewExchangeId() {
  std::array<uint8_t, 12> raw{};
  if (RAND_bytes(raw.data(), static_cast<int>(raw.size())) != 1) return IoError("RAND_bytes failed");
  return "tx_" + HexEncode(raw);
}

// Records a refused exchange of a genuine id token: a write attempt the audit log keeps.
void RecordRefusal(const HubContext& c, const http::Request& req, const std::string& subject_token,
                   const std::string& resource, const Error& why) {
  auto token = oidc::ParseIdToken(subject_token);
  if (!token) return;
  const index::AuditActor by{
      .actor = "oidc:" + token->iss + "#" + token->sub, .token_id = "", .client = req.remote};
  const std::string ns = hub::NamespaceOf(resource);
  auto st = c.options.audit->AppendAudit(
      by.Event(c.server.authenticator()->now(), "token.exchange.refused", ns, resource, why.reason));
  if (!st) spdlog::warn("audit: recording a refused exchange failed: {}", st.error().message);
}

// The answer to a grant: a token signed for it, recorded in the audit log.
http::Response Grant(const HubContext& c, const http::Request& req, const publish::ExchangeGrant& grant) {
  auto id = NewExchangeId();
  if (!id) return OAuthError(id.error());
  const int64_t now = c.server.authenticator()->now();
  const http::Principal who{
      .scope = grant.resource,
      .perm = grant.access == Access::kWrite ? http::Permission::kWrite : http::Permission::kRead,
      .kind = http::TokenKind::kFineGrained,
      .expires = grant.expires,
      .verified_at = now,
      .user = std::string(publish::kHolderPrefix) + grant.policy_id,
      .token_id = *id,
      .reach = {}};
  const int64_t life = grant.expires - now;
  auto token = c.server.authenticator()->Mint(who, std::chrono::seconds(life), now);
  if (!token) return OAuthError(token.error());
  const index::AuditActor by{.actor = who.user, .token_id = *id, .client = req.remote};
  if (auto st = c.options.audit->AppendAudit(
          by.Event(now, "token.exchange", grant.ns, grant.resource,
                   std::string(AccessName(grant.access)) + " for " + grant.subject));
      !st) {
    return OAuthError(st.error());  // no token without its record
  }
  http::Response r = JsonAnswer(json::object{{"access_token", *token},
                                             {"issued_token_type", kAccessTokenType},
                                             {"token_type", "bearer"},
                                             {"expires_in", life}});
  r.Header("Cache-Control", "no-store");
  return r;
}

void ExchangeToken(const HubContext& c, const std::shared_ptr<Exchange>& ex) {
  const http::Request& req = ex->request();
  const bool form = req.Header("Content-Type").starts_with("application/x-www-form-urlencoded");
  // A form is parsed once: hf auth login's grants (device_routes.cc) or a token exchange.
  std::optional<http::FormFields> fields = form ? http::ParseForm(req.body) : std::nullopt;
  if (fields && DeviceGrantAsked(c, ex, *fields)) return;
  if (c.options.exchanger == nullptr || c.options.audit == nullptr) {
    return ex->Respond(OAuthError(404, "invalid_request", "this server has no trusted publishers"));
  }
  auto body = fields ? TokenExchangeOf(*fields) : ParseTokenExchangeBody(req.body, form);
  if (!body) return ex->Respond(OAuthError(400, "invalid_request", body.error().message));
  if (body->grant_type != kTokenExchange) {
    return ex->Respond(
        OAuthError(400, "unsupported_grant_type", "grant_type is " + std::string(kTokenExchange)));
  }
  if (body->subject_token_type != kIdTokenType && body->subject_token_type != kJwtType) {
    return ex->Respond(
        OAuthError(400, "invalid_request", "subject_token_type is " + std::string(kIdTokenType)));
  }
  // Off the event loop: the issuer's keys may have to be fetched.
  ex->Offload([&c, ex, body = std::move(*body)] {
    bool verified = false;
    auto grant = c.options.exchanger->Exchange(body.subject_token, body.resource, &verified);
    if (!grant) {
      if (verified) RecordRefusal(c, ex->request(), body.subject_token, body.resource, grant.error());
      return ex->Respond(OAuthError(grant.error()));
    }
    ex->Respond(Grant(c, ex->request(), *grant));
  });
}

json::object PolicyAnswer(const people::PublisherRecord& p, const std::string& ns) {
  json::object claims;
  if (auto parsed = people::ParseClaims(p.claims)) {
    for (const auto& claim : *parsed) claims[claim.name] = claim.value;
  }
  return json::object{
      {"id", p.id},
      {"namespace", ns},
      {"repo", p.repo.empty() ? json::value(nullptr) : json::value(p.repo)},
      {"issuer", p.issuer},
      {"audience", p.audience},
      {"claims", std::move(claims)},
      {"role", people::TokenRoleName(p.role)},
      {"createdAt", IsoDate(p.created_at)},
      {"revokedAt", p.revoked_at == 0 ? json::value(nullptr) : json::value(IsoDate(p.revoked_at))}};
}

// The caller when they are an admin of the route's namespace; answers the request itself otherwise.
std::optional<hub::Caller> PolicyAdmin(const HubContext& c, const std::shared_ptr<Exchange>& ex,
                                       const std::string& ns) {
  auto caller = PeopleCaller(c, ex);
  if (!caller) return std::nullopt;
  if (!caller->person() || hub::AccessToNamespace(*caller, ns) < Access::kAdmin) {
    ex->Respond(HubErrorResponse(404, "", "no namespace " + Printable(ns, 96) + " you administer"));
    return std::nullopt;
  }
  return caller;
}

void ListPolicies(const HubContext& c, const std::shared_ptr<Exchange>& ex) {
  const std::string ns = ex->request().Param("ns");
  if (!PolicyAdmin(c, ex, ns)) return;
  ex->Offload([&c, ex, ns] {
    auto policies = c.options.people_service->Publishers(ns);
    if (!policies) return ex->Respond(HubErrorResponse(policies.error()));
    json::array out;
    for (const auto& p : *policies) out.push_back(PolicyAnswer(p, ns));
    ex->Respond(JsonAnswer(out));
  });
}

void CreatePolicy(const HubContext& c, const std::shared_ptr<Exchange>& ex) {
  const std::string ns = ex->request().Param("ns");
  auto admin = PolicyAdmin(c, ex, ns);
  if (!admin) return;
  auto spec = ParsePublisherBody(ex->request().body, ns);
  if (!spec) return ex->Respond(HubErrorResponse(400, "", spec.error().message));
  ex->Offload([&c, ex, by = admin->Actor(), spec = std::move(*spec)] {
    auto made = c.options.people_service->CreatePublisher(by, spec);
    if (!made) return ex->Respond(HubErrorResponse(made.error()));
    ex->Respond(JsonAnswer(PolicyAnswer(*made, spec.ns)));
  });
}

void RevokePolicy(const HubContext& c, const std::shared_ptr<Exchange>& ex) {
  const std::string ns = ex->request().Param("ns");
  auto admin = PolicyAdmin(c, ex, ns);
  if (!admin) return;
  ex->Offload([&c, ex, ns, by = admin->Actor(), id = ex->request().Param("id")] {
    if (auto theirs = c.options.people_service->FindPublisher(ns, id); !theirs) {
      if (theirs.error().code != ErrorCode::kNotFound) return ex->Respond(HubErrorResponse(theirs.error()));
      return ex->Respond(HubErrorResponse(404, "", "no trust policy " + Printable(id, 32) + " here"));
    }
    auto revoked = c.options.people_service->RevokePublisher(by, id);
    if (!revoked) return ex->Respond(HubErrorResponse(revoked.error()));
    ex->Respond(JsonAnswer(json::object{{"id", id}, {"revoked", *revoked}}));
  });
}

}  // namespace

void RegisterPublisherRoutes(const std::shared_ptr<const HubContext>& ctx) {
  auto& r = ctx->server.router();
  r.Handle(Verb::post, "/oauth/token", RouteOptions().Name("oauth_token").MaxBody(64 << 10),
           Bind(ctx, &ExchangeToken));
  r.Handle(Verb::get, "/api/publishers/{ns}", RouteOptions().Name("hub_publishers"),
           Bind(ctx, &ListPolicies));
  r.Handle(Verb::post, "/api/publishers/{ns}", RouteOptions().Name("hub_publisher_create").MaxBody(64 << 10),
           Bind(ctx, &CreatePolicy));
  r.Handle(Verb::delete_, "/api/publishers/{ns}/{id}", RouteOptions().Name("hub_publisher_revoke"),
           Bind(ctx, &RevokePolicy));
}

}  // namespace cairn::api::hub_routes
