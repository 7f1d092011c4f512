// The routes git-lfs's upload links point at (docs/git.md, lfs/lfs_service.h). The links are the credentials
// (neither git-lfs nor huggingface_hub sends a token with them), so the routes take no Authorization:
//   PUT  /v1/lfs/{oid}?<link>               the whole object (basic transfer), streamed into the ingest
//   PUT  /v1/lfs/{oid}/parts/{n}?<link>     one part (multipart), answered with its ETag once synced
//   POST /v1/lfs/{oid}?<link>               {"oid", "parts": [{"partNumber", "etag"}]}: the parts ingested
//   POST /v1/lfs/{oid}/verify?<link>        {"oid", "size"}: 200 when the object is stored, else 404
// Errors are git-lfs's {"message"} with the status the failure maps to (errors.h). `lfs` and `quota` (when
// given) must outlive the server.
#pragma once

#include <memory>

#include "http/server.h"
#include "lfs/lfs_service.h"
#include "quota/quota_service.h"

namespace cairn::api {

struct LfsRouteOptions {
  quota::QuotaService* quota = nullptr;  // set: nothing is received for a namespace whose quota is used up
  // Set: uploads (whole objects and parts) enter it, past its limit answered 503 with Retry-After before
  // their bodies are read: the gate the xorb uploads use (cas_routes.h), since an upload being chunked holds
  // a xorb's worth of memory as one of theirs does. Null: no limit (tests).
  std::shared_ptr<http::AdmissionGate> uploads = nullptr;
};

void RegisterLfsRoutes(http::Server& server, lfs::LfsService& lfs, const LfsRouteOptions& options);

}  // namespace cairn::api
