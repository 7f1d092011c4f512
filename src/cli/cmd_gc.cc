// `cairn gc`: one run of the garbage collector (gc/collector.h) on the configured index and store, safe
// while servers run on them.
#include <sys/resource.h>

#include <iostream>
#include <string>

#include "cli/backend.h"
#include "cli/commands.h"
#include "config/config.h"
#include "gc/collector.h"
#include "gc/scheduler.h"

namespace cairn::cli {

int RunGc(const GcCommandOptions& opts) {
  auto cfg = LoadBackendConfig(opts.config_file, opts.data_dir, opts.index, opts.store);
  if (!cfg) {
    std::cerr << "cairn gc: " << cfg.error().message << "\n";
    return 2;
  }
  gc::GcOptions go;
  go.dry_run = opts.dry_run;
  go.vacuum = opts.vacuum;
  go.mark_share_percent = static_cast<unsigned>(cfg->gc_mark_share);
  const uint64_t minimum = gc::MinimumGraceSeconds(static_cast<uint64_t>(cfg->dedup_key_expiry.count()),
                                                   static_cast<uint64_t>(cfg->transfer_url_ttl.count()));
  go.grace_seconds = std::max(gc::kDefaultGraceSeconds, minimum);
  if (!opts.grace.empty()) {
    auto grace = config::ParseDuration(opts.grace, /*allow_zero=*/true);  // 0 needs --force (CheckGrace)
    if (!grace) {
      std::cerr << "cairn gc: --grace: " << grace.error().message << "\n";
      return 2;
    }
    go.grace_seconds = static_cast<uint64_t>(grace->count());
  }
  if (auto ok =
          gc::CheckGrace("--grace", go.grace_seconds, static_cast<uint64_t>(cfg->dedup_key_expiry.count()),
                         static_cast<uint64_t>(cfg->transfer_url_ttl.count()));
      !ok && !opts.force) {
    std::cerr << "cairn gc: " << ok.error().message << ". Add --force to run it anyway.\n";
    return 2;
  }
  auto backend = OpenConfiguredBackend(*cfg);
  if (!backend) {
    std::cerr << "cairn gc: " << backend.error().message << "\n";
    return 2;
  }
  auto& index = backend->index;
  auto& store = backend->store;
  // Beside servers on the same machine, the collector yields the CPU to them (a mark reads every file's
  // terms).
  (void)::setpriority(PRIO_PROCESS, 0, gc::Scheduler::kNice);
  quota::QuotaService quotas(*index, Clock::System());
  go.quota = &quotas;
  go.audit = index.get();
  go.actor = CommandActor();
  gc::Collector collector(*index, *index, *index, *store, go);
  auto report = collector.Run();
  if (report && go.grace_seconds == 0 && !go.dry_run) {
    // A run quarantines what it finds unreferenced and sweeps only what an earlier run had: with no grace a
    // second pass sweeps at once what the first found (a purged secret freed by one command).
    report = collector.Run();
  }
  if (!report) {
    std::cerr << "cairn gc: " << report.error().message << "\n";
    return 2;
  }
  const auto& r = *report;
  if (opts.json) {
    std::cout << r.ToJson() << "\n";
    return 0;
  }
  std::cout << (r.dry_run ? "dry run (nothing changed): " : "") << r.files << " files (" << r.live_files
            << " live), " << r.xorbs << " xorbs; " << r.newly_quarantined << " newly unreferenced, "
            << r.released << " wanted again\n"
            << "quarantined: " << r.quarantined_files << " files, " << r.quarantined_xorbs << " xorbs, "
            << r.quarantined_bytes << " bytes\n"
            << "past the grace of " << gc::Days(go.grace_seconds) << ": " << r.reclaimable_xorbs << " xorbs, "
            << r.reclaimable_bytes << " bytes" << (r.dry_run ? " would be freed" : "") << "\n"
            << "repositories: " << r.repos << " walked"
            << (r.unwalkable_repos > 0
                    ? " (" + std::to_string(r.unwalkable_repos) +
                          " with history missing or unreadable: not collected; see cairn fsck)"
                    : std::string())
            << ", " << r.reached_files << " files reached; " << r.quarantined_repo_objects << " of "
            << r.repo_objects << " history objects unreachable, " << r.reclaimable_repo_bytes
            << " bytes past the grace\n";
  if (!r.dry_run) {
    std::cout << "swept: " << r.swept_files << " files, " << r.swept_xorbs + r.resumed_xorbs << " xorbs; "
              << r.reclaimed_bytes << " bytes freed in " << r.seconds << " s; " << r.swept_repo_objects
              << " history objects (" << r.reclaimed_repo_bytes << " bytes) deleted from the index\n";
    if (!r.scrub.empty()) std::cout << "index database: " << r.scrub << "\n";
  }
  return 0;
}

}  // namespace cairn::cli
