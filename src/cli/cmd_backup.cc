// `cairn backup` and `cairn restore` (backup/backup.h) with the settings of `cairn serve`.
#include <boost/json.hpp>
#include <iostream>
#include <string>

#include "backup/backup.h"
#include "cli/backend.h"
#include "cli/commands.h"
#include "config/config.h"
#include "index/pg.h"

namespace cairn::cli {
namespace {

void Progress(std::string_view what, uint64_t done, uint64_t total) {
  if (total == 0) {
    if (done % 4096 == 0) std::cerr << "  " << what << ": " << done << " rows\r" << std::flush;
  } else if (done % 64 == 0 || done == total) {
    std::cerr << "  " << what << "s: " << done << " / " << total << "\r" << std::flush;
  }
}

void PrintCounts(std::string_view what, const backup::ObjectCounts& c) {
  std::cout << what << ": " << c.named << " (" << c.copied << " copied now, " << c.already
            << " held already)\n";
}

boost::json::object Counts(const backup::ObjectCounts& c) {
  return {{"named", c.named}, {"copied", c.copied}, {"already", c.already}, {"bytes_copied", c.bytes_copied}};
}

}  // namespace

int RunBackup(const BackupCommandOptions& opts) {
  if (opts.verify) {
    auto report = backup::VerifyBackup(opts.dest, opts.threads);
    if (!report) {
      std::cerr << "cairn backup --verify: " << report.error().message << "\n";
      return 2;
    }
    if (opts.json) {
      boost::json::array snapshots(report->snapshots.begin(), report->snapshots.end());
      boost::json::array failed(report->failed.begin(), report->failed.end());
      std::cout << boost::json::serialize(boost::json::object{{"snapshots", snapshots},
                                                              {"objects", report->objects},
                                                              {"bytes", report->bytes},
                                                              {"failed", failed}})
                << "\n";
      return report->ok() ? 0 : 1;
    }
    std::cout << report->snapshots.size() << " snapshots, " << report->objects << " objects, "
              << report->bytes << " bytes re-hashed\n";
    for (const auto& f : report->failed) std::cout << "  FAILED " << f << "\n";
    if (!report->ok()) {
      std::cerr << "cairn backup --verify: " << report->failed.size() << " damaged (listed above)\n";
      return 1;
    }
    std::cout << "verified: every snapshot and object of " << opts.dest << " is whole\n";
    return 0;
  }
  auto cfg = LoadBackendConfig(opts.config_file, opts.data_dir, opts.index, opts.store);
  if (!cfg) {
    std::cerr << "cairn backup: " << cfg.error().message << "\n";
    return 2;
  }
  auto store = OpenConfiguredStore(*cfg);
  if (!store) {
    std::cerr << "cairn backup: " << store.error().message << "\n";
    return 2;
  }
  backup::BackupOptions bo;
  bo.threads = opts.threads;
  bo.keep = opts.keep;
  bo.progress = Progress;
  std::cerr << "backing up " << index::pg::RedactedUri(cfg->index) << " and " << (*store)->Describe()
            << " -> " << opts.dest << "\n";
  auto report = backup::TakeBackup(cfg->index, **store, opts.dest, bo);
  std::cerr << "\n";
  if (!report) {
    std::cerr << "cairn backup: " << report.error().message << "\n";
    return 1;
  }
  const auto& r = *report;
  if (opts.json) {
    std::cout << boost::json::serialize(boost::json::object{{"snapshot", r.manifest.name},
                                                            {"taken_at", r.manifest.taken_at},
                                                            {"index_bytes", r.manifest.index_bytes},
                                                            {"waited_seconds", r.waited_seconds},
                                                            {"seconds", r.seconds},
                                                            {"xorbs", Counts(r.xorbs)},
                                                            {"shards", Counts(r.shards)},
                                                            {"grants", Counts(r.grants)},
                                                            {"dropped_snapshots", r.dropped_snapshots},
                                                            {"pruned_objects", r.pruned_objects}})
              << "\n";
    return 0;
  }
  std::cout << "snapshot " << r.manifest.name << ": the index at " << r.manifest.taken_at << " ("
            << r.manifest.index_bytes << " bytes)";
  if (r.waited_seconds >= 1) std::cout << ", after waiting " << r.waited_seconds << " s for a collector";
  std::cout << "\n";
  PrintCounts("xorbs", r.xorbs);
  PrintCounts("shards", r.shards);
  PrintCounts("grants", r.grants);
  std::cout << "dropped " << r.dropped_snapshots << " old snapshots and " << r.pruned_objects
            << " objects no kept snapshot names; took " << r.seconds << " s\n";
  return 0;
}

int RunRestore(const RestoreCommandOptions& opts) {
  auto cfg = LoadBackendConfig(opts.config_file, opts.data_dir, opts.index, opts.store);
  if (!cfg) {
    std::cerr << "cairn restore: " << cfg.error().message << "\n";
    return 2;
  }
  {  // Creates the data directory (SQLite) and the schema.
    auto index = OpenConfiguredIndex(*cfg);
    if (!index) {
      std::cerr << "cairn restore: " << index.error().message << "\n";
      return 2;
    }
  }
  auto store = OpenConfiguredStore(*cfg);
  if (!store) {
    std::cerr << "cairn restore: " << store.error().message << "\n";
    return 2;
  }
  backup::RestoreOptions ro;
  ro.snapshot = opts.snapshot;
  ro.resume = opts.resume;
  ro.threads = opts.threads;
  ro.progress = Progress;
  std::cerr << "restoring " << opts.src << " -> " << index::pg::RedactedUri(cfg->index) << " and "
            << (*store)->Describe() << "\n";
  auto report = backup::Restore(opts.src, cfg->index, **store, ro);
  std::cerr << "\n";
  if (!report) {
    std::cerr << "cairn restore: " << report.error().message << "\n";
    return report.error().code == xet::ErrorCode::kConflict ? 2 : 1;
  }
  const auto& r = *report;
  uint64_t rows = 0;
  for (const auto& t : r.index.tables) rows += t.rows;
  if (opts.json) {
    std::cout << boost::json::serialize(boost::json::object{{"snapshot", r.manifest.name},
                                                            {"taken_at", r.manifest.taken_at},
                                                            {"xorbs", Counts(r.xorbs)},
                                                            {"shards", Counts(r.shards)},
                                                            {"grants", Counts(r.grants)},
                                                            {"revocations", r.revocations},
                                                            {"rows", rows},
                                                            {"seconds", r.seconds}})
              << "\n";
    return 0;
  }
  std::cout << "restored snapshot " << r.manifest.name << " (taken at " << r.manifest.taken_at << ")\n";
  PrintCounts("xorbs", r.xorbs);
  PrintCounts("shards", r.shards);
  PrintCounts("grants", r.grants);
  std::cout << r.revocations << " revocations written; the index: " << rows << " rows in "
            << r.index.tables.size() << " tables, verified; took " << r.seconds << " s\n";
  return 0;
}

}  // namespace cairn::cli
