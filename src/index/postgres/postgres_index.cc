// The PostgreSQL backend: migrations, the pool, opening, the writers, the secrets and the operations. Its two
// slices are postgres_cas.cc (CasIndex) and postgres_repo.cc (RepoIndex).
#include "index/postgres/postgres_index.h"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <random>
#include <string>
#include <thread>
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
    // 10: finding the repository a scope is the write scope of (as on SQLite).
    R"sql(
CREATE INDEX repos_by_scope ON repos(scope);
)sql",
    // 11: garbage collection (as on SQLite), and the refusals a write raises when it names what a sweep
    // claimed (CR001, kUnavailable: retry) or deleted (CR002, kUnknownReference) (pg.h).
    R"sql(
CREATE TABLE gc_quarantine(
  kind int8 NOT NULL,
  hash bytea NOT NULL CHECK (length(hash) = 32),
  since int8 NOT NULL,
  claimed_at int8 NOT NULL DEFAULT 0,
  PRIMARY KEY (kind, hash));
CREATE INDEX dedup_by_xorb ON dedup(xorb);
CREATE INDEX shard_xorbs_by_xorb ON shard_xorbs(xorb);
CREATE INDEX bucket_files_by_file ON bucket_files(file);
CREATE FUNCTION cairn_refuse_claimed(n int8) RETURNS int8 LANGUAGE plpgsql AS $$
BEGIN
  IF n > 0 THEN
    RAISE EXCEPTION 'a xorb named is being deleted by the garbage collector; retry' USING ERRCODE = 'CR001';
  END IF;
  RETURN n;
END $$;
CREATE FUNCTION cairn_refuse_missing(n int8) RETURNS int8 LANGUAGE plpgsql AS $$
BEGIN
  IF n > 0 THEN
    RAISE EXCEPTION 'a xorb named is not stored' USING ERRCODE = 'CR002';
  END IF;
  RETURN n;
END $$;
)sql",
    // 12: repository objects no ref reaches (a squashed history, a deleted branch), found by a mark and
    // deleted once unreachable for the grace (as on SQLite).
    R"sql(
CREATE TABLE gc_repo_quarantine(
  repo int8 NOT NULL,
  key bytea NOT NULL,
  since int8 NOT NULL,                  -- unix seconds: the first mark that found it unreachable
  PRIMARY KEY (repo, key));
-- The scopes each shard was registered for: the names of its grants, which go with it.
CREATE TABLE shard_scopes(
  shard bytea NOT NULL,
  scope text NOT NULL,
  PRIMARY KEY (shard, scope));
)sql",
    // 13: the files scopes removed, kept for a rebuild from the store (as on SQLite).
    R"sql(
CREATE TABLE revocations(
  file bytea NOT NULL CHECK (length(file) = 32),
  scope text NOT NULL,
  cleared bool NOT NULL DEFAULT false,  -- registered again; its blob is being deleted
  PRIMARY KEY (file, scope));
)sql",
    // 14: the cleared revocations alone (as on SQLite).
    R"sql(
CREATE INDEX revocations_cleared ON revocations(file, scope) WHERE cleared;
)sql",
    // 15: storage quotas per namespace (as on SQLite).
    R"sql(
CREATE TABLE quotas(
  namespace text COLLATE "C" PRIMARY KEY,
  limit_bytes int8,                     -- NULL: measured only
  used_bytes int8 NOT NULL DEFAULT 0,
  pending_bytes int8 NOT NULL DEFAULT 0,
  reserved_bytes int8 NOT NULL DEFAULT 0,       -- admitted, not yet published
  reserved_at int8 NOT NULL DEFAULT 0,
  measured_at int8 NOT NULL DEFAULT 0,
  generation int8 NOT NULL DEFAULT 0,
  stale bool NOT NULL DEFAULT true);
-- A write that carries a quota charge (QuotaCharge) calls this with the number of records it could not
-- charge: the charge would pass the limit, and the whole write fails (CR003, kQuota).
CREATE FUNCTION cairn_refuse_quota(n int8) RETURNS int8 LANGUAGE plpgsql AS $$
BEGIN
  IF n > 0 THEN
    RAISE EXCEPTION 'the namespace''s storage quota has no room for this' USING ERRCODE = 'CR003';
  END IF;
  RETURN n;
END $$;
)sql",
    // 16: xorbs a compaction replaced (as on SQLite), and the refusal of a compaction step whose files
    // changed since it read them (CR004, kConflict).
    R"sql(
CREATE TABLE compacted_xorbs(
  xorb bytea PRIMARY KEY REFERENCES xorbs(hash) ON DELETE CASCADE,
  into_xorb bytea NOT NULL CHECK (length(into_xorb) = 32),
  compacted_at int8 NOT NULL);
CREATE FUNCTION cairn_refuse_changed(n int8) RETURNS int8 LANGUAGE plpgsql AS $$
BEGIN
  IF n > 0 THEN
    RAISE EXCEPTION 'a file changed since the compaction read it' USING ERRCODE = 'CR004';
  END IF;
  RETURN n;
END $$;
)sql",
    // 17: leases on names (as on SQLite).
    R"sql(
CREATE TABLE leases(
  name text PRIMARY KEY,
  holder text NOT NULL,
  expires int8 NOT NULL);
)sql",
    // 18: when each mirrored repository was last read (as on SQLite).
    R"sql(
CREATE TABLE mirror_reads(
  repo int8 PRIMARY KEY REFERENCES repos(id) ON DELETE CASCADE,
  last_read int8 NOT NULL);
CREATE INDEX mirror_reads_by_time ON mirror_reads(last_read);
)sql",
    // 19: people: accounts, members, tokens and the generation every change takes (as on SQLite).
    R"sql(
CREATE TABLE people_generation(
  id int8 PRIMARY KEY CHECK (id = 1),
  n int8 NOT NULL);
INSERT INTO people_generation(id, n) VALUES (1, 0);
CREATE TABLE accounts(
  id bigserial PRIMARY KEY,
  kind int8 NOT NULL CHECK (kind IN (0, 1)),
  name text NOT NULL,
  folded text NOT NULL UNIQUE,
  full_name text NOT NULL DEFAULT '',
  is_operator bool NOT NULL DEFAULT false,
  disabled bool NOT NULL DEFAULT false,
  created_at int8 NOT NULL,
  changed int8 NOT NULL);
CREATE INDEX accounts_changed ON accounts(changed);
CREATE TABLE members(
  org int8 NOT NULL REFERENCES accounts(id),
  member int8 NOT NULL REFERENCES accounts(id),
  role int8 CHECK (role IN (0, 1, 2)),
  changed int8 NOT NULL,
  PRIMARY KEY (org, member));
CREATE INDEX members_of_user ON members(member);
CREATE INDEX members_changed ON members(changed);
CREATE TABLE tokens(
  id text PRIMARY KEY,
  owner int8 NOT NULL REFERENCES accounts(id),
  name text NOT NULL,
  role int8 NOT NULL CHECK (role IN (0, 1, 2)),
  grants text NOT NULL DEFAULT '',
  secret_hash bytea NOT NULL CHECK (length(secret_hash) = 32),
  created_at int8 NOT NULL,
  expires_at int8 NOT NULL,
  last_used_at int8 NOT NULL DEFAULT 0,
  revoked_at int8 NOT NULL DEFAULT 0,
  changed int8 NOT NULL);
CREATE INDEX tokens_of_owner ON tokens(owner, id);
CREATE INDEX tokens_changed ON tokens(changed);
)sql",
    // 20: the audit log (as on SQLite).
    R"sql(
CREATE TABLE audit_events(
  id bigserial PRIMARY KEY,
  at int8 NOT NULL,
  actor text NOT NULL,
  token_id text NOT NULL,
  client text NOT NULL,
  action text NOT NULL,
  ns text NOT NULL,
  target text NOT NULL,
  detail text NOT NULL);
CREATE INDEX audit_events_at ON audit_events(at);
CREATE INDEX audit_events_actor ON audit_events(actor, id);
CREATE INDEX audit_events_ns ON audit_events(ns, id);
)sql",
    // 21: trust policies (as on SQLite).
    R"sql(
CREATE TABLE publishers(
  id text PRIMARY KEY,
  owner int8 NOT NULL REFERENCES accounts(id),
  repo text NOT NULL,
  issuer text NOT NULL,
  audience text NOT NULL,
  claims text NOT NULL,
  role int8 NOT NULL CHECK (role IN (0, 1)),
  created_at int8 NOT NULL,
  revoked_at int8 NOT NULL DEFAULT 0,
  changed int8 NOT NULL);
CREATE INDEX publishers_of_owner ON publishers(owner, id);
CREATE INDEX publishers_changed ON publishers(changed);
)sql",
    // 22: no index of the audit log by actor (as on SQLite: one index fewer for every audited change to
    // write; filtering by actor reads from the newest event back).
    R"sql(
DROP INDEX audit_events_actor;
)sql",
    // 23: password hashes, browser sessions, devices' sign-ins and linked OpenID Connect subjects (as on
    // SQLite).
    R"sql(
CREATE TABLE passwords(
  account int8 PRIMARY KEY REFERENCES accounts(id),
  hash text NOT NULL);
CREATE TABLE sessions(
  id text PRIMARY KEY,
  secret_hash bytea NOT NULL,
  user_id int8 NOT NULL REFERENCES accounts(id),
  created_at int8 NOT NULL,
  expires_at int8 NOT NULL,
  method text NOT NULL,
  client text NOT NULL);
CREATE INDEX sessions_of_user ON sessions(user_id);
CREATE INDEX sessions_expiry ON sessions(expires_at);
CREATE TABLE device_grants(
  device_hash bytea PRIMARY KEY,
  user_code text NOT NULL UNIQUE,
  client_id text NOT NULL,
  created_at int8 NOT NULL,
  expires_at int8 NOT NULL,
  state int8 NOT NULL CHECK (state IN (0, 1, 2, 3)),
  user_id int8 NOT NULL,
  polled_at int8 NOT NULL);
CREATE INDEX device_grants_expiry ON device_grants(expires_at);
CREATE TABLE identities(
  issuer text NOT NULL,
  subject text NOT NULL,
  user_id int8 NOT NULL REFERENCES accounts(id),
  created_at int8 NOT NULL,
  PRIMARY KEY (issuer, subject));
CREATE INDEX identities_of_user ON identities(user_id);
)sql",
};
static_assert(std::size(kMigrations) == PostgresIndex::kSchemaVersion);
static_assert(kFileLinkKind == 16, "migration 9 reads the links by their kind");

constexpr int kCounterSlots = 64;
// pg_advisory_lock key of schema migrations ("cairn-mg" in ASCII).
constexpr const char kLockMigrations[] = "SELECT pg_advisory_lock(7161132942838478695)";
constexpr const char kUnlockMigrations[] = "SELECT pg_advisory_unlock(7161132942838478695)";

// Every parameter is cast, so that the server knows its type when the statement is prepared and reads the
// binary values accordingly.
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

// The schema version recorded in the database (0: none yet). Call under the migration lock.
Result<int> SchemaVersion(pg::Conn& c) {
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
Result<std::pair<int, int>> MigrateLocked(pg::Conn& c, const std::string& where) {
  if (auto r = c.Exec(kLockMigrations); !r.ok()) return r.error();
  auto result = [&]() -> Result<std::pair<int, int>> {
    auto version = SchemaVersion(c);
    if (!version.ok()) return version.error();
    const int from = *version;
    if (from > PostgresIndex::kSchemaVersion) {
      return Inconsistent("index " + where + " has schema version " + std::to_string(from) +
                          ", newer than this cairn's " + std::to_string(PostgresIndex::kSchemaVersion));
    }
    if (from == PostgresIndex::kSchemaVersion) return std::pair{from, from};
    if (auto r = c.Exec("BEGIN"); !r.ok()) return r.error();
    Status st = Ok{};
    for (int i = from; st.ok() && i < PostgresIndex::kSchemaVersion; ++i) {
      auto r = c.Exec(kMigrations[i]);
      if (!r.ok())
        st = Error{r.error().code, "migration " + std::to_string(i + 1) + ": " + r.error().message};
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

Result<PostgresIndex::Lease> PostgresIndex::Acquire() {
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
      return Unavailable("index: all " + std::to_string(options_.pool_size) +
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

Result<pg::Rows> PostgresIndex::Query(const pg::Statement& s, const pg::Params& p) {
  for (int attempt = 0;; ++attempt) {
    auto lease = Acquire();
    if (!lease.ok()) return lease.error();
    auto rows = (*lease)->Run(s, p);
    // A pooled connection may have broken since its last use (PostgreSQL restarted): one more try, fresh.
    if (!rows.ok() && rows.error().code == ErrorCode::kUnavailable && (*lease)->broken() && attempt == 0) {
      continue;
    }
    return rows;
  }
}

Status PostgresIndex::RunTransaction(std::span<const pg::Conn::BatchItem> items) {
  auto rows = RunTransactionRows(items);
  if (!rows.ok()) return rows.error();
  return Ok{};
}

Result<std::vector<pg::Rows>> PostgresIndex::RunTransactionRows(std::span<const pg::Conn::BatchItem> items) {
  for (int attempt = 0;; ++attempt) {
    auto lease = Acquire();
    if (!lease.ok()) return lease.error();
    auto out = (*lease)->RunBatch(items);
    if (out.ok()) return std::move(*out);
    // A deadlock or serialization failure (nothing was stored), or a connection that broke while idle.
    if ((out.error().retryable || (*lease)->broken()) && attempt < 4) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5 << attempt));
      continue;
    }
    return out.error().error;
  }
}

// ---- Open and close

PostgresIndex::PostgresIndex(PostgresOptions options)
    : options_(std::move(options)), counter_slot_(static_cast<int64_t>(Rng()() % kCounterSlots)) {}

Result<std::pair<int, int>> PostgresIndex::Migrate(const std::string& uri) {
  auto conn = pg::Conn::Connect(uri);
  if (!conn.ok()) return conn.error();
  return MigrateLocked(**conn, pg::RedactedUri(uri));
}

Result<std::unique_ptr<PostgresIndex>> PostgresIndex::Open(PostgresOptions options) {
  if (options.pool_size == 0) return Malformed("index pool size must be at least 1");
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

std::vector<Status> PostgresIndex::RunBatch(size_t writer, std::span<WriteRequest* const> batch) {
  std::unique_ptr<pg::Conn>& conn = writer_conns_[writer];
  std::vector<Status> results(batch.size(), Ok{});
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
    if (failure.error.code == ErrorCode::kUnavailable && conn->broken() && !reconnected) {
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

Result<std::string> PostgresIndex::SharedSecret(std::string_view name, std::string_view candidate) {
  // Insert-if-absent, then read in a new statement: under READ COMMITTED that sees a value a concurrent
  // node committed first, which the insert's own snapshot would not.
  if (auto put =
          Query(kAddSecret, pg::Params().Text(name).Text(candidate).Int8(options_.clock->UnixSeconds()));
      !put.ok()) {
    return put.error();
  }
  auto rows = Query(kGetSecret, pg::Params().Text(name));
  if (!rows.ok()) return rows.error();
  if (rows->size() != 1) return IoError("postgres: secret " + std::string(name) + " vanished");
  return std::string(rows->Text(0, 0));
}

Result<std::vector<SecretRecord>> PostgresIndex::ListSecrets() {
  auto rows = Query(kListSecrets, pg::Params());
  if (!rows.ok()) return rows.error();
  std::vector<SecretRecord> out;
  for (int i = 0; i < rows->size(); ++i)
    out.push_back({std::string(rows->Text(i, 0)), std::string(rows->Text(i, 1)), rows->Int8(i, 2)});
  return out;
}

Result<bool> PostgresIndex::AddSecret(std::string_view name, std::string_view value) {
  auto rows = Query(kAddSecret, pg::Params().Text(name).Text(value).Int8(options_.clock->UnixSeconds()));
  if (!rows.ok()) return rows.error();
  return rows->size() == 1;
}

Result<bool> PostgresIndex::DeleteSecret(std::string_view name) {
  auto rows = Query(kDeleteSecret, pg::Params().Text(name));
  if (!rows.ok()) return rows.error();
  return rows->size() == 1;
}

Status PostgresIndex::Ping() {
  auto rows = Query(kPing, {});
  if (!rows.ok()) return rows.error();
  return Ok{};
}

}  // namespace cairn::index
