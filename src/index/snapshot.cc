#include "index/snapshot.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <optional>

#include "common/posix_io.h"
#include "common/unique_fd.h"

namespace cairn::index {
namespace {

// The quarantine's kinds as stored (records.h GcKind).
static_assert(static_cast<int>(GcKind::kXorb) == 0 && static_cast<int>(GcKind::kShard) == 2);

constexpr const char kXorbs[] =
    "SELECT hash, region_size FROM xorbs WHERE hash NOT IN "
    "(SELECT hash FROM gc_quarantine WHERE kind = 0 AND claimed_at <> 0) ORDER BY hash";
constexpr const char kShards[] =
    "SELECT hash, size FROM shards WHERE hash NOT IN "
    "(SELECT hash FROM gc_quarantine WHERE kind = 2 AND claimed_at <> 0) ORDER BY hash";
constexpr const char kShardScopes[] =
    "SELECT shard, scope FROM shard_scopes WHERE shard NOT IN "
    "(SELECT hash FROM gc_quarantine WHERE kind = 2 AND claimed_at <> 0) ORDER BY shard, scope";
constexpr const char kRevocations[] =
    "SELECT file, scope FROM revocations WHERE NOT cleared ORDER BY file, scope";

std::optional<Hash> HashAt(sqlite3_stmt* s, int col) {
  if (sqlite3_column_bytes(s, col) != 32) return std::nullopt;
  return Hash::FromBytes(static_cast<const uint8_t*>(sqlite3_column_blob(s, col)));
}

std::string TextAt(sqlite3_stmt* s, int col) {
  const unsigned char* p = sqlite3_column_text(s, col);
  if (p == nullptr) return {};
  return {reinterpret_cast<const char*>(p), static_cast<size_t>(sqlite3_column_bytes(s, col))};
}

}  // namespace

Result<SnapshotObjects> ReadSnapshotObjects(const std::string& sqlite_path) {
  sqlite3* db = nullptr;
  const int rc = sqlite3_open_v2(sqlite_path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr);
  std::unique_ptr<sqlite3, int (*)(sqlite3*)> closer(db, sqlite3_close_v2);
  const auto fail = [&](const std::string& what) {
    return IoError("snapshot " + sqlite_path + ": " + what + ": " +
                   (db != nullptr ? sqlite3_errmsg(db) : "out of memory"));
  };
  if (rc != SQLITE_OK) return fail("open");
  // Each query row by row; `row` false ends it with a damaged row.
  const auto each = [&](const char* sql, const std::function<bool(sqlite3_stmt*)>& row) -> Status {
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v2(db, sql, -1, &s, nullptr) != SQLITE_OK) return fail("prepare");
    int r = 0;
    bool good = true;
    while (good && (r = sqlite3_step(s)) == SQLITE_ROW) good = row(s);
    sqlite3_finalize(s);
    if (!good) return Inconsistent("snapshot " + sqlite_path + ": a row that is not a hash");
    if (r != SQLITE_DONE) return fail("read");
    return Ok{};
  };
  // Rows whose first column is a hash.
  const auto hashed = [&](const char* sql, const std::function<void(const Hash&, sqlite3_stmt*)>& add) {
    return each(sql, [&](sqlite3_stmt* s) {
      auto h = HashAt(s, 0);
      if (h) add(*h, s);
      return h.has_value();
    });
  };
  SnapshotObjects out;
  for (const Status& st : {hashed(kXorbs,
                                  [&](const Hash&h, sqlite3_stmt*s) {
                                    out.xorbs.push_back(h);
                                    out.xorb_bytes += static_cast<uint64_t>(sqlite3_column_int64(s, 1));
                                  }),
                           hashed(kShards,
                                  [&](const Hash&h, sqlite3_stmt*s) {
                                    out.shards.push_back(h);
                                    out.shard_bytes += static_cast<uint64_t>(sqlite3_column_int64(s, 1));
                                  }),
                           hashed(kShardScopes,
                                  [&](const Hash&h, sqlite3_stmt*s) {
                                    out.shard_scopes.push_back({h, TextAt(s, 1)});
                                  }),
                           hashed(kRevocations, [&](const Hash&h, sqlite3_stmt*s) {
                             out.revocations.push_back({FileHash(h), TextAt(s, 1)});
                           })}) {
    if (!st.ok()) return st.error();
  }
  // Shards without a recorded scope: both lists are in shard order.
  auto scoped = out.shard_scopes.begin();
  for (const Hash& shard : out.shards) {
    while (scoped != out.shard_scopes.end() && scoped->shard < shard) ++scoped;
    if (scoped == out.shard_scopes.end() || scoped->shard != shard) out.unscoped_shards.push_back(shard);
  }
  return out;
}

Status SealSnapshotFile(const std::string& path) {
  sqlite3* db = nullptr;
  const int rc = sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr);
  std::unique_ptr<sqlite3, int (*)(sqlite3*)> closer(db, sqlite3_close_v2);
  if (rc != SQLITE_OK ||
      sqlite3_exec(db, "PRAGMA journal_mode = DELETE", nullptr, nullptr, nullptr) != SQLITE_OK)
    return IoError("snapshot " + path + ": " + (db != nullptr ? sqlite3_errmsg(db) : "out of memory"));
  closer.reset();
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid() || ::fsync(fd.get()) != 0) return IoError("sync " + path + ": " + ErrnoText(errno));
  return Ok{};
}

}  // namespace cairn::index
