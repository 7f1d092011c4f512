#include "index/open_index.h"

#include "index/cached_index.h"
#include "index/postgres/pg.h"
#include "index/postgres/postgres_index.h"
#include "index/sqlite/sqlite_index.h"

namespace cairn::index {

Result<IndexLocation> ParseIndexUrl(std::string_view url) {
  if (url.starts_with("sqlite:")) {
    std::string path(url.substr(7));
    if (path.starts_with("//")) path.erase(0, 2);  // sqlite:///abs/path is a common spelling
    if (path.empty()) return Malformed("index: sqlite: needs a file path, as in sqlite:/srv/cairn/index.db");
    return IndexLocation{IndexLocation::Kind::kSqlite, std::move(path)};
  }
  if (url.starts_with("postgres://") || url.starts_with("postgresql://")) {
    if (auto st = pg::CheckUri(std::string(url)); !st.ok()) return st.error();
    return IndexLocation{IndexLocation::Kind::kPostgres, std::string(url)};
  }
  return Malformed("index: expected sqlite:PATH or postgres://USER@HOST[:PORT]/DB, got \"" +
                   pg::RedactedUri(url) + "\"");
}

Result<std::pair<int, int>> MigrateIndex(std::string_view url) {
  auto where = ParseIndexUrl(url);
  if (!where.ok()) return where.error();
  if (where->kind == IndexLocation::Kind::kSqlite) return SqliteIndex::Migrate(where->target);
  return PostgresIndex::Migrate(where->target);
}

Result<std::unique_ptr<Index>> OpenIndex(std::string_view url, const OpenIndexOptions& options) {
  auto where = ParseIndexUrl(url);
  if (!where.ok()) return where.error();
  if (where->kind == IndexLocation::Kind::kSqlite) {
    SqliteOptions so;
    so.path = where->target;
    so.before_batch = options.before_batch;
    so.clock = options.clock;
    auto ix = SqliteIndex::Open(std::move(so));
    if (!ix.ok()) return ix.error();
    return std::unique_ptr<Index>(std::make_unique<CachedIndex>(std::move(*ix), options.cache_bytes));
  }
  PostgresOptions po;
  po.uri = where->target;
  po.pool_size = options.pool_size;
  po.writers = options.writers;
  po.before_batch = options.before_batch;
  po.clock = options.clock;
  auto ix = PostgresIndex::Open(std::move(po));
  if (!ix.ok()) return ix.error();
  return std::unique_ptr<Index>(std::make_unique<CachedIndex>(std::move(*ix), options.cache_bytes));
}

}  // namespace cairn::index
