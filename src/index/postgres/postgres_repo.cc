// The PostgreSQL backend's repository slice (index.h's RepoIndex): repositories, objects, refs, buckets.
#include <map>
#include <string>
#include <utility>

#include "index/failures.h"
#include "index/postgres/postgres_index.h"

namespace cairn::index {

namespace {

// Every parameter is cast, so that the server knows its type when the statement is prepared and reads the
// binary values accordingly.
// Repositories. Each write is one statement (as the writer threads require): its row says what happened.
const std::string kCreateRepoSql =
    R"sql(
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
  SELECT r.id, u.kind, u.name, u.target FROM r, unnest($9::int8[], $10::text[], $11::bytea[]) AS u(kind, name, target)),
)sql" +
    AuditCte(14, "r") + R"sql(SELECT id FROM r)sql";
const pg::Statement kCreateRepo{"create_repo", kCreateRepoSql.c_str()};
constexpr pg::Statement kFindRepo{"find_repo",
                                  "SELECT id, private, created_at, scope, read_scope FROM repos "
                                  "WHERE type = $1::int8 "
                                  "AND ns = $2::text AND name = $3::text"};
constexpr pg::Statement kRepoByScope{
    "repo_by_scope",
    "SELECT id, ns, name, private, created_at, scope, read_scope, type FROM repos "
    "WHERE scope = $1::text OR read_scope = $1::text LIMIT 1"};
constexpr pg::Statement kListRepos{"list_repos", R"sql(
SELECT id, ns, name, private, created_at, scope, read_scope FROM repos
WHERE type = $1::int8 AND ($2::text IS NULL OR ns = $2::text) AND (ns, name) > ($3::text, $4::text)
ORDER BY ns, name LIMIT $5::int8)sql"};
constexpr pg::Statement kCountRepos{"count_repos",
                                    "SELECT count(*) FROM repos WHERE type = $1::int8 AND ns = $2::text"};
const std::string kUpdateRepoSql =
    R"sql(
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
  WHERE scope_totals.scope = cur.read_scope AND cur.read_scope <> $5::text AND EXISTS (SELECT 1 FROM upd)),
)sql" +
    AuditCte(6, "upd") +
    R"sql(SELECT (SELECT count(*) FROM cur)::int8, (SELECT count(*) FROM taken)::int8)sql";
const pg::Statement kUpdateRepo{"update_repo", kUpdateRepoSql.c_str()};
const std::string kDeleteRepoSql =
    R"sql(
WITH d AS (DELETE FROM repos WHERE id = $1::int8 RETURNING id, scope, read_scope),
o AS (DELETE FROM repo_objects WHERE repo IN (SELECT id FROM d)),
f AS (DELETE FROM repo_refs WHERE repo IN (SELECT id FROM d)),
q AS (DELETE FROM gc_repo_quarantine WHERE repo IN (SELECT id FROM d)),
b AS (DELETE FROM bucket_files WHERE repo IN (SELECT id FROM d)),
fs AS (DELETE FROM file_scopes WHERE scope IN (SELECT scope FROM d UNION ALL SELECT read_scope FROM d)),
st AS (DELETE FROM scope_totals WHERE scope IN (SELECT scope FROM d UNION ALL SELECT read_scope FROM d)),
)sql" +
    AuditCte(2, "d") + R"sql(SELECT count(*)::int8 FROM d)sql";
const pg::Statement kDeleteRepo{"delete_repo", kDeleteRepoSql.c_str()};
// Every key given is wanted again: its quarantine goes first (the insert waits for it), in the same
// statement. A sweep holding the row commits first, having deleted the object too, and the insert then stores
// it again (ON CONFLICT sees the committed delete); a sweep that comes after finds no quarantine row to take.
// $5..$10: a quota charge (QuotaCharge; $5 NULL: none), refused as a whole with CR003.
constexpr pg::Statement kPutRepoObjects{"put_repo_objects", R"sql(
WITH r AS (SELECT id FROM repos WHERE id = $1::int8),
qc AS (
  UPDATE quotas SET pending_bytes = pending_bytes + $6::int8 + $8::int8,
    reserved_bytes = GREATEST(reserved_bytes - $8::int8, 0) + $7::int8,
    reserved_at = CASE WHEN $7::int8 > 0 THEN $10::int8 ELSE reserved_at END
  WHERE namespace = $5::text AND EXISTS (SELECT 1 FROM r) AND (NOT $9::bool OR limit_bytes IS NULL
    OR used_bytes + pending_bytes + reserved_bytes + $6::int8 + $7::int8 <= limit_bytes)
  RETURNING 1),
qr AS (
  SELECT cairn_refuse_quota(count(*)) AS n FROM quotas
  WHERE namespace = $5::text AND EXISTS (SELECT 1 FROM r) AND NOT EXISTS (SELECT 1 FROM qc)),
q AS (
  DELETE FROM gc_repo_quarantine q USING r WHERE q.repo = r.id AND q.key = ANY($2::bytea[]) RETURNING q.key),
o AS (
  INSERT INTO repo_objects(repo, key, kind, data)
  SELECT r.id, u.key, u.kind, u.data FROM r, unnest($2::bytea[], $3::int8[], $4::bytea[]) AS u(key, kind, data)
  WHERE (SELECT count(*) FROM q) >= 0 AND (SELECT n FROM qr) = 0
  ON CONFLICT DO NOTHING)
SELECT (SELECT count(*) FROM r)::int8, (SELECT n FROM qr))sql"};
// Which of the keys are objects and which are quarantined, read only (ReviveRepoObjects writes only when one
// is).
constexpr pg::Statement kRepoObjectUses{"repo_object_uses", R"sql(
SELECT u.i, EXISTS (SELECT 1 FROM gc_repo_quarantine q WHERE q.repo = $1::int8 AND q.key = o.key)
FROM unnest($2::bytea[]) WITH ORDINALITY AS u(key, i)
JOIN repo_objects o ON o.repo = $1::int8 AND o.key = u.key)sql"};
// Takes the quarantine rows first (waiting for a sweep that holds them), then locks the objects: an object a
// sweep deleted meanwhile is not locked, so not reported (READ COMMITTED skips a row deleted under its lock).
// Locking in the sweep's order (quarantine, then object) keeps the two from deadlocking.
constexpr pg::Statement kReviveRepoObjects{"revive_repo_objects", R"sql(
WITH rq AS (
  DELETE FROM gc_repo_quarantine WHERE repo = $1::int8 AND key = ANY($2::bytea[]) RETURNING key),
o AS (
  SELECT key FROM repo_objects
  WHERE repo = $1::int8 AND key = ANY($2::bytea[]) AND (SELECT count(*) FROM rq) >= 0
  FOR KEY SHARE)
SELECT u.i, EXISTS (SELECT 1 FROM rq WHERE rq.key = o.key)
FROM unnest($2::bytea[]) WITH ORDINALITY AS u(key, i) JOIN o ON o.key = u.key)sql"};
constexpr pg::Statement kDeleteRepoObjects{"delete_repo_objects", R"sql(
WITH r AS (SELECT id FROM repos WHERE id = $1::int8),
q AS (DELETE FROM gc_repo_quarantine q USING r WHERE q.repo = r.id AND q.key = ANY($2::bytea[])),
d AS (DELETE FROM repo_objects o USING r WHERE o.repo = r.id AND o.key = ANY($2::bytea[]) RETURNING 1)
SELECT (SELECT count(*) FROM r)::int8, (SELECT count(*) FROM d)::int8)sql"};
constexpr pg::Statement kListRepoObjects{"list_repo_objects", R"sql(
SELECT key, data FROM repo_objects WHERE repo = $1::int8 AND kind = $2::int8 AND key > $3::bytea
ORDER BY key LIMIT $4::int8)sql"};
constexpr pg::Statement kGetRepoObjects{"get_repo_objects", R"sql(
SELECT u.i, o.kind, o.data FROM unnest($2::bytea[]) WITH ORDINALITY AS u(key, i)
JOIN repo_objects o ON o.repo = $1::int8 AND o.key = u.key)sql"};
constexpr pg::Statement kGetRepoObjectHead{
    "get_repo_object_head",
    "SELECT kind, length(data)::int8, substring(data from 1 for $3::int8::int4) FROM repo_objects "
    "WHERE repo = $1::int8 AND key = $2::bytea"};
constexpr pg::Statement kGetRepoObjectHeads{
    "get_repo_object_heads",
    "SELECT key, kind, length(data)::int8, substring(data from 1 for $3::int8::int4) FROM repo_objects "
    "WHERE repo = $1::int8 AND key = ANY($2::bytea[])"};
constexpr pg::Statement kListRefs{
    "list_refs", "SELECT kind, name, target FROM repo_refs WHERE repo = $1::int8 ORDER BY kind, name"};
// A bucket's changes as arrays (deletes have a NULL file): one statement applies them all, deletes first.
const std::string kChangeBucketSql =
    R"sql(
WITH r AS (SELECT id FROM repos WHERE id = $1::int8),
u AS (SELECT * FROM unnest($2::text[], $3::bytea[], $4::int8[], $5::int8[], $6::text[], $7::int8[])
                 AS u(path, file, size, mtime, content_type, uploaded_at)),
del AS (DELETE FROM bucket_files b USING r, u WHERE b.repo = r.id AND b.path = u.path AND u.file IS NULL),
put AS (
  INSERT INTO bucket_files(repo, path, file, size, mtime, content_type, uploaded_at)
  SELECT r.id, u.path, u.file, u.size, u.mtime, NULLIF(u.content_type, ''), u.uploaded_at FROM r, u
  WHERE u.file IS NOT NULL
  ON CONFLICT (repo, path) DO UPDATE SET file = excluded.file, size = excluded.size, mtime = excluded.mtime,
    content_type = excluded.content_type, uploaded_at = excluded.uploaded_at),
)sql" +
    AuditCte(8, "r") + R"sql(SELECT count(*)::int8 FROM r)sql";
const pg::Statement kChangeBucket{"change_bucket", kChangeBucketSql.c_str()};
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
// A new target must be an object of the repository: `t` locks it, so a sweep cannot delete it before the ref
// names it (one that deleted it first leaves `t` empty, and nothing changes). The last two columns tell
// kUnknownReference from kConflict when nothing changed: whether the target is there, and whether the ref
// was as expected.
const std::string kUpdateRefSql =
    R"sql(
WITH r AS (SELECT id FROM repos WHERE id = $1::int8),
t AS (
  SELECT 1 FROM repo_objects WHERE $5::bytea IS NOT NULL AND repo = $1::int8 AND key = $5::bytea FOR KEY SHARE),
ins AS (
  INSERT INTO repo_refs(repo, kind, name, target)
  SELECT id, $2::int8, $3::text, $5::bytea FROM r
  WHERE $4::bytea IS NULL AND $5::bytea IS NOT NULL AND EXISTS (SELECT 1 FROM t)
  ON CONFLICT DO NOTHING RETURNING 1),
upd AS (
  UPDATE repo_refs SET target = $5::bytea
  WHERE $5::bytea IS NOT NULL AND repo = $1::int8 AND kind = $2::int8 AND name = $3::text AND target = $4::bytea
    AND EXISTS (SELECT 1 FROM t)
  RETURNING 1),
del AS (
  DELETE FROM repo_refs
  WHERE $5::bytea IS NULL AND repo = $1::int8 AND kind = $2::int8 AND name = $3::text AND target = $4::bytea
  RETURNING 1),
)sql" +
    AuditCte(6, "(SELECT 1 FROM ins UNION ALL SELECT 1 FROM upd UNION ALL SELECT 1 FROM del) AS ch") +
    R"sql(SELECT (SELECT count(*) FROM r)::int8,
       ((SELECT count(*) FROM ins) + (SELECT count(*) FROM upd) + (SELECT count(*) FROM del))::int8,
       (SELECT count(*) FROM t)::int8,
       CASE WHEN $4::bytea IS NULL
            THEN NOT EXISTS (SELECT 1 FROM repo_refs WHERE repo = $1::int8 AND kind = $2::int8 AND name = $3::text)
            ELSE EXISTS (SELECT 1 FROM repo_refs
                         WHERE repo = $1::int8 AND kind = $2::int8 AND name = $3::text AND target = $4::bytea)
       END)sql";
const pg::Statement kUpdateRef{"update_ref", kUpdateRefSql.c_str()};

}  // namespace

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

// Keys as the bytea array the statements take.
std::vector<std::optional<std::span<const uint8_t>>> KeyArray(const std::vector<std::vector<uint8_t>>& keys) {
  return {keys.begin(), keys.end()};
}

Status CheckKeys(const std::vector<RepoObject>& objects) {
  for (const RepoObject& o : objects) {
    if (o.key.empty() || o.key.size() > 32) return Malformed("object keys are 1 to 32 bytes");
  }
  return Ok{};
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

Result<RepoRecord> PostgresIndex::CreateRepo(const NewRepo& repo) {
  if (auto st = CheckKeys(repo.objects); !st.ok()) return st.error();
  if (repo.scope.empty() || repo.read_scope.empty() || repo.scope == repo.read_scope) {
    return Malformed("a repository needs a scope and a read scope of its own");
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
  AuditParams(req.params, repo.audit ? &*repo.audit : nullptr);
  if (auto st = writes_->Submit(req); !st.ok()) return st.error();
  if (!id) return RepoExists(repo.ns, repo.name);
  return RepoRecord{.id = *id,
                    .type = repo.type,
                    .ns = repo.ns,
                    .name = repo.name,
                    .is_private = repo.is_private,
                    .created_at = repo.created_at,
                    .scope = repo.scope,
                    .read_scope = repo.read_scope};
}

Result<RepoRecord> PostgresIndex::FindRepo(RepoType type, std::string_view ns, std::string_view name) {
  auto rows = Query(kFindRepo, pg::Params().Int8(static_cast<uint8_t>(type)).Text(ns).Text(name));
  if (!rows.ok()) return rows.error();
  if (rows->size() == 0) return NotFound("repository " + std::string(ns) + "/" + std::string(name));
  return RepoRecord{.id = rows->Int8(0, 0),
                    .type = type,
                    .ns = std::string(ns),
                    .name = std::string(name),
                    .is_private = rows->Bool(0, 1),
                    .created_at = rows->Int8(0, 2),
                    .scope = std::string(rows->Text(0, 3)),
                    .read_scope = std::string(rows->Text(0, 4))};
}

Result<RepoRecord> PostgresIndex::FindRepoByScope(std::string_view scope) {
  auto rows = Query(kRepoByScope, pg::Params().Text(scope));
  if (!rows.ok()) return rows.error();
  if (rows->size() == 0) return NotFound("scope " + std::string(scope) + " is no repository's");
  return RepoFromRow(*rows, 0, static_cast<RepoType>(rows->Int8(0, 7)));
}

Result<std::vector<RepoRecord>> PostgresIndex::ListRepos(
    RepoType type, std::optional<std::string_view> ns,
    std::optional<std::pair<std::string, std::string>> after, size_t limit) {
  if (limit > kMaxListedRepos) return Malformed("too many repositories in one listing");
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

Result<uint64_t> PostgresIndex::CountRepos(RepoType type, std::string_view ns) {
  auto rows = Query(kCountRepos, pg::Params().Int8(static_cast<uint8_t>(type)).Text(ns));
  if (!rows.ok()) return rows.error();
  if (rows->size() != 1) return IoError("postgres: count_repos returned no row");
  return static_cast<uint64_t>(rows->Int8(0, 0));
}

Status PostgresIndex::UpdateRepo(int64_t id, const RepoChange& change) {
  if (change.ns.has_value() != change.name.has_value()) {
    return Malformed("a move names both the namespace and the name");
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
  AuditParams(req.params, change.audit ? &*change.audit : nullptr);
  if (auto st = writes_->Submit(req); !st.ok()) return st;
  if (found == 0) return RepoNotIndexed(id);
  if (taken != 0) return RepoExists(*change.ns, *change.name);
  return Ok{};
}

Status PostgresIndex::DeleteRepo(int64_t id, const AuditEvent* audit) {
  int64_t deleted = 0;
  WriteRequest req{&kDeleteRepo, {}, [&](const pg::Rows& rows) {
                     if (rows.size() == 1) deleted = rows.Int8(0, 0);
                   }};
  req.params.Int8(id);
  AuditParams(req.params, audit);
  if (auto st = writes_->Submit(req); !st.ok()) return st;
  if (deleted == 0) return RepoNotIndexed(id);
  return Ok{};
}

Status PostgresIndex::PutRepoObjects(int64_t repo, const std::vector<RepoObject>& objects,
                                     const QuotaCharge* charge) {
  if (auto st = CheckKeys(objects); !st.ok()) return st;
  int64_t found = 0;
  WriteRequest req{&kPutRepoObjects, {}, [&](const pg::Rows& rows) {
                     if (rows.size() == 1) found = rows.Int8(0, 0);
                   }};
  req.params.Int8(repo);
  ObjectArrays(req.params, objects);
  if (auto st = QuotaChargeParams(req.params, charge); !st.ok()) return st;
  if (auto st = writes_->Submit(req); !st.ok()) return st;
  if (found == 0) return RepoNotIndexed(repo);
  return Ok{};
}

Result<std::vector<ObjectRevival>> PostgresIndex::ReviveRepoObjects(
    int64_t repo, const std::vector<std::vector<uint8_t>>& keys) {
  if (keys.size() > kMaxObjectsPerRead) return Malformed("too many objects in one request");
  // Rows of (position from 1, quarantined) for the keys that are objects.
  const auto revivals = [&](const pg::Rows& rows, bool* quarantined) -> Result<std::vector<ObjectRevival>> {
    std::vector<ObjectRevival> out(keys.size(), ObjectRevival::kAbsent);
    for (int r = 0; r < rows.size(); ++r) {
      const int64_t i = rows.Int8(r, 0) - 1;
      if (i < 0 || static_cast<size_t>(i) >= keys.size()) return IoError("index: an object out of place");
      const bool q = rows.Bool(r, 1);
      if (q && quarantined != nullptr) *quarantined = true;
      out[static_cast<size_t>(i)] = q ? ObjectRevival::kRevived : ObjectRevival::kPresent;
    }
    return out;
  };
  if (keys.empty()) return std::vector<ObjectRevival>();
  const auto wanted = KeyArray(keys);
  auto rows = Query(kRepoObjectUses, pg::Params().Int8(repo).ByteaArray(wanted));
  if (!rows.ok()) return rows.error();
  bool quarantined = false;
  auto read = revivals(*rows, &quarantined);
  if (!read.ok() || !quarantined) return read;  // a read only, as long as nothing named is quarantined
  Result<std::vector<ObjectRevival>> written = IoError("postgres: revive_repo_objects returned nothing");
  WriteRequest req{&kReviveRepoObjects, {}, [&](const pg::Rows& r) { written = revivals(r, nullptr); }};
  req.params.Int8(repo).ByteaArray(wanted);
  if (auto st = writes_->Submit(req); !st.ok()) return st.error();
  return written;
}

Result<size_t> PostgresIndex::DeleteRepoObjects(int64_t repo, const std::vector<std::vector<uint8_t>>& keys) {
  if (keys.size() > kMaxObjectsPerRead) return Malformed("too many objects in one request");
  int64_t found = 0;
  int64_t deleted = 0;
  WriteRequest req{&kDeleteRepoObjects, {}, [&](const pg::Rows& rows) {
                     if (rows.size() != 1) return;
                     found = rows.Int8(0, 0);
                     deleted = rows.Int8(0, 1);
                   }};
  req.params.Int8(repo).ByteaArray(KeyArray(keys));
  if (auto st = writes_->Submit(req); !st.ok()) return st.error();
  if (found == 0) return RepoNotIndexed(repo);
  return static_cast<size_t>(deleted);
}

Result<std::vector<RepoObject>> PostgresIndex::ListRepoObjects(
    int64_t repo, uint8_t kind, const std::optional<std::vector<uint8_t>>& after, size_t limit) {
  if (limit > kMaxObjectsPerRead) return Malformed("too many objects in one read");
  pg::Params p;
  p.Int8(repo).Int8(kind);
  p.Bytea(after ? std::span<const uint8_t>(*after) : std::span<const uint8_t>());  // every key sorts after ''
  p.Int8(static_cast<int64_t>(limit));
  auto rows = Query(kListRepoObjects, p);
  if (!rows.ok()) return rows.error();
  std::vector<RepoObject> out;
  out.reserve(static_cast<size_t>(rows->size()));
  for (int r = 0; r < rows->size(); ++r) {
    out.push_back(
        RepoObject{.key = Bytes(rows->Bytes(r, 0)), .kind = kind, .data = Bytes(rows->Bytes(r, 1))});
  }
  return out;
}

Result<std::vector<std::optional<RepoObject>>> PostgresIndex::GetRepoObjects(
    int64_t repo, const std::vector<std::vector<uint8_t>>& keys) {
  if (keys.size() > kMaxObjectsPerRead) return Malformed("too many objects in one read");
  std::vector<std::optional<RepoObject>> out(keys.size());
  if (keys.empty()) return out;
  std::vector<std::optional<std::span<const uint8_t>>> wanted(keys.begin(), keys.end());
  auto rows = Query(kGetRepoObjects, pg::Params().Int8(repo).ByteaArray(wanted));
  if (!rows.ok()) return rows.error();
  for (int r = 0; r < rows->size(); ++r) {
    const int64_t i = rows->Int8(r, 0) - 1;  // ORDINALITY counts from 1
    if (i < 0 || static_cast<size_t>(i) >= keys.size()) return IoError("index: an object out of place");
    out[i] = RepoObject{
        .key = keys[i], .kind = static_cast<uint8_t>(rows->Int8(r, 1)), .data = Bytes(rows->Bytes(r, 2))};
  }
  return out;
}

Result<std::optional<RepoObjectHead>> PostgresIndex::GetRepoObjectHead(int64_t repo,
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

Result<std::vector<std::optional<RepoObjectHead>>> PostgresIndex::GetRepoObjectHeads(
    int64_t repo, const std::vector<std::vector<uint8_t>>& keys, size_t max_bytes) {
  if (keys.size() > kMaxObjectsPerRead) return Malformed("too many objects in one read");
  std::vector<std::optional<RepoObjectHead>> out(keys.size());
  if (keys.empty()) return out;
  const auto bound = static_cast<int64_t>(std::min<size_t>(max_bytes, INT32_MAX));
  std::vector<std::optional<std::span<const uint8_t>>> wanted(keys.begin(), keys.end());
  auto rows = Query(kGetRepoObjectHeads, pg::Params().Int8(repo).ByteaArray(wanted).Int8(bound));
  if (!rows.ok()) return rows.error();
  // Matched back by key (an index scan: = ANY, where a join on unnest had PostgreSQL read the whole table).
  std::map<std::vector<uint8_t>, size_t> where;
  for (size_t i = 0; i < keys.size(); ++i) where.emplace(keys[i], i);
  for (int r = 0; r < rows->size(); ++r) {
    auto it = where.find(Bytes(rows->Bytes(r, 0)));
    if (it == where.end()) return IoError("index: an object out of place");
    const size_t i = it->second;
    out[i] = RepoObjectHead{.kind = static_cast<uint8_t>(rows->Int8(r, 1)),
                            .size = static_cast<uint64_t>(rows->Int8(r, 2)),
                            .data = Bytes(rows->Bytes(r, 3))};
  }
  return out;
}

Result<std::vector<Ref>> PostgresIndex::ListRefs(int64_t repo) {
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

Status PostgresIndex::UpdateRef(int64_t repo, const RefUpdate& update) {
  int64_t found = 0;
  int64_t changed = 0;
  int64_t target_found = 0;
  bool as_expected = false;
  WriteRequest req{&kUpdateRef, {}, [&](const pg::Rows& rows) {
                     if (rows.size() != 1) return;
                     found = rows.Int8(0, 0);
                     changed = rows.Int8(0, 1);
                     target_found = rows.Int8(0, 2);
                     as_expected = rows.Bool(0, 3);
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
  AuditParams(req.params, update.audit ? &*update.audit : nullptr);
  if (auto st = writes_->Submit(req); !st.ok()) return st;
  if (found == 0) return RepoNotIndexed(repo);
  if (changed == 0 && update.target && target_found == 0 && as_expected) {
    // A ref never names what is not there: a collector may have swept an old commit meanwhile.
    return RefTargetGone(update.name);
  }
  // Not as expected: moved, or (no ref expected) one exists, which a delete must not pass over either.
  if (changed == 0 && (update.expected || update.target || !as_expected)) {
    return update.expected ? RefMoved(update.name) : RefExists(update.name);
  }
  return Ok{};
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

Status PostgresIndex::ChangeBucket(int64_t repo, const std::vector<BucketChange>& changes,
                                   const AuditEvent* audit) {
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
  AuditParams(req.params, audit);
  if (auto st = writes_->Submit(req); !st.ok()) return st;
  if (found == 0) return RepoNotIndexed(repo);
  return Ok{};
}

Result<std::vector<BucketFile>> PostgresIndex::ListBucket(int64_t repo, std::string_view prefix,
                                                          std::optional<std::string_view> from,
                                                          size_t limit) {
  if (limit > kMaxListedFiles) return Malformed("too many files in one listing");
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

Result<std::vector<std::optional<BucketFile>>> PostgresIndex::GetBucketFiles(
    int64_t repo, const std::vector<std::string>& paths) {
  if (paths.size() > kMaxObjectsPerRead) return Malformed("too many paths in one read");
  std::vector<std::optional<BucketFile>> out(paths.size());
  if (paths.empty()) return out;
  auto rows = Query(kGetBucketFiles, pg::Params().Int8(repo).TextArray(paths));
  if (!rows.ok()) return rows.error();
  for (int r = 0; r < rows->size(); ++r) {
    const int64_t i = rows->Int8(r, 0) - 1;
    if (i < 0 || static_cast<size_t>(i) >= paths.size()) return IoError("index: a file out of place");
    out[i] = BucketFileFromRow(*rows, r, 1);
  }
  return out;
}

Result<BucketTotals> PostgresIndex::GetBucketTotals(int64_t repo) {
  auto rows = Query(kBucketTotals, pg::Params().Int8(repo));
  if (!rows.ok()) return rows.error();
  if (rows->size() != 1) return IoError("index: no bucket totals");
  return BucketTotals{static_cast<uint64_t>(rows->Int8(0, 0)), static_cast<uint64_t>(rows->Int8(0, 1))};
}

}  // namespace cairn::index
