// `cairn compact`: one compaction run (compact/compactor.h) on the configured index and store, safe while
// servers run on them. What it replaces is freed by the collector, past its grace.
#include <sys/resource.h>

#include <iostream>
#include <string>

#include "cas/service.h"
#include "cli/backend.h"
#include "cli/commands.h"
#include "common/worker_pool.h"
#include "compact/compactor.h"
#include "config/config.h"
#include "gc/scheduler.h"

namespace cairn::cli {

int RunCompact(const CompactCommandOptions& opts) {
  if (!(opts.threshold > 0 && opts.threshold <= 1)) {
    std::cerr << "cairn compact: --threshold is a share of a xorb's bytes, above 0 and at most 1 (0.5: "
                 "rewrite xorbs less than half live)\n";
    return 2;
  }
  auto cfg = LoadBackendConfig(opts.config_file, opts.data_dir, opts.index, opts.store);
  if (!cfg) {
    std::cerr << "cairn compact: " << cfg.error().message << "\n";
    return 2;
  }
  auto backend = OpenConfiguredBackend(*cfg);
  if (!backend) {
    std::cerr << "cairn compact: " << backend.error().message << "\n";
    return 2;
  }
  auto& index = backend->index;
  auto& store = backend->store;
  // Beside servers on the same machine, it yields the CPU to them, as the collector does.
  (void)::setpriority(PRIO_PROCESS, 0, gc::Scheduler::kNice);
  WorkerPool workers(1);
  cas::CasService cas(*index, *store, workers, {});  // validates and registers; signs nothing
  compact::CompactOptions co;
  co.threshold = opts.threshold;
  co.dry_run = opts.dry_run;
  co.max_new_xorbs = opts.max_new_xorbs;
  compact::Compactor compactor(*index, *index, cas, co);
  auto report = compactor.Run();
  if (!report) {
    std::cerr << "cairn compact: " << report.error().message << "\n";
    return 1;
  }
  const auto& r = *report;
  if (!r.dry_run) {
    RecordCommand(*index, "compact.run", "", "",
                  std::to_string(r.compacted_xorbs) + " xorbs (" + std::to_string(r.replaced_bytes) +
                      " bytes) replaced by " + std::to_string(r.new_xorbs) + " (" +
                      std::to_string(r.written_bytes) + " bytes), " + std::to_string(r.files_moved) +
                      " files moved");
  }
  if (opts.json) {
    std::cout << r.ToJson() << "\n";
    return 0;
  }
  std::cout << (r.dry_run ? "dry run (nothing changed): " : "") << r.files << " files use " << r.xorbs
            << " xorbs; " << r.candidates << " below " << opts.threshold * 100 << " % live ("
            << r.candidate_bytes << " bytes)\n"
            << (r.dry_run ? "would replace " : "replaced ") << r.compacted_xorbs << " xorbs ("
            << r.replaced_bytes << " bytes) with " << r.new_xorbs << " (" << r.written_bytes << " bytes), "
            << r.files_moved << " files moved";
  if (!r.dry_run) std::cout << ", " << r.shards << " shards written, in " << r.seconds << " s";
  std::cout << "\n"
            << r.freed_bytes() << " bytes " << (r.dry_run ? "would be" : "are") << " freed once `cairn gc` "
            << "sweeps the replaced xorbs, past its grace\n";
  if (r.conflicts > 0) {
    std::cout << r.conflicts << " steps given up: files changed meanwhile (the next run retries them)\n";
  }
  return 0;
}

}  // namespace cairn::cli
