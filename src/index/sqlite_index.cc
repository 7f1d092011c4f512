#include "index/sqlite_index.h"

#include <sqlite3.h>

#include <cstring>
#include <ctime>
#include <filesystem>
#include <string>
#include <unordered_map>
#include <utility>

namespace cairn::index {

namespace {

// Ordered schema migrations: entry i takes the database from user_version i to i + 1. Append only; never
// edit a migration that has shipped.
constexpr const char* kMigrations[] = {
    R"sql(
CREATE TABLE xorbs(
  hash BLOB PRIMARY KEY CHECK (length(hash) = 32),
  layout BLOB NOT NULL,                 -- packed chunks, 40 bytes each (index/records.h)
  chunk_count INTEGER NOT NULL,
  region_size INTEGER NOT NULL,
  unpacked_size INTEGER NOT NULL,
  stored_at INTEGER NOT NULL,
  CHECK (length(layout) = chunk_count * 40));
CREATE TABLE files(
  hash BLOB PRIMARY KEY CHECK (length(hash) = 32),
  terms BLOB NOT NULL,                  -- packed terms, 52 bytes each (index/records.h)
  term_count INTEGER NOT NULL,
  size INTEGER NOT NULL,
  sha256 BLOB CHECK (sha256 IS NULL OR length(sha256) = 32),
  created_at INTEGER NOT NULL,
  CHECK (length(terms) = term_count * 52));
CREATE INDEX files_by_sha256 ON files(sha256) WHERE sha256 IS NOT NULL;
CREATE TABLE file_scopes(
  file BLOB NOT NULL REFERENCES files(hash),
  scope TEXT NOT NULL,
  PRIMARY KEY (file, scope)) WITHOUT ROWID;
CREATE TABLE shards(
  hash BLOB PRIMARY KEY CHECK (length(hash) = 32),
  size INTEGER NOT NULL,
  registered_at INTEGER NOT NULL);
CREATE TABLE dedup(
  chunk BLOB NOT NULL,
  scope TEXT NOT NULL,
  xorb BLOB NOT NULL REFERENCES xorbs(hash),
  shard BLOB NOT NULL REFERENCES shards(hash),
  PRIMARY KEY (chunk, scope, xorb)) WITHOUT ROWID;
CREATE TABLE counters(
  id INTEGER PRIMARY KEY CHECK (id = 1),
  xorbs INTEGER NOT NULL, files INTEGER NOT NULL, chunks INTEGER NOT NULL,
  stored_bytes INTEGER NOT NULL, shards INTEGER NOT NULL);
INSERT INTO counters VALUES (1, 0, 0, 0, 0, 0);
)sql",
    // 2: logical bytes (Σ file sizes) and unpacked bytes (Σ xorb contents), for the dedup ratio.
    R"sql(
ALTER TABLE counters ADD COLUMN unpacked_bytes INTEGER NOT NULL DEFAULT 0;
ALTER TABLE counters ADD COLUMN file_bytes INTEGER NOT NULL DEFAULT 0;
UPDATE counters SET unpacked_bytes = (SELECT COALESCE(SUM(unpacked_size), 0) FROM xorbs),
                    file_bytes = (SELECT COALESCE(SUM(size), 0) FROM files);
)sql",
    // 3: the xorbs each shard brought together, for dedup answers that carry a hit's neighbourhood. Shards
    // registered before have only their dedup entries to go by (upload order unknown).
    R"sql(
CREATE TABLE shard_xorbs(
  shard BLOB NOT NULL REFERENCES shards(hash),
  seq INTEGER NOT NULL,                 -- listed xorbs first, in upload order, then referenced ones
  xorb BLOB NOT NULL REFERENCES xorbs(hash),
  listed INTEGER NOT NULL,              -- 1: in the shard's xorb section; 0: used by its files only
  PRIMARY KEY (shard, seq)) WITHOUT ROWID;
INSERT INTO shard_xorbs(shard, seq, xorb, listed)
  SELECT shard, row_number() OVER (PARTITION BY shard ORDER BY xorb) - 1, xorb, 1
  FROM (SELECT DISTINCT shard, xorb FROM dedup);
)sql",
    // 4: the signing secrets, shared by every process on this index (config/secrets.h).
    R"sql(
CREATE TABLE secrets(
  name TEXT PRIMARY KEY,
  value TEXT NOT NULL,
  created_at INTEGER NOT NULL);
)sql",
    // 5: each file's term byte ranges in their xorbs (index/records.h), so that a reconstruction needs a
    // layout only for the terms a byte range cuts. Files registered before have none (NULL).
    R"sql(
ALTER TABLE files ADD COLUMN ranges BLOB CHECK (ranges IS NULL OR length(ranges) = term_count * 8);
)sql",
    // 6: listing a scope's files in hash order (GET /v1/files) without scanning every scope's.
    R"sql(
CREATE INDEX file_scopes_by_scope ON file_scopes(scope, file);
)sql",
    // 7: each scope's file count and bytes, kept as files join it: summing them at every listing read every
    // file row of the scope (175 s for a scope of 10^6 files).
    R"sql(
CREATE TABLE scope_totals(
  scope TEXT PRIMARY KEY,
  files INTEGER NOT NULL,
  bytes INTEGER NOT NULL);
INSERT INTO scope_totals(scope, files, bytes)
  SELECT s.scope, count(*), sum(f.size) FROM file_scopes s JOIN files f ON f.hash = s.file GROUP BY s.scope;
)sql",
    // 8: Hub repositories, the objects of their histories and their refs (repo_records.h).
    R"sql(
CREATE TABLE repos(
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  type INTEGER NOT NULL,
  ns TEXT NOT NULL,
  name TEXT NOT NULL,
  private INTEGER NOT NULL,
  created_at INTEGER NOT NULL,
  scope TEXT NOT NULL,
  UNIQUE(type, ns, name));
CREATE TABLE repo_objects(
  repo INTEGER NOT NULL,
  key BLOB NOT NULL CHECK (length(key) BETWEEN 1 AND 32),
  kind INTEGER NOT NULL,
  data BLOB NOT NULL,
  PRIMARY KEY(repo, key));
CREATE TABLE repo_refs(
  repo INTEGER NOT NULL,
  kind INTEGER NOT NULL,
  name TEXT NOT NULL,
  target BLOB NOT NULL,
  PRIMARY KEY(repo, kind, name)) WITHOUT ROWID;
CREATE TABLE bucket_files(
  repo INTEGER NOT NULL,
  path TEXT NOT NULL,
  file BLOB NOT NULL CHECK (length(file) = 32),
  size INTEGER NOT NULL,
  mtime INTEGER NOT NULL,
  content_type TEXT,
  uploaded_at INTEGER NOT NULL,
  PRIMARY KEY(repo, path)) WITHOUT ROWID;
)sql",
    // 9: each repository's read scope, which sees only what the repository committed (repo_records.h).
    // Repositories made before publish what their LFS links (kind 16) and bucket files name.
    R"sql(
ALTER TABLE repos ADD COLUMN read_scope TEXT NOT NULL DEFAULT '';
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
static_assert(std::size(kMigrations) == SqliteIndex::kSchemaVersion);
static_assert(kFileLinkKind == 16, "migration 9 reads the links by their kind");
static_assert(Index::kMaxDedupHits == 32, "the LIMIT of kDedupAny and kDedupScoped");

// Transaction control, prepared once per connection (sqlite3_exec would parse them for every request).
constexpr const char kBegin[] = "BEGIN IMMEDIATE";
constexpr const char kCommit[] = "COMMIT";
constexpr const char kRollback[] = "ROLLBACK";
constexpr const char kSavepoint[] = "SAVEPOINT request";
constexpr const char kRelease[] = "RELEASE request";
constexpr const char kRollbackTo[] = "ROLLBACK TO request";
constexpr const char kSetWal[] = "PRAGMA journal_mode = WAL";
constexpr const char kUserVersion[] = "PRAGMA user_version";

// Statements. Their addresses key each connection's prepared-statement cache.
constexpr const char kGetXorb[] =
    "SELECT layout, chunk_count, region_size, unpacked_size, stored_at FROM xorbs WHERE hash = ?1";
constexpr const char kHasXorb[] = "SELECT 1 FROM xorbs WHERE hash = ?1";
constexpr const char kPutXorb[] =
    "INSERT INTO xorbs(hash, layout, chunk_count, region_size, unpacked_size, stored_at) "
    "VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT(hash) DO NOTHING";
constexpr const char kGetFile[] = "SELECT terms, term_count, size, sha256, ranges FROM files WHERE hash = ?1";
constexpr const char kFileVisible[] = "SELECT 1 FROM file_scopes WHERE file = ?1 AND scope = ?2";
constexpr const char kGetVisibleFile[] =
    "SELECT terms, term_count, size, sha256, ranges FROM files WHERE hash = ?1 "
    "AND EXISTS (SELECT 1 FROM file_scopes WHERE file = ?1 AND scope = ?2)";
constexpr const char kListFiles[] =
    "SELECT f.hash, f.size, f.sha256, f.created_at FROM file_scopes s JOIN files f ON f.hash = s.file "
    "WHERE s.scope = ?1 AND s.file > ?2 ORDER BY s.file LIMIT ?3";
constexpr const char kScanXorbs[] = "SELECT hash FROM xorbs WHERE hash > ?1 ORDER BY hash LIMIT ?2";
constexpr const char kScanFiles[] = "SELECT hash FROM files WHERE hash > ?1 ORDER BY hash LIMIT ?2";
constexpr const char kScanShards[] = "SELECT hash FROM shards WHERE hash > ?1 ORDER BY hash LIMIT ?2";
constexpr const char kScopeStats[] = "SELECT files, bytes FROM scope_totals WHERE scope = ?1";
constexpr const char kBumpScope[] =
    "INSERT INTO scope_totals(scope, files, bytes) VALUES (?1, ?2, ?3) "
    "ON CONFLICT(scope) DO UPDATE SET files = files + excluded.files, bytes = bytes + excluded.bytes";
constexpr const char kFileSize[] = "SELECT size FROM files WHERE hash = ?1";
constexpr const char kFileBySha[] = "SELECT hash FROM files WHERE sha256 = ?1 LIMIT 1";
constexpr const char kFileByShaScoped[] =
    "SELECT f.hash FROM files f JOIN file_scopes s ON s.file = f.hash WHERE f.sha256 = ?1 AND s.scope = ?2 "
    "LIMIT 1";
constexpr const char kPutShard[] =
    "INSERT INTO shards(hash, size, registered_at) VALUES (?1, ?2, ?3) ON CONFLICT(hash) DO NOTHING";
constexpr const char kGetShard[] = "SELECT size, registered_at FROM shards WHERE hash = ?1";
constexpr const char kPutShardXorb[] =
    "INSERT INTO shard_xorbs(shard, seq, xorb, listed) VALUES (?1, ?2, ?3, ?4) ON CONFLICT DO NOTHING";
constexpr const char kGetShardXorbs[] = "SELECT xorb, listed FROM shard_xorbs WHERE shard = ?1 ORDER BY seq";
constexpr const char kPutFile[] =
    "INSERT INTO files(hash, terms, term_count, size, sha256, created_at, ranges) "
    "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT(hash) DO NOTHING";
constexpr const char kPutScope[] =
    "INSERT INTO file_scopes(file, scope) VALUES (?1, ?2) ON CONFLICT(file, scope) DO NOTHING";
constexpr const char kPutDedup[] =
    "INSERT INTO dedup(chunk, scope, xorb, shard) VALUES (?1, ?2, ?3, ?4) "
    "ON CONFLICT(chunk, scope, xorb) DO NOTHING";
constexpr const char kDedupAny[] = "SELECT DISTINCT xorb, shard FROM dedup WHERE chunk = ?1 LIMIT 32";
constexpr const char kDedupScoped[] =
    "SELECT xorb, shard FROM dedup WHERE chunk = ?1 AND scope = ?2 LIMIT 32";
constexpr const char kBumpCounters[] =
    "UPDATE counters SET xorbs = xorbs + ?1, files = files + ?2, chunks = chunks + ?3, "
    "stored_bytes = stored_bytes + ?4, shards = shards + ?5, unpacked_bytes = unpacked_bytes + ?6, "
    "file_bytes = file_bytes + ?7 WHERE id = 1";
constexpr const char kPutSecret[] =
    "INSERT INTO secrets(name, value, created_at) VALUES (?1, ?2, ?3) ON CONFLICT(name) DO NOTHING";
constexpr const char kGetSecret[] = "SELECT value FROM secrets WHERE name = ?1";
constexpr const char kListSecrets[] = "SELECT name, value, created_at FROM secrets ORDER BY name";
constexpr const char kDeleteSecret[] = "DELETE FROM secrets WHERE name = ?1";
constexpr const char kPing[] = "SELECT 1";
constexpr const char kCreateRepo[] =
    "INSERT INTO repos(type, ns, name, private, created_at, scope, read_scope) "
    "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT DO NOTHING";
constexpr const char kFindRepo[] =
    "SELECT id, private, created_at, scope, read_scope FROM repos WHERE type = ?1 AND ns = ?2 AND name = ?3";
constexpr const char kListRepos[] =
    "SELECT id, ns, name, private, created_at, scope, read_scope FROM repos WHERE type = ?1 "
    "AND (?2 IS NULL OR ns = ?2) AND (ns, name) > (?3, ?4) ORDER BY ns, name LIMIT ?5";
constexpr const char kRepoById[] = "SELECT type, scope, read_scope FROM repos WHERE id = ?1";
constexpr const char kSetPrivate[] = "UPDATE repos SET private = ?2 WHERE id = ?1";
constexpr const char kSetReadScope[] = "UPDATE repos SET read_scope = ?2 WHERE id = ?1";
constexpr const char kMoveScopeFiles[] = "UPDATE file_scopes SET scope = ?2 WHERE scope = ?1";
constexpr const char kMoveScopeTotals[] = "UPDATE scope_totals SET scope = ?2 WHERE scope = ?1";
constexpr const char kDropScopeFiles[] = "DELETE FROM file_scopes WHERE scope = ?1";
constexpr const char kDropScopeTotals[] = "DELETE FROM scope_totals WHERE scope = ?1";
constexpr const char kRenameRepo[] = "UPDATE repos SET ns = ?2, name = ?3 WHERE id = ?1";
constexpr const char kDeleteRepo[] = "DELETE FROM repos WHERE id = ?1";
constexpr const char kDeleteRepoObjects[] = "DELETE FROM repo_objects WHERE repo = ?1";
constexpr const char kDeleteRepoRefs[] = "DELETE FROM repo_refs WHERE repo = ?1";
constexpr const char kDeleteRepoFiles[] = "DELETE FROM bucket_files WHERE repo = ?1";
constexpr const char kPutBucketFile[] =
    "INSERT INTO bucket_files(repo, path, file, size, mtime, content_type, uploaded_at) "
    "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT(repo, path) DO UPDATE SET file = excluded.file, "
    "size = excluded.size, mtime = excluded.mtime, content_type = excluded.content_type, "
    "uploaded_at = excluded.uploaded_at";
constexpr const char kDeleteBucketFile[] = "DELETE FROM bucket_files WHERE repo = ?1 AND path = ?2";
constexpr const char kListBucket[] =
    "SELECT path, file, size, mtime, content_type, uploaded_at FROM bucket_files WHERE repo = ?1 AND path >= "
    "?2 "
    "AND (?3 IS NULL OR path < ?3) AND path >= ?4 ORDER BY path LIMIT ?5";
constexpr const char kGetBucketFile[] =
    "SELECT path, file, size, mtime, content_type, uploaded_at FROM bucket_files WHERE repo = ?1 AND path = "
    "?2";
constexpr const char kBucketTotals[] =
    "SELECT count(*), COALESCE(sum(size), 0) FROM bucket_files WHERE repo = ?1";
constexpr const char kPutRepoObject[] =
    "INSERT INTO repo_objects(repo, key, kind, data) VALUES (?1, ?2, ?3, ?4) ON CONFLICT DO NOTHING";
constexpr const char kGetRepoObject[] = "SELECT kind, data FROM repo_objects WHERE repo = ?1 AND key = ?2";
constexpr const char kGetRepoObjectHead[] =
    "SELECT kind, length(data), substr(data, 1, ?3) FROM repo_objects WHERE repo = ?1 AND key = ?2";
constexpr const char kListRefs[] =
    "SELECT kind, name, target FROM repo_refs WHERE repo = ?1 ORDER BY kind, name";
constexpr const char kGetRef[] = "SELECT target FROM repo_refs WHERE repo = ?1 AND kind = ?2 AND name = ?3";
constexpr const char kInsertRef[] = "INSERT INTO repo_refs(repo, kind, name, target) VALUES (?1, ?2, ?3, ?4)";
constexpr const char kSetRef[] =
    "UPDATE repo_refs SET target = ?4 WHERE repo = ?1 AND kind = ?2 AND name = ?3";
constexpr const char kDeleteRef[] = "DELETE FROM repo_refs WHERE repo = ?1 AND kind = ?2 AND name = ?3";
constexpr const char kStats[] =
    "SELECT xorbs, files, chunks, stored_bytes, shards, unpacked_bytes, file_bytes FROM counters WHERE id = "
    "1";

// A prepared statement borrowed from a connection's cache; reset (and unbound) when the borrow ends.
// Bound blobs and texts are not copied (SQLITE_STATIC): they must outlive the last Step.
class Stmt {
 public:
  explicit Stmt(sqlite3_stmt* s) : s_(s) {}
  ~Stmt() {
    if (s_ == nullptr) return;
    sqlite3_reset(s_);
    sqlite3_clear_bindings(s_);
  }
  Stmt(Stmt&& o) noexcept : s_(std::exchange(o.s_, nullptr)) {}
  Stmt& operator=(Stmt&&) = delete;
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

  Stmt& Bind(int i, std::span<const uint8_t> b) {
    // A null pointer would bind SQL NULL; an empty file's terms are an empty blob, not NULL.
    if (b.empty()) {
      sqlite3_bind_zeroblob(s_, i, 0);
    } else {
      sqlite3_bind_blob(s_, i, b.data(), static_cast<int>(b.size()), SQLITE_STATIC);
    }
    return *this;
  }
  Stmt& Bind(int i, const Hash& h) { return Bind(i, std::span<const uint8_t>(h.bytes)); }
  Stmt& Bind(int i, int64_t v) {
    sqlite3_bind_int64(s_, i, v);
    return *this;
  }
  Stmt& Bind(int i, std::string_view t) {
    sqlite3_bind_text(s_, i, t.data(), static_cast<int>(t.size()), SQLITE_STATIC);
    return *this;
  }
  Stmt& BindNull(int i) {
    sqlite3_bind_null(s_, i);
    return *this;
  }

  int Step() { return sqlite3_step(s_); }
  int64_t Int(int col) const { return sqlite3_column_int64(s_, col); }
  std::span<const uint8_t> Blob(int col) const {
    const void* p = sqlite3_column_blob(s_, col);
    return {static_cast<const uint8_t*>(p), static_cast<size_t>(sqlite3_column_bytes(s_, col))};
  }
  std::string_view Text(int col) const {
    const unsigned char* p = sqlite3_column_text(s_, col);
    if (p == nullptr) return {};
    return {reinterpret_cast<const char*>(p), static_cast<size_t>(sqlite3_column_bytes(s_, col))};
  }
  bool IsNull(int col) const { return sqlite3_column_type(s_, col) == SQLITE_NULL; }
  // A 32-byte column; nullopt for anything else (a corrupt row must not crash a reader).
  std::optional<Hash> HashCol(int col) const {
    auto b = Blob(col);
    if (b.size() != 32) return std::nullopt;
    return Hash::FromBytes(b.data());
  }

 private:
  sqlite3_stmt* s_;
};

}  // namespace

// ---- Connection

class SqliteIndex::Conn {
 public:
  Conn() = default;

  // Opens the database; on failure the connection is unusable and only its destruction remains.
  xet::Status Open(const std::string& path, bool read_only, int busy_timeout_ms) {
    // NOMUTEX: a connection is used by one thread at a time (the writer, or one leased reader).
    const int flags =
        (read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE) | SQLITE_OPEN_NOMUTEX;
    const int rc = sqlite3_open_v2(path.c_str(), &db_, flags, nullptr);
    if (rc != SQLITE_OK) return Err("open " + path, rc);
    sqlite3_extended_result_codes(db_, 1);
    sqlite3_busy_timeout(db_, busy_timeout_ms);
    return xet::Ok{};
  }

  ~Conn() {
    for (auto& [sql, stmt] : stmts_) sqlite3_finalize(stmt);
    sqlite3_close_v2(db_);  // also after a failed open, which may still allocate a handle
  }
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;

  sqlite3* db() const { return db_; }

  xet::Error Err(std::string_view what, int rc) const {
    std::string msg =
        "sqlite: " + std::string(what) + ": " + (db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc));
    // A constraint names a request that contradicts the index; anything else is the database failing.
    if ((rc & 0xff) == SQLITE_CONSTRAINT) return xet::Inconsistent(std::move(msg));
    return xet::IoError(std::move(msg));
  }

  xet::Status Exec(const char* sql) {
    const int rc = sqlite3_exec(db_, sql, nullptr, nullptr, nullptr);
    if (rc != SQLITE_OK) return Err(sql, rc);
    return xet::Ok{};
  }

  // A cached prepared statement for `sql`, which must be one of the constants above.
  xet::Result<Stmt> Prepare(const char* sql) {
    auto it = stmts_.find(sql);
    if (it == stmts_.end()) {
      sqlite3_stmt* s = nullptr;
      const int rc = sqlite3_prepare_v3(db_, sql, -1, SQLITE_PREPARE_PERSISTENT, &s, nullptr);
      if (rc != SQLITE_OK) return Err(sql, rc);
      it = stmts_.emplace(sql, s).first;
    }
    return Stmt(it->second);
  }

  // Steps a statement that returns no rows.
  xet::Status Run(Stmt& s, const char* what) {
    const int rc = s.Step();
    if (rc != SQLITE_DONE) return Err(what, rc);
    return xet::Ok{};
  }

  // Runs one of the cached statements that take no parameters and return no rows.
  xet::Status Step(const char* sql) {
    auto s = Prepare(sql);
    if (!s.ok()) return s.error();
    return Run(*s, sql);
  }

  int changes() const { return sqlite3_changes(db_); }

 private:
  sqlite3* db_ = nullptr;
  std::unordered_map<const char*, sqlite3_stmt*> stmts_;
};

class SqliteIndex::ReaderLease {
 public:
  ReaderLease(SqliteIndex* owner, std::unique_ptr<Conn> conn) : owner_(owner), conn_(std::move(conn)) {}
  ReaderLease(ReaderLease&&) noexcept = default;
  ReaderLease& operator=(ReaderLease&&) = delete;
  ReaderLease(const ReaderLease&) = delete;
  ReaderLease& operator=(const ReaderLease&) = delete;
  ~ReaderLease() {
    if (conn_) owner_->ReleaseReader(std::move(conn_));
  }
  Conn* operator->() const { return conn_.get(); }

 private:
  SqliteIndex* owner_;
  std::unique_ptr<Conn> conn_;
};

// ---- Open and close

SqliteIndex::SqliteIndex(SqliteOptions options)
    : options_(std::move(options)),
      xorb_cache_(options_.cache_bytes / 16 * 15),
      shard_xorbs_cache_(options_.cache_bytes / 16) {}

xet::Result<std::unique_ptr<SqliteIndex>> SqliteIndex::Open(SqliteOptions options) {
  std::unique_ptr<SqliteIndex> index(new SqliteIndex(std::move(options)));
  if (auto st = index->Init(); !st.ok()) return st.error();
  index->writes_ = std::make_unique<WriteQueue<WriteRequest>>(
      1, [p = index.get()](size_t, std::span<WriteRequest* const> batch) { return p->RunBatch(batch); },
      index->options_.before_batch);
  return index;
}

xet::Result<std::pair<int, int>> SqliteIndex::Migrate(const std::string& path) {
  SqliteOptions options;
  options.path = path;
  auto index = Open(std::move(options));
  if (!index.ok()) return index.error();
  return std::pair{(*index)->schema_before_, static_cast<int>(kSchemaVersion)};
}

xet::Status SqliteIndex::Init() {
  std::error_code ec;
  const bool created = !std::filesystem::exists(options_.path, ec);
  writer_conn_ = std::make_unique<Conn>();
  if (auto st = writer_conn_->Open(options_.path, /*read_only=*/false, options_.busy_timeout_ms); !st.ok()) {
    return st;
  }
  // The index holds the signing secrets: owner only (SQLite gives its -wal and -shm files the same mode).
  if (created)
    std::filesystem::permissions(
        options_.path, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write, ec);
  Conn& c = *writer_conn_;
  // WAL: readers never block the writer nor it them. FULL: a COMMIT is durable when it returns (NORMAL
  // could lose the last transactions on power loss, after clients were told they were stored).
  {
    // journal_mode answers with the mode in force: a file system without shared memory may refuse WAL.
    auto wal = c.Prepare(kSetWal);
    if (!wal.ok()) return wal.error();
    if (wal->Step() != SQLITE_ROW || wal->Text(0) != "wal") {
      return xet::IoError("sqlite: " + options_.path + " cannot use write-ahead logging");
    }
  }
  // A larger page cache keeps the B-tree interior pages that random-hash inserts walk in memory.
  for (const char* pragma :
       {"PRAGMA synchronous = FULL", "PRAGMA foreign_keys = ON", "PRAGMA cache_size = -65536"}) {
    if (auto st = c.Exec(pragma); !st.ok()) return st;
  }

  // Migrations, all pending ones in one transaction.
  if (auto st = c.Step(kBegin); !st.ok()) return st;
  int64_t version = 0;
  {
    auto v = c.Prepare(kUserVersion);
    if (!v.ok()) return v.error();
    if (v->Step() == SQLITE_ROW) version = v->Int(0);
  }
  schema_before_ = static_cast<int>(version);
  xet::Status result = xet::Ok{};
  if (version > kSchemaVersion) {
    result = xet::Inconsistent("index " + options_.path + " has schema version " + std::to_string(version) +
                               ", newer than this cairn's " + std::to_string(kSchemaVersion));
  }
  for (int64_t i = version; result.ok() && i < kSchemaVersion; ++i) result = c.Exec(kMigrations[i]);
  if (result.ok() && version < kSchemaVersion) {
    result = c.Exec(("PRAGMA user_version = " + std::to_string(kSchemaVersion)).c_str());
  }
  if (result.ok()) result = c.Step(kCommit);
  if (!result.ok()) {
    (void)c.Step(kRollback);  // the original error is the one worth reporting
    return result;
  }
  return xet::Ok{};
}

SqliteIndex::~SqliteIndex() {
  writes_.reset();  // finishes what is queued while the connection still exists
}

// ---- Writes

xet::Status SqliteIndex::Write(std::function<xet::Status(Conn&)> apply) {
  WriteRequest req{std::move(apply)};
  return writes_->Submit(req);
}

std::vector<xet::Status> SqliteIndex::RunBatch(std::span<WriteRequest* const> batch) {
  Conn& c = *writer_conn_;
  std::vector<xet::Status> results;
  results.reserve(batch.size());
  xet::Status batch_error = c.Step(kBegin);
  for (size_t i = 0; batch_error.ok() && i < batch.size(); ++i) {
    if (auto st = c.Step(kSavepoint); !st.ok()) {
      batch_error = st;
      break;
    }
    xet::Status st = batch[i]->apply(c);
    if (st.ok()) {
      batch_error = c.Step(kRelease);
    } else if (sqlite3_get_autocommit(c.db()) != 0) {
      // SQLite rolled back the whole transaction (I/O error, disk full): the earlier requests are lost too.
      batch_error = st;
    } else {
      batch_error = c.Step(kRollbackTo);
      if (batch_error.ok()) batch_error = c.Step(kRelease);
    }
    results.push_back(std::move(st));
  }
  if (batch_error.ok() && options_.fault_before_commit) batch_error = options_.fault_before_commit();
  if (batch_error.ok()) batch_error = c.Step(kCommit);
  if (!batch_error.ok()) {
    if (sqlite3_get_autocommit(c.db()) == 0) (void)c.Step(kRollback);
    // Nothing of this batch is stored: every request fails, with its own error if it had one.
    for (auto& st : results) {
      if (st.ok()) st = batch_error;
    }
    results.resize(batch.size(), batch_error);
  }
  return results;
}

xet::Result<bool> SqliteIndex::PutXorb(const XorbHash& hash, const xet::XorbLayout& layout) {
  const XorbEntry e = MakeXorbEntry(hash, layout);
  bool inserted = false;
  auto st = Write([&](Conn& c) -> xet::Status {
    auto put = c.Prepare(kPutXorb);
    if (!put.ok()) return put.error();
    put->Bind(1, hash).Bind(2, e.packed).Bind(3, int64_t{e.chunk_count}).Bind(4, int64_t{e.region_size});
    put->Bind(5, static_cast<int64_t>(e.unpacked_size)).Bind(6, options_.clock->UnixSeconds());
    if (auto r = c.Run(*put, "insert xorb"); !r.ok()) return r;
    if (c.changes() == 0) return xet::Ok{};  // already registered: immutable, nothing to do
    auto bump = c.Prepare(kBumpCounters);
    if (!bump.ok()) return bump.error();
    bump->Bind(1, int64_t{1}).Bind(2, int64_t{0}).Bind(3, int64_t{e.chunk_count});
    bump->Bind(4, int64_t{e.region_size}).Bind(5, int64_t{0});
    bump->Bind(6, static_cast<int64_t>(e.unpacked_size)).Bind(7, int64_t{0});
    if (auto r = c.Run(*bump, "count xorb"); !r.ok()) return r;
    inserted = true;
    return xet::Ok{};
  });
  if (!st.ok()) return st.error();
  return inserted;
}

xet::Result<CommitOutcome> SqliteIndex::CommitShard(const ShardCommit& commit) {
  // Checked here, before the request joins a batch; the CHECK constraints are the backstop.
  if (auto st = CheckShardCommit(commit); !st.ok()) return st.error();
  CommitOutcome outcome;
  auto st = Write([&](Conn& c) -> xet::Status {
    const int64_t now = options_.clock->UnixSeconds();
    auto shard = c.Prepare(kPutShard);
    if (!shard.ok()) return shard.error();
    shard->Bind(1, commit.shard).Bind(2, static_cast<int64_t>(commit.shard_size)).Bind(3, now);
    if (auto r = c.Run(*shard, "insert shard"); !r.ok()) return r;
    outcome.already_existed = c.changes() == 0;
    if (!outcome.already_existed) {
      int64_t seq = 0;
      for (const auto* list : {&commit.xorbs.listed, &commit.xorbs.referenced}) {
        const int64_t listed = list == &commit.xorbs.listed ? 1 : 0;
        for (const auto& x : *list) {
          auto put = c.Prepare(kPutShardXorb);
          if (!put.ok()) return put.error();
          put->Bind(1, commit.shard).Bind(2, seq++).Bind(3, x).Bind(4, listed);
          if (auto r = c.Run(*put, "insert shard xorb"); !r.ok()) {
            return xet::Error{r.error().code, "xorb " + x.hex() + " of the shard: " + r.error().message};
          }
        }
      }
    }
    int64_t new_files = 0;
    int64_t new_file_bytes = 0;
    int64_t scope_files = 0;  // files new to the scope
    int64_t scope_bytes = 0;
    for (const auto& f : commit.files) {
      auto file = c.Prepare(kPutFile);
      if (!file.ok()) return file.error();
      file->Bind(1, f.hash).Bind(2, f.packed_terms).Bind(3, int64_t{f.term_count});
      file->Bind(4, static_cast<int64_t>(f.size)).Bind(6, now);
      if (f.sha256) {
        file->Bind(5, *f.sha256);
      } else {
        file->BindNull(5);
      }
      if (f.packed_ranges.empty()) {
        file->BindNull(7);
      } else {
        file->Bind(7, f.packed_ranges);
      }
      if (auto r = c.Run(*file, "insert file"); !r.ok()) return r;
      if (c.changes() > 0) {
        ++new_files;
        new_file_bytes += static_cast<int64_t>(f.size);
      }
      auto scope = c.Prepare(kPutScope);
      if (!scope.ok()) return scope.error();
      scope->Bind(1, f.hash).Bind(2, std::string_view(commit.scope));
      if (auto r = c.Run(*scope, "insert file scope"); !r.ok()) return r;
      if (c.changes() > 0) {
        ++scope_files;
        scope_bytes += static_cast<int64_t>(f.size);
      }
    }
    if (scope_files > 0) {
      auto bump = c.Prepare(kBumpScope);
      if (!bump.ok()) return bump.error();
      bump->Bind(1, std::string_view(commit.scope)).Bind(2, scope_files).Bind(3, scope_bytes);
      if (auto r = c.Run(*bump, "count the scope's files"); !r.ok()) return r;
    }
    for (const auto& d : commit.dedup) {
      auto dedup = c.Prepare(kPutDedup);
      if (!dedup.ok()) return dedup.error();
      dedup->Bind(1, d.chunk).Bind(2, std::string_view(commit.scope)).Bind(3, d.xorb).Bind(4, commit.shard);
      if (auto r = c.Run(*dedup, "insert dedup entry"); !r.ok()) {
        return xet::Error{r.error().code, "dedup entry for chunk " + d.chunk.hex() + " in xorb " +
                                              d.xorb.hex() + ": " + r.error().message};
      }
    }
    if (new_files == 0 && outcome.already_existed) return xet::Ok{};
    auto bump = c.Prepare(kBumpCounters);
    if (!bump.ok()) return bump.error();
    const bool new_shard = !outcome.already_existed;
    bump->Bind(1, int64_t{0}).Bind(2, new_files).Bind(3, int64_t{0});
    bump->Bind(4, new_shard ? static_cast<int64_t>(commit.shard_size) : 0).Bind(5, int64_t{new_shard});
    bump->Bind(6, int64_t{0}).Bind(7, new_file_bytes);
    return c.Run(*bump, "count shard");
  });
  if (!st.ok()) return st.error();
  return outcome;
}

WriteStats SqliteIndex::write_stats() const {
  return writes_->stats();
}

xet::Result<std::string> SqliteIndex::SharedSecret(std::string_view name, std::string_view candidate) {
  const auto read = [&]() -> xet::Result<std::optional<std::string>> {
    auto r = AcquireReader();
    if (!r.ok()) return r.error();
    auto s = (*r)->Prepare(kGetSecret);
    if (!s.ok()) return s.error();
    s->Bind(1, name);
    const int rc = s->Step();
    if (rc == SQLITE_DONE) return std::optional<std::string>();
    if (rc != SQLITE_ROW) return (*r)->Err("read secret", rc);
    return std::optional<std::string>(std::string(s->Text(0)));
  };
  auto existing = read();
  if (!existing.ok()) return existing.error();
  if (existing->has_value()) return std::move(**existing);
  auto st = Write([&](Conn& c) -> xet::Status {
    auto put = c.Prepare(kPutSecret);
    if (!put.ok()) return put.error();
    put->Bind(1, name).Bind(2, candidate).Bind(3, options_.clock->UnixSeconds());
    return c.Run(*put, "insert secret");
  });
  if (!st.ok()) return st.error();
  existing = read();  // the first value stored wins, ours or a concurrent process's
  if (!existing.ok()) return existing.error();
  if (!existing->has_value()) return xet::IoError("sqlite: secret " + std::string(name) + " vanished");
  return std::move(**existing);
}

xet::Result<std::vector<SecretRecord>> SqliteIndex::ListSecrets() {
  auto r = AcquireReader();
  if (!r.ok()) return r.error();
  auto s = (*r)->Prepare(kListSecrets);
  if (!s.ok()) return s.error();
  std::vector<SecretRecord> out;
  int rc = SQLITE_ROW;
  while ((rc = s->Step()) == SQLITE_ROW)
    out.push_back({std::string(s->Text(0)), std::string(s->Text(1)), s->Int(2)});
  if (rc != SQLITE_DONE) return (*r)->Err("list secrets", rc);
  return out;
}

xet::Result<bool> SqliteIndex::AddSecret(std::string_view name, std::string_view value) {
  bool added = false;
  auto st = Write([&](Conn& c) -> xet::Status {
    auto put = c.Prepare(kPutSecret);
    if (!put.ok()) return put.error();
    put->Bind(1, name).Bind(2, value).Bind(3, options_.clock->UnixSeconds());
    if (auto run = c.Run(*put, "insert secret"); !run.ok()) return run;
    added = c.changes() == 1;
    return xet::Ok{};
  });
  if (!st.ok()) return st.error();
  return added;
}

xet::Result<bool> SqliteIndex::DeleteSecret(std::string_view name) {
  bool deleted = false;
  auto st = Write([&](Conn& c) -> xet::Status {
    auto del = c.Prepare(kDeleteSecret);
    if (!del.ok()) return del.error();
    del->Bind(1, name);
    if (auto run = c.Run(*del, "delete secret"); !run.ok()) return run;
    deleted = c.changes() == 1;
    return xet::Ok{};
  });
  if (!st.ok()) return st.error();
  return deleted;
}

xet::Status SqliteIndex::Ping() {
  auto r = AcquireReader();
  if (!r.ok()) return r.error();
  auto s = (*r)->Prepare(kPing);
  if (!s.ok()) return s.error();
  const int rc = s->Step();
  if (rc != SQLITE_ROW) return (*r)->Err("ping", rc);
  return xet::Ok{};
}

// ---- Reads

xet::Result<SqliteIndex::ReaderLease> SqliteIndex::AcquireReader() {
  {
    std::lock_guard lock(readers_mu_);
    if (!idle_readers_.empty()) {
      auto conn = std::move(idle_readers_.back());
      idle_readers_.pop_back();
      return ReaderLease(this, std::move(conn));
    }
  }
  auto conn = std::make_unique<Conn>();
  if (auto st = conn->Open(options_.path, /*read_only=*/true, options_.busy_timeout_ms); !st.ok())
    return st.error();
  return ReaderLease(this, std::move(conn));
}

void SqliteIndex::ReleaseReader(std::unique_ptr<Conn> conn) {
  std::lock_guard lock(readers_mu_);
  if (idle_readers_.size() < options_.max_idle_readers) idle_readers_.push_back(std::move(conn));
}

xet::Result<std::shared_ptr<const XorbEntry>> SqliteIndex::GetXorb(const XorbHash& hash) {
  if (auto hit = xorb_cache_.Get(hash)) return hit;
  auto r = AcquireReader();
  if (!r.ok()) return r.error();
  auto s = (*r)->Prepare(kGetXorb);
  if (!s.ok()) return s.error();
  s->Bind(1, hash);
  const int rc = s->Step();
  if (rc == SQLITE_DONE) return xet::NotFound("xorb " + hash.hex() + " is not in the index");
  if (rc != SQLITE_ROW) return (*r)->Err("read xorb", rc);
  auto e = XorbEntryFromRow(hash, s->Blob(0), s->Int(1), s->Int(2), s->Int(3), s->Int(4));
  if (e.ok()) xorb_cache_.Put(hash, *e, (*e)->memory_size());
  return e;
}

xet::Result<std::vector<std::shared_ptr<const XorbEntry>>> SqliteIndex::GetXorbs(
    std::span<const XorbHash> hashes) {
  if (hashes.size() > kMaxXorbsPerRead) return xet::Malformed("too many xorbs in one read");
  // In process, one statement per xorb costs no more than one for all of them.
  std::vector<std::shared_ptr<const XorbEntry>> out;
  out.reserve(hashes.size());
  for (const auto& h : hashes) {
    auto e = GetXorb(h);
    if (!e.ok() && e.error().code != xet::ErrorCode::kNotFound) return e.error();
    out.push_back(e.ok() ? *e : nullptr);
  }
  return out;
}

xet::Result<bool> SqliteIndex::HasXorb(const XorbHash& hash) {
  if (xorb_cache_.Get(hash)) return true;
  auto r = AcquireReader();
  if (!r.ok()) return r.error();
  auto s = (*r)->Prepare(kHasXorb);
  if (!s.ok()) return s.error();
  s->Bind(1, hash);
  const int rc = s->Step();
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return (*r)->Err("read xorb", rc);
}

xet::Result<std::shared_ptr<const FileEntry>> SqliteIndex::GetFile(const FileHash& hash) {
  return ReadFile(hash, std::nullopt);
}

xet::Result<std::shared_ptr<const FileEntry>> SqliteIndex::GetVisibleFile(const FileHash& hash,
                                                                          std::string_view scope) {
  return ReadFile(hash, scope);
}

xet::Result<std::shared_ptr<const FileEntry>> SqliteIndex::ReadFile(const FileHash& hash,
                                                                    std::optional<std::string_view> scope) {
  auto r = AcquireReader();
  if (!r.ok()) return r.error();
  auto s = (*r)->Prepare(scope ? kGetVisibleFile : kGetFile);
  if (!s.ok()) return s.error();
  s->Bind(1, hash);
  if (scope) s->Bind(2, *scope);
  const int rc = s->Step();
  if (rc == SQLITE_DONE) return xet::NotFound("file " + hash.hex() + " is not in the index");
  if (rc != SQLITE_ROW) return (*r)->Err("read file", rc);
  return FileEntryFromRow(hash, s->Blob(0), s->Int(1), s->Int(2), s->IsNull(3) ? std::nullopt : s->HashCol(3),
                          s->Blob(4));
}

xet::Result<bool> SqliteIndex::FileVisibleTo(const FileHash& hash, std::string_view scope) {
  auto r = AcquireReader();
  if (!r.ok()) return r.error();
  auto s = (*r)->Prepare(kFileVisible);
  if (!s.ok()) return s.error();
  s->Bind(1, hash).Bind(2, scope);
  const int rc = s->Step();
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return (*r)->Err("read file scope", rc);
}

xet::Result<std::optional<FileHash>> SqliteIndex::FileBySha256(const Hash& sha256,
                                                               std::optional<std::string_view> scope) {
  auto r = AcquireReader();
  if (!r.ok()) return r.error();
  auto s = (*r)->Prepare(scope ? kFileByShaScoped : kFileBySha);
  if (!s.ok()) return s.error();
  s->Bind(1, sha256);
  if (scope) s->Bind(2, *scope);
  const int rc = s->Step();
  if (rc == SQLITE_DONE) return std::optional<FileHash>();
  if (rc != SQLITE_ROW) return (*r)->Err("read file by sha256", rc);
  return s->HashCol(0);
}

xet::Result<std::vector<ListedFile>> SqliteIndex::ListFiles(std::string_view scope,
                                                            std::optional<FileHash> after, size_t limit) {
  if (limit > kMaxListedFiles)
    return xet::Malformed("at most " + std::to_string(kMaxListedFiles) + " files a page");
  auto r = AcquireReader();
  if (!r.ok()) return r.error();
  auto s = (*r)->Prepare(kListFiles);
  if (!s.ok()) return s.error();
  // Every hash sorts after the empty blob.
  s->Bind(1, scope);
  if (after) {
    s->Bind(2, *after);
  } else {
    s->Bind(2, std::span<const uint8_t>());
  }
  s->Bind(3, static_cast<int64_t>(limit));
  std::vector<ListedFile> out;
  for (;;) {
    const int rc = s->Step();
    if (rc == SQLITE_DONE) return out;
    if (rc != SQLITE_ROW) return (*r)->Err("list files", rc);
    auto hash = s->HashCol(0);
    if (!hash) return xet::IoError("a files row has a hash that is not 32 bytes");
    out.push_back(
        {*hash, static_cast<uint64_t>(s->Int(1)), s->IsNull(2) ? std::nullopt : s->HashCol(2), s->Int(3)});
  }
}

xet::Result<std::vector<Hash>> SqliteIndex::Scan(Scanned what, std::optional<Hash> after, size_t limit) {
  if (limit > kMaxScanned) return xet::Malformed("at most " + std::to_string(kMaxScanned) + " hashes a page");
  auto r = AcquireReader();
  if (!r.ok()) return r.error();
  auto s = (*r)->Prepare(what == Scanned::kXorbs   ? kScanXorbs
                         : what == Scanned::kFiles ? kScanFiles
                                                   : kScanShards);
  if (!s.ok()) return s.error();
  if (after) {
    s->Bind(1, *after);
  } else {
    s->Bind(1, std::span<const uint8_t>());  // every hash sorts after the empty blob
  }
  s->Bind(2, static_cast<int64_t>(limit));
  std::vector<Hash> out;
  for (;;) {
    const int rc = s->Step();
    if (rc == SQLITE_DONE) return out;
    if (rc != SQLITE_ROW) return (*r)->Err("scan the index", rc);
    auto hash = s->HashCol(0);
    if (!hash) return xet::IoError("an index row has a hash that is not 32 bytes");
    out.push_back(*hash);
  }
}

xet::Result<ScopeTotals> SqliteIndex::ScopeStats(std::string_view scope) {
  auto r = AcquireReader();
  if (!r.ok()) return r.error();
  auto s = (*r)->Prepare(kScopeStats);
  if (!s.ok()) return s.error();
  s->Bind(1, scope);
  const int rc = s->Step();
  if (rc == SQLITE_DONE) return ScopeTotals{};  // no file in the scope
  if (rc != SQLITE_ROW) return (*r)->Err("read a scope's totals", rc);
  return ScopeTotals{static_cast<uint64_t>(s->Int(0)), static_cast<uint64_t>(s->Int(1))};
}

xet::Result<std::optional<ShardInfo>> SqliteIndex::GetShard(const Hash& shard) {
  auto r = AcquireReader();
  if (!r.ok()) return r.error();
  auto s = (*r)->Prepare(kGetShard);
  if (!s.ok()) return s.error();
  s->Bind(1, shard);
  const int rc = s->Step();
  if (rc == SQLITE_DONE) return std::optional<ShardInfo>();
  if (rc != SQLITE_ROW) return (*r)->Err("read shard", rc);
  return std::optional<ShardInfo>(
      ShardInfo{.size = static_cast<uint64_t>(s->Int(0)), .registered_at = s->Int(1)});
}

xet::Result<std::shared_ptr<const ShardXorbs>> SqliteIndex::GetShardXorbs(const Hash& shard) {
  if (auto hit = shard_xorbs_cache_.Get(shard)) return hit;
  // The shard row first: its xorbs were committed with it, so every later read sees them all.
  auto known = GetShard(shard);
  if (!known) return known.error();
  if (!known->has_value()) return xet::NotFound("shard " + shard.hex() + " is not in the index");
  auto r = AcquireReader();
  if (!r.ok()) return r.error();
  auto s = (*r)->Prepare(kGetShardXorbs);
  if (!s.ok()) return s.error();
  s->Bind(1, shard);
  auto e = std::make_shared<ShardXorbs>();
  for (;;) {
    const int rc = s->Step();
    if (rc == SQLITE_DONE) break;
    if (rc != SQLITE_ROW) return (*r)->Err("read shard xorbs", rc);
    auto xorb = s->HashCol(0);
    if (!xorb) return xet::IoError("index row of shard " + shard.hex() + " is corrupt");
    (s->Int(1) != 0 ? e->listed : e->referenced).push_back(*xorb);
  }
  shard_xorbs_cache_.Put(shard, e, e->memory_size());
  return std::shared_ptr<const ShardXorbs>(std::move(e));
}

xet::Result<std::vector<DedupHit>> SqliteIndex::LookupDedup(const ChunkHash& chunk,
                                                            std::optional<std::string_view> scope) {
  auto r = AcquireReader();
  if (!r.ok()) return r.error();
  auto s = (*r)->Prepare(scope ? kDedupScoped : kDedupAny);
  if (!s.ok()) return s.error();
  s->Bind(1, chunk);
  if (scope) s->Bind(2, *scope);
  std::vector<DedupHit> hits;
  for (;;) {
    const int rc = s->Step();
    if (rc == SQLITE_DONE) break;
    if (rc != SQLITE_ROW) return (*r)->Err("read dedup entries", rc);
    auto xorb = s->HashCol(0);
    auto shard = s->HashCol(1);
    if (xorb && shard) hits.push_back({*xorb, *shard});
  }
  return hits;
}

xet::Status SqliteIndex::ShareFiles(std::span<const FileHash> hashes, std::string_view scope) {
  if (hashes.size() > kMaxSharedFiles) return xet::Malformed("too many files shared at once");
  if (hashes.empty()) return xet::Ok{};
  return Write([&](Conn& c) -> xet::Status {
    int64_t files = 0;
    int64_t bytes = 0;
    for (const FileHash& hash : hashes) {
      auto size = c.Prepare(kFileSize);
      if (!size.ok()) return size.error();
      size->Bind(1, hash);
      const int rc = size->Step();
      if (rc == SQLITE_DONE) return xet::NotFound("file " + hash.hex() + " is not in the index");
      if (rc != SQLITE_ROW) return c.Err("read file", rc);
      const int64_t file_bytes = size->Int(0);
      auto put = c.Prepare(kPutScope);
      if (!put.ok()) return put.error();
      put->Bind(1, hash).Bind(2, scope);
      if (auto st = c.Run(*put, "insert file scope"); !st.ok()) return st;
      if (c.changes() == 0) continue;  // the scope had it already
      ++files;
      bytes += file_bytes;
    }
    if (files == 0) return xet::Ok{};
    auto bump = c.Prepare(kBumpScope);
    if (!bump.ok()) return bump.error();
    bump->Bind(1, scope).Bind(2, files).Bind(3, bytes);
    return c.Run(*bump, "count the scope's files");
  });
}

// ---- Repositories

namespace {

// What a write needs of a repository's row: its type and its two scopes.
struct RepoRow {
  int64_t type = 0;
  std::string scope;
  std::string read_scope;
};

// The repository's row on the writer's connection (inside the write's transaction); kNotFound without one.
xet::Result<RepoRow> ReadRepoRow(auto& c, int64_t id) {
  auto s = c.Prepare(kRepoById);
  if (!s.ok()) return s.error();
  s->Bind(1, id);
  const int rc = s->Step();
  if (rc == SQLITE_DONE) return xet::NotFound("repository " + std::to_string(id) + " is not in the index");
  if (rc != SQLITE_ROW) return c.Err("read repository", rc);
  return RepoRow{s->Int(0), std::string(s->Text(1)), std::string(s->Text(2))};
}

xet::Status RepoExists(auto& c, int64_t id) {
  auto row = ReadRepoRow(c, id);
  if (!row.ok()) return row.error();
  return xet::Ok{};
}

xet::Status InsertObjects(auto& c, int64_t repo, const std::vector<RepoObject>& objects) {
  for (const RepoObject& o : objects) {
    if (o.key.empty() || o.key.size() > 32) return xet::Malformed("object keys are 1 to 32 bytes");
    auto put = c.Prepare(kPutRepoObject);
    if (!put.ok()) return put.error();
    put->Bind(1, repo).Bind(2, std::span<const uint8_t>(o.key)).Bind(3, int64_t{o.kind});
    put->Bind(4, std::span<const uint8_t>(o.data));
    if (auto r = c.Run(*put, "insert object"); !r.ok()) return r;
  }
  return xet::Ok{};
}

std::vector<uint8_t> Bytes(std::span<const uint8_t> b) {
  return {b.begin(), b.end()};
}

}  // namespace

xet::Result<RepoRecord> SqliteIndex::CreateRepo(const NewRepo& repo) {
  RepoRecord out{.id = 0,
                 .type = repo.type,
                 .ns = repo.ns,
                 .name = repo.name,
                 .is_private = repo.is_private,
                 .created_at = repo.created_at,
                 .scope = repo.scope,
                 .read_scope = repo.read_scope};
  if (repo.scope.empty() || repo.read_scope.empty() || repo.scope == repo.read_scope) {
    return xet::Malformed("a repository needs a scope and a read scope of its own");
  }
  auto st = Write([&](Conn& c) -> xet::Status {
    auto put = c.Prepare(kCreateRepo);
    if (!put.ok()) return put.error();
    put->Bind(1, int64_t{static_cast<uint8_t>(repo.type)}).Bind(2, repo.ns).Bind(3, repo.name);
    put->Bind(4, int64_t{repo.is_private})
        .Bind(5, repo.created_at)
        .Bind(6, repo.scope)
        .Bind(7, repo.read_scope);
    if (auto r = c.Run(*put, "insert repository"); !r.ok()) return r;
    if (c.changes() == 0) return xet::Conflict("repository " + repo.ns + "/" + repo.name + " exists");
    out.id = sqlite3_last_insert_rowid(c.db());
    if (auto r = InsertObjects(c, out.id, repo.objects); !r.ok()) return r;
    for (const Ref& ref : repo.refs) {
      auto ins = c.Prepare(kInsertRef);
      if (!ins.ok()) return ins.error();
      ins->Bind(1, out.id).Bind(2, int64_t{static_cast<uint8_t>(ref.kind)}).Bind(3, ref.name);
      ins->Bind(4, std::span<const uint8_t>(ref.target));
      if (auto r = c.Run(*ins, "insert ref"); !r.ok()) return r;
    }
    return xet::Ok{};
  });
  if (!st.ok()) return st.error();
  return out;
}

xet::Result<RepoRecord> SqliteIndex::FindRepo(RepoType type, std::string_view ns, std::string_view name) {
  auto r = AcquireReader();
  if (!r.ok()) return r.error();
  auto s = (*r)->Prepare(kFindRepo);
  if (!s.ok()) return s.error();
  s->Bind(1, int64_t{static_cast<uint8_t>(type)}).Bind(2, ns).Bind(3, name);
  const int rc = s->Step();
  if (rc == SQLITE_DONE) return xet::NotFound("repository " + std::string(ns) + "/" + std::string(name));
  if (rc != SQLITE_ROW) return (*r)->Err("read repository", rc);
  return RepoRecord{.id = s->Int(0),
                    .type = type,
                    .ns = std::string(ns),
                    .name = std::string(name),
                    .is_private = s->Int(1) != 0,
                    .created_at = s->Int(2),
                    .scope = std::string(s->Text(3)),
                    .read_scope = std::string(s->Text(4))};
}

xet::Result<std::vector<RepoRecord>> SqliteIndex::ListRepos(
    RepoType type, std::optional<std::string_view> ns,
    std::optional<std::pair<std::string, std::string>> after, size_t limit) {
  if (limit > kMaxListedRepos) return xet::Malformed("too many repositories in one listing");
  auto r = AcquireReader();
  if (!r.ok()) return r.error();
  auto s = (*r)->Prepare(kListRepos);
  if (!s.ok()) return s.error();
  s->Bind(1, int64_t{static_cast<uint8_t>(type)});
  if (ns) {
    s->Bind(2, *ns);
  } else {
    s->BindNull(2);
  }
  // ("", "") sorts before every name: no repository has an empty namespace.
  const std::string after_ns = after ? after->first : "";
  const std::string after_name = after ? after->second : "";
  s->Bind(3, after_ns).Bind(4, after_name).Bind(5, static_cast<int64_t>(limit));
  std::vector<RepoRecord> out;
  for (;;) {
    const int rc = s->Step();
    if (rc == SQLITE_DONE) break;
    if (rc != SQLITE_ROW) return (*r)->Err("list repositories", rc);
    out.push_back(RepoRecord{.id = s->Int(0),
                             .type = type,
                             .ns = std::string(s->Text(1)),
                             .name = std::string(s->Text(2)),
                             .is_private = s->Int(3) != 0,
                             .created_at = s->Int(4),
                             .scope = std::string(s->Text(5)),
                             .read_scope = std::string(s->Text(6))});
  }
  return out;
}

xet::Status SqliteIndex::UpdateRepo(int64_t id, const RepoChange& change) {
  if (change.ns.has_value() != change.name.has_value()) {
    return xet::Malformed("a move names both the namespace and the name");
  }
  return Write([&](Conn& c) -> xet::Status {
    auto row = ReadRepoRow(c, id);
    if (!row.ok()) return row.error();
    const std::string& old_read_scope = row->read_scope;
    if (change.ns) {
      auto taken = c.Prepare(kFindRepo);
      if (!taken.ok()) return taken.error();
      taken->Bind(1, row->type).Bind(2, *change.ns).Bind(3, *change.name);
      const int rc = taken->Step();
      if (rc == SQLITE_ROW && taken->Int(0) != id) {
        return xet::Conflict("repository " + *change.ns + "/" + *change.name + " exists");
      }
      if (rc != SQLITE_ROW && rc != SQLITE_DONE) return c.Err("read repository", rc);
      auto mv = c.Prepare(kRenameRepo);
      if (!mv.ok()) return mv.error();
      mv->Bind(1, id).Bind(2, *change.ns).Bind(3, *change.name);
      if (auto st = c.Run(*mv, "rename repository"); !st.ok()) return st;
    }
    if (change.is_private) {
      auto set = c.Prepare(kSetPrivate);
      if (!set.ok()) return set.error();
      set->Bind(1, id).Bind(2, int64_t{*change.is_private});
      if (auto st = c.Run(*set, "update repository"); !st.ok()) return st;
    }
    if (change.read_scope && *change.read_scope != old_read_scope) {
      auto set = c.Prepare(kSetReadScope);
      if (!set.ok()) return set.error();
      set->Bind(1, id).Bind(2, *change.read_scope);
      if (auto st = c.Run(*set, "update repository"); !st.ok()) return st;
      for (const char* sql : {kMoveScopeFiles, kMoveScopeTotals}) {
        auto mv = c.Prepare(sql);
        if (!mv.ok()) return mv.error();
        mv->Bind(1, old_read_scope).Bind(2, *change.read_scope);
        if (auto st = c.Run(*mv, "move the read scope"); !st.ok()) return st;
      }
    }
    return xet::Ok{};
  });
}

xet::Status SqliteIndex::DeleteRepo(int64_t id) {
  return Write([&](Conn& c) -> xet::Status {
    auto row = ReadRepoRow(c, id);
    if (!row.ok()) return row.error();
    for (const std::string& scope : {row->scope, row->read_scope}) {
      for (const char* sql : {kDropScopeFiles, kDropScopeTotals}) {
        auto drop = c.Prepare(sql);
        if (!drop.ok()) return drop.error();
        drop->Bind(1, scope);
        if (auto st = c.Run(*drop, "drop the repository's scopes"); !st.ok()) return st;
      }
    }
    for (const char* sql : {kDeleteRepoRefs, kDeleteRepoObjects, kDeleteRepoFiles, kDeleteRepo}) {
      auto del = c.Prepare(sql);
      if (!del.ok()) return del.error();
      del->Bind(1, id);
      if (auto st = c.Run(*del, "delete repository"); !st.ok()) return st;
    }
    return xet::Ok{};
  });
}

xet::Status SqliteIndex::PutRepoObjects(int64_t repo, const std::vector<RepoObject>& objects) {
  return Write([&](Conn& c) -> xet::Status {
    if (auto st = RepoExists(c, repo); !st.ok()) return st;
    return InsertObjects(c, repo, objects);
  });
}

xet::Result<std::vector<std::optional<RepoObject>>> SqliteIndex::GetRepoObjects(
    int64_t repo, const std::vector<std::vector<uint8_t>>& keys) {
  if (keys.size() > kMaxObjectsPerRead) return xet::Malformed("too many objects in one read");
  auto r = AcquireReader();
  if (!r.ok()) return r.error();
  std::vector<std::optional<RepoObject>> out;
  out.reserve(keys.size());
  for (const auto& key : keys) {
    auto s = (*r)->Prepare(kGetRepoObject);
    if (!s.ok()) return s.error();
    s->Bind(1, repo).Bind(2, std::span<const uint8_t>(key));
    const int rc = s->Step();
    if (rc == SQLITE_DONE) {
      out.emplace_back();
      continue;
    }
    if (rc != SQLITE_ROW) return (*r)->Err("read object", rc);
    out.emplace_back(
        RepoObject{.key = key, .kind = static_cast<uint8_t>(s->Int(0)), .data = Bytes(s->Blob(1))});
  }
  return out;
}

xet::Result<std::optional<RepoObjectHead>> SqliteIndex::GetRepoObjectHead(int64_t repo,
                                                                          std::span<const uint8_t> key,
                                                                          size_t max_bytes) {
  auto r = AcquireReader();
  if (!r.ok()) return r.error();
  auto s = (*r)->Prepare(kGetRepoObjectHead);
  if (!s.ok()) return s.error();
  s->Bind(1, repo).Bind(2, key).Bind(3, static_cast<int64_t>(std::min<size_t>(max_bytes, INT32_MAX)));
  const int rc = s->Step();
  if (rc == SQLITE_DONE) return std::optional<RepoObjectHead>();
  if (rc != SQLITE_ROW) return (*r)->Err("read object", rc);
  return std::optional<RepoObjectHead>(RepoObjectHead{.kind = static_cast<uint8_t>(s->Int(0)),
                                                      .size = static_cast<uint64_t>(s->Int(1)),
                                                      .data = Bytes(s->Blob(2))});
}

xet::Result<std::vector<Ref>> SqliteIndex::ListRefs(int64_t repo) {
  auto r = AcquireReader();
  if (!r.ok()) return r.error();
  auto s = (*r)->Prepare(kListRefs);
  if (!s.ok()) return s.error();
  s->Bind(1, repo);
  std::vector<Ref> out;
  for (;;) {
    const int rc = s->Step();
    if (rc == SQLITE_DONE) break;
    if (rc != SQLITE_ROW) return (*r)->Err("list refs", rc);
    out.push_back(Ref{.kind = static_cast<RefKind>(s->Int(0)),
                      .name = std::string(s->Text(1)),
                      .target = Bytes(s->Blob(2))});
  }
  return out;
}

xet::Status SqliteIndex::UpdateRef(int64_t repo, const RefUpdate& update) {
  // One writer: the read and the change below see no other write in between.
  return Write([&](Conn& c) -> xet::Status {
    if (auto st = RepoExists(c, repo); !st.ok()) return st;
    const int64_t kind = static_cast<uint8_t>(update.kind);
    auto get = c.Prepare(kGetRef);
    if (!get.ok()) return get.error();
    get->Bind(1, repo).Bind(2, kind).Bind(3, update.name);
    const int rc = get->Step();
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) return c.Err("read ref", rc);
    std::optional<std::vector<uint8_t>> current;
    if (rc == SQLITE_ROW) current = Bytes(get->Blob(0));
    if (current != update.expected) {
      return xet::Conflict(current ? "ref " + update.name + " has moved"
                                   : "ref " + update.name + " does not exist");
    }
    const char* sql = !update.target ? kDeleteRef : current ? kSetRef : kInsertRef;
    if (!update.target && !current) return xet::Ok{};
    auto set = c.Prepare(sql);
    if (!set.ok()) return set.error();
    set->Bind(1, repo).Bind(2, kind).Bind(3, update.name);
    if (update.target) set->Bind(4, std::span<const uint8_t>(*update.target));
    return c.Run(*set, "update ref");
  });
}

namespace {

BucketFile BucketFileFromRow(const Stmt& s) {
  BucketFile f;
  f.path = std::string(s.Text(0));
  if (auto h = s.HashCol(1)) f.file = *h;
  f.size = static_cast<uint64_t>(s.Int(2));
  f.mtime_ms = s.Int(3);
  if (!s.IsNull(4)) f.content_type = std::string(s.Text(4));
  f.uploaded_at = s.Int(5);
  return f;
}

}  // namespace

xet::Status SqliteIndex::ChangeBucket(int64_t repo, const std::vector<BucketChange>& changes) {
  return Write([&](Conn& c) -> xet::Status {
    if (auto st = RepoExists(c, repo); !st.ok()) return st;
    for (const BucketChange& ch : changes) {
      auto s = c.Prepare(ch.put ? kPutBucketFile : kDeleteBucketFile);
      if (!s.ok()) return s.error();
      s->Bind(1, repo).Bind(2, ch.path);
      if (ch.put) {
        s->Bind(3, ch.put->file).Bind(4, static_cast<int64_t>(ch.put->size)).Bind(5, ch.put->mtime_ms);
        if (ch.put->content_type) {
          s->Bind(6, *ch.put->content_type);
        } else {
          s->BindNull(6);
        }
        s->Bind(7, ch.put->uploaded_at);
      }
      if (auto st = c.Run(*s, "change bucket"); !st.ok()) return st;
    }
    return xet::Ok{};
  });
}

xet::Result<std::vector<BucketFile>> SqliteIndex::ListBucket(int64_t repo, std::string_view prefix,
                                                             std::optional<std::string_view> from,
                                                             size_t limit) {
  if (limit > kMaxListedFiles) return xet::Malformed("too many files in one listing");
  auto r = AcquireReader();
  if (!r.ok()) return r.error();
  auto s = (*r)->Prepare(kListBucket);
  if (!s.ok()) return s.error();
  const std::optional<std::string> upper = PrefixEnd(prefix);
  s->Bind(1, repo).Bind(2, prefix);
  if (upper) {
    s->Bind(3, *upper);
  } else {
    s->BindNull(3);
  }
  s->Bind(4, from.value_or("")).Bind(5, static_cast<int64_t>(limit));
  std::vector<BucketFile> out;
  for (;;) {
    const int rc = s->Step();
    if (rc == SQLITE_DONE) break;
    if (rc != SQLITE_ROW) return (*r)->Err("list bucket", rc);
    BucketFile f = BucketFileFromRow(*s);
    if (f.path.starts_with(prefix)) out.push_back(std::move(f));
  }
  return out;
}

xet::Result<std::vector<std::optional<BucketFile>>> SqliteIndex::GetBucketFiles(
    int64_t repo, const std::vector<std::string>& paths) {
  if (paths.size() > kMaxObjectsPerRead) return xet::Malformed("too many paths in one read");
  auto r = AcquireReader();
  if (!r.ok()) return r.error();
  std::vector<std::optional<BucketFile>> out;
  for (const auto& p : paths) {
    auto s = (*r)->Prepare(kGetBucketFile);
    if (!s.ok()) return s.error();
    s->Bind(1, repo).Bind(2, p);
    const int rc = s->Step();
    if (rc == SQLITE_DONE) {
      out.emplace_back();
      continue;
    }
    if (rc != SQLITE_ROW) return (*r)->Err("read bucket file", rc);
    out.emplace_back(BucketFileFromRow(*s));
  }
  return out;
}

xet::Result<BucketTotals> SqliteIndex::GetBucketTotals(int64_t repo) {
  auto r = AcquireReader();
  if (!r.ok()) return r.error();
  auto s = (*r)->Prepare(kBucketTotals);
  if (!s.ok()) return s.error();
  s->Bind(1, repo);
  const int rc = s->Step();
  if (rc != SQLITE_ROW) return (*r)->Err("sum bucket", rc);
  return BucketTotals{static_cast<uint64_t>(s->Int(0)), static_cast<uint64_t>(s->Int(1))};
}

xet::Result<IndexStats> SqliteIndex::Stats() {
  auto r = AcquireReader();
  if (!r.ok()) return r.error();
  auto s = (*r)->Prepare(kStats);
  if (!s.ok()) return s.error();
  const int rc = s->Step();
  if (rc != SQLITE_ROW) return (*r)->Err("read counters", rc);
  const auto u = [&](int col) { return static_cast<uint64_t>(s->Int(col)); };
  return IndexStats{.xorbs = u(0),
                    .files = u(1),
                    .chunks = u(2),
                    .stored_bytes = u(3),
                    .shards = u(4),
                    .unpacked_bytes = u(5),
                    .file_bytes = u(6)};
}

}  // namespace cairn::index
