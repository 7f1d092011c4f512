#include "api/ops_routes.h"

#include <memory>
#include <optional>
#include <string>

#include "http/handler.h"

namespace cairn::api {

void RegisterReadiness(http::Server& server, std::vector<ReadinessCheck> checks) {
  auto shared = std::make_shared<const std::vector<ReadinessCheck>>(std::move(checks));
  server.router().Handle(
      http::Verb::get, "/readyz", http::RouteOptions().Name("readyz"),
      [shared](const std::shared_ptr<http::Exchange>& ex) {
        ex->Offload([shared, ex] {
          for (const auto& c : *shared) {
            if (auto st = c.check(); !st.ok()) {
              return ex->Respond(http::Response::ErrorJson(503, c.name + ": " + st.error().message));
            }
          }
          ex->Respond(http::Response::Json(200, R"({"status":"ready"})"));
        });
      });
}

void RegisterIndexMetrics(http::Server& server, index::Index& index) {
  auto* ix = &index;
  const auto stat = [ix](uint64_t index::IndexStats::*field) {
    return [ix, field] {
      auto s = ix->Stats();
      return s ? static_cast<double>((*s).*field) : 0.0;
    };
  };
  auto& m = server.metrics();
  m.Gauge("cairn_stored_xorbs", "Xorbs stored", stat(&index::IndexStats::xorbs));
  m.Gauge("cairn_stored_files", "Files registered", stat(&index::IndexStats::files));
  m.Gauge("cairn_stored_chunks", "Chunks in stored xorbs", stat(&index::IndexStats::chunks));
  m.Gauge("cairn_stored_bytes", "Bytes of stored xorbs and shards", stat(&index::IndexStats::stored_bytes));
  m.Gauge("cairn_stored_shards", "Shards registered", stat(&index::IndexStats::shards));
  m.Gauge("cairn_stored_unpacked_bytes", "Unpacked bytes of stored xorbs",
          stat(&index::IndexStats::unpacked_bytes));
  m.Gauge("cairn_file_bytes", "Bytes of registered files (each distinct file once)",
          stat(&index::IndexStats::file_bytes));
  m.Gauge("cairn_dedup_ratio", "Bytes of registered files per unpacked byte stored", [ix] {
    auto s = ix->Stats();
    return s ? s->dedup_ratio() : 0.0;
  });
  m.Gauge("cairn_index_write_requests", "Index writes completed by this process",
          [ix] { return static_cast<double>(ix->write_stats().requests); });
  m.Gauge("cairn_index_write_transactions", "Durable index transactions that carried them",
          [ix] { return static_cast<double>(ix->write_stats().transactions); });
  m.Gauge("cairn_index_writes_queued", "Index writes waiting for the writer",
          [ix] { return static_cast<double>(ix->write_stats().queued); });
}

void RegisterQuotaMetrics(http::Server& server, index::QuotaIndex& quotas) {
  auto* q = &quotas;
  const auto series = [q](bool limits) {
    return [q, limits] {
      http::MetricsRegistry::GaugeSeries out;
      std::optional<std::string> after;
      for (;;) {
        auto page = q->ListQuotas(after, index::QuotaIndex::kMaxListedQuotas);
        if (!page) break;
        for (const auto& r : *page) {
          if (limits && !r.limit) continue;
          out.push_back({{r.ns}, static_cast<double>(limits ? *r.limit : r.charged())});
        }
        if (page->size() < index::QuotaIndex::kMaxListedQuotas) break;
        after = page->back().ns;
      }
      return out;
    };
  };
  auto& m = server.metrics();
  m.GaugeFamily("cairn_quota_limit_bytes", "Storage quota of the namespace", {"namespace"}, series(true));
  m.GaugeFamily("cairn_quota_used_bytes",
                "Bytes the namespace is charged (as last measured, plus what commits added since)",
                {"namespace"}, series(false));
}

void RegisterMirrorMetrics(http::Server& server, const mirror::MirrorService& mirror) {
  const auto* m = &mirror;
  const auto counter = [m](uint64_t mirror::MirrorCounters::*field) {
    return [m, field] { return static_cast<double>(m->counters().*field); };
  };
  auto& r = server.metrics();
  r.Gauge("cairn_mirror_repos_fetched", "Repositories copied from upstream for the first time (this node)",
          counter(&mirror::MirrorCounters::repos_fetched));
  r.Gauge("cairn_mirror_syncs", "Ref listings asked of upstream", counter(&mirror::MirrorCounters::syncs));
  r.Gauge("cairn_mirror_file_misses", "Large files fetched from upstream",
          counter(&mirror::MirrorCounters::files_fetched));
  r.Gauge("cairn_mirror_file_hits", "Large files downloaded that were held already",
          counter(&mirror::MirrorCounters::file_hits));
  r.Gauge("cairn_mirror_upstream_bytes", "Bytes of large files received from upstream",
          counter(&mirror::MirrorCounters::upstream_bytes));
  r.Gauge("cairn_mirror_stored_bytes", "Of those, chunk bytes stored (the rest were deduplicated)",
          counter(&mirror::MirrorCounters::new_bytes));
  r.Gauge("cairn_mirror_saved_bytes", "Bytes received from upstream that dedup did not store again", [m] {
    const auto c = m->counters();
    return static_cast<double>(c.upstream_bytes > c.new_bytes ? c.upstream_bytes - c.new_bytes : 0);
  });
  r.Gauge("cairn_mirror_spooled_bytes",
          "Bytes written again, decoded, for plain downloads of files coming through resolve (a file relayed "
          "through Xet is read from its relay)",
          counter(&mirror::MirrorCounters::spooled_bytes));
  r.Gauge("cairn_mirror_stored_in_place_bytes",
          "Bytes of whole xorbs relayed straight into the store and stored as they arrived (written once)",
          counter(&mirror::MirrorCounters::stored_in_place_bytes));
  r.Gauge("cairn_mirror_upstream_failures", "Requests upstream could not answer",
          counter(&mirror::MirrorCounters::upstream_failures));
  r.Gauge("cairn_mirror_peer_fetches",
          "Large files another node sharing the index fetched while this one waited",
          counter(&mirror::MirrorCounters::peer_fetches));
  r.Gauge("cairn_mirror_peer_relays",
          "Of those, files relayed from the node fetching them as they arrived there (mirror_node_url)",
          counter(&mirror::MirrorCounters::peer_relays));
  r.Gauge("cairn_mirror_relayed_answers",
          "Xet reconstructions answered with upstream's terms while the file was still coming (its ranges "
          "relayed)",
          counter(&mirror::MirrorCounters::relayed_answers));
  r.Gauge("cairn_mirror_evicted_repos", "Mirrored repositories evicted for the size limit (mirror_max_bytes)",
          counter(&mirror::MirrorCounters::evicted_repos));
  r.Gauge("cairn_mirror_held_bytes",
          "Bytes of large files mirrored repositories held at the last check of the size limit",
          counter(&mirror::MirrorCounters::held_bytes));
}

}  // namespace cairn::api
