// `cairn backup` and `cairn restore` (backup/backup.h) with the settings of `cairn serve`.
#include <boost/json.hpp>
#include <iostream>
#include <string>

#include "backup/backup.h"
#include "cli/backend.h"
#include "cli/commands.h"
#include "config/config.h"
#include "index/postgres/pg.h"
#include "store/open_store.h"

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

// The backup's space: a bucket is reached with the backup_s3_* settings when backup_s3_endpoint is set,
// else with the s3_* ones; it must not be inside the store (a backup lost with what it backs up is none).
Result<std::unique_ptr<backup::BackupSpace>> OpenSpace(const config::Config& cfg, const std::string& where,
                                                       bool create) {
  backup::SpaceOptions so;
  so.s3 = StoreOptionsOf(cfg);
  so.create = create;
  const bool own_connection = !cfg.backup_s3_endpoint.empty();
  if (own_connection) {
    so.s3.s3.endpoint = cfg.backup_s3_endpoint;
    so.s3.s3.region = cfg.backup_s3_region;
    so.s3.s3.path_style = cfg.backup_s3_path_style;
    so.s3.s3.access_key = cfg.backup_s3_access_key_id;
    so.s3.s3.secret_key = cfg.backup_s3_secret_access_key;
    so.s3.s3.session_token.clear();
  }
  auto at = store::ParseStoreUrl(where);
  auto own = store::ParseStoreUrl(cfg.store);
  if (at.ok() && own.ok() && at->kind == store::StoreLocation::Kind::kS3 &&
      own->kind == store::StoreLocation::Kind::kS3 && so.s3.s3.endpoint == cfg.s3_endpoint &&
      at->bucket == own->bucket &&
      (at->prefix.starts_with(own->prefix) || own->prefix.starts_with(at->prefix))) {
    return Malformed(where + " is inside the store " + cfg.store +
                     ": keep the backup in another bucket (or under a prefix outside the store's)");
  }
  auto space = backup::OpenBackupSpace(where, so);
  if (!space) {
    return Error{space.error().code, "backup " + where + (own_connection ? " (settings backup_s3_*)" : "") +
                                         ": " + space.error().message};
  }
  return space;
}

}  // namespace

namespace {

// Records a backup's or a restore's run in the configured index's audit log (the restored one's, after a
// restore: its log is the snapshot's, and now says it was restored).
void RecordIn(const config::Config& cfg, std::string action, std::string detail) {
  auto index = OpenConfiguredIndex(cfg);
  if (!index) {
    std::cerr << "warning: the run was not recorded in the audit log: " << index.error().message << "\n";
    return;
  }
  RecordCommand(**index, std::move(action), "", "", std::move(detail));
}

}  // namespace

int RunBackup(const BackupCommandOptions& opts) {
  auto cfg = LoadBackendConfig(opts.config_file, opts.data_dir, opts.index, opts.store);
  if (!cfg) {
    std::cerr << "cairn backup: " << cfg.error().message << "\n";
    return 2;
  }
  auto space = OpenSpace(*cfg, opts.dest, /*create=*/!opts.verify);
  if (!space) {
    std::cerr << "cairn backup: " << space.error().message << "\n";
    return 2;
  }
  if (opts.verify) {
    auto report = backup::VerifyBackup(**space, opts.threads);
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
    std::cout << "verified: every snapshot and object of " << (*space)->Describe() << " is whole\n";
    return 0;
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
            << " -> " << (*space)->Describe() << "\n";
  auto report = backup::TakeBackup(cfg->index, **store, **space, bo);
  std::cerr << "\n";
  if (!report) {
    std::cerr << "cairn backup: " << report.error().message << "\n";
    return 1;
  }
  const auto& r = *report;
  RecordIn(*cfg, "backup.create", "snapshot " + r.manifest.name);
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
  auto space = OpenSpace(*cfg, opts.src, /*create=*/false);
  if (!space) {
    std::cerr << "cairn restore: " << space.error().message << "\n";
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
  std::cerr << "restoring " << (*space)->Describe() << " -> " << index::pg::RedactedUri(cfg->index) << " and "
            << (*store)->Describe() << "\n";
  auto report = backup::Restore(**space, cfg->index, **store, ro);
  std::cerr << "\n";
  if (!report) {
    std::cerr << "cairn restore: " << report.error().message << "\n";
    return report.error().code == ErrorCode::kConflict ? 2 : 1;
  }
  const auto& r = *report;
  RecordIn(*cfg, "backup.restore",
           "snapshot " + r.manifest.name + " (taken at " + std::to_string(r.manifest.taken_at) + ")");
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
