// The Xet CAS HTTP API: maps routes to the CAS service and service results to HTTP statuses
// (xet-protocol.md §5). Everything the stock clients call; anything else answers 404 (hf_xet probes newer
// routes and falls back on 404).
#pragma once

#include <functional>
#include <memory>

#include "cas/relay.h"
#include "cas/service.h"
#include "http/server.h"
#include "quota/quota_service.h"

namespace cairn::api {

struct CasRouteOptions {
  // Xorb and shard uploads in flight at once (their bodies are held in memory); more answer 503.
  size_t max_concurrent_uploads = 64;
  // Set: the gate uploads enter instead of one of max_concurrent_uploads of their own, shared with the other
  // routes that receive large files (git-lfs's, lfs_routes.h), so that the limit bounds them all together.
  std::shared_ptr<http::AdmissionGate> uploads = nullptr;
  // Xorbs for a namespace whose storage quota is used up are refused (403); null: no quotas. Outlives the
  // server.
  quota::QuotaService* quota = nullptr;
  // A file not found is asked of this before the 404: the mirror's fetch of it, in flight on this node,
  // is waited for (true once it is stored). Null: none.
  std::function<bool(const xet::FileHash&)> await_file = nullptr;
  // A file not found is asked of this first: a copy in transit answers with its source's terms, and their
  // xorb ranges (which the store does not hold) are sent on as they arrive. Null: none. Outlives the server.
  cas::Relay* relay = nullptr;
};

void RegisterCasRoutes(http::Server& server, cas::CasService& service, const CasRouteOptions& options = {});

}  // namespace cairn::api
