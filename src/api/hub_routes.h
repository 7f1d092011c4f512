// The Hub API over HTTP (docs/hub.md): the routes huggingface_hub and the `hf` CLI call with HF_ENDPOINT
// pointing at cairn. Repositories, commits, refs, trees and file info under /api/, file downloads under
// /{repo}/resolve/{revision}/{path} (datasets and spaces prefixed), the xet token routes that hand hf_xet a
// CAS token scoped to one repository, and buckets under /api/buckets/ and /buckets/{bucket}/resolve/{path}.
//
// Errors answer {"error": message} with X-Error-Message and, where huggingface_hub tells errors apart by it,
// X-Error-Code (RepoNotFound, RevisionNotFound, EntryNotFound). `hub` and `files` must outlive the server.
// The xet token routes sign CAS tokens with the server's Authenticator (its current key).
// The routes live in one file per resource, beside what they share (hub_context.h).
#pragma once

#include <chrono>
#include <string>

#include "files/file_service.h"
#include "http/server.h"
#include "hub/bucket_service.h"
#include "hub/hub_service.h"
#include "mirror/mirror_service.h"
#include "people/device_flow.h"
#include "people/directory.h"
#include "publish/exchange.h"

namespace cairn::api {

struct HubRouteOptions {
  std::string public_url = "http://127.0.0.1:8080";  // base of every URL handed out (casUrl, commit URLs)
  std::chrono::seconds cas_token_ttl{3600};
  uint64_t max_commit_bytes = 160ULL << 20;  // a commit's NDJSON (inline files travel in it, base64)
  // Commits (and bucket batches) in flight at once, past which 503 with Retry-After: their bodies are
  // buffered, so this bounds the memory they hold (max_commit_bytes each).
  size_t max_concurrent_commits = 8;
  size_t max_ranges = 64;
  // GET /api/quotas/{ns} answers from it; null: that route answers 404. Outlives the server.
  quota::QuotaService* quota = nullptr;
  // The pull-through mirror: reads of repositories this server does not hold go to it; null: no mirror.
  // Outlives the server.
  mirror::MirrorService* mirror = nullptr;
  // People: whoami-v2 names a person's organizations from it; null: only scope tokens. Outlives the server.
  people::Directory* people = nullptr;
  // People's changes through the API (a user's own tokens); null: those routes answer 404. Outlives the
  // server.
  people::PeopleService* people_service = nullptr;
  // The audit log GET /api/audit reads (with people); null: that route answers 404. Outlives the server.
  index::AuditIndex* audit = nullptr;
  // Trusted publishers' token exchange (POST /oauth/token, with people and audit); null: that route answers
  // 404. Outlives the server.
  publish::Exchanger* exchanger = nullptr;
  // hf auth login's device flow (POST /oauth/device, its grants at /oauth/token); null: those answer 404.
  // The verification page is the web pages' (/device). Outlives the server.
  people::DeviceFlow* device = nullptr;
  // The user-content origin ("https://files.example.com"; empty: none): a browser sent to a file's download
  // route on cairn's origin is redirected there with a link (hub/download_link.h), and there only linked
  // downloads are served. The server's content_host is its host.
  std::string content_url = {};
};

void RegisterHubRoutes(http::Server& server, hub::HubService& hub, hub::BucketService& buckets,
                       files::FileService& files, const HubRouteOptions& options);

}  // namespace cairn::api
