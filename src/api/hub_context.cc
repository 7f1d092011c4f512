#include "api/hub_context.h"

#include <algorithm>
#include <ctime>

#include "http/auth.h"

namespace cairn::api::hub_routes {

http::Response JsonAnswer(const json::value& v, unsigned status) {
  return http::Response::Json(status, json::serialize(v));
}

std::string IsoDateMs(int64_t unix_ms) {
  const int64_t ms = ((unix_ms % 1000) + 1000) % 1000;
  const auto t = static_cast<std::time_t>((unix_ms - ms) / 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  if (std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm) == 0) return "1970-01-01T00:00:00.000Z";
  const std::string millis = std::to_string(1000 + ms);  // "1mmm": three digits after the 1
  return std::string(buf) + "." + millis.substr(1) + "Z";
}

std::string IsoDate(int64_t unix_seconds) {
  return IsoDateMs(unix_seconds * 1000);
}

http::Result<hub::Caller> CallerOf(const http::Server& server, const http::Request& req) {
  const std::string_view header = req.Header("Authorization");
  if (header.empty()) return hub::Caller{};
  const http::Authenticator* auth = server.authenticator();
  if (auth == nullptr) return cairn::Unauthorized("this server checks no tokens");
  auto who = auth->Authenticate(header, http::Permission::kRead, http::kAccessTokens);
  if (!who) return cairn::Unauthorized("Invalid credentials in Authorization header");
  hub::Caller caller = CallerFrom(*who);
  caller.client = req.remote;  // the client as the server sees it (a trusted proxy's X-Forwarded-For)
  return caller;
}

std::optional<hub::Caller> PeopleCaller(const HubContext& c, const std::shared_ptr<http::Exchange>& ex) {
  if (c.options.people == nullptr || c.options.people_service == nullptr) {
    ex->Respond(HubErrorResponse(404, "", "this server keeps no people"));
    return std::nullopt;
  }
  auto caller = CallerOf(c.server, ex->request());
  if (!caller || caller->anonymous()) {
    ex->Respond(HubErrorResponse(401, "", "Invalid credentials in Authorization header"));
    return std::nullopt;
  }
  return std::move(*caller);
}

std::string_view BearerToken(const http::Request& req) {
  std::string_view header = req.Header("Authorization");
  const size_t space = header.find(' ');
  if (space == std::string_view::npos) return {};
  header.remove_prefix(space + 1);
  while (!header.empty() && header.front() == ' ') header.remove_prefix(1);
  while (!header.empty() && header.back() == ' ') header.remove_suffix(1);
  return header;
}

std::optional<RepoRequest> RepoOf(const http::Server& server, const std::shared_ptr<http::Exchange>& ex) {
  const auto& req = ex->request();
  auto caller = CallerOf(server, req);
  if (!caller) {
    ex->Respond(HubErrorResponse(401, "", caller.error().message));
    return std::nullopt;
  }
  std::optional<hub::RepoType> type = hub::RepoType::kModel;
  if (const std::string& t = req.Param("types"); !t.empty()) type = hub::TypeFromPlural(t);
  if (!type || *type == hub::RepoType::kBucket) {
    ex->Respond(HubErrorResponse(404, "", "no such route"));
    return std::nullopt;
  }
  // A name no repository can have (not even valid UTF-8, say) is simply not found.
  if (!hub::ValidName(req.Param("ns")) || !hub::ValidName(req.Param("name"))) {
    ex->Respond(HubErrorResponse(404, "RepoNotFound", "Repository not found"));
    return std::nullopt;
  }
  return RepoRequest{std::move(*caller), hub::RepoId{*type, req.Param("ns"), req.Param("name")}};
}

bool QueryTrue(const http::Request& req, std::string_view key) {
  auto v = req.Query(key);
  return v && (*v == "1" || *v == "true" || *v == "True");
}

http::Response Done(const Status& st) {
  return st ? JsonAnswer(json::object{}) : HubErrorResponse(st.error());
}

http::Response CreatedAnswer(const Result<hub::Repo>& made, json::object out) {
  if (!made) {
    if (made.error().code != ErrorCode::kConflict) return HubErrorResponse(made.error());
    return HubErrorResponse(made.error(), std::move(out));  // the 409 names the repository that exists
  }
  return JsonAnswer(out);
}

std::function<std::string(const http::Request&)> CommitTenant(bool bucket) {
  return [bucket](const http::Request& req) -> std::string {
    if (!req.principal) return "~none";
    const hub::Caller caller = CallerFrom(*req.principal);
    std::optional<hub::RepoType> type = hub::RepoType::kModel;
    if (bucket) {
      type = hub::RepoType::kBucket;
    } else if (const std::string& t = req.Param("types"); !t.empty()) {
      type = hub::TypeFromPlural(t);
    }
    std::string ns = req.Param("ns");
    if (bucket && ns == "me") ns = hub::NamespaceOf(caller.scope);
    if (!type ||
        hub::AccessTo(caller, hub::ProspectiveRecord({*type, ns, req.Param("name")})) < Access::kWrite)
      return "~others";
    return "ns:" + ns;
  };
}

Result<hub::ObjectId> HubContext::ResolveIn(const hub::Repo& repo, std::string_view revision) const {
  if (options.mirror != nullptr && hub::IsMirrored(repo.record))
    return options.mirror->Resolve(repo, revision);
  return hub.Resolve(repo, revision);
}

void HubContext::MintCasToken(const std::shared_ptr<http::Exchange>& ex, const hub::Caller& caller,
                              const hub::Repo& repo, bool write) const {
  if (write) {
    if (auto st = hub.CheckRoom(repo); !st) return ex->Respond(HubErrorResponse(st.error()));
  }
  // A CAS token for one of this repository's scopes alone. A write token's scope sees every upload made with
  // it (files uploaded with it are visible to this repository only); a read token's scope sees only what the
  // repository committed, and is replaced when the repository goes private.
  // Of the CAS kind: accepted by the CAS routes alone, never as the caller of the Hub API, git or the mirror
  // (an anonymous caller gets read tokens of public repositories).
  const http::Principal who{write ? repo.record.scope : repo.record.read_scope,
                            write ? http::Permission::kWrite : http::Permission::kRead,
                            http::TokenKind::kCas};
  const http::Authenticator* auth = server.authenticator();
  if (auth == nullptr) return ex->Respond(HubErrorResponse(500, "", "this server signs no tokens"));
  const int64_t now = auth->now();
  // No longer than the caller's own token lives: a credential mints nothing that outlives it.
  std::chrono::seconds ttl = options.cas_token_ttl;
  if (caller.expires > 0)
    ttl = std::min(ttl, std::chrono::seconds(std::max<int64_t>(caller.expires - now, 1)));
  auto token = auth->Mint(who, ttl, now);  // with the current key, as it verifies
  if (!token) return ex->Respond(HubErrorResponse(500, "", token.error().message));
  const int64_t exp = now + ttl.count();
  http::Response r =
      JsonAnswer(json::object{{"accessToken", *token}, {"exp", exp}, {"casUrl", options.public_url}});
  r.Header("X-Xet-Cas-Url", options.public_url)
      .Header("X-Xet-Access-Token", *token)
      .Header("X-Xet-Token-Expiration", std::to_string(exp));
  ex->Respond(std::move(r));
}

http::Response OAuthError(unsigned status, std::string_view error, std::string_view description) {
  http::Response r = JsonAnswer(json::object{{"error", error}, {"error_description", description}}, status);
  r.Header("Cache-Control", "no-store");
  return r;
}

http::Response OAuthError(const Error& e) {
  if (e.code == ErrorCode::kUnavailable) return OAuthError(503, "temporarily_unavailable", e.message);
  if (e.reason.empty()) return OAuthError(HttpStatusOf(e.code), "server_error", e.message);
  return OAuthError(400, e.reason, e.message);
}

}  // namespace cairn::api::hub_routes
