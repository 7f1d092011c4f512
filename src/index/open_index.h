// Choosing the index from a URL: `sqlite:PATH` (the embedded default) or a libpq URI
// `postgres://USER[:PASS]@HOST[:PORT]/DB[?...]` (`postgresql://` too). Any other text is refused with a
// message that names both forms.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "common/clock.h"
#include "index/index.h"

namespace cairn::index {

struct IndexLocation {
  enum class Kind { kSqlite, kPostgres };
  Kind kind = Kind::kSqlite;
  std::string target;  // the SQLite file, or the PostgreSQL URI as given
};

// Parses and checks an index URL (a PostgreSQL URI must parse as one; nothing is contacted).
Result<IndexLocation> ParseIndexUrl(std::string_view url);

struct OpenIndexOptions {
  size_t cache_bytes = 256ULL * 1024 * 1024;  // xorb layouts and shards' xorbs (cached_index.h)
  size_t pool_size = 8;                       // PostgreSQL: connections for reads
  size_t writers = 1;                         // PostgreSQL: writer connections
  std::function<void(size_t)> before_batch;   // tests
  const Clock* clock = &Clock::System();      // what stored times are read from; outlives the index
};

// Applies the missing schema migrations to the index at `url` (what opening it does first), under the
// backend's lock; returns the versions before and after.
Result<std::pair<int, int>> MigrateIndex(std::string_view url);

// Opens (creating and migrating as needed) the index at `url`, behind its record caches (cached_index.h).
Result<std::unique_ptr<Index>> OpenIndex(std::string_view url, const OpenIndexOptions& options = {});

}  // namespace cairn::index
