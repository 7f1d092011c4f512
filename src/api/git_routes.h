// git over smart HTTP on the Hub's repository URLs (docs/git.md): /{ns}/{name}[.git]/info/refs and
// /git-upload-pack, with /datasets/ and /spaces/ before them, so that `git clone http://cairn/alice/model`
// works on the repositories the Hub API writes; and git-lfs's batch API (/{ns}/{name}.git/info/lfs/objects/
// batch) for the large files' bytes: downloads answered with signed links to /v1/files (file_routes.h).
//
// Authentication as the Hub does it: HTTP Basic with any user name and a token as the password (or a Bearer
// token); anonymous reads of public repositories. git sends credentials only after a 401, so an anonymous
// request for a repository it may not see — private or missing, told apart by nothing — answers 401 with
// WWW-Authenticate: Basic. A push is answered from its header when its credentials are missing, invalid or
// read-only, or when max_concurrent_pushes are in flight: no body is read for a push that will be refused.
// `hub`, `files` and `index` must outlive the server.
#pragma once

#include <cstdint>
#include <string>

#include "files/file_service.h"
#include "git/receive_pack.h"
#include "git/upload_pack.h"
#include "http/server.h"
#include "hub/hub_service.h"
#include "lfs/lfs_service.h"
#include "mirror/mirror_service.h"

namespace cairn::api {

struct GitRouteOptions {
  std::string public_url = "http://127.0.0.1:8080";  // base of the download links git-lfs is sent to
  uint64_t lfs_link_ttl_seconds = 3600;              // at most; never past the asking token's expiry
  uint64_t max_request_bytes = 16 << 20;             // a POST's body as sent (wants and haves; gzip or not)
  // Fetch requests (their bodies held in memory) at once, shared fairly between client addresses: anonymous
  // readers of public repositories cannot make the server hold 16 MiB for each of their connections.
  size_t max_concurrent_fetches = 32;
  uint64_t max_inflated_bytes = 64 << 20;  // and once inflated
  size_t max_pending_bytes = 16 << 20;     // pack bytes queued for a slow client before the writer waits
  git::UploadPackLimits limits;
  // A push's body (commands and pack), spooled to an unnamed file in `spool_dir` as it arrives (never held
  // in memory), by at most `max_concurrent_pushes` pushes at once (more answer 503 with Retry-After).
  uint64_t max_push_bytes = 512ULL << 20;
  std::string spool_dir;  // empty: the system's temporary directory
  size_t max_concurrent_pushes = 8;
  git::PackLimits pack_limits;
  // Set: git-lfs uploads are answered with its upload links (lfs_routes.h); else refused (501).
  lfs::LfsService* lfs = nullptr;
  // Set: reads of repositories this server does not hold go to the pull-through mirror (mirror_service.h).
  mirror::MirrorService* mirror = nullptr;
};

void RegisterGitRoutes(http::Server& server, hub::HubService& hub, files::FileService& files,
                       index::RepoIndex& index, const GitRouteOptions& options);

}  // namespace cairn::api
