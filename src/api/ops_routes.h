// Operations routes and metrics beside the CAS API. /healthz (liveness: the process answers) is the HTTP
// server's own; /readyz here answers 200 only when every dependency answers (the index, later the store), and
// 503 naming the first that does not, so that a load balancer takes a node out of rotation while its
// database is unreachable and back when it returns. Neither needs a token.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "http/server.h"
#include "index/index.h"
#include "mirror/mirror_service.h"

namespace cairn::api {

struct ReadinessCheck {
  std::string name;               // "index"
  std::function<Status()> check;  // blocking; runs on a worker thread
};

void RegisterReadiness(http::Server& server, std::vector<ReadinessCheck> checks);

// The index's totals and write batching as /metrics gauges. `index` must outlive the server.
void RegisterIndexMetrics(http::Server& server, index::Index& index);
// Per namespace with a quota: its limit and what it is charged (src/quota/), as recorded in the index.
void RegisterQuotaMetrics(http::Server& server, index::QuotaIndex& quotas);
// The mirror's counters (mirror_service.h): repositories and files fetched, hits, bytes from upstream and
// what dedup saved of them, upstream failures; this node's since it started.
void RegisterMirrorMetrics(http::Server& server, const mirror::MirrorService& mirror);

}  // namespace cairn::api
