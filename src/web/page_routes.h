// The web pages (docs/web.md): what a person sees at the URLs the clients print. Repositories at the Hub's
// URL shapes — /{ns}/{name} (the card), /tree/{rev}/{path}, /blob/{rev}/{path}, /commits/{rev},
// /commit/{id}, the same under /datasets/ and /spaces/ — namespaces at /{ns}, lists at /, /models,
// /datasets, /spaces; the stylesheet at /static/. Rendered on the server from assets/ (no script at all).
//
// Access is the API's: a page shows what the visitor may read (HubService::Open), and a private repository
// anyone else may not read is the same 404 page as one that does not exist. Registered after every API route:
// the router takes the first match, so /api/…, /v1/… and the git and download routes keep their paths.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "files/file_service.h"
#include "http/server.h"
#include "hub/bucket_service.h"
#include "hub/hub_service.h"
#include "index/index.h"
#include "oidc/single_sign_on.h"
#include "people/device_flow.h"
#include "people/sign_in.h"
#include "web/view.h"

namespace cairn::web {

// Who a request comes from, as the pages see it: the caller the Hub checks access for and the visitor the
// layout greets (anonymous, both empty, without a session), and the session's cookie.
struct Signed {
  hub::Caller caller;
  Visitor visitor;
  std::string cookie;  // the session's, when signed in
  int64_t user_id = 0;
};

struct PageOptions {
  std::string public_url =
      "http://127.0.0.1:8080";  // the clone URL's base and the origin forms must come from
  // The user-content origin (no trailing '/'; empty: none): files' downloads and a card's images link there,
  // signed (hub/download_link.h), instead of to the download route on public_url.
  std::string content_url = {};
  // Signing in (sessions, passwords); null: nobody signs in, every visitor is anonymous. Outlives the server.
  people::SignInService* sign_in = nullptr;
  // Devices' sign-ins (hf auth login: /device approves them); null: that page answers 404. Outlives the
  // server.
  people::DeviceFlow* device = nullptr;
  // People's own tokens (/settings/tokens) and organizations' members (it refreshes the node's directory
  // after a change); null: those pages answer 404. Outlives the server.
  people::PeopleService* people = nullptr;
  // Company sign-in (OpenID Connect: /login/oidc and its callback); null: only passwords. Outlives the
  // server.
  oidc::SingleSignOn* sso = nullptr;
  // The operator's page (/admin, operators only): the index's totals, quotas and audit log; the node's
  // dependencies, each checked when the page is shown; and the mirror's counters (empty: no mirror). Null
  // index: no such page. Outlive the server.
  index::Index* index = nullptr;
  std::vector<std::pair<std::string, std::function<Status()>>> health;
  std::function<std::vector<std::pair<std::string, uint64_t>>()> mirror_counters;
  // Buckets' pages (/buckets/{ns}/{name}); null: none. Outlives the server.
  hub::BucketService* buckets = nullptr;
  // The pull-through mirror's reads, as the API reads through it (unset: no mirror): a repository a page
  // names that this server does not hold is fetched from upstream, and a mirrored repository's revisions
  // are upstream's names.
  std::function<Result<hub::Repo>(const hub::Caller&, const hub::RepoId&)> mirror_open = {};
  std::function<Result<hub::ObjectId>(const hub::Repo&, std::string_view)> mirror_resolve = {};
};

// `hub` and `files` outlive the server.
void RegisterPageRoutes(http::Server& server, hub::HubService& hub, files::FileService& files,
                        PageOptions options);

}  // namespace cairn::web
