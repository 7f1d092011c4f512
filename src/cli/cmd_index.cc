// `cairn index …`: operations on the metadata index.
#include <iostream>
#include <map>
#include <string>

#include "cli/commands.h"
#include "config/config.h"
#include "index/open_index.h"
#include "index/pg.h"

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
    return versions.error().code == xet::ErrorCode::kMalformed ? 2 : 1;
  }
  std::cout << name << ": schema " << versions->first << " -> " << versions->second << "\n";
  return 0;
}

}  // namespace cairn::cli
