#include "cli/backend.h"

#include <filesystem>

#include "index/open_index.h"
#include "index/pg.h"
#include "store/open_store.h"

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

xet::Result<std::unique_ptr<store::BlobStore>> OpenConfiguredStore(const config::Config& cfg) {
  store::OpenStoreOptions options;
  options.s3.endpoint = cfg.s3_endpoint;
  options.s3.region = cfg.s3_region;
  options.s3.path_style = cfg.s3_path_style;
  options.s3.access_key = cfg.s3_access_key_id;
  options.s3.secret_key = cfg.s3_secret_access_key;
  options.s3.session_token = cfg.s3_session_token;
  options.s3.max_connections = cfg.s3_max_connections;
  options.s3_part_bytes = cfg.s3_part_size;
  options.s3_public_endpoint = cfg.s3_public_endpoint;
  auto st = store::OpenStore(cfg.store, options);
  if (!st) {
    return xet::Error{st.error().code, "store " + cfg.store +
                                           " (setting `store`, --store, CAIRN_STORE): " + st.error().message};
  }
  return st;
}

xet::Result<config::Secrets> LoadConfiguredSecrets(const config::Config& cfg, index::Index& index) {
  return config::LoadSecrets(cfg, [&index](std::string_view name, std::string_view candidate) {
    return index.SharedSecret(name, candidate);
  });
}

xet::Hash KeyFrom(const std::string& secret) {
  return xet::KeyedHash(xet::Hash{}, {reinterpret_cast<const uint8_t*>(secret.data()), secret.size()});
}

}  // namespace cairn::cli
