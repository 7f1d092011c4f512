// The SQLite backend: opening and migrating the database, the writer and the readers, the secrets and the
// operations. Its two slices are sqlite_cas.cc (CasIndex) and sqlite_repo.cc (RepoIndex).
#include "index/sqlite/sqlite_index.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <string>
#include <thread>
#include <utility>

#include "index/sqlite/sqlite_conn.h"

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
    // 10: finding the repository a scope is the write scope of (DELETE /v1/files refuses repositories'
    // scopes) without reading every repository; read scopes have their index since 9.
    R"sql(
CREATE INDEX repos_by_scope ON repos(scope);
)sql",
    // 11: garbage collection (index.h's GcIndex): what marks found unreferenced and since when, and the
    // indexes a mark and a sweep look things up by.
    R"sql(
CREATE TABLE gc_quarantine(
  kind INTEGER NOT NULL,                -- GcKind: 0 xorb, 1 file
  hash BLOB NOT NULL CHECK (length(hash) = 32),
  since INTEGER NOT NULL,               -- unix seconds: the first mark that found it unreferenced
  claimed_at INTEGER NOT NULL DEFAULT 0,  -- unix seconds a sweep claimed it; 0: not claimed
  PRIMARY KEY (kind, hash)) WITHOUT ROWID;
CREATE INDEX dedup_by_xorb ON dedup(xorb);
CREATE INDEX shard_xorbs_by_xorb ON shard_xorbs(xorb);
CREATE INDEX bucket_files_by_file ON bucket_files(file);
)sql",
    // 12: repository objects no ref reaches (a squashed history, a deleted branch), found by a mark and
    // deleted once unreachable for the grace (index.h's GcIndex).
    R"sql(
CREATE TABLE gc_repo_quarantine(
  repo INTEGER NOT NULL,
  key BLOB NOT NULL,
  since INTEGER NOT NULL,               -- unix seconds: the first mark that found it unreachable
  PRIMARY KEY (repo, key)) WITHOUT ROWID;
-- The scopes each shard was registered for: the names of its grants, which go with it.
CREATE TABLE shard_scopes(
  shard BLOB NOT NULL,
  scope TEXT NOT NULL,
  PRIMARY KEY (shard, scope)) WITHOUT ROWID;
)sql",
    // 13: the files scopes removed (UnregisterFile), kept so that a rebuild from the store does not give them
    // back (cas/grant.h); cleared by a registration that gives one back until its blob is gone.
    R"sql(
CREATE TABLE revocations(
  file BLOB NOT NULL CHECK (length(file) = 32),
  scope TEXT NOT NULL,
  cleared INTEGER NOT NULL DEFAULT 0,   -- 1: registered again; its blob is being deleted
  PRIMARY KEY (file, scope)) WITHOUT ROWID;
)sql",
    // 14: the cleared revocations alone, which every collector run finishes (ListClearedRevocations).
    R"sql(
CREATE INDEX revocations_cleared ON revocations(file, scope) WHERE cleared = 1;
)sql",
    // 15: storage quotas per namespace and what was last measured of them (index.h's QuotaIndex).
    R"sql(
CREATE TABLE quotas(
  namespace TEXT PRIMARY KEY,
  limit_bytes INTEGER,                  -- NULL: measured only
  used_bytes INTEGER NOT NULL DEFAULT 0,
  pending_bytes INTEGER NOT NULL DEFAULT 0,
  reserved_bytes INTEGER NOT NULL DEFAULT 0,       -- admitted, not yet published
  reserved_at INTEGER NOT NULL DEFAULT 0,
  measured_at INTEGER NOT NULL DEFAULT 0,
  generation INTEGER NOT NULL DEFAULT 0,
  stale INTEGER NOT NULL DEFAULT 1) WITHOUT ROWID;
)sql",
    // 16: xorbs a compaction replaced (GcIndex::Repoint): still stored until the collector sweeps them, no
    // longer offered in dedup answers. A row goes with its xorb.
    R"sql(
CREATE TABLE compacted_xorbs(
  xorb BLOB PRIMARY KEY REFERENCES xorbs(hash) ON DELETE CASCADE,
  into_xorb BLOB NOT NULL CHECK (length(into_xorb) = 32),
  compacted_at INTEGER NOT NULL) WITHOUT ROWID;
)sql",
    // 17: leases on names (index.h's MirrorIndex): the mirror's one transfer per file across nodes.
    R"sql(
CREATE TABLE leases(
  name TEXT PRIMARY KEY,
  holder TEXT NOT NULL,
  expires INTEGER NOT NULL) WITHOUT ROWID;
)sql",
    // 18: when each mirrored repository was last read (index.h's MirrorIndex): its eviction order.
    R"sql(
CREATE TABLE mirror_reads(
  repo INTEGER PRIMARY KEY REFERENCES repos(id) ON DELETE CASCADE,
  last_read INTEGER NOT NULL);
CREATE INDEX mirror_reads_by_time ON mirror_reads(last_read);
)sql",
    // 19: people (index.h's PeopleIndex): accounts (users and organizations, one space of names compared
    // without case), members of organizations, users' tokens (a hash of each secret); every change stamped
    // with the next people generation.
    R"sql(
CREATE TABLE people_generation(
  id INTEGER PRIMARY KEY CHECK (id = 1),
  n INTEGER NOT NULL);
INSERT INTO people_generation(id, n) VALUES (1, 0);
CREATE TABLE accounts(
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  kind INTEGER NOT NULL CHECK (kind IN (0, 1)),
  name TEXT NOT NULL,
  folded TEXT NOT NULL UNIQUE,
  full_name TEXT NOT NULL DEFAULT '',
  is_operator INTEGER NOT NULL DEFAULT 0,
  disabled INTEGER NOT NULL DEFAULT 0,
  created_at INTEGER NOT NULL,
  changed INTEGER NOT NULL);
CREATE INDEX accounts_changed ON accounts(changed);
CREATE TABLE members(
  org INTEGER NOT NULL REFERENCES accounts(id),
  member INTEGER NOT NULL REFERENCES accounts(id),
  role INTEGER CHECK (role IN (0, 1, 2)),  -- NULL: removed
  changed INTEGER NOT NULL,
  PRIMARY KEY (org, member)) WITHOUT ROWID;
CREATE INDEX members_of_user ON members(member);
CREATE INDEX members_changed ON members(changed);
CREATE TABLE tokens(
  id TEXT PRIMARY KEY,
  owner INTEGER NOT NULL REFERENCES accounts(id),
  name TEXT NOT NULL,
  role INTEGER NOT NULL CHECK (role IN (0, 1, 2)),
  grants TEXT NOT NULL DEFAULT '',
  secret_hash BLOB NOT NULL CHECK (length(secret_hash) = 32),
  created_at INTEGER NOT NULL,
  expires_at INTEGER NOT NULL,
  last_used_at INTEGER NOT NULL DEFAULT 0,
  revoked_at INTEGER NOT NULL DEFAULT 0,
  changed INTEGER NOT NULL) WITHOUT ROWID;
CREATE INDEX tokens_of_owner ON tokens(owner, id);
CREATE INDEX tokens_changed ON tokens(changed);
)sql",
    // 20: the audit log (index.h's AuditIndex): each change with who, from where, what and when.
    R"sql(
CREATE TABLE audit_events(
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  at INTEGER NOT NULL,
  actor TEXT NOT NULL,
  token_id TEXT NOT NULL,
  client TEXT NOT NULL,
  action TEXT NOT NULL,
  ns TEXT NOT NULL,
  target TEXT NOT NULL,
  detail TEXT NOT NULL);
CREATE INDEX audit_events_at ON audit_events(at);
CREATE INDEX audit_events_actor ON audit_events(actor, id);
CREATE INDEX audit_events_ns ON audit_events(ns, id);
)sql",
    // 21: trust policies (trusted publishers): whose OpenID Connect id tokens are exchanged for short-lived
    // tokens to a namespace's repositories; changes stamped with the people generation, like tokens.
    R"sql(
CREATE TABLE publishers(
  id TEXT PRIMARY KEY,
  owner INTEGER NOT NULL REFERENCES accounts(id),
  repo TEXT NOT NULL,
  issuer TEXT NOT NULL,
  audience TEXT NOT NULL,
  claims TEXT NOT NULL,
  role INTEGER NOT NULL CHECK (role IN (0, 1)),
  created_at INTEGER NOT NULL,
  revoked_at INTEGER NOT NULL DEFAULT 0,
  changed INTEGER NOT NULL) WITHOUT ROWID;
CREATE INDEX publishers_of_owner ON publishers(owner, id);
CREATE INDEX publishers_changed ON publishers(changed);
)sql",
    // 22: what an audited change writes besides itself, trimmed: the events' ids without AUTOINCREMENT (its
    // sqlite_sequence row was one more page written by every change; ids still only grow, since pruning
    // never deletes the newest event), no index by actor (an operator's filter, read from the newest event
    // back) and none by time (events are written in time order: pruning and `since` find their bound by id,
    // sqlite_audit.cc). The events are kept.
    R"sql(
CREATE TABLE audit_events_22(
  id INTEGER PRIMARY KEY,
  at INTEGER NOT NULL,
  actor TEXT NOT NULL,
  token_id TEXT NOT NULL,
  client TEXT NOT NULL,
  action TEXT NOT NULL,
  ns TEXT NOT NULL,
  target TEXT NOT NULL,
  detail TEXT NOT NULL);
INSERT INTO audit_events_22(id, at, actor, token_id, client, action, ns, target, detail)
  SELECT id, at, actor, token_id, client, action, ns, target, detail FROM audit_events;
DROP TABLE audit_events;
ALTER TABLE audit_events_22 RENAME TO audit_events;
DELETE FROM sqlite_sequence WHERE name = 'audit_events';
CREATE INDEX audit_events_ns ON audit_events(ns, id);
)sql",
    // 23: signing in through the pages: users' password hashes (Argon2id, as libsodium writes them),
    // browser sessions (the SHA-256 of each cookie's secret), which end with their user's password change,
    // devices' sign-ins (RFC 8628: the SHA-256 of each device code, its user code, who decided it), and
    // the OpenID Connect subjects linked to users.
    R"sql(
CREATE TABLE passwords(
  account INTEGER PRIMARY KEY REFERENCES accounts(id),
  hash TEXT NOT NULL);
CREATE TABLE sessions(
  id TEXT PRIMARY KEY,
  secret_hash BLOB NOT NULL,
  user_id INTEGER NOT NULL REFERENCES accounts(id),
  created_at INTEGER NOT NULL,
  expires_at INTEGER NOT NULL,
  method TEXT NOT NULL,
  client TEXT NOT NULL) WITHOUT ROWID;
CREATE INDEX sessions_of_user ON sessions(user_id);
CREATE INDEX sessions_expiry ON sessions(expires_at);
CREATE TABLE device_grants(
  device_hash BLOB PRIMARY KEY,
  user_code TEXT NOT NULL UNIQUE,
  client_id TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  expires_at INTEGER NOT NULL,
  state INTEGER NOT NULL CHECK (state IN (0, 1, 2, 3)),
  user_id INTEGER NOT NULL,
  polled_at INTEGER NOT NULL) WITHOUT ROWID;
CREATE INDEX device_grants_expiry ON device_grants(expires_at);
CREATE TABLE identities(
  issuer TEXT NOT NULL,
  subject TEXT NOT NULL,
  user_id INTEGER NOT NULL REFERENCES accounts(id),
  created_at INTEGER NOT NULL,
  PRIMARY KEY (issuer, subject)) WITHOUT ROWID;
CREATE INDEX identities_of_user ON identities(user_id);
)sql",
};
static_assert(std::size(kMigrations) == SqliteIndex::kSchemaVersion);
static_assert(kFileLinkKind == 16, "migration 9 reads the links by their kind");

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
constexpr const char kPutSecret[] =
    "INSERT INTO secrets(name, value, created_at) VALUES (?1, ?2, ?3) ON CONFLICT(name) DO NOTHING";
constexpr const char kGetSecret[] = "SELECT value FROM secrets WHERE name = ?1";
constexpr const char kListSecrets[] = "SELECT name, value, created_at FROM secrets ORDER BY name";
constexpr const char kDeleteSecret[] = "DELETE FROM secrets WHERE name = ?1";
constexpr const char kPing[] = "SELECT 1";

}  // namespace

// ---- Open and close

SqliteIndex::SqliteIndex(SqliteOptions options) : options_(std::move(options)) {}

Result<std::unique_ptr<SqliteIndex>> SqliteIndex::Open(SqliteOptions options) {
  std::unique_ptr<SqliteIndex> index(new SqliteIndex(std::move(options)));
  if (auto st = index->Init(); !st.ok()) return st.error();
  index->writes_ = std::make_unique<WriteQueue<WriteRequest>>(
      1, [p = index.get()](size_t, std::span<WriteRequest* const> batch) { return p->RunBatch(batch); },
      index->options_.before_batch);
  return index;
}

Result<std::pair<int, int>> SqliteIndex::Migrate(const std::string& path) {
  SqliteOptions options;
  options.path = path;
  auto index = Open(std::move(options));
  if (!index.ok()) return index.error();
  return std::pair{(*index)->schema_before_, static_cast<int>(kSchemaVersion)};
}

Status SqliteIndex::UseWal(Conn& c) {
  // journal_mode answers with the mode in force: a file system without shared memory may refuse WAL. So may
  // a new file another process is switching at the same moment (SQLite answers at once, without waiting,
  // where waiting could deadlock): tried again, backing off, for as long as the busy timeout.
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(options_.busy_timeout_ms);
  for (int attempt = 0;; ++attempt) {
    {
      auto wal = c.Prepare(kSetWal);
      if (!wal.ok()) return wal.error();
      if (wal->Step() == SQLITE_ROW && wal->Text(0) == "wal") return Ok{};
    }
    if (std::chrono::steady_clock::now() >= deadline)
      return IoError("sqlite: " + options_.path + " cannot use write-ahead logging");
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min(2 << std::min(attempt, 6), 100)));
  }
}

Status SqliteIndex::Init() {
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
  if (auto st = UseWal(c); !st.ok()) return st;
  // A larger page cache keeps the B-tree interior pages that random-hash inserts walk in memory.
  for (const char* pragma : {"PRAGMA synchronous = FULL", "PRAGMA secure_delete = ON",
                             "PRAGMA foreign_keys = ON", "PRAGMA cache_size = -65536"}) {
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
  Status result = Ok{};
  if (version > kSchemaVersion) {
    result = Inconsistent("index " + options_.path + " has schema version " + std::to_string(version) +
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
  return Ok{};
}

SqliteIndex::~SqliteIndex() {
  writes_.reset();  // finishes what is queued while the connection still exists
}

// ---- Writes

Status SqliteIndex::Write(std::function<Status(Conn&)> apply) {
  WriteRequest req{std::move(apply)};
  return writes_->Submit(req);
}

std::vector<Status> SqliteIndex::RunBatch(std::span<WriteRequest* const> batch) {
  Conn& c = *writer_conn_;
  std::vector<Status> results;
  results.reserve(batch.size());
  Status batch_error = c.Step(kBegin);
  for (size_t i = 0; batch_error.ok() && i < batch.size(); ++i) {
    if (auto st = c.Step(kSavepoint); !st.ok()) {
      batch_error = st;
      break;
    }
    Status st = batch[i]->apply(c);
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

WriteStats SqliteIndex::write_stats() const {
  return writes_->stats();
}

Result<std::string> SqliteIndex::SharedSecret(std::string_view name, std::string_view candidate) {
  const auto read = [&]() -> Result<std::optional<std::string>> {
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
  auto st = Write([&](Conn& c) -> Status {
    auto put = c.Prepare(kPutSecret);
    if (!put.ok()) return put.error();
    put->Bind(1, name).Bind(2, candidate).Bind(3, options_.clock->UnixSeconds());
    return c.Run(*put, "insert secret");
  });
  if (!st.ok()) return st.error();
  existing = read();  // the first value stored wins, ours or a concurrent process's
  if (!existing.ok()) return existing.error();
  if (!existing->has_value()) return IoError("sqlite: secret " + std::string(name) + " vanished");
  return std::move(**existing);
}

Result<std::vector<SecretRecord>> SqliteIndex::ListSecrets() {
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

Result<bool> SqliteIndex::AddSecret(std::string_view name, std::string_view value) {
  bool added = false;
  auto st = Write([&](Conn& c) -> Status {
    auto put = c.Prepare(kPutSecret);
    if (!put.ok()) return put.error();
    put->Bind(1, name).Bind(2, value).Bind(3, options_.clock->UnixSeconds());
    if (auto run = c.Run(*put, "insert secret"); !run.ok()) return run;
    added = c.changes() == 1;
    return Ok{};
  });
  if (!st.ok()) return st.error();
  return added;
}

Result<bool> SqliteIndex::DeleteSecret(std::string_view name) {
  bool deleted = false;
  auto st = Write([&](Conn& c) -> Status {
    auto del = c.Prepare(kDeleteSecret);
    if (!del.ok()) return del.error();
    del->Bind(1, name);
    if (auto run = c.Run(*del, "delete secret"); !run.ok()) return run;
    deleted = c.changes() == 1;
    return Ok{};
  });
  if (!st.ok()) return st.error();
  return deleted;
}

Status SqliteIndex::Ping() {
  auto r = AcquireReader();
  if (!r.ok()) return r.error();
  auto s = (*r)->Prepare(kPing);
  if (!s.ok()) return s.error();
  const int rc = s->Step();
  if (rc != SQLITE_ROW) return (*r)->Err("ping", rc);
  return Ok{};
}

// ---- Reads

Result<SqliteIndex::ReaderLease> SqliteIndex::AcquireReader() {
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

}  // namespace cairn::index
