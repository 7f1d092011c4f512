// The PostgreSQL backend's garbage-collection slice (index.h's GcIndex) and ReviveXorbs, the CAS's side of
// it. Each step is one statement, so a write that names a xorb or a file (CommitShard, ShareFiles: their
// statements lock the quarantine rows they name) and a sweep's step meet on the same rows and serialize.
#include <string>
#include <unordered_map>
#include <utility>

#include "index/postgres/postgres_index.h"

namespace cairn::index {

namespace {

constexpr pg::Statement kXorbUses{
    "xorb_uses",
    "SELECT x.hash, q.claimed_at, EXISTS (SELECT 1 FROM compacted_xorbs c WHERE c.xorb = x.hash) "
    "FROM xorbs x LEFT JOIN gc_quarantine q ON q.kind = 0 AND q.hash = x.hash WHERE x.hash = "
    "ANY($1::bytea[])"};
// Locks the quarantine and the xorbs named: a claim committed before is seen, a later one waits and then
// finds the xorb revived; a xorb deleted before is absent.
constexpr pg::Statement kReviveXorbs{"revive_xorbs", R"sql(
WITH xs AS (SELECT hash FROM xorbs WHERE hash = ANY($1::bytea[]) FOR KEY SHARE),
gq AS (SELECT hash, claimed_at FROM gc_quarantine WHERE kind = 0 AND hash = ANY($1::bytea[]) FOR UPDATE),
cx AS (SELECT xorb FROM compacted_xorbs WHERE xorb = ANY($1::bytea[])),
rv AS (DELETE FROM gc_quarantine q USING gq WHERE q.kind = 0 AND q.hash = gq.hash AND gq.claimed_at = 0
       AND NOT EXISTS (SELECT 1 FROM cx WHERE cx.xorb = gq.hash))
SELECT xs.hash, gq.claimed_at, EXISTS (SELECT 1 FROM cx WHERE cx.xorb = xs.hash)
FROM xs LEFT JOIN gq ON gq.hash = xs.hash)sql"};
constexpr pg::Statement kFileScopes{
    "file_scopes", "SELECT file, scope FROM file_scopes WHERE file = ANY($1::bytea[]) ORDER BY file, scope"};
constexpr pg::Statement kScanFileXorbs{"scan_file_xorbs", R"sql(
SELECT f.hash, f.size, f.terms,
  EXISTS (SELECT 1 FROM file_scopes s WHERE s.file = f.hash
            AND NOT EXISTS (SELECT 1 FROM repos r WHERE r.scope = s.scope)
            AND NOT EXISTS (SELECT 1 FROM repos r WHERE r.read_scope = s.scope))
  OR EXISTS (SELECT 1 FROM bucket_files b WHERE b.file = f.hash)
FROM files f WHERE f.hash > $1::bytea ORDER BY f.hash LIMIT $2::int8)sql"};
constexpr pg::Statement kScanQuarantine{"scan_quarantine", R"sql(
SELECT q.hash, q.since, q.claimed_at,
  COALESCE(CASE q.kind WHEN 0 THEN (SELECT region_size FROM xorbs x WHERE x.hash = q.hash)
                       WHEN 1 THEN (SELECT size FROM files f WHERE f.hash = q.hash)
                       ELSE (SELECT size FROM shards s WHERE s.hash = q.hash) END, 0)::int8
FROM gc_quarantine q WHERE q.kind = $1::int8 AND q.hash > $2::bytea ORDER BY q.hash LIMIT $3::int8)sql"};
constexpr pg::Statement kQuarantine{
    "quarantine",
    "INSERT INTO gc_quarantine(kind, hash, since, claimed_at) "
    "SELECT $1::int8, h, $3::int8, 0 FROM unnest($2::bytea[]) AS t(h) ON CONFLICT DO NOTHING"};
constexpr pg::Statement kRelease{
    "release",
    "DELETE FROM gc_quarantine WHERE kind = $1::int8 AND hash = ANY($2::bytea[]) AND claimed_at = 0"};
// Files, their scopes (and the scopes' totals) and the counters, for the files still quarantined as given.
constexpr pg::Statement kSweepFiles{"sweep_files", R"sql(
WITH c AS (SELECT * FROM unnest($1::bytea[], $2::int8[]) AS t(hash, since)),
taken AS (
  DELETE FROM gc_quarantine q USING c
  WHERE q.kind = 1 AND q.hash = c.hash AND q.since = c.since AND q.claimed_at = 0 RETURNING q.hash),
f AS (SELECT files.hash, files.size FROM files JOIN taken ON taken.hash = files.hash),
sc AS (DELETE FROM file_scopes s USING f WHERE s.file = f.hash RETURNING s.scope, f.size),
tot AS (
  UPDATE scope_totals t SET files = t.files - d.n, bytes = t.bytes - d.b
  FROM (SELECT scope, count(*) AS n, sum(size) AS b FROM sc GROUP BY scope) d WHERE t.scope = d.scope),
df AS (DELETE FROM files USING f WHERE files.hash = f.hash RETURNING files.size),
bump AS (
  UPDATE counters k SET files = k.files - (SELECT count(*) FROM df),
                        file_bytes = k.file_bytes - (SELECT COALESCE(sum(size), 0) FROM df)
  WHERE k.slot = $3::int8)
SELECT (SELECT count(*) FROM df)::int8, (SELECT COALESCE(sum(size), 0) FROM df)::int8)sql"};
constexpr pg::Statement kClaimXorbs{"claim_xorbs", R"sql(
WITH c AS (SELECT * FROM unnest($1::bytea[], $2::int8[]) AS t(hash, since)),
cl AS (
  UPDATE gc_quarantine q SET claimed_at = $3::int8 FROM c
  WHERE q.kind = 0 AND q.hash = c.hash AND q.since = c.since AND q.claimed_at = 0 RETURNING q.hash),
dd AS (DELETE FROM dedup d USING cl WHERE d.xorb = cl.hash),
dn AS (DELETE FROM shard_xorbs s USING cl WHERE s.xorb = cl.hash RETURNING s.shard),
dead AS (
  SELECT DISTINCT dn.shard FROM dn
  WHERE NOT EXISTS (SELECT 1 FROM shard_xorbs o
                    WHERE o.shard = dn.shard AND o.xorb NOT IN (SELECT hash FROM cl))),
ds AS (
  INSERT INTO gc_quarantine(kind, hash, since, claimed_at) SELECT 2, dead.shard, $3::int8, $3::int8 FROM dead
  ON CONFLICT DO NOTHING)
SELECT hash FROM cl)sql"};
constexpr pg::Statement kDropXorbs{"drop_xorbs", R"sql(
WITH taken AS (
  DELETE FROM gc_quarantine q WHERE q.kind = 0 AND q.hash = ANY($1::bytea[]) AND q.claimed_at <> 0
  RETURNING q.hash),
dx AS (
  DELETE FROM xorbs x USING taken WHERE x.hash = taken.hash
  RETURNING x.chunk_count, x.region_size, x.unpacked_size),
bump AS (
  UPDATE counters k SET xorbs = k.xorbs - (SELECT count(*) FROM dx),
                        chunks = k.chunks - (SELECT COALESCE(sum(chunk_count), 0) FROM dx),
                        stored_bytes = k.stored_bytes - (SELECT COALESCE(sum(region_size), 0) FROM dx),
                        unpacked_bytes = k.unpacked_bytes - (SELECT COALESCE(sum(unpacked_size), 0) FROM dx)
  WHERE k.slot = $2::int8)
SELECT (SELECT count(*) FROM dx)::int8, (SELECT COALESCE(sum(region_size), 0) FROM dx)::int8)sql"};
constexpr pg::Statement kShardScopes{
    "shard_scopes",
    "SELECT shard, scope FROM shard_scopes WHERE shard = ANY($1::bytea[]) ORDER BY shard, scope"};
// Its dedup entries went with its xorbs (each names one of them).
constexpr pg::Statement kDropShards{"drop_shards", R"sql(
WITH taken AS (
  DELETE FROM gc_quarantine q WHERE q.kind = 2 AND q.hash = ANY($1::bytea[]) AND q.claimed_at <> 0
  RETURNING q.hash),
sc AS (DELETE FROM shard_scopes s USING taken WHERE s.shard = taken.hash),
ds AS (DELETE FROM shards s USING taken WHERE s.hash = taken.hash RETURNING s.size),
bump AS (
  UPDATE counters k SET shards = k.shards - (SELECT count(*) FROM ds),
                        stored_bytes = k.stored_bytes - (SELECT COALESCE(sum(size), 0) FROM ds)
  WHERE k.slot = $2::int8)
SELECT (SELECT count(*) FROM ds)::int8, (SELECT COALESCE(sum(size), 0) FROM ds)::int8)sql"};
// Repository objects (their sizes, never their data: length() of a bytea reads no more than its header).
constexpr pg::Statement kScanRepoObjects{"scan_repo_objects", R"sql(
SELECT o.key, length(o.data)::int8, COALESCE(q.since, 0)::int8 FROM repo_objects o
LEFT JOIN gc_repo_quarantine q ON q.repo = o.repo AND q.key = o.key
WHERE o.repo = $1::int8 AND o.key > $2::bytea ORDER BY o.key LIMIT $3::int8)sql"};
// Objects only, and a quarantine already there keeps its time.
constexpr pg::Statement kQuarantineRepoObjects{"quarantine_repo_objects", R"sql(
INSERT INTO gc_repo_quarantine(repo, key, since)
SELECT o.repo, o.key, $3::int8 FROM repo_objects o WHERE o.repo = $1::int8 AND o.key = ANY($2::bytea[])
ON CONFLICT DO NOTHING)sql"};
constexpr pg::Statement kReleaseRepoObjects{
    "release_repo_objects",
    "DELETE FROM gc_repo_quarantine WHERE repo = $1::int8 AND key = ANY($2::bytea[])"};
// The quarantine rows still as the mark read them are taken first, then their objects: a write that wants an
// object (PutRepoObjects, ReviveRepoObjects) takes the same row, so one of the two waits for the other, and
// a revived object's row is gone (or has another time) by the time the sweep reads it.
constexpr pg::Statement kSweepRepoObjects{"sweep_repo_objects", R"sql(
WITH c AS (SELECT * FROM unnest($2::bytea[], $3::int8[]) AS t(key, since)),
taken AS (
  DELETE FROM gc_repo_quarantine q USING c
  WHERE q.repo = $1::int8 AND q.key = c.key AND q.since = c.since RETURNING q.key),
d AS (
  DELETE FROM repo_objects o USING taken WHERE o.repo = $1::int8 AND o.key = taken.key
  RETURNING length(o.data)::int8 AS size)
SELECT (SELECT count(*) FROM d)::int8, (SELECT COALESCE(sum(size), 0) FROM d)::int8)sql"};
// ScrubDeleted's statements, each outside any transaction (VACUUM refuses to run in one).
constexpr const char kVacuum[] = "VACUUM repo_objects, gc_repo_quarantine";
constexpr const char kVacuumFull[] = "VACUUM FULL repo_objects";
constexpr const char kCheckpoint[] = "CHECKPOINT";
// pg_advisory_lock key of the collector ("cairn-gc" in ASCII).
constexpr const char kLockGc[] = "SELECT pg_advisory_lock(7161132942838359907)";
constexpr const char kStillConnected[] = "SELECT 1";
// The deletion hold (HoldDeletions): shared by backups, exclusive for a collector's deletions.
constexpr int64_t kDeletionsKey = 7161132942838359908;

constexpr int64_t Kind(GcKind k) {
  return static_cast<int64_t>(k);
}

pg::Params& AfterHash(pg::Params& p, const std::optional<Hash>& after) {
  if (after) return p.Bytea(*after);
  return p.Bytea(std::span<const uint8_t>());  // every hash sorts after the empty bytea
}

// The lock lives as long as its session: a connection of its own that nothing else uses.
class SessionGcLock final : public GcLock {
 public:
  explicit SessionGcLock(std::unique_ptr<pg::Conn> conn) : conn_(std::move(conn)) {}
  // Released at once: a closed connection's locks go only once its backend notices, and the next holder
  // (a collector after a backup) would find them still held.
  ~SessionGcLock() override { (void)conn_->Exec("SELECT pg_advisory_unlock_all()"); }
  SessionGcLock(const SessionGcLock&) = delete;
  SessionGcLock& operator=(const SessionGcLock&) = delete;
  Status Check() override {
    if (auto r = conn_->Exec(kStillConnected); !r.ok()) {
      return Unavailable("the garbage collector's lock was lost: " + r.error().message);
    }
    return Ok{};
  }

 private:
  std::unique_ptr<pg::Conn> conn_;
};

}  // namespace

Result<std::vector<XorbUse>> PostgresIndex::ReviveXorbs(std::span<const XorbHash> xorbs) {
  if (xorbs.size() > kMaxXorbsPerRead) return Malformed("too many xorbs in one read");
  const auto uses = [&](const pg::Rows& rows, bool* quarantined) -> Result<std::vector<XorbUse>> {
    std::unordered_map<XorbHash, XorbUse, xet::HashHasher> found;
    for (int r = 0; r < rows.size(); ++r) {
      auto hash = rows.Hash(r, 0);
      if (!hash) return IoError("index: a xorb hash that is not 32 bytes");
      XorbUse use = XorbUse::kStored;
      if (!rows.IsNull(r, 1) && rows.Int8(r, 1) != 0) {
        use = XorbUse::kBeingSwept;
      } else if (rows.Bool(r, 2)) {
        use = XorbUse::kSuperseded;  // asking does not revive it (records.h)
      } else if (!rows.IsNull(r, 1) && quarantined != nullptr) {
        *quarantined = true;
      }
      found[*hash] = use;
    }
    std::vector<XorbUse> out;
    out.reserve(xorbs.size());
    for (const XorbHash& x : xorbs) {
      auto it = found.find(x);
      out.push_back(it == found.end() ? XorbUse::kAbsent : it->second);
    }
    return out;
  };
  auto rows = Query(kXorbUses, pg::Params().HashArray(xorbs));
  if (!rows.ok()) return rows.error();
  bool quarantined = false;
  auto read = uses(*rows, &quarantined);
  if (!read.ok() || !quarantined) return read;  // a read only, as long as nothing named is quarantined
  Result<std::vector<XorbUse>> written = IoError("postgres: revive_xorbs returned nothing");
  WriteRequest req{&kReviveXorbs, {}, [&](const pg::Rows& r) { written = uses(r, nullptr); }};
  req.params.HashArray(xorbs);
  if (auto st = writes_->Submit(req); !st.ok()) return st.error();
  return written;
}

Result<std::vector<FileXorbs>> PostgresIndex::ScanFileXorbs(std::optional<FileHash> after, size_t limit) {
  if (limit > kMaxScanned) return Malformed("at most " + std::to_string(kMaxScanned) + " files a page");
  pg::Params p;
  AfterHash(p, after).Int8(static_cast<int64_t>(limit));
  auto rows = Query(kScanFileXorbs, p);
  if (!rows.ok()) return rows.error();
  std::vector<FileXorbs> out;
  out.reserve(static_cast<size_t>(rows->size()));
  for (int r = 0; r < rows->size(); ++r) {
    auto hash = rows->Hash(r, 0);
    if (!hash) return IoError("a files row has a hash that is not 32 bytes");
    out.push_back({*hash, static_cast<uint64_t>(rows->Int8(r, 1)), DistinctTermXorbs(rows->Bytes(r, 2)),
                   rows->Bool(r, 3)});
  }
  return out;
}

Result<std::vector<Quarantined>> PostgresIndex::ScanQuarantine(GcKind kind, std::optional<Hash> after,
                                                               size_t limit) {
  if (limit > kMaxScanned) return Malformed("at most " + std::to_string(kMaxScanned) + " hashes a page");
  pg::Params p;
  p.Int8(Kind(kind));
  AfterHash(p, after).Int8(static_cast<int64_t>(limit));
  auto rows = Query(kScanQuarantine, p);
  if (!rows.ok()) return rows.error();
  std::vector<Quarantined> out;
  out.reserve(static_cast<size_t>(rows->size()));
  for (int r = 0; r < rows->size(); ++r) {
    auto hash = rows->Hash(r, 0);
    if (!hash) return IoError("a gc_quarantine row has a hash that is not 32 bytes");
    out.push_back({*hash, rows->Int8(r, 1), rows->Int8(r, 2), static_cast<uint64_t>(rows->Int8(r, 3))});
  }
  return out;
}

Status PostgresIndex::Quarantine(GcKind kind, std::span<const Hash> hashes, int64_t since) {
  if (hashes.empty()) return Ok{};
  WriteRequest req{&kQuarantine, {}, [](const pg::Rows&) {}};
  req.params.Int8(Kind(kind)).HashArray(hashes).Int8(since);
  return writes_->Submit(req);
}

Status PostgresIndex::Release(GcKind kind, std::span<const Hash> hashes) {
  if (hashes.empty()) return Ok{};
  WriteRequest req{&kRelease, {}, [](const pg::Rows&) {}};
  req.params.Int8(Kind(kind)).HashArray(hashes);
  return writes_->Submit(req);
}

Result<SweptTotals> PostgresIndex::SweepFiles(std::span<const Quarantined> files) {
  SweptTotals swept;
  if (files.empty()) return swept;
  std::vector<Hash> hashes;
  std::vector<int64_t> since;
  for (const Quarantined& q : files) {
    hashes.push_back(q.hash);
    since.push_back(q.since);
  }
  WriteRequest req{&kSweepFiles, {}, [&](const pg::Rows& rows) {
                     if (rows.size() != 1) return;
                     swept = {static_cast<uint64_t>(rows.Int8(0, 0)), static_cast<uint64_t>(rows.Int8(0, 1))};
                   }};
  req.params.HashArray(hashes).Int8Array(since).Int8(counter_slot_);
  if (auto st = writes_->Submit(req); !st.ok()) return st.error();
  return swept;
}

Result<std::vector<XorbHash>> PostgresIndex::ClaimXorbs(std::span<const Quarantined> xorbs, int64_t now) {
  std::vector<XorbHash> claimed;
  if (xorbs.empty()) return claimed;
  std::vector<Hash> hashes;
  std::vector<int64_t> since;
  for (const Quarantined& q : xorbs) {
    hashes.push_back(q.hash);
    since.push_back(q.since);
  }
  WriteRequest req{&kClaimXorbs, {}, [&](const pg::Rows& rows) {
                     claimed.clear();
                     for (int r = 0; r < rows.size(); ++r) {
                       if (auto h = rows.Hash(r, 0)) claimed.push_back(*h);
                     }
                   }};
  req.params.HashArray(hashes).Int8Array(since).Int8(now);
  if (auto st = writes_->Submit(req); !st.ok()) return st.error();
  return claimed;
}

Result<SweptTotals> PostgresIndex::DropXorbs(std::span<const XorbHash> xorbs) {
  SweptTotals swept;
  if (xorbs.empty()) return swept;
  WriteRequest req{&kDropXorbs, {}, [&](const pg::Rows& rows) {
                     if (rows.size() != 1) return;
                     swept = {static_cast<uint64_t>(rows.Int8(0, 0)), static_cast<uint64_t>(rows.Int8(0, 1))};
                   }};
  req.params.HashArray(xorbs).Int8(counter_slot_);
  if (auto st = writes_->Submit(req); !st.ok()) return st.error();
  return swept;
}

// ---- Shards

// ---- Compaction

Result<std::vector<std::vector<std::string>>> PostgresIndex::FileScopes(std::span<const FileHash> files) {
  if (files.size() > kMaxFilesPerRead) return Malformed("too many files in one read");
  std::vector<std::vector<std::string>> out(files.size());
  if (files.empty()) return out;
  auto rows = Query(kFileScopes, pg::Params().HashArray(files));
  if (!rows.ok()) return rows.error();
  std::unordered_map<FileHash, std::vector<size_t>, xet::HashHasher> places;
  for (size_t i = 0; i < files.size(); ++i) places[files[i]].push_back(i);
  for (int r = 0; r < rows->size(); ++r) {
    const auto file = rows->Hash(r, 0);
    auto it = file ? places.find(*file) : places.end();
    if (it == places.end()) return IoError("index: scopes came back for a file not asked for");
    for (size_t i : it->second) out[i].emplace_back(rows->Text(r, 1));
  }
  return out;
}

Result<std::vector<ShardScope>> PostgresIndex::ShardScopes(std::span<const Hash> shards) {
  std::vector<ShardScope> out;
  if (shards.empty()) return out;
  pg::Params p;
  p.HashArray(shards);
  auto rows = Query(kShardScopes, p);
  if (!rows.ok()) return rows.error();
  for (int r = 0; r < rows->size(); ++r) {
    auto hash = rows->Hash(r, 0);
    if (!hash) return IoError("a shard_scopes row has a shard that is not 32 bytes");
    out.push_back({*hash, std::string(rows->Text(r, 1))});
  }
  return out;
}

Result<SweptTotals> PostgresIndex::DropShards(std::span<const Hash> shards) {
  SweptTotals swept;
  if (shards.empty()) return swept;
  WriteRequest req{&kDropShards, {}, [&](const pg::Rows& rows) {
                     if (rows.size() != 1) return;
                     swept = {static_cast<uint64_t>(rows.Int8(0, 0)), static_cast<uint64_t>(rows.Int8(0, 1))};
                   }};
  req.params.HashArray(shards).Int8(counter_slot_);
  if (auto st = writes_->Submit(req); !st.ok()) return st.error();
  return swept;
}

// ---- Repository objects

Result<std::vector<RepoObjectMark>> PostgresIndex::ScanRepoObjects(
    int64_t repo, const std::optional<std::vector<uint8_t>>& after, size_t limit) {
  if (limit > kMaxScanned) return Malformed("at most " + std::to_string(kMaxScanned) + " objects a page");
  pg::Params p;
  p.Int8(repo);
  p.Bytea(after ? std::span<const uint8_t>(*after) : std::span<const uint8_t>());  // every key sorts after ''
  p.Int8(static_cast<int64_t>(limit));
  auto rows = Query(kScanRepoObjects, p);
  if (!rows.ok()) return rows.error();
  std::vector<RepoObjectMark> out;
  out.reserve(static_cast<size_t>(rows->size()));
  for (int r = 0; r < rows->size(); ++r) {
    const auto key = rows->Bytes(r, 0);
    out.push_back({{key.begin(), key.end()}, static_cast<uint64_t>(rows->Int8(r, 1)), rows->Int8(r, 2)});
  }
  return out;
}

Status PostgresIndex::QuarantineRepoObjects(int64_t repo, const std::vector<std::vector<uint8_t>>& keys,
                                            int64_t since) {
  if (keys.size() > kMaxScanned) return Malformed("too many objects in one request");
  if (keys.empty()) return Ok{};
  WriteRequest req{&kQuarantineRepoObjects, {}, [](const pg::Rows&) {}};
  req.params.Int8(repo).ByteaArray(
      std::vector<std::optional<std::span<const uint8_t>>>(keys.begin(), keys.end()));
  req.params.Int8(since);
  return writes_->Submit(req);
}

Status PostgresIndex::ReleaseRepoObjects(int64_t repo, const std::vector<std::vector<uint8_t>>& keys) {
  if (keys.size() > kMaxScanned) return Malformed("too many objects in one request");
  if (keys.empty()) return Ok{};
  WriteRequest req{&kReleaseRepoObjects, {}, [](const pg::Rows&) {}};
  req.params.Int8(repo).ByteaArray(
      std::vector<std::optional<std::span<const uint8_t>>>(keys.begin(), keys.end()));
  return writes_->Submit(req);
}

Result<SweptTotals> PostgresIndex::SweepRepoObjects(int64_t repo, std::span<const RepoObjectMark> objects) {
  if (objects.size() > kMaxScanned) return Malformed("too many objects in one request");
  SweptTotals swept;
  if (objects.empty()) return swept;
  std::vector<std::optional<std::span<const uint8_t>>> keys;
  std::vector<int64_t> since;
  keys.reserve(objects.size());
  since.reserve(objects.size());
  for (const RepoObjectMark& o : objects) {
    keys.emplace_back(o.key);
    since.push_back(o.since);
  }
  WriteRequest req{&kSweepRepoObjects, {}, [&](const pg::Rows& rows) {
                     if (rows.size() != 1) return;
                     swept = {static_cast<uint64_t>(rows.Int8(0, 0)), static_cast<uint64_t>(rows.Int8(0, 1))};
                   }};
  req.params.Int8(repo).ByteaArray(keys).Int8Array(since);
  if (auto st = writes_->Submit(req); !st.ok()) return st.error();
  return swept;
}

Result<std::string> PostgresIndex::ScrubDeleted(bool vacuum) {
  // A connection of its own, in autocommit: VACUUM cannot run inside a transaction block, and the writers'
  // connections run in transactions. VACUUM makes the dead rows' space reusable; VACUUM FULL writes each
  // table anew (and drops the old file), and the checkpoint lets the write-ahead log that still holds the
  // deleted rows be recycled.
  auto conn = pg::Conn::Connect(options_.uri);
  if (!conn.ok()) return conn.error();
  const auto run = [&](const char* sql) -> Status {
    if (auto r = (*conn)->Exec(sql); !r.ok()) {
      return Error{r.error().code, std::string(sql) + ": " + r.error().message};
    }
    return Ok{};
  };
  if (!vacuum) {
    if (auto st = run(kVacuum); !st.ok()) return st.error();
    return std::string(kVacuum);
  }
  if (auto st = run(kVacuumFull); !st.ok()) return st.error();
  // CHECKPOINT needs a superuser or pg_checkpoint (PostgreSQL 15): without either the vacuum still counts,
  // and the operator is told what is left to do (docs/operations.md).
  if (auto st = run(kCheckpoint); !st.ok()) {
    return std::string(kVacuumFull) + "; no checkpoint (" + st.error().message +
           "): the write-ahead log keeps the deleted rows until the server's next checkpoint";
  }
  return std::string(kVacuumFull) + "; checkpoint";
}

Result<std::unique_ptr<GcLock>> PostgresIndex::LockGc() {
  auto conn = pg::Conn::Connect(options_.uri);
  if (!conn.ok()) return conn.error();
  if (auto r = (*conn)->Exec(kLockGc); !r.ok()) return r.error();
  return std::unique_ptr<GcLock>(new SessionGcLock(std::move(*conn)));
}

Result<std::unique_ptr<GcLock>> PostgresIndex::HoldDeletions(DeletionHold mode, bool wait) {
  auto conn = pg::Conn::Connect(options_.uri);
  if (!conn.ok()) return conn.error();
  const std::string fn = std::string(wait ? "pg_advisory_lock" : "pg_try_advisory_lock") +
                         (mode == DeletionHold::kShared ? "_shared" : "");
  pg::Params p;
  p.Int8(kDeletionsKey);
  auto r = (*conn)->Query("SELECT " + fn + "($1::int8)", p);
  if (!r.ok()) return r.error();
  if (!wait && !r->Bool(0, 0)) return std::unique_ptr<GcLock>();
  return std::unique_ptr<GcLock>(new SessionGcLock(std::move(*conn)));
}

}  // namespace cairn::index
