// The PostgreSQL backend's CAS slice (index.h's CasIndex): xorbs, files, scopes, shards, dedup, scans,
// counts.
#include <algorithm>
#include <string>
#include <unordered_map>
#include <utility>

#include "index/failures.h"
#include "index/postgres/postgres_index.h"

namespace cairn::index {

namespace {

static_assert(Index::kMaxDedupHits == 32, "the LIMIT of kDedupAny and kDedupScoped");

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
    "get_file",
    "SELECT terms, term_count, size, sha256, ranges, created_at FROM files WHERE hash = $1::bytea"};
constexpr pg::Statement kGetFiles{"get_files",
                                  "SELECT hash, terms, term_count, size, sha256, ranges, created_at FROM "
                                  "files WHERE hash = ANY($1::bytea[])"};
constexpr pg::Statement kFileVisible{"file_visible",
                                     "SELECT 1 FROM file_scopes WHERE file = $1::bytea AND scope = $2::text"};
constexpr pg::Statement kVisibleFileRecord{
    "visible_file_record",
    "SELECT f.created_at FROM file_scopes s JOIN files f ON f.hash = s.file "
    "WHERE s.file = $1::bytea AND s.scope = $2::text"};
constexpr pg::Statement kGetVisibleFile{
    "get_visible_file",
    "SELECT terms, term_count, size, sha256, ranges, created_at FROM files WHERE hash = $1::bytea "
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
// The collector's side first (index.h GcIndex): the quarantine of every xorb and file named is locked (so a
// sweep's claim either committed before, and the shard is refused with CR001 for a retry, or waits and
// finds them revived), and the xorbs themselves too (one deleted since the service read its layout is
// refused with CR002; none can be deleted before this commits).
constexpr pg::Statement kCommitShard{"commit_shard", R"sql(
WITH gq AS (
  SELECT q.kind, q.hash, q.claimed_at FROM gc_quarantine q
  WHERE (q.kind = 0 AND q.hash = ANY($5::bytea[])) OR (q.kind = 1 AND q.hash = ANY($7::bytea[]))
     OR (q.kind = 2 AND q.hash = $1::bytea)
  FOR UPDATE),
refuse AS (SELECT cairn_refuse_claimed(count(*)) AS n FROM gq WHERE gq.claimed_at <> 0),
present AS (SELECT hash FROM xorbs WHERE hash = ANY($5::bytea[]) FOR KEY SHARE),
missing AS (
  SELECT cairn_refuse_missing(cardinality($5::bytea[]) - (SELECT count(*) FROM present)) AS n),
revive AS (
  DELETE FROM gc_quarantine q USING gq
  WHERE q.kind = gq.kind AND q.hash = gq.hash AND gq.claimed_at = 0),
s AS (
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
ss AS (
  INSERT INTO shard_scopes(shard, scope) VALUES ($1::bytea, $4::text) ON CONFLICT DO NOTHING RETURNING 1),
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
  FROM n WHERE c.slot = $14::int8 AND (n.files > 0 OR n.shards > 0)),
-- The scope's revocations of files it sees again are cleared: one row per cleared file (one row when none).
rv AS (
  UPDATE revocations r SET cleared = true FROM fs
  WHERE r.file = fs.file AND r.scope = $4::text AND NOT r.cleared
  RETURNING r.file)
SELECT n.shards, rv.file, (SELECT count(*) FROM ss)::int8 FROM n, refuse, missing LEFT JOIN rv ON true)sql"};
// A compaction step's index side (GcIndex::Repoint), after its shards' kCommitShard in the same transaction:
// refused whole (CR001 claimed, CR002 missing, CR004 a file changed) or done whole.
constexpr pg::Statement kRepoint{"repoint", R"sql(
WITH u AS (
  SELECT * FROM unnest($1::bytea[], $2::bytea[], $3::bytea[], $4::int8[]) AS t(hash, terms, ranges, record)),
gq AS (
  SELECT hash FROM gc_quarantine WHERE kind = 0 AND claimed_at <> 0
  AND (hash = ANY($5::bytea[]) OR hash = $6::bytea) FOR UPDATE),
refuse AS (SELECT cairn_refuse_claimed(count(*)) AS n FROM gq),
present AS (SELECT hash FROM xorbs WHERE hash = ANY($5::bytea[]) OR hash = $6::bytea FOR KEY SHARE),
missing AS (
  SELECT cairn_refuse_missing(cardinality($5::bytea[]) + 1 - (SELECT count(*) FROM present)) AS n),
up AS (
  UPDATE files f SET terms = u.terms, ranges = u.ranges, created_at = GREATEST($7::int8, f.created_at + 1)
  FROM u WHERE f.hash = u.hash AND f.created_at = u.record AND f.term_count * 52 = length(u.terms)
  RETURNING f.hash),
changed AS (SELECT cairn_refuse_changed(cardinality($1::bytea[]) - (SELECT count(*) FROM up)) AS n),
dd AS (DELETE FROM dedup WHERE xorb = ANY($5::bytea[])),
cx AS (
  INSERT INTO compacted_xorbs(xorb, into_xorb, compacted_at)
  SELECT x, $6::bytea, $7::int8 FROM unnest($5::bytea[]) AS t(x)
  ON CONFLICT (xorb) DO UPDATE SET into_xorb = EXCLUDED.into_xorb, compacted_at = EXCLUDED.compacted_at)
SELECT (SELECT n FROM refuse), (SELECT n FROM missing), (SELECT n FROM changed))sql"};
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
// All or nothing: no row goes in unless every file is known (the counts say which).
// Sharing a file revives it and its xorbs (index.h GcIndex), as CommitShard does; the files are locked so
// that a sweep cannot delete one in between (it is then not found).
// $3..$8: a quota charge (QuotaCharge; $3 NULL: none), refused as a whole with CR003.
constexpr pg::Statement kShareFiles{"share_files", R"sql(
WITH u AS (SELECT DISTINCT hash FROM unnest($1::bytea[]) AS u(hash)),
f AS (SELECT files.hash, files.size, files.terms, files.term_count FROM files JOIN u ON u.hash = files.hash
      FOR KEY SHARE OF files),
complete AS (SELECT (SELECT count(*) FROM f) = (SELECT count(*) FROM u) AS ok),
qc AS (
  UPDATE quotas SET pending_bytes = pending_bytes + $4::int8 + $6::int8,
    reserved_bytes = GREATEST(reserved_bytes - $6::int8, 0) + $5::int8,
    reserved_at = CASE WHEN $5::int8 > 0 THEN $8::int8 ELSE reserved_at END
  WHERE namespace = $3::text AND (SELECT ok FROM complete) AND (NOT $7::bool OR limit_bytes IS NULL
    OR used_bytes + pending_bytes + reserved_bytes + $4::int8 + $5::int8 <= limit_bytes)
  RETURNING 1),
qr AS (
  SELECT cairn_refuse_quota(count(*)) AS n FROM quotas
  WHERE namespace = $3::text AND (SELECT ok FROM complete) AND NOT EXISTS (SELECT 1 FROM qc)),
fx AS (
  SELECT DISTINCT substring(f.terms FROM (g.i * 52 + 1)::int4 FOR 32) AS xorb
  FROM f, generate_series(0, f.term_count - 1) AS g(i)
  WHERE EXISTS (SELECT 1 FROM gc_quarantine)),
gq AS (
  SELECT q.kind, q.hash, q.claimed_at FROM gc_quarantine q
  WHERE (q.kind = 0 AND q.hash IN (SELECT xorb FROM fx)) OR (q.kind = 1 AND q.hash IN (SELECT hash FROM u))
  FOR UPDATE),
refuse AS (SELECT cairn_refuse_claimed(count(*)) AS n FROM gq WHERE gq.claimed_at <> 0),
revive AS (
  DELETE FROM gc_quarantine q USING gq
  WHERE q.kind = gq.kind AND q.hash = gq.hash AND gq.claimed_at = 0),
fs AS (
  INSERT INTO file_scopes(file, scope) SELECT hash, $2::text FROM f
  WHERE (SELECT ok FROM complete) AND (SELECT n FROM qr) = 0
  ON CONFLICT (file, scope) DO NOTHING RETURNING file),
st AS (
  INSERT INTO scope_totals(scope, files, bytes)
  SELECT $2::text, count(*), COALESCE(sum(f.size), 0) FROM fs JOIN f ON f.hash = fs.file
  HAVING count(*) > 0
  ON CONFLICT (scope) DO UPDATE SET files = scope_totals.files + EXCLUDED.files,
                                    bytes = scope_totals.bytes + EXCLUDED.bytes),
rv AS (
  UPDATE revocations r SET cleared = true FROM fs
  WHERE r.file = fs.file AND r.scope = $2::text AND NOT r.cleared)
SELECT (SELECT count(*) FROM u)::int8, (SELECT count(*) FROM f)::int8, (SELECT n FROM refuse),
  (SELECT n FROM qr))sql"};
// The file leaves the scope, and its size the scope's totals, only where the scope saw it; its revocation
// is recorded. Second column: whether a revocation was recorded before this statement (its snapshot).
constexpr pg::Statement kUnregisterFile{"unregister_file", R"sql(
WITH fs AS (DELETE FROM file_scopes WHERE file = $1::bytea AND scope = $2::text RETURNING file),
st AS (
  UPDATE scope_totals SET files = scope_totals.files - 1, bytes = scope_totals.bytes - f.size
  FROM fs JOIN files f ON f.hash = fs.file WHERE scope_totals.scope = $2::text),
rv AS (
  INSERT INTO revocations(file, scope, cleared) SELECT file, $2::text, false FROM fs
  ON CONFLICT (file, scope) DO UPDATE SET cleared = false)
SELECT (SELECT count(*) FROM fs)::int8,
       (SELECT count(*) FROM revocations WHERE file = $1::bytea AND scope = $2::text AND NOT cleared)::int8
)sql"};
constexpr pg::Statement kListRevocations{"list_revocations", R"sql(
SELECT file, scope, cleared FROM revocations WHERE (file, scope) > ($1::bytea, $2::text)
ORDER BY file, scope LIMIT $3::int8)sql"};
constexpr pg::Statement kListClearedRevocations{"list_cleared_revocations", R"sql(
SELECT file, scope, cleared FROM revocations WHERE cleared AND (file, scope) > ($1::bytea, $2::text)
ORDER BY file, scope LIMIT $3::int8)sql"};
constexpr pg::Statement kForgetRevocations{"forget_revocations", R"sql(
DELETE FROM revocations r USING unnest($1::bytea[], $2::text[]) AS u(file, scope)
WHERE r.file = u.file AND r.scope = u.scope AND r.cleared)sql"};

}  // namespace

// ---- Writes

Result<bool> PostgresIndex::PutXorb(const XorbHash& hash, const xet::XorbLayout& layout) {
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

Result<CommitOutcome> PostgresIndex::CommitShard(const ShardCommit& commit) {
  if (auto st = CheckShardCommit(commit); !st.ok()) return st.error();
  CommitOutcome outcome;
  WriteRequest req{&kCommitShard, CommitShardParams(commit, options_.clock->UnixSeconds()),
                   [&](const pg::Rows& rows) {
                     outcome.already_existed = rows.size() >= 1 && rows.Int8(0, 0) == 0;
                     outcome.new_scope = rows.size() >= 1 && rows.Int8(0, 2) > 0;
                     outcome.cleared_revocations.clear();
                     for (int i = 0; i < rows.size(); ++i) {
                       if (auto file = rows.Hash(i, 1)) outcome.cleared_revocations.push_back(*file);
                     }
                   }};
  if (auto st = writes_->Submit(req); !st.ok()) return st.error();
  return outcome;
}

pg::Params PostgresIndex::CommitShardParams(const ShardCommit& commit, int64_t now) const {
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
  pg::Params params;
  params.Bytea(commit.shard).Int8(static_cast<int64_t>(commit.shard_size)).Int8(now).Text(commit.scope);
  params.HashArray(xorbs).BoolArray(listed);
  params.HashArray(file_hashes).ByteaArray(terms).Int8Array(term_counts).Int8Array(sizes).ByteaArray(shas);
  params.HashArray(dedup_chunks).HashArray(dedup_xorbs).Int8(counter_slot_).ByteaArray(ranges);
  return params;
}

// ---- Compaction (GcIndex::Repoint: its shards are registered as CommitShard registers them)

Status PostgresIndex::Repoint(const Repointing& repointing) {
  if (auto st = CheckRepointing(repointing); !st.ok()) return st;
  const int64_t now = options_.clock->UnixSeconds();
  std::vector<pg::Params> params;
  params.reserve(repointing.shards.size() + 1);
  for (const auto& shard : repointing.shards) params.push_back(CommitShardParams(shard, now));
  std::vector<FileHash> hashes;
  std::vector<std::optional<std::span<const uint8_t>>> terms, ranges;
  std::vector<int64_t> records;
  for (const auto& f : repointing.files) {
    hashes.push_back(f.hash);
    terms.emplace_back(std::span<const uint8_t>(f.packed_terms));
    if (f.packed_ranges.empty()) {
      ranges.emplace_back(std::nullopt);
    } else {
      ranges.emplace_back(std::span<const uint8_t>(f.packed_ranges));
    }
    records.push_back(f.record);
  }
  pg::Params& p = params.emplace_back();
  p.HashArray(hashes).ByteaArray(terms).ByteaArray(ranges).Int8Array(records);
  p.HashArray(repointing.replaced).Bytea(repointing.into).Int8(now);
  std::vector<pg::Conn::BatchItem> items;
  for (size_t i = 0; i + 1 < params.size(); ++i) items.push_back({&kCommitShard, &params[i]});
  items.push_back({&kRepoint, &params.back()});
  return RunTransaction(items);
}

// ---- Reads

Result<std::shared_ptr<const XorbEntry>> PostgresIndex::GetXorb(const XorbHash& hash) {
  auto rows = Query(kGetXorb, pg::Params().Bytea(hash));
  if (!rows.ok()) return rows.error();
  if (rows->size() == 0) return XorbNotIndexed(hash);
  return XorbEntryFromRow(hash, rows->Bytes(0, 0), rows->Int8(0, 1), rows->Int8(0, 2), rows->Int8(0, 3),
                          rows->Int8(0, 4));
}

Result<std::vector<std::shared_ptr<const XorbEntry>>> PostgresIndex::GetXorbs(
    std::span<const XorbHash> hashes) {
  if (hashes.size() > kMaxXorbsPerRead) return Malformed("too many xorbs in one read");
  std::vector<std::shared_ptr<const XorbEntry>> out(hashes.size());
  std::vector<XorbHash> missing;                                              // each hash once
  std::unordered_map<XorbHash, std::vector<size_t>, xet::HashHasher> wanted;  // hash -> its places in out
  for (size_t i = 0; i < hashes.size(); ++i) {
    auto& places = wanted[hashes[i]];
    if (places.empty()) missing.push_back(hashes[i]);
    places.push_back(i);
  }
  auto rows = Query(kGetXorbs, pg::Params().HashArray(missing));
  if (!rows.ok()) return rows.error();
  for (int r = 0; r < rows->size(); ++r) {
    const auto hash = rows->Hash(r, 0);
    auto it = hash ? wanted.find(*hash) : wanted.end();
    if (it == wanted.end()) return IoError("index: a xorb came back that was not asked for");
    auto e = XorbEntryFromRow(*hash, rows->Bytes(r, 1), rows->Int8(r, 2), rows->Int8(r, 3), rows->Int8(r, 4),
                              rows->Int8(r, 5));
    if (!e.ok()) return e.error();
    for (size_t i : it->second) out[i] = *e;
  }
  return out;
}

Result<bool> PostgresIndex::HasXorb(const XorbHash& hash) {
  auto rows = Query(kHasXorb, pg::Params().Bytea(hash));
  if (!rows.ok()) return rows.error();
  return rows->size() > 0;
}

Result<std::shared_ptr<const FileEntry>> PostgresIndex::GetFile(const FileHash& hash) {
  return ReadFile(hash, std::nullopt);
}

Result<std::vector<std::shared_ptr<const FileEntry>>> PostgresIndex::GetFiles(
    std::span<const FileHash> hashes) {
  if (hashes.size() > kMaxFilesPerRead) return Malformed("too many files in one read");
  std::vector<std::shared_ptr<const FileEntry>> out(hashes.size());
  std::unordered_map<FileHash, std::vector<size_t>, xet::HashHasher> wanted;  // hash -> its places in out
  std::vector<FileHash> asked;                                                // each hash once
  for (size_t i = 0; i < hashes.size(); ++i) {
    auto& places = wanted[hashes[i]];
    if (places.empty()) asked.push_back(hashes[i]);
    places.push_back(i);
  }
  auto rows = Query(kGetFiles, pg::Params().HashArray(asked));
  if (!rows.ok()) return rows.error();
  for (int r = 0; r < rows->size(); ++r) {
    const auto hash = rows->Hash(r, 0);
    auto it = hash ? wanted.find(*hash) : wanted.end();
    if (it == wanted.end()) return IoError("index: a file came back that was not asked for");
    auto e = FileEntryFromRow(*hash, rows->Bytes(r, 1), rows->Int8(r, 2), rows->Int8(r, 3),
                              rows->IsNull(r, 4) ? std::nullopt : rows->Hash(r, 4),
                              rows->IsNull(r, 5) ? std::span<const uint8_t>() : rows->Bytes(r, 5),
                              rows->Int8(r, 6));
    if (!e.ok()) return e.error();
    for (size_t i : it->second) out[i] = *e;
  }
  return out;
}

Result<std::shared_ptr<const FileEntry>> PostgresIndex::GetVisibleFile(const FileHash& hash,
                                                                       std::string_view scope) {
  return ReadFile(hash, scope);
}

Result<std::shared_ptr<const FileEntry>> PostgresIndex::ReadFile(const FileHash& hash,
                                                                 std::optional<std::string_view> scope) {
  auto rows = scope ? Query(kGetVisibleFile, pg::Params().Bytea(hash).Text(*scope))
                    : Query(kGetFile, pg::Params().Bytea(hash));
  if (!rows.ok()) return rows.error();
  if (rows->size() == 0) return FileNotIndexed(hash);
  return FileEntryFromRow(hash, rows->Bytes(0, 0), rows->Int8(0, 1), rows->Int8(0, 2),
                          rows->IsNull(0, 3) ? std::nullopt : rows->Hash(0, 3),
                          rows->IsNull(0, 4) ? std::span<const uint8_t>() : rows->Bytes(0, 4),
                          rows->Int8(0, 5));
}

Result<std::optional<int64_t>> PostgresIndex::VisibleFileRecord(const FileHash& hash,
                                                                std::string_view scope) {
  auto rows = Query(kVisibleFileRecord, pg::Params().Bytea(hash).Text(scope));
  if (!rows.ok()) return rows.error();
  if (rows->size() == 0) return std::optional<int64_t>();
  return std::optional<int64_t>(rows->Int8(0, 0));
}

Result<bool> PostgresIndex::FileVisibleTo(const FileHash& hash, std::string_view scope) {
  auto rows = Query(kFileVisible, pg::Params().Bytea(hash).Text(scope));
  if (!rows.ok()) return rows.error();
  return rows->size() > 0;
}

Result<std::optional<FileHash>> PostgresIndex::FileBySha256(const Hash& sha256,
                                                            std::optional<std::string_view> scope) {
  pg::Params p;
  p.Bytea(sha256);
  if (scope) p.Text(*scope);
  auto rows = Query(scope ? kFileByShaScoped : kFileBySha, p);
  if (!rows.ok()) return rows.error();
  if (rows->size() == 0) return std::optional<FileHash>();
  return rows->Hash(0, 0);
}

Result<std::vector<ListedFile>> PostgresIndex::ListFiles(std::string_view scope,
                                                         std::optional<FileHash> after, size_t limit) {
  if (limit > kMaxListedFiles)
    return Malformed("at most " + std::to_string(kMaxListedFiles) + " files a page");
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
    if (!hash) return IoError("a files row has a hash that is not 32 bytes");
    out.push_back({*hash, static_cast<uint64_t>(rows->Int8(i, 1)),
                   rows->IsNull(i, 2) ? std::nullopt : rows->Hash(i, 2), rows->Int8(i, 3)});
  }
  return out;
}

Result<std::vector<Hash>> PostgresIndex::Scan(Scanned what, std::optional<Hash> after, size_t limit) {
  if (limit > kMaxScanned) return Malformed("at most " + std::to_string(kMaxScanned) + " hashes a page");
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
    if (!hash) return IoError("an index row has a hash that is not 32 bytes");
    out.push_back(*hash);
  }
  return out;
}

Result<ScopeTotals> PostgresIndex::ScopeStats(std::string_view scope) {
  auto rows = Query(kScopeStats, pg::Params().Text(scope));
  if (!rows.ok()) return rows.error();
  if (rows->size() == 0) return ScopeTotals{};  // no file in the scope
  return ScopeTotals{static_cast<uint64_t>(rows->Int8(0, 0)), static_cast<uint64_t>(rows->Int8(0, 1))};
}

Result<std::optional<ShardInfo>> PostgresIndex::GetShard(const Hash& shard) {
  auto rows = Query(kGetShard, pg::Params().Bytea(shard));
  if (!rows.ok()) return rows.error();
  if (rows->size() == 0) return std::optional<ShardInfo>();
  return std::optional<ShardInfo>(
      ShardInfo{.size = static_cast<uint64_t>(rows->Int8(0, 0)), .registered_at = rows->Int8(0, 1)});
}

Result<std::shared_ptr<const ShardXorbs>> PostgresIndex::GetShardXorbs(const Hash& shard) {
  auto rows = Query(kGetShardXorbs, pg::Params().Bytea(shard));
  if (!rows.ok()) return rows.error();
  if (rows->size() == 0) return ShardNotIndexed(shard);
  auto e = std::make_shared<ShardXorbs>();
  for (int i = 0; i < rows->size(); ++i) {
    if (rows->IsNull(i, 0)) continue;  // the shard has no xorbs
    auto xorb = rows->Hash(i, 0);
    if (!xorb) return IoError("index row of shard " + shard.hex() + " is corrupt");
    (rows->Bool(i, 1) ? e->listed : e->referenced).push_back(*xorb);
  }
  return std::shared_ptr<const ShardXorbs>(std::move(e));
}

Result<std::vector<DedupHit>> PostgresIndex::LookupDedup(const ChunkHash& chunk,
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

Result<IndexStats> PostgresIndex::Stats() {
  auto rows = Query(kStats, {});
  if (!rows.ok()) return rows.error();
  if (rows->size() != 1) return IoError("postgres: the counters are missing");
  const auto u = [&](int col) { return static_cast<uint64_t>(rows->Int8(0, col)); };
  return IndexStats{.xorbs = u(0),
                    .files = u(1),
                    .chunks = u(2),
                    .stored_bytes = u(3),
                    .shards = u(4),
                    .unpacked_bytes = u(5),
                    .file_bytes = u(6)};
}

Status PostgresIndex::ShareFiles(std::span<const FileHash> hashes, std::string_view scope,
                                 const QuotaCharge* charge) {
  if (hashes.size() > kMaxSharedFiles) return Malformed("too many files shared at once");
  if (hashes.empty()) return Ok{};
  int64_t asked = 0;
  int64_t found = 0;
  WriteRequest req{&kShareFiles, {}, [&](const pg::Rows& rows) {
                     if (rows.size() != 1) return;
                     asked = rows.Int8(0, 0);
                     found = rows.Int8(0, 1);
                   }};
  req.params.HashArray(hashes).Text(scope);
  if (auto st = QuotaChargeParams(req.params, charge); !st.ok()) return st;
  if (auto st = writes_->Submit(req); !st.ok()) return st;
  if (found != asked || asked == 0) return SharedFileNotIndexed();
  return Ok{};
}

Result<Unregistered> PostgresIndex::UnregisterFile(const FileHash& hash, std::string_view scope) {
  Unregistered outcome = Unregistered::kNotVisible;
  WriteRequest req{&kUnregisterFile, {}, [&](const pg::Rows& rows) {
                     if (rows.size() != 1) return;
                     outcome = rows.Int8(0, 0) > 0   ? Unregistered::kRemoved
                               : rows.Int8(0, 1) > 0 ? Unregistered::kRemovedBefore
                                                     : Unregistered::kNotVisible;
                   }};
  req.params.Bytea(hash).Text(scope);
  if (auto st = writes_->Submit(req); !st.ok()) return st.error();
  return outcome;
}

Result<std::vector<RevocationRecord>> PostgresIndex::RevocationPage(const pg::Statement& statement,
                                                                    const std::optional<RevocationKey>& after,
                                                                    size_t limit) {
  if (limit > kMaxListedFiles)
    return Malformed("at most " + std::to_string(kMaxListedFiles) + " revocations a page");
  pg::Params p;
  // Every hash sorts after the empty bytea.
  if (after) {
    p.Bytea(after->file).Text(after->scope);
  } else {
    p.Bytea(std::span<const uint8_t>()).Text("");
  }
  p.Int8(static_cast<int64_t>(limit));
  auto rows = Query(statement, p);
  if (!rows.ok()) return rows.error();
  std::vector<RevocationRecord> out;
  for (int i = 0; i < rows->size(); ++i) {
    auto file = rows->Hash(i, 0);
    if (!file) return IoError("a revocations row has a file that is not 32 bytes");
    out.push_back({{*file, std::string(rows->Text(i, 1))}, rows->Bool(i, 2)});
  }
  return out;
}

Result<std::vector<RevocationRecord>> PostgresIndex::ListRevocations(std::optional<RevocationKey> after,
                                                                     size_t limit) {
  return RevocationPage(kListRevocations, after, limit);
}

Result<std::vector<RevocationKey>> PostgresIndex::ListClearedRevocations(std::optional<RevocationKey> after,
                                                                         size_t limit) {
  return KeysOf(RevocationPage(kListClearedRevocations, after, limit));
}

Status PostgresIndex::ForgetRevocations(std::span<const RevocationKey> revocations) {
  if (revocations.empty()) return Ok{};
  std::vector<xet::Hash> files;
  std::vector<std::string> scopes;
  for (const auto& k : revocations) {
    files.push_back(k.file);
    scopes.push_back(k.scope);
  }
  WriteRequest req{&kForgetRevocations, {}, [](const pg::Rows&) {}};
  req.params.HashArray(files).TextArray(scopes);
  return writes_->Submit(req);
}

}  // namespace cairn::index
