#include "cli/backend.h"

#include <filesystem>

#include "index/open_index.h"
#include "index/pg.h"

namespace cairn::cli {

xet::Result<std::unique_ptr<index::Index>> OpenConfiguredIndex(const config::Config& cfg) {
  index::OpenIndexOptions options;
  options.pool_size = cfg.index_pool_size;
  auto where = index::ParseIndexUrl(cfg.index);
  if (where.ok() && where->kind == index::IndexLocation::Kind::kSqlite) {
    std::error_code ec;
    const auto dir = std::filesystem::path(where->target).parent_path();
    if (!dir.empty()) std::filesystem::create_directories(dir, ec);
    if (ec)
      return xet::IoError("index " + cfg.index + ": cannot create " + dir.string() + ": " + ec.message());
  }
  auto ix = index::OpenIndex(cfg.index, options);
  if (!ix.ok()) {
    return xet::Error{ix.error().code, "index " + index::pg::RedactedUri(cfg.index) +
                                           " (setting `index`, --index, " +
                                           "CAIRN_INDEX): " + ix.error().message};
  }
  return ix;
}

xet::Result<config::Secrets> LoadConfiguredSecrets(const config::Config& cfg, index::Index& index) {
  return config::LoadSecrets(cfg, [&index](std::string_view name, std::string_view candidate) {
    return index.SharedSecret(name, candidate);
  });
}

}  // namespace cairn::cli
