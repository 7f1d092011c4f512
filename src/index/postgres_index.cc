#include "index/postgres_index.h"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>

namespace cairn::index {

namespace {

// Ordered schema migrations: entry i takes the database from version i to i + 1, with the same meaning as
// SqliteIndex's (version N is the same data on both backends). Append only; never edit one that shipped.
constexpr const char* kMigrations[] = {
    R"sql(
CREATE TABLE xorbs(
  hash bytea PRIMARY KEY CHECK (length(hash) = 32),
  layout bytea NOT NULL,                -- packed chunks, 40 bytes each (index/records.h)
  chunk_count bigint NOT NULL,
  region_size bigint NOT NULL,
  unpacked_size bigint NOT NULL,
  stored_at bigint NOT NULL,
  CHECK (length(layout) = chunk_count * 40));
-- Hashes do not compress: store the packed records out of line, uncompressed.
ALTER TABLE xorbs ALTER COLUMN layout SET STORAGE EXTERNAL;
CREATE TABLE files(
  hash bytea PRIMARY KEY CHECK (length(hash) = 32),
  terms bytea NOT NULL,                 -- packed terms, 52 bytes each (index/records.h)
  term_count bigint NOT NULL,
  size bigint NOT NULL,
  sha256 bytea CHECK (sha256 IS NULL OR length(sha256) = 32),
  created_at bigint NOT NULL,
  CHECK (length(terms) = term_count * 52));
ALTER TABLE files ALTER COLUMN terms SET STORAGE EXTERNAL;
CREATE INDEX files_by_sha256 ON files(sha256) WHERE sha256 IS NOT NULL;
CREATE TABLE file_scopes(
  file bytea NOT NULL REFERENCES files(hash),
  scope text NOT NULL,
  PRIMARY KEY (file, scope));
CREATE TABLE shards(
  hash bytea PRIMARY KEY CHECK (length(hash) = 32),
  size bigint NOT NULL,
  registered_at bigint NOT NULL);
CREATE TABLE dedup(
  chunk bytea NOT NULL,
  scope text NOT NULL,
  xorb bytea NOT NULL REFERENCES xorbs(hash),
  shard bytea NOT NULL REFERENCES shards(hash),
  PRIMARY KEY (chunk, scope, xorb));
-- The totals, spread over 64 rows so that nodes committing at once rarely wait on each other's row lock;
-- the stats are the column sums.
CREATE TABLE counters(
  slot bigint PRIMARY KEY,
  xorbs bigint NOT NULL DEFAULT 0, files bigint NOT NULL DEFAULT 0, chunks bigint NOT NULL DEFAULT 0,
  stored_bytes bigint NOT NULL DEFAULT 0, shards bigint NOT NULL DEFAULT 0);
INSERT INTO counters(slot) SELECT generate_series(0, 63);
)sql",
    // 2: logical bytes (Σ file sizes) and unpacked bytes (Σ xorb contents), for the dedup ratio.
    R"sql(
ALTER TABLE counters ADD COLUMN unpacked_bytes bigint NOT NULL DEFAULT 0,
                     ADD COLUMN file_bytes bigint NOT NULL DEFAULT 0;
UPDATE counters SET unpacked_bytes = (SELECT COALESCE(SUM(unpacked_size), 0) FROM xorbs),
                    file_bytes = (SELECT COALESCE(SUM(size), 0) FROM files)
  WHERE slot = 0;
)sql",
    // 3: the xorbs each shard brought together (dedup answers carry a hit's neighbourhood). Shards registered
    // before have only their dedup entries to go by.
    R"sql(
CREATE TABLE shard_xorbs(
  shard bytea NOT NULL REFERENCES shards(hash),
  seq bigint NOT NULL,                  -- listed xorbs first, in upload order, then referenced ones
  xorb bytea NOT NULL REFERENCES xorbs(hash),
  listed boolean NOT NULL,              -- in the shard's xorb section, or used by its files only
  PRIMARY KEY (shard, seq));
INSERT INTO shard_xorbs(shard, seq, xorb, listed)
  SELECT shard, row_number() OVER (PARTITION BY shard ORDER BY xorb) - 1, xorb, true
  FROM (SELECT DISTINCT shard, xorb FROM dedup) d;
)sql",
    // 4: the signing secrets, shared by every node on this index (config/secrets.h).
    R"sql(
CREATE TABLE secrets(
  name text PRIMARY KEY,
  value text NOT NULL,
  created_at bigint NOT NULL);
)sql",
    // 5: each file's term byte ranges in their xorbs; NULL for files registered before.
    R"sql(
ALTER TABLE files ADD COLUMN ranges bytea CHECK (ranges IS NULL OR length(ranges) = term_count * 8);
ALTER TABLE files ALTER COLUMN ranges SET STORAGE EXTERNAL;
)sql",
    // 6: listing a scope's files in hash order (GET /v1/files) without scanning every scope's.
    R"sql(
CREATE INDEX file_scopes_by_scope ON file_scopes(scope, file);
)sql",
    // 7: each scope's file count and bytes, kept as files join it (as on SQLite).
    R"sql(
CREATE TABLE scope_totals(
  scope text PRIMARY KEY,
  files int8 NOT NULL,
  bytes int8 NOT NULL);
INSERT INTO scope_totals(scope, files, bytes)
  SELECT s.scope, count(*), sum(f.size) FROM file_scopes s JOIN files f ON f.hash = s.file GROUP BY s.scope;
)sql",
    // 8: Hub repositories, the objects of their histories and their refs (as on SQLite; names sort
    // bytewise, as SQLite's do).
    R"sql(
CREATE TABLE repos(
  id bigserial PRIMARY KEY,
  type int8 NOT NULL,
  ns text COLLATE "C" NOT NULL,
  name text COLLATE "C" NOT NULL,
  private bool NOT NULL,
  created_at int8 NOT NULL,
  scope text NOT NULL,
  UNIQUE(type, ns, name));
CREATE TABLE repo_objects(
  repo int8 NOT NULL,
  key bytea NOT NULL CHECK (length(key) BETWEEN 1 AND 32),
  kind int8 NOT NULL,
  data bytea NOT NULL,
  PRIMARY KEY(repo, key));
CREATE TABLE repo_refs(
  repo int8 NOT NULL,
  kind int8 NOT NULL,
  name text COLLATE "C" NOT NULL,
  target bytea NOT NULL,
  PRIMARY KEY(repo, kind, name));
CREATE TABLE bucket_files(
  repo int8 NOT NULL,
  path text COLLATE "C" NOT NULL,
  file bytea NOT NULL CHECK (length(file) = 32),
  size int8 NOT NULL,
  mtime int8 NOT NULL,
  content_type text,
  uploaded_at int8 NOT NULL,
  PRIMARY KEY(repo, path));
)sql",
    // 9: each repository's read scope, which sees only what the repository committed (as on SQLite).
    R"sql(
ALTER TABLE repos ADD COLUMN read_scope text NOT NULL DEFAULT '';
UPDATE repos SET read_scope = scope || ':read';
CREATE UNIQUE INDEX repos_by_read_scope ON repos(read_scope);
INSERT INTO file_scopes(file, scope)
  SELECT DISTINCT o.data, r.read_scope FROM repo_objects o JOIN repos r ON r.id = o.repo
  WHERE o.kind = 16 AND EXISTS (SELECT 1 FROM files f WHERE f.hash = o.data)
  ON CONFLICT DO NOTHING;
INSERT INTO file_scopes(file, scope)
  SELECT DISTINCT b.file, r.read_scope FROM bucket_files b JOIN repos r ON r.id = b.repo
  WHERE EXISTS (SELECT 1 FROM files f WHERE f.hash = b.file)
  ON CONFLICT DO NOTHING;
INSERT INTO scope_totals(scope, files, bytes)
  SELECT s.scope, count(*), sum(f.size) FROM file_scopes s JOIN files f ON f.hash = s.file
  WHERE s.scope IN (SELECT read_scope FROM repos) GROUP BY s.scope;
)sql",
};
static_assert(std::size(kMigrations) == PostgresIndex::kSchemaVersion);
static_assert(kFileLinkKind == 16, "migration 9 reads the links by their kind");
static_assert(Index::kMaxDedupHits == 32, "the LIMIT of kDedupAny and kDedupScoped");

constexpr int kCounterSlots = 64;
// pg_advisory_lock key of schema migrations ("cairn-mg" in ASCII).
constexpr const char kLockMigrations[] = "SELECT pg_advisory_lock(7161132942838478695)";
constexpr const char kUnlockMigrations[] = "SELECT pg_advisory_unlock(7161132942838478695)";

// Every parameter is cast, so that the server knows its type when the statement is prepared and reads the
// binary values accordingly.
constexpr pg::Statement kGetXorb{
    "get_xorb",
    "SELECT layout, chunk_count, region_size, unpacked_size, stored_at FROM xorbs WHERE hash = $1::bytea"};
constexpr pg::Statement kGetXorbs{"get_xorbs",
                                  "SELECT hash, layout, chunk_count, region_size, unpacked_size, stored_at "
                                  "FROM xorbs WHERE hash = ANY($1::bytea[])"};
constexpr pg::Statement kHasXorb{"has_xorb", "SELECT 1 FROM xorbs WHERE hash = $1::bytea"};
constexpr pg::Statement kPutXorb{"put_xorb", R"sql(
WITH ins AS (
  INSERT INTO xorbs(hash, layout, chunk_count, region_size, unpacked_size, stored_at)
  VALUES ($1::bytea, $2::bytea, $3::int8, $4::int8, $5::int8, $6::int8)
  ON CONFLICT (hash) DO NOTHING
  RETURNING chunk_count, region_size, unpacked_size),
bump AS (
  UPDATE counters c SET xorbs = c.xorbs + 1, chunks = c.chunks + ins.chunk_count,
                        stored_bytes = c.stored_bytes + ins.region_size,
                        unpacked_bytes = c.unpacked_bytes + ins.unpacked_size
  FROM ins WHERE c.slot = $7::int8)
SELECT count(*)::int8 FROM ins)sql"};
constexpr pg::Statement kGetFile{
    "get_file", "SELECT terms, term_count, size, sha256, ranges FROM files WHERE hash = $1::bytea"};
constexpr pg::Statement kFileVisible{"file_visible",
                                     "SELECT 1 FROM file_scopes WHERE file = $1::bytea AND scope = $2::text"};
constexpr pg::Statement kGetVisibleFile{
    "get_visible_file",
    "SELECT terms, term_count, size, sha256, ranges FROM files WHERE hash = $1::bytea "
    "AND EXISTS (SELECT 1 FROM file_scopes WHERE file = $1::bytea AND scope = $2::text)"};
constexpr pg::Statement kListFiles{
    "list_files",
    "SELECT f.hash, f.size, f.sha256, f.created_at FROM file_scopes s JOIN files f ON f.hash = s.file "
    "WHERE s.scope = $1 AND s.file > $2::bytea ORDER BY s.file LIMIT $3"};
constexpr pg::Statement kScanXorbs{
    "scan_xorbs", "SELECT hash FROM xorbs WHERE hash > $1::bytea ORDER BY hash LIMIT $2::int8"};
constexpr pg::Statement kScanFiles{
    "scan_files", "SELECT hash FROM files WHERE hash > $1::bytea ORDER BY hash LIMIT $2::int8"};
constexpr pg::Statement kScanShards{
    "scan_shards", "SELECT hash FROM shards WHERE hash > $1::bytea ORDER BY hash LIMIT $2::int8"};
constexpr pg::Statement kScopeStats{"scope_stats", "SELECT files, bytes FROM scope_totals WHERE scope = $1"};
constexpr pg::Statement kFileBySha{"file_by_sha", "SELECT hash FROM files WHERE sha256 = $1::bytea LIMIT 1"};
constexpr pg::Statement kFileByShaScoped{"file_by_sha_scoped",
                                         "SELECT f.hash FROM files f JOIN file_scopes s ON s.file = f.hash "
                                         "WHERE f.sha256 = $1::bytea AND s.scope = $2::text LIMIT 1"};
// One statement registers a whole shard. Rows of the same statement see each other for the foreign keys
// (checked at its end), so files, scopes, xorbs and dedup entries go in together.
constexpr pg::Statement kCommitShard{"commit_shard", R"sql(
WITH s AS (
  INSERT INTO shards(hash, size, registered_at) VALUES ($1::bytea, $2::int8, $3::int8)
  ON CONFLICT (hash) DO NOTHING
  RETURNING size),
sx AS (
  INSERT INTO shard_xorbs(shard, seq, xorb, listed)
  SELECT $1::bytea, t.ord - 1, t.xorb, t.listed
  FROM unnest($5::bytea[], $6::bool[]) WITH ORDINALITY AS t(xorb, listed, ord)
  WHERE EXISTS (SELECT 1 FROM s)),
f AS (
  INSERT INTO files(hash, terms, term_count, size, sha256, created_at, ranges)
  SELECT t.hash, t.terms, t.term_count, t.size, t.sha256, $3::int8, t.ranges
  FROM unnest($7::bytea[], $8::bytea[], $9::int8[], $10::int8[], $11::bytea[], $15::bytea[])
       AS t(hash, terms, term_count, size, sha256, ranges)
  ON CONFLICT (hash) DO NOTHING
  RETURNING size),
fs AS (
  INSERT INTO file_scopes(file, scope) SELECT t.hash, $4::text FROM unnest($7::bytea[]) AS t(hash)
  ON CONFLICT (file, scope) DO NOTHING
  RETURNING file),
st AS (
  INSERT INTO scope_totals(scope, files, bytes)
  SELECT $4::text, count(*), COALESCE(sum(t.size), 0)
  FROM fs JOIN (SELECT DISTINCT ON (hash) hash, size FROM unnest($7::bytea[], $10::int8[]) AS u(hash, size)) t
    ON t.hash = fs.file
  HAVING count(*) > 0
  ON CONFLICT (scope) DO UPDATE SET files = scope_totals.files + EXCLUDED.files,
                                    bytes = scope_totals.bytes + EXCLUDED.bytes),
d AS (
  INSERT INTO dedup(chunk, scope, xorb, shard)
  SELECT t.chunk, $4::text, t.xorb, $1::bytea FROM unnest($12::bytea[], $13::bytea[]) AS t(chunk, xorb)
  ON CONFLICT (chunk, scope, xorb) DO NOTHING),
n AS (
  SELECT (SELECT count(*) FROM f)::int8 AS files, (SELECT COALESCE(sum(size), 0) FROM f)::int8 AS file_bytes,
         (SELECT count(*) FROM s)::int8 AS shards, (SELECT COALESCE(sum(size), 0) FROM s)::int8 AS shard_bytes),
bump AS (
  UPDATE counters c SET files = c.files + n.files, file_bytes = c.file_bytes + n.file_bytes,
                        shards = c.shards + n.shards, stored_bytes = c.stored_bytes + n.shard_bytes
  FROM n WHERE c.slot = $14::int8 AND (n.files > 0 OR n.shards > 0))
SELECT shards FROM n)sql"};
constexpr pg::Statement kGetShard{"get_shard",
                                  "SELECT size, registered_at FROM shards WHERE hash = $1::bytea"};
// The shard's row and its xorbs in one round trip: no row, unknown shard; one row with a NULL xorb, none.
constexpr pg::Statement kGetShardXorbs{"get_shard_xorbs",
                                       "SELECT x.xorb, x.listed FROM shards s "
                                       "LEFT JOIN shard_xorbs x ON x.shard = s.hash "
                                       "WHERE s.hash = $1::bytea ORDER BY x.seq"};
constexpr pg::Statement kDedupAny{"dedup_any",
                                  "SELECT DISTINCT xorb, shard FROM dedup WHERE chunk = $1::bytea LIMIT 32"};
constexpr pg::Statement kDedupScoped{
    "dedup_scoped", "SELECT xorb, shard FROM dedup WHERE chunk = $1::bytea AND scope = $2::text LIMIT 32"};
constexpr pg::Statement kStats{"stats",
                               "SELECT sum(xorbs)::int8, sum(files)::int8, sum(chunks)::int8, "
                               "sum(stored_bytes)::int8, sum(shards)::int8, sum(unpacked_bytes)::int8, "
                               "sum(file_bytes)::int8 FROM counters"};
constexpr pg::Statement kGetSecret{"get_secret", "SELECT value FROM secrets WHERE name = $1::text"};
constexpr pg::Statement kListSecrets{"list_secrets",
                                     "SELECT name, value, created_at FROM secrets ORDER BY name"};
constexpr pg::Statement kAddSecret{"add_secret",
                                   "INSERT INTO secrets(name, value, created_at) "
                                   "VALUES ($1::text, $2::text, $3::int8) ON CONFLICT (name) DO NOTHING "
                                   "RETURNING name"};
constexpr pg::Statement kDeleteSecret{"delete_secret",
                                      "DELETE FROM secrets WHERE name = $1::text RETURNING name"};
constexpr pg::Statement kPing{"ping", "SELECT 1"};
// All or nothing: no row goes in unless every file is known (the counts say which).
constexpr pg::Statement kShareFiles{"share_files", R"sql(
WITH u AS (SELECT DISTINCT hash FROM unnest($1::bytea[]) AS u(hash)),
f AS (SELECT files.hash, files.size FROM files JOIN u ON u.hash = files.hash),
fs AS (
  INSERT INTO file_scopes(file, scope) SELECT hash, $2::text FROM f
  WHERE (SELECT count(*) FROM f) = (SELECT count(*) FROM u)
  ON CONFLICT (file, scope) DO NOTHING RETURNING file),
st AS (
  INSERT INTO scope_totals(scope, files, bytes)
  SELECT $2::text, count(*), COALESCE(sum(f.size), 0) FROM fs JOIN f ON f.hash = fs.file
  HAVING count(*) > 0
  ON CONFLICT (scope) DO UPDATE SET files = scope_totals.files + EXCLUDED.files,
                                    bytes = scope_totals.bytes + EXCLUDED.bytes)
SELECT (SELECT count(*) FROM u)::int8, (SELECT count(*) FROM f)::int8)sql"};
// Repositories. Each write is one statement (as the writer threads require): its row says what happened.
constexpr pg::Statement kCreateRepo{"create_repo", R"sql(
WITH r AS (
  INSERT INTO repos(type, ns, name, private, created_at, scope, read_scope)
  VALUES ($1::int8, $2::text, $3::text, $4::bool, $5::int8, $12::text, $13::text)
  ON CONFLICT DO NOTHING RETURNING id),
o AS (
  INSERT INTO repo_objects(repo, key, kind, data)
  SELECT r.id, u.key, u.kind, u.data FROM r, unnest($6::bytea[], $7::int8[], $8::bytea[]) AS u(key, kind, data)
  ON CONFLICT DO NOTHING),
f AS (
  INSERT INTO repo_refs(repo, kind, name, target)
  SELECT r.id, u.kind, u.name, u.target FROM r, unnest($9::int8[], $10::text[], $11::bytea[]) AS u(kind, name, target))
SELECT id FROM r)sql"};
constexpr pg::Statement kFindRepo{"find_repo",
                                  "SELECT id, private, created_at, scope, read_scope FROM repos "
                                  "WHERE type = $1::int8 "
                                  "AND ns = $2::text AND name = $3::text"};
constexpr pg::Statement kListRepos{"list_repos", R"sql(
SELECT id, ns, name, private, created_at, scope, read_scope FROM repos
WHERE type = $1::int8 AND ($2::text IS NULL OR ns = $2::text) AND (ns, name) > ($3::text, $4::text)
ORDER BY ns, name LIMIT $5::int8)sql"};
constexpr pg::Statement kUpdateRepo{"update_repo", R"sql(
WITH cur AS (SELECT id, type, read_scope FROM repos WHERE id = $1::int8),
taken AS (
  SELECT 1 FROM repos r, cur
  WHERE $3::text IS NOT NULL AND r.type = cur.type AND r.ns = $3::text AND r.name = $4::text AND r.id <> cur.id),
upd AS (
  UPDATE repos SET private = coalesce($2::bool, private), ns = coalesce($3::text, ns),
                   name = coalesce($4::text, name), read_scope = coalesce($5::text, read_scope)
  WHERE id = $1::int8 AND NOT EXISTS (SELECT 1 FROM taken) RETURNING id),
mf AS (
  UPDATE file_scopes SET scope = $5::text FROM cur
  WHERE file_scopes.scope = cur.read_scope AND cur.read_scope <> $5::text AND EXISTS (SELECT 1 FROM upd)),
mt AS (
  UPDATE scope_totals SET scope = $5::text FROM cur
  WHERE scope_totals.scope = cur.read_scope AND cur.read_scope <> $5::text AND EXISTS (SELECT 1 FROM upd))
SELECT (SELECT count(*) FROM cur)::int8, (SELECT count(*) FROM taken)::int8)sql"};
constexpr pg::Statement kDeleteRepo{"delete_repo", R"sql(
WITH d AS (DELETE FROM repos WHERE id = $1::int8 RETURNING id, scope, read_scope),
o AS (DELETE FROM repo_objects WHERE repo IN (SELECT id FROM d)),
f AS (DELETE FROM repo_refs WHERE repo IN (SELECT id FROM d)),
b AS (DELETE FROM bucket_files WHERE repo IN (SELECT id FROM d)),
fs AS (DELETE FROM file_scopes WHERE scope IN (SELECT scope FROM d UNION ALL SELECT read_scope FROM d)),
st AS (DELETE FROM scope_totals WHERE scope IN (SELECT scope FROM d UNION ALL SELECT read_scope FROM d))
SELECT count(*)::int8 FROM d)sql"};
constexpr pg::Statement kPutRepoObjects{"put_repo_objects", R"sql(
WITH r AS (SELECT id FROM repos WHERE id = $1::int8),
o AS (
  INSERT INTO repo_objects(repo, key, kind, data)
  SELECT r.id, u.key, u.kind, u.data FROM r, unnest($2::bytea[], $3::int8[], $4::bytea[]) AS u(key, kind, data)
  ON CONFLICT DO NOTHING)
SELECT count(*)::int8 FROM r)sql"};
constexpr pg::Statement kGetRepoObjects{"get_repo_objects", R"sql(
SELECT u.i, o.kind, o.data FROM unnest($2::bytea[]) WITH ORDINALITY AS u(key, i)
JOIN repo_objects o ON o.repo = $1::int8 AND o.key = u.key)sql"};
constexpr pg::Statement kGetRepoObjectHead{
    "get_repo_object_head",
    "SELECT kind, length(data)::int8, substring(data from 1 for $3::int8::int4) FROM repo_objects "
    "WHERE repo = $1::int8 AND key = $2::bytea"};
constexpr pg::Statement kListRefs{
    "list_refs", "SELECT kind, name, target FROM repo_refs WHERE repo = $1::int8 ORDER BY kind, name"};
// A bucket's changes as arrays (deletes have a NULL file): one statement applies them all, deletes first.
constexpr pg::Statement kChangeBucket{"change_bucket", R"sql(
WITH r AS (SELECT id FROM repos WHERE id = $1::int8),
u AS (SELECT * FROM unnest($2::text[], $3::bytea[], $4::int8[], $5::int8[], $6::text[], $7::int8[])
                 AS u(path, file, size, mtime, content_type, uploaded_at)),
del AS (DELETE FROM bucket_files b USING r, u WHERE b.repo = r.id AND b.path = u.path AND u.file IS NULL),
put AS (
  INSERT INTO bucket_files(repo, path, file, size, mtime, content_type, uploaded_at)
  SELECT r.id, u.path, u.file, u.size, u.mtime, NULLIF(u.content_type, ''), u.uploaded_at FROM r, u
  WHERE u.file IS NOT NULL
  ON CONFLICT (repo, path) DO UPDATE SET file = excluded.file, size = excluded.size, mtime = excluded.mtime,
    content_type = excluded.content_type, uploaded_at = excluded.uploaded_at)
SELECT count(*)::int8 FROM r)sql"};
constexpr pg::Statement kListBucket{"list_bucket", R"sql(
SELECT path, file, size, mtime, content_type, uploaded_at FROM bucket_files
WHERE repo = $1::int8 AND path >= $2::text AND ($3::text IS NULL OR path < $3::text) AND path >= $4::text
ORDER BY path LIMIT $5::int8)sql"};
constexpr pg::Statement kGetBucketFiles{"get_bucket_files", R"sql(
SELECT u.i, b.path, b.file, b.size, b.mtime, b.content_type, b.uploaded_at
FROM unnest($2::text[]) WITH ORDINALITY AS u(path, i) JOIN bucket_files b ON b.repo = $1::int8 AND b.path = u.path)sql"};
constexpr pg::Statement kBucketTotals{
    "bucket_totals",
    "SELECT count(*)::int8, COALESCE(sum(size), 0)::int8 FROM bucket_files WHERE repo = $1::int8"};
// Compare and swap of one ref: $4 the target expected (NULL: none), $5 the new one (NULL: delete). An UPDATE
// or DELETE waiting on a concurrent change re-checks `target = $4` against the committed row (READ
// COMMITTED), so of two writers from the same state one wins and the other changes nothing.
constexpr pg::Statement kUpdateRef{"update_ref", R"sql(
WITH r AS (SELECT id FROM repos WHERE id = $1::int8),
ins AS (
  INSERT INTO repo_refs(repo, kind, name, target)
  SELECT id, $2::int8, $3::text, $5::bytea FROM r WHERE $4::bytea IS NULL AND $5::bytea IS NOT NULL
  ON CONFLICT DO NOTHING RETURNING 1),
upd AS (
  UPDATE repo_refs SET target = $5::bytea
  WHERE $5::bytea IS NOT NULL AND repo = $1::int8 AND kind = $2::int8 AND name = $3::text AND target = $4::bytea
  RETURNING 1),
del AS (
  DELETE FROM repo_refs
  WHERE $5::bytea IS NULL AND repo = $1::int8 AND kind = $2::int8 AND name = $3::text AND target = $4::bytea
  RETURNING 1)
SELECT (SELECT count(*) FROM r)::int8,
       ((SELECT count(*) FROM ins) + (SELECT count(*) FROM upd) + (SELECT count(*) FROM del))::int8)sql"};

// The schema version recorded in the database (0: none yet). Call under the migration lock.
xet::Result<int> SchemaVersion(pg::Conn& c) {
  if (auto r = c.Exec("CREATE TABLE IF NOT EXISTS cairn_schema("
                      "id int PRIMARY KEY CHECK (id = 1), version int NOT NULL)");
      !r.ok()) {
    return r.error();
  }
  auto v = c.Exec("SELECT version FROM cairn_schema");
  if (!v.ok()) return v.error();
  if (v->size() == 0) return 0;
  return std::stoi(std::string(v->Text(0, 0)));
}

// Applies the missing migrations under the advisory lock; returns the versions before and after.
xet::Result<std::pair<int, int>> MigrateLocked(pg::Conn& c, const std::string& where) {
  if (auto r = c.Exec(kLockMigrations); !r.ok()) return r.error();
  auto result = [&]() -> xet::Result<std::pair<int, int>> {
    auto version = SchemaVersion(c);
    if (!version.ok()) return version.error();
    const int from = *version;
    if (from > PostgresIndex::kSchemaVersion) {
      return xet::Inconsistent("index " + where + " has schema version " + std::to_string(from) +
                               ", newer than this cairn's " + std::to_string(PostgresIndex::kSchemaVersion));
    }
    if (from == PostgresIndex::kSchemaVersion) return std::pair{from, from};
    if (auto r = c.Exec("BEGIN"); !r.ok()) return r.error();
    xet::Status st = xet::Ok{};
    for (int i = from; st.ok() && i < PostgresIndex::kSchemaVersion; ++i) {
      auto r = c.Exec(kMigrations[i]);
      if (!r.ok())
        st = xet::Error{r.error().code, "migration " + std::to_string(i + 1) + ": " + r.error().message};
    }
    if (st.ok()) {
      auto r = c.Exec("INSERT INTO cairn_schema(id, version) VALUES (1, " +
                      std::to_string(PostgresIndex::kSchemaVersion) +
                      ") ON CONFLICT (id) DO UPDATE SET version = EXCLUDED.version");
      if (!r.ok()) st = r.error();
    }
    if (st.ok()) {
      auto r = c.Exec("COMMIT");
      if (!r.ok()) st = r.error();
    }
    if (!st.ok()) {
      (void)c.Exec("ROLLBACK");  // the original error is the one worth reporting
      return st.error();
    }
    return std::pair{from, static_cast<int>(PostgresIndex::kSchemaVersion)};
  }();
  (void)c.Exec(kUnlockMigrations);  // also released when the session ends
  return result;
}

std::mt19937_64& Rng() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return rng;
}

}  // namespace

// ---- Pool

// A pooled connection, returned to the pool when the lease ends (dropped when it broke).
class PostgresIndex::Lease {
 public:
  Lease(PostgresIndex* owner, std::unique_ptr<pg::Conn> conn) : owner_(owner), conn_(std::move(conn)) {}
  Lease(Lease&&) noexcept = default;
  Lease& operator=(Lease&&) = delete;
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;
  ~Lease() {
    if (conn_) owner_->Release(std::move(conn_));
  }
  pg::Conn* operator->() const { return conn_.get(); }
  pg::Conn& operator*() const { return *conn_; }

 private:
  PostgresIndex* owner_;
  std::unique_ptr<pg::Conn> conn_;
};

xet::Result<PostgresIndex::Lease> PostgresIndex::Acquire() {
  std::unique_lock lock(pool_mu_);
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(options_.acquire_timeout_ms);
  for (;;) {
    if (!idle_.empty()) {
      auto conn = std::move(idle_.back());
      idle_.pop_back();
      return Lease(this, std::move(conn));
    }
    if (open_ < options_.pool_size) {
      ++open_;
      lock.unlock();
      auto conn = pg::Conn::Connect(options_.uri);
      if (!conn.ok()) {
        lock.lock();
        --open_;
        pool_cv_.notify_one();
        return conn.error();
      }
      return Lease(this, std::move(*conn));
    }
    if (pool_cv_.wait_until(lock, deadline) == std::cv_status::timeout && idle_.empty() &&
        open_ >= options_.pool_size) {
      return xet::Unavailable("index: all " + std::to_string(options_.pool_size) +
                              " PostgreSQL connections stayed busy for " +
                              std::to_string(options_.acquire_timeout_ms) + " ms");
    }
  }
}

void PostgresIndex::Release(std::unique_ptr<pg::Conn> conn) {
  std::lock_guard lock(pool_mu_);
  if (conn->broken()) {
    --open_;
  } else {
    idle_.push_back(std::move(conn));
  }
  pool_cv_.notify_one();
}

xet::Result<pg::Rows> PostgresIndex::Query(const pg::Statement& s, const pg::Params& p) {
  for (int attempt = 0;; ++attempt) {
    auto lease = Acquire();
    if (!lease.ok()) return lease.error();
    auto rows = (*lease)->Run(s, p);
    // A pooled connection may have broken since its last use (PostgreSQL restarted): one more try, fresh.
    if (!rows.ok() && rows.error().code == xet::ErrorCode::kUnavailable && (*lease)->broken() &&
        attempt == 0) {
      continue;
    }
    return rows;
  }
}

// ---- Open and close

PostgresIndex::PostgresIndex(PostgresOptions options)
    : options_(std::move(options)),
      counter_slot_(static_cast<int64_t>(Rng()() % kCounterSlots)),
      xorb_cache_(options_.cache_bytes / 16 * 15),
      shard_xorbs_cache_(options_.cache_bytes / 16) {}

xet::Result<std::pair<int, int>> PostgresIndex::Migrate(const std::string& uri) {
  auto conn = pg::Conn::Connect(uri);
  if (!conn.ok()) return conn.error();
  return MigrateLocked(**conn, pg::RedactedUri(uri));
}

xet::Result<std::unique_ptr<PostgresIndex>> PostgresIndex::Open(PostgresOptions options) {
  if (options.pool_size == 0) return xet::Malformed("index pool size must be at least 1");
  std::unique_ptr<PostgresIndex> index(new PostgresIndex(std::move(options)));
  auto conn = pg::Conn::Connect(index->options_.uri);
  if (!conn.ok()) return conn.error();
  if (auto m = MigrateLocked(**conn, index->description()); !m.ok()) return m.error();
  index->Release(std::move(*conn));
  {
    std::lock_guard lock(index->pool_mu_);
    ++index->open_;  // Release counted it as returned
  }
  const size_t writers = std::max<size_t>(1, index->options_.writers);
  index->writer_conns_.resize(writers);
  index->writes_ = std::make_unique<WriteQueue<WriteRequest>>(
      writers,
      [p = index.get()](size_t writer, std::span<WriteRequest* const> batch) {
        return p->RunBatch(writer, batch);
      },
      index->options_.before_batch);
  return index;
}

PostgresIndex::~PostgresIndex() {
  writes_.reset();  // finishes what is queued while the writer connections still exist
}

std::string PostgresIndex::description() const {
  return pg::RedactedUri(options_.uri);
}

// ---- Writes

std::vector<xet::Status> PostgresIndex::RunBatch(size_t writer, std::span<WriteRequest* const> batch) {
  std::unique_ptr<pg::Conn>& conn = writer_conns_[writer];
  std::vector<xet::Status> results(batch.size(), xet::Ok{});
  std::vector<size_t> pending(batch.size());
  std::iota(pending.begin(), pending.end(), 0);
  std::vector<pg::Conn::BatchItem> items;
  int conflicts = 0;
  bool reconnected = false;
  while (!pending.empty()) {
    if (!conn || conn->broken()) {
      conn.reset();
      auto c = pg::Conn::Connect(options_.uri);
      if (!c.ok()) {
        for (size_t i : pending) results[i] = c.error();
        break;
      }
      conn = std::move(*c);
      reconnected = true;
    }
    items.clear();
    for (size_t i : pending) items.push_back({batch[i]->statement, &batch[i]->params});
    auto out = conn->RunBatch(items);
    if (out.ok()) {
      for (size_t k = 0; k < pending.size(); ++k) batch[pending[k]]->on_done((*out)[k]);
      break;
    }
    const auto& failure = out.error();
    if (failure.retryable && conflicts < 8) {
      // A deadlock or serialization failure with another transaction: nothing was stored, run it again
      // after a short random pause so the two do not collide again.
      ++conflicts;
      std::this_thread::sleep_for(std::chrono::microseconds(500 + Rng()() % (2000U << conflicts)));
      continue;
    }
    if (failure.error.code == xet::ErrorCode::kUnavailable && conn->broken() && !reconnected) {
      reconnected = true;  // it broke while idle (PostgreSQL restarted): once more on a fresh connection
      conn.reset();
      continue;
    }
    if (failure.failed_at < pending.size()) {
      // That request alone is refused; the others run again without it.
      results[pending[failure.failed_at]] = failure.error;
      pending.erase(pending.begin() + static_cast<std::ptrdiff_t>(failure.failed_at));
      continue;
    }
    for (size_t i : pending) results[i] = failure.error;
    break;
  }
  return results;
}

xet::Result<bool> PostgresIndex::PutXorb(const XorbHash& hash, const xet::XorbLayout& layout) {
  const XorbEntry e = MakeXorbEntry(hash, layout);
  bool inserted = false;
  WriteRequest req{
      &kPutXorb, {}, [&](const pg::Rows& rows) { inserted = rows.size() == 1 && rows.Int8(0, 0) > 0; }};
  req.params.Bytea(hash).Bytea(e.packed).Int8(e.chunk_count).Int8(e.region_size);
  req.params.Int8(static_cast<int64_t>(e.unpacked_size))
      .Int8(options_.clock->UnixSeconds())
      .Int8(counter_slot_);
  if (auto st = writes_->Submit(req); !st.ok()) return st.error();
  return inserted;
}

xet::Result<CommitOutcome> PostgresIndex::CommitShard(const ShardCommit& commit) {
  if (auto st = CheckShardCommit(commit); !st.ok()) return st.error();
  // Rows in key order: two transactions inserting overlapping rows then lock them in the same order.
  std::vector<const FileCommit*> files;
  for (const auto& f : commit.files) files.push_back(&f);
  std::sort(files.begin(), files.end(), [](const auto* a, const auto* b) { return a->hash < b->hash; });
  std::vector<const DedupEntry*> dedup;
  for (const auto& d : commit.dedup) dedup.push_back(&d);
  std::sort(dedup.begin(), dedup.end(), [](const auto* a, const auto* b) {
    return a->chunk < b->chunk || (a->chunk == b->chunk && a->xorb < b->xorb);
  });

  std::vector<xet::Hash> xorbs(commit.xorbs.listed);
  xorbs.insert(xorbs.end(), commit.xorbs.referenced.begin(), commit.xorbs.referenced.end());
  std::vector<bool> listed(xorbs.size(), false);
  std::fill_n(listed.begin(), commit.xorbs.listed.size(), true);

  std::vector<xet::Hash> file_hashes, dedup_chunks, dedup_xorbs;
  std::vector<std::optional<std::span<const uint8_t>>> terms, shas, ranges;
  std::vector<int64_t> term_counts, sizes;
  for (const auto* f : files) {
    file_hashes.push_back(f->hash);
    terms.emplace_back(std::span<const uint8_t>(f->packed_terms));
    term_counts.push_back(f->term_count);
    sizes.push_back(static_cast<int64_t>(f->size));
    if (f->sha256) {
      shas.emplace_back(std::span<const uint8_t>(f->sha256->bytes));
    } else {
      shas.emplace_back(std::nullopt);
    }
    if (f->packed_ranges.empty()) {
      ranges.emplace_back(std::nullopt);
    } else {
      ranges.emplace_back(std::span<const uint8_t>(f->packed_ranges));
    }
  }
  for (const auto* d : dedup) {
    dedup_chunks.push_back(d->chunk);
    dedup_xorbs.push_back(d->xorb);
  }

  CommitOutcome outcome;
  WriteRequest req{&kCommitShard, {}, [&](const pg::Rows& rows) {
                     outcome.already_existed = rows.size() == 1 && rows.Int8(0, 0) == 0;
                   }};
  req.params.Bytea(commit.shard)
      .Int8(static_cast<int64_t>(commit.shard_size))
      .Int8(options_.clock->UnixSeconds())
      .Text(commit.scope);
  req.params.HashArray(xorbs).BoolArray(listed);
  req.params.HashArray(file_hashes)
      .ByteaArray(terms)
      .Int8Array(term_counts)
      .Int8Array(sizes)
      .ByteaArray(shas);
  req.params.HashArray(dedup_chunks).HashArray(dedup_xorbs).Int8(counter_slot_).ByteaArray(ranges);
  if (auto st = writes_->Submit(req); !st.ok()) return st.error();
  return outcome;
}

// ---- Reads

xet::Result<std::shared_ptr<const XorbEntry>> PostgresIndex::GetXorb(const XorbHash& hash) {
  if (auto hit = xorb_cache_.Get(hash)) return hit;
  auto rows = Query(kGetXorb, pg::Params().Bytea(hash));
  if (!rows.ok()) return rows.error();
  if (rows->size() == 0) return xet::NotFound("xorb " + hash.hex() + " is not in the index");
  auto e = XorbEntryFromRow(hash, rows->Bytes(0, 0), rows->Int8(0, 1), rows->Int8(0, 2), rows->Int8(0, 3),
                            rows->Int8(0, 4));
  if (e.ok()) xorb_cache_.Put(hash, *e, (*e)->memory_size());
  return e;
}

xet::Result<std::vector<std::shared_ptr<const XorbEntry>>> PostgresIndex::GetXorbs(
    std::span<const XorbHash> hashes) {
  if (hashes.size() > kMaxXorbsPerRead) return xet::Malformed("too many xorbs in one read");
  std::vector<std::shared_ptr<const XorbEntry>> out(hashes.size());
  std::vector<XorbHash> missing;
  std::unordered_map<XorbHash, std::vector<size_t>, xet::HashHasher> wanted;  // hash -> its places in out
  for (size_t i = 0; i < hashes.size(); ++i) {
    if ((out[i] = xorb_cache_.Get(hashes[i])) != nullptr) continue;
    auto& places = wanted[hashes[i]];
    if (places.empty()) missing.push_back(hashes[i]);
    places.push_back(i);
  }
  if (missing.empty()) return out;
  auto rows = Query(kGetXorbs, pg::Params().HashArray(missing));
  if (!rows.ok()) return rows.error();
  for (int r = 0; r < rows->size(); ++r) {
    const auto hash = rows->Hash(r, 0);
    auto it = hash ? wanted.find(*hash) : wanted.end();
    if (it == wanted.end()) return xet::IoError("index: a xorb came back that was not asked for");
    auto e = XorbEntryFromRow(*hash, rows->Bytes(r, 1), rows->Int8(r, 2), rows->Int8(r, 3), rows->Int8(r, 4),
                              rows->Int8(r, 5));
    if (!e.ok()) return e.error();
    xorb_cache_.Put(*hash, *e, (*e)->memory_size());
    for (size_t i : it->second) out[i] = *e;
  }
  return out;
}

xet::Result<bool> PostgresIndex::HasXorb(const XorbHash& hash) {
  if (xorb_cache_.Get(hash)) return true;
  auto rows = Query(kHasXorb, pg::Params().Bytea(hash));
  if (!rows.ok()) return rows.error();
  return rows->size() > 0;
}

xet::Result<std::shared_ptr<const FileEntry>> PostgresIndex::GetFile(const FileHash& hash) {
  return ReadFile(hash, std::nullopt);
}

xet::Result<std::shared_ptr<const FileEntry>> PostgresIndex::GetVisibleFile(const FileHash& hash,
                                                                            std::string_view scope) {
  return ReadFile(hash, scope);
}

xet::Result<std::shared_ptr<const FileEntry>> PostgresIndex::ReadFile(const FileHash& hash,
                                                                      std::optional<std::string_view> scope) {
  auto rows = scope ? Query(kGetVisibleFile, pg::Params().Bytea(hash).Text(*scope))
                    : Query(kGetFile, pg::Params().Bytea(hash));
  if (!rows.ok()) return rows.error();
  if (rows->size() == 0) return xet::NotFound("file " + hash.hex() + " is not in the index");
  return FileEntryFromRow(hash, rows->Bytes(0, 0), rows->Int8(0, 1), rows->Int8(0, 2),
                          rows->IsNull(0, 3) ? std::nullopt : rows->Hash(0, 3),
                          rows->IsNull(0, 4) ? std::span<const uint8_t>() : rows->Bytes(0, 4));
}

xet::Result<bool> PostgresIndex::FileVisibleTo(const FileHash& hash, std::string_view scope) {
  auto rows = Query(kFileVisible, pg::Params().Bytea(hash).Text(scope));
  if (!rows.ok()) return rows.error();
  return rows->size() > 0;
}

xet::Result<std::optional<FileHash>> PostgresIndex::FileBySha256(const Hash& sha256,
                                                                 std::optional<std::string_view> scope) {
  pg::Params p;
  p.Bytea(sha256);
  if (scope) p.Text(*scope);
  auto rows = Query(scope ? kFileByShaScoped : kFileBySha, p);
  if (!rows.ok()) return rows.error();
  if (rows->size() == 0) return std::optional<FileHash>();
  return rows->Hash(0, 0);
}

xet::Result<std::vector<ListedFile>> PostgresIndex::ListFiles(std::string_view scope,
                                                              std::optional<FileHash> after, size_t limit) {
  if (limit > kMaxListedFiles)
    return xet::Malformed("at most " + std::to_string(kMaxListedFiles) + " files a page");
  pg::Params p;
  p.Text(scope);
  if (after) {
    p.Bytea(*after);
  } else {
    p.Bytea(std::span<const uint8_t>());  // every hash sorts after the empty bytea
  }
  p.Int8(static_cast<int64_t>(limit));
  auto rows = Query(kListFiles, p);
  if (!rows.ok()) return rows.error();
  std::vector<ListedFile> out;
  out.reserve(static_cast<size_t>(rows->size()));
  for (int i = 0; i < rows->size(); ++i) {
    auto hash = rows->Hash(i, 0);
    if (!hash) return xet::IoError("a files row has a hash that is not 32 bytes");
    out.push_back({*hash, static_cast<uint64_t>(rows->Int8(i, 1)),
                   rows->IsNull(i, 2) ? std::nullopt : rows->Hash(i, 2), rows->Int8(i, 3)});
  }
  return out;
}

xet::Result<std::vector<Hash>> PostgresIndex::Scan(Scanned what, std::optional<Hash> after, size_t limit) {
  if (limit > kMaxScanned) return xet::Malformed("at most " + std::to_string(kMaxScanned) + " hashes a page");
  pg::Params p;
  if (after) {
    p.Bytea(*after);
  } else {
    p.Bytea(std::span<const uint8_t>());  // every hash sorts after the empty bytea
  }
  p.Int8(static_cast<int64_t>(limit));
  auto rows = Query(what == Scanned::kXorbs   ? kScanXorbs
                    : what == Scanned::kFiles ? kScanFiles
                                              : kScanShards,
                    p);
  if (!rows.ok()) return rows.error();
  std::vector<Hash> out;
  out.reserve(static_cast<size_t>(rows->size()));
  for (int i = 0; i < rows->size(); ++i) {
    auto hash = rows->Hash(i, 0);
    if (!hash) return xet::IoError("an index row has a hash that is not 32 bytes");
    out.push_back(*hash);
  }
  return out;
}

xet::Result<ScopeTotals> PostgresIndex::ScopeStats(std::string_view scope) {
  auto rows = Query(kScopeStats, pg::Params().Text(scope));
  if (!rows.ok()) return rows.error();
  if (rows->size() == 0) return ScopeTotals{};  // no file in the scope
  return ScopeTotals{static_cast<uint64_t>(rows->Int8(0, 0)), static_cast<uint64_t>(rows->Int8(0, 1))};
}

xet::Result<std::optional<ShardInfo>> PostgresIndex::GetShard(const Hash& shard) {
  auto rows = Query(kGetShard, pg::Params().Bytea(shard));
  if (!rows.ok()) return rows.error();
  if (rows->size() == 0) return std::optional<ShardInfo>();
  return std::optional<ShardInfo>(
      ShardInfo{.size = static_cast<uint64_t>(rows->Int8(0, 0)), .registered_at = rows->Int8(0, 1)});
}

xet::Result<std::shared_ptr<const ShardXorbs>> PostgresIndex::GetShardXorbs(const Hash& shard) {
  if (auto hit = shard_xorbs_cache_.Get(shard)) return hit;
  auto rows = Query(kGetShardXorbs, pg::Params().Bytea(shard));
  if (!rows.ok()) return rows.error();
  if (rows->size() == 0) return xet::NotFound("shard " + shard.hex() + " is not in the index");
  auto e = std::make_shared<ShardXorbs>();
  for (int i = 0; i < rows->size(); ++i) {
    if (rows->IsNull(i, 0)) continue;  // the shard has no xorbs
    auto xorb = rows->Hash(i, 0);
    if (!xorb) return xet::IoError("index row of shard " + shard.hex() + " is corrupt");
    (rows->Bool(i, 1) ? e->listed : e->referenced).push_back(*xorb);
  }
  shard_xorbs_cache_.Put(shard, e, e->memory_size());
  return std::shared_ptr<const ShardXorbs>(std::move(e));
}

xet::Result<std::vector<DedupHit>> PostgresIndex::LookupDedup(const ChunkHash& chunk,
                                                              std::optional<std::string_view> scope) {
  pg::Params p;
  p.Bytea(chunk);
  if (scope) p.Text(*scope);
  auto rows = Query(scope ? kDedupScoped : kDedupAny, p);
  if (!rows.ok()) return rows.error();
  std::vector<DedupHit> hits;
  for (int i = 0; i < rows->size(); ++i) {
    auto xorb = rows->Hash(i, 0);
    auto shard = rows->Hash(i, 1);
    if (xorb && shard) hits.push_back({*xorb, *shard});
  }
  return hits;
}

xet::Result<IndexStats> PostgresIndex::Stats() {
  auto rows = Query(kStats, {});
  if (!rows.ok()) return rows.error();
  if (rows->size() != 1) return xet::IoError("postgres: the counters are missing");
  const auto u = [&](int col) { return static_cast<uint64_t>(rows->Int8(0, col)); };
  return IndexStats{.xorbs = u(0),
                    .files = u(1),
                    .chunks = u(2),
                    .stored_bytes = u(3),
                    .shards = u(4),
                    .unpacked_bytes = u(5),
                    .file_bytes = u(6)};
}

xet::Result<std::string> PostgresIndex::SharedSecret(std::string_view name, std::string_view candidate) {
  // Insert-if-absent, then read in a new statement: under READ COMMITTED that sees a value a concurrent
  // node committed first, which the insert's own snapshot would not.
  if (auto put =
          Query(kAddSecret, pg::Params().Text(name).Text(candidate).Int8(options_.clock->UnixSeconds()));
      !put.ok()) {
    return put.error();
  }
  auto rows = Query(kGetSecret, pg::Params().Text(name));
  if (!rows.ok()) return rows.error();
  if (rows->size() != 1) return xet::IoError("postgres: secret " + std::string(name) + " vanished");
  return std::string(rows->Text(0, 0));
}

xet::Result<std::vector<SecretRecord>> PostgresIndex::ListSecrets() {
  auto rows = Query(kListSecrets, pg::Params());
  if (!rows.ok()) return rows.error();
  std::vector<SecretRecord> out;
  for (int i = 0; i < rows->size(); ++i)
    out.push_back({std::string(rows->Text(i, 0)), std::string(rows->Text(i, 1)), rows->Int8(i, 2)});
  return out;
}

xet::Result<bool> PostgresIndex::AddSecret(std::string_view name, std::string_view value) {
  auto rows = Query(kAddSecret, pg::Params().Text(name).Text(value).Int8(options_.clock->UnixSeconds()));
  if (!rows.ok()) return rows.error();
  return rows->size() == 1;
}

xet::Result<bool> PostgresIndex::DeleteSecret(std::string_view name) {
  auto rows = Query(kDeleteSecret, pg::Params().Text(name));
  if (!rows.ok()) return rows.error();
  return rows->size() == 1;
}

xet::Status PostgresIndex::ShareFiles(std::span<const FileHash> hashes, std::string_view scope) {
  if (hashes.size() > kMaxSharedFiles) return xet::Malformed("too many files shared at once");
  if (hashes.empty()) return xet::Ok{};
  int64_t asked = 0;
  int64_t found = 0;
  WriteRequest req{&kShareFiles, {}, [&](const pg::Rows& rows) {
                     if (rows.size() != 1) return;
                     asked = rows.Int8(0, 0);
                     found = rows.Int8(0, 1);
                   }};
  req.params.HashArray(hashes).Text(scope);
  if (auto st = writes_->Submit(req); !st.ok()) return st;
  if (found != asked || asked == 0) return xet::NotFound("a file shared is not in the index");
  return xet::Ok{};
}

// ---- Repositories

namespace {

std::vector<uint8_t> Bytes(std::span<const uint8_t> b) {
  return {b.begin(), b.end()};
}

// Objects as the three arrays the statements unnest.
void ObjectArrays(pg::Params& p, const std::vector<RepoObject>& objects) {
  std::vector<std::optional<std::span<const uint8_t>>> keys, data;
  std::vector<int64_t> kinds;
  for (const RepoObject& o : objects) {
    keys.emplace_back(o.key);
    kinds.push_back(o.kind);
    data.emplace_back(o.data);
  }
  p.ByteaArray(keys).Int8Array(kinds).ByteaArray(data);
}

xet::Status CheckKeys(const std::vector<RepoObject>& objects) {
  for (const RepoObject& o : objects) {
    if (o.key.empty() || o.key.size() > 32) return xet::Malformed("object keys are 1 to 32 bytes");
  }
  return xet::Ok{};
}

RepoRecord RepoFromRow(const pg::Rows& rows, int r, RepoType type) {
  return RepoRecord{.id = rows.Int8(r, 0),
                    .type = type,
                    .ns = std::string(rows.Text(r, 1)),
                    .name = std::string(rows.Text(r, 2)),
                    .is_private = rows.Bool(r, 3),
                    .created_at = rows.Int8(r, 4),
                    .scope = std::string(rows.Text(r, 5)),
                    .read_scope = std::string(rows.Text(r, 6))};
}

}  // namespace

xet::Result<RepoRecord> PostgresIndex::CreateRepo(const NewRepo& repo) {
  if (auto st = CheckKeys(repo.objects); !st.ok()) return st.error();
  if (repo.scope.empty() || repo.read_scope.empty() || repo.scope == repo.read_scope) {
    return xet::Malformed("a repository needs a scope and a read scope of its own");
  }
  std::optional<int64_t> id;
  WriteRequest req{&kCreateRepo, {}, [&](const pg::Rows& rows) {
                     if (rows.size() == 1) id = rows.Int8(0, 0);
                   }};
  req.params.Int8(static_cast<uint8_t>(repo.type)).Text(repo.ns).Text(repo.name).Bool(repo.is_private);
  req.params.Int8(repo.created_at);
  ObjectArrays(req.params, repo.objects);
  std::vector<int64_t> kinds;
  std::vector<std::string> names;
  std::vector<std::optional<std::span<const uint8_t>>> targets;
  for (const Ref& ref : repo.refs) {
    kinds.push_back(static_cast<uint8_t>(ref.kind));
    names.push_back(ref.name);
    targets.emplace_back(ref.target);
  }
  req.params.Int8Array(kinds).TextArray(names).ByteaArray(targets).Text(repo.scope).Text(repo.read_scope);
  if (auto st = writes_->Submit(req); !st.ok()) return st.error();
  if (!id) return xet::Conflict("repository " + repo.ns + "/" + repo.name + " exists");
  return RepoRecord{.id = *id,
                    .type = repo.type,
                    .ns = repo.ns,
                    .name = repo.name,
                    .is_private = repo.is_private,
                    .created_at = repo.created_at,
                    .scope = repo.scope,
                    .read_scope = repo.read_scope};
}

xet::Result<RepoRecord> PostgresIndex::FindRepo(RepoType type, std::string_view ns, std::string_view name) {
  auto rows = Query(kFindRepo, pg::Params().Int8(static_cast<uint8_t>(type)).Text(ns).Text(name));
  if (!rows.ok()) return rows.error();
  if (rows->size() == 0) return xet::NotFound("repository " + std::string(ns) + "/" + std::string(name));
  return RepoRecord{.id = rows->Int8(0, 0),
                    .type = type,
                    .ns = std::string(ns),
                    .name = std::string(name),
                    .is_private = rows->Bool(0, 1),
                    .created_at = rows->Int8(0, 2),
                    .scope = std::string(rows->Text(0, 3)),
                    .read_scope = std::string(rows->Text(0, 4))};
}

xet::Result<std::vector<RepoRecord>> PostgresIndex::ListRepos(
    RepoType type, std::optional<std::string_view> ns,
    std::optional<std::pair<std::string, std::string>> after, size_t limit) {
  if (limit > kMaxListedRepos) return xet::Malformed("too many repositories in one listing");
  pg::Params p;
  p.Int8(static_cast<uint8_t>(type));
  if (ns) {
    p.Text(*ns);
  } else {
    p.Null();
  }
  p.Text(after ? after->first : "").Text(after ? after->second : "").Int8(static_cast<int64_t>(limit));
  auto rows = Query(kListRepos, p);
  if (!rows.ok()) return rows.error();
  std::vector<RepoRecord> out;
  for (int r = 0; r < rows->size(); ++r) out.push_back(RepoFromRow(*rows, r, type));
  return out;
}

xet::Status PostgresIndex::UpdateRepo(int64_t id, const RepoChange& change) {
  if (change.ns.has_value() != change.name.has_value()) {
    return xet::Malformed("a move names both the namespace and the name");
  }
  int64_t found = 0;
  int64_t taken = 0;
  WriteRequest req{&kUpdateRepo, {}, [&](const pg::Rows& rows) {
                     if (rows.size() != 1) return;
                     found = rows.Int8(0, 0);
                     taken = rows.Int8(0, 1);
                   }};
  req.params.Int8(id);
  if (change.is_private) {
    req.params.Bool(*change.is_private);
  } else {
    req.params.Null();
  }
  if (change.ns) {
    req.params.Text(*change.ns).Text(*change.name);
  } else {
    req.params.Null().Null();
  }
  if (change.read_scope) {
    req.params.Text(*change.read_scope);
  } else {
    req.params.Null();
  }
  if (auto st = writes_->Submit(req); !st.ok()) return st;
  if (found == 0) return xet::NotFound("repository " + std::to_string(id) + " is not in the index");
  if (taken != 0) return xet::Conflict("repository " + *change.ns + "/" + *change.name + " exists");
  return xet::Ok{};
}

xet::Status PostgresIndex::DeleteRepo(int64_t id) {
  int64_t deleted = 0;
  WriteRequest req{&kDeleteRepo, {}, [&](const pg::Rows& rows) {
                     if (rows.size() == 1) deleted = rows.Int8(0, 0);
                   }};
  req.params.Int8(id);
  if (auto st = writes_->Submit(req); !st.ok()) return st;
  if (deleted == 0) return xet::NotFound("repository " + std::to_string(id) + " is not in the index");
  return xet::Ok{};
}

xet::Status PostgresIndex::PutRepoObjects(int64_t repo, const std::vector<RepoObject>& objects) {
  if (auto st = CheckKeys(objects); !st.ok()) return st;
  int64_t found = 0;
  WriteRequest req{&kPutRepoObjects, {}, [&](const pg::Rows& rows) {
                     if (rows.size() == 1) found = rows.Int8(0, 0);
                   }};
  req.params.Int8(repo);
  ObjectArrays(req.params, objects);
  if (auto st = writes_->Submit(req); !st.ok()) return st;
  if (found == 0) return xet::NotFound("repository " + std::to_string(repo) + " is not in the index");
  return xet::Ok{};
}

xet::Result<std::vector<std::optional<RepoObject>>> PostgresIndex::GetRepoObjects(
    int64_t repo, const std::vector<std::vector<uint8_t>>& keys) {
  if (keys.size() > kMaxObjectsPerRead) return xet::Malformed("too many objects in one read");
  std::vector<std::optional<RepoObject>> out(keys.size());
  if (keys.empty()) return out;
  std::vector<std::optional<std::span<const uint8_t>>> wanted(keys.begin(), keys.end());
  auto rows = Query(kGetRepoObjects, pg::Params().Int8(repo).ByteaArray(wanted));
  if (!rows.ok()) return rows.error();
  for (int r = 0; r < rows->size(); ++r) {
    const int64_t i = rows->Int8(r, 0) - 1;  // ORDINALITY counts from 1
    if (i < 0 || static_cast<size_t>(i) >= keys.size()) return xet::IoError("index: an object out of place");
    out[i] = RepoObject{
        .key = keys[i], .kind = static_cast<uint8_t>(rows->Int8(r, 1)), .data = Bytes(rows->Bytes(r, 2))};
  }
  return out;
}

xet::Result<std::optional<RepoObjectHead>> PostgresIndex::GetRepoObjectHead(int64_t repo,
                                                                            std::span<const uint8_t> key,
                                                                            size_t max_bytes) {
  const auto bound = static_cast<int64_t>(std::min<size_t>(max_bytes, INT32_MAX));
  auto rows = Query(kGetRepoObjectHead, pg::Params().Int8(repo).Bytea(key).Int8(bound));
  if (!rows.ok()) return rows.error();
  if (rows->size() == 0) return std::optional<RepoObjectHead>();
  return std::optional<RepoObjectHead>(RepoObjectHead{.kind = static_cast<uint8_t>(rows->Int8(0, 0)),
                                                      .size = static_cast<uint64_t>(rows->Int8(0, 1)),
                                                      .data = Bytes(rows->Bytes(0, 2))});
}

xet::Result<std::vector<Ref>> PostgresIndex::ListRefs(int64_t repo) {
  auto rows = Query(kListRefs, pg::Params().Int8(repo));
  if (!rows.ok()) return rows.error();
  std::vector<Ref> out;
  for (int r = 0; r < rows->size(); ++r) {
    out.push_back(Ref{.kind = static_cast<RefKind>(rows->Int8(r, 0)),
                      .name = std::string(rows->Text(r, 1)),
                      .target = Bytes(rows->Bytes(r, 2))});
  }
  return out;
}

xet::Status PostgresIndex::UpdateRef(int64_t repo, const RefUpdate& update) {
  int64_t found = 0;
  int64_t changed = 0;
  WriteRequest req{&kUpdateRef, {}, [&](const pg::Rows& rows) {
                     if (rows.size() != 1) return;
                     found = rows.Int8(0, 0);
                     changed = rows.Int8(0, 1);
                   }};
  req.params.Int8(repo).Int8(static_cast<uint8_t>(update.kind)).Text(update.name);
  if (update.expected) {
    req.params.Bytea(*update.expected);
  } else {
    req.params.Null();
  }
  if (update.target) {
    req.params.Bytea(*update.target);
  } else {
    req.params.Null();
  }
  if (auto st = writes_->Submit(req); !st.ok()) return st;
  if (found == 0) return xet::NotFound("repository " + std::to_string(repo) + " is not in the index");
  if (changed == 0 && (update.expected || update.target)) {
    return xet::Conflict(update.expected ? "ref " + update.name + " has moved"
                                         : "ref " + update.name + " exists");
  }
  return xet::Ok{};
}

namespace {

// A bucket file from row `r`, columns from `col` on: path, file, size, mtime, content_type, uploaded_at.
BucketFile BucketFileFromRow(const pg::Rows& rows, int r, int col) {
  BucketFile f;
  f.path = std::string(rows.Text(r, col));
  if (auto h = rows.Hash(r, col + 1)) f.file = *h;
  f.size = static_cast<uint64_t>(rows.Int8(r, col + 2));
  f.mtime_ms = rows.Int8(r, col + 3);
  if (!rows.IsNull(r, col + 4)) f.content_type = std::string(rows.Text(r, col + 4));
  f.uploaded_at = rows.Int8(r, col + 5);
  return f;
}

}  // namespace

xet::Status PostgresIndex::ChangeBucket(int64_t repo, const std::vector<BucketChange>& changes) {
  std::vector<std::string> paths, types;
  std::vector<std::optional<std::span<const uint8_t>>> hashes;
  std::vector<int64_t> sizes, mtimes, uploaded;
  for (const BucketChange& ch : changes) {
    paths.push_back(ch.path);
    if (ch.put) {
      hashes.emplace_back(std::span<const uint8_t>(ch.put->file.bytes));
      sizes.push_back(static_cast<int64_t>(ch.put->size));
      mtimes.push_back(ch.put->mtime_ms);
      uploaded.push_back(ch.put->uploaded_at);
    } else {
      hashes.emplace_back(std::nullopt);
      sizes.push_back(0);
      mtimes.push_back(0);
      uploaded.push_back(0);
    }
    types.push_back(ch.put && ch.put->content_type ? *ch.put->content_type : "");
  }
  int64_t found = 0;
  WriteRequest req{&kChangeBucket, {}, [&](const pg::Rows& rows) {
                     if (rows.size() == 1) found = rows.Int8(0, 0);
                   }};
  req.params.Int8(repo).TextArray(paths).ByteaArray(hashes).Int8Array(sizes).Int8Array(mtimes).TextArray(
      types);
  req.params.Int8Array(uploaded);
  if (auto st = writes_->Submit(req); !st.ok()) return st;
  if (found == 0) return xet::NotFound("repository " + std::to_string(repo) + " is not in the index");
  return xet::Ok{};
}

xet::Result<std::vector<BucketFile>> PostgresIndex::ListBucket(int64_t repo, std::string_view prefix,
                                                               std::optional<std::string_view> from,
                                                               size_t limit) {
  if (limit > kMaxListedFiles) return xet::Malformed("too many files in one listing");
  pg::Params p;
  p.Int8(repo).Text(prefix);
  if (auto upper = PrefixEnd(prefix)) {
    p.Text(*upper);
  } else {
    p.Null();
  }
  p.Text(from.value_or("")).Int8(static_cast<int64_t>(limit));
  auto rows = Query(kListBucket, p);
  if (!rows.ok()) return rows.error();
  std::vector<BucketFile> out;
  for (int r = 0; r < rows->size(); ++r) {
    BucketFile f = BucketFileFromRow(*rows, r, 0);
    if (f.path.starts_with(prefix)) out.push_back(std::move(f));
  }
  return out;
}

xet::Result<std::vector<std::optional<BucketFile>>> PostgresIndex::GetBucketFiles(
    int64_t repo, const std::vector<std::string>& paths) {
  if (paths.size() > kMaxObjectsPerRead) return xet::Malformed("too many paths in one read");
  std::vector<std::optional<BucketFile>> out(paths.size());
  if (paths.empty()) return out;
  auto rows = Query(kGetBucketFiles, pg::Params().Int8(repo).TextArray(paths));
  if (!rows.ok()) return rows.error();
  for (int r = 0; r < rows->size(); ++r) {
    const int64_t i = rows->Int8(r, 0) - 1;
    if (i < 0 || static_cast<size_t>(i) >= paths.size()) return xet::IoError("index: a file out of place");
    out[i] = BucketFileFromRow(*rows, r, 1);
  }
  return out;
}

xet::Result<BucketTotals> PostgresIndex::GetBucketTotals(int64_t repo) {
  auto rows = Query(kBucketTotals, pg::Params().Int8(repo));
  if (!rows.ok()) return rows.error();
  if (rows->size() != 1) return xet::IoError("index: no bucket totals");
  return BucketTotals{static_cast<uint64_t>(rows->Int8(0, 0)), static_cast<uint64_t>(rows->Int8(0, 1))};
}

xet::Status PostgresIndex::Ping() {
  auto rows = Query(kPing, {});
  if (!rows.ok()) return rows.error();
  return xet::Ok{};
}

}  // namespace cairn::index
