// `cairn index …`: operations on the metadata index.
#include <iostream>
#include <map>
#include <string>

#include "cli/commands.h"
#include "config/config.h"
#include "index/index_copy.h"
#include "index/open_index.h"
#include "index/postgres/pg.h"

namespace cairn::cli {

int RunIndexMigrate(const IndexOptions& opts) {
  std::map<std::string, std::string> flags;
  if (!opts.data_dir.empty()) flags["data_dir"] = opts.data_dir;
  if (!opts.index.empty()) flags["index"] = opts.index;
  auto cfg = config::LoadCommandConfig(opts.config_file, std::move(flags));
  if (!cfg) {
    std::cerr << "cairn index migrate: " << cfg.error().message << "\n";
    return 2;
  }
  const std::string name = index::pg::RedactedUri(cfg->index);
  auto versions = index::MigrateIndex(cfg->index);
  if (!versions) {
    std::cerr << "cairn index migrate: " << name << ": " << versions.error().message << "\n";
    return versions.error().code == ErrorCode::kMalformed ? 2 : 1;
  }
  std::cout << name << ": schema " << versions->first << " -> " << versions->second << "\n";
  return 0;
}

int RunIndexCopy(const IndexCopyOptions& opts) {
  const std::string from = index::pg::RedactedUri(opts.from);
  const std::string to = index::pg::RedactedUri(opts.to);
  std::cerr << "copying " << from << " -> " << to << "\n";
  auto report = index::CopyIndex(opts.from, opts.to, [](const index::TableCopyReport& t) {
    std::cerr << "  " << t.table << ": " << t.copied << " rows copied\r" << std::flush;
  });
  if (!report) {
    std::cerr << "\ncairn index copy: " << report.error().message << "\n";
    return report.error().code == ErrorCode::kMalformed ? 2 : 1;
  }
  std::cerr << "\n";
  for (const auto& t : report->tables) {
    std::cout << t.table << ": " << t.rows << " rows (" << t.copied << " copied now), blake3 " << t.digest
              << "\n";
  }
  std::cout << "verified: " << to << " holds the same rows as " << from << "\n";
  return 0;
}

}  // namespace cairn::cli
