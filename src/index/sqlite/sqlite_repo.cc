// The SQLite backend's repository slice (index.h's RepoIndex): repositories, objects, refs, buckets.
#include <string>
#include <utility>

#include "index/failures.h"
#include "index/sqlite/sqlite_conn.h"
#include "index/sqlite/sqlite_index.h"

namespace cairn::index {

namespace {
using sqlite_internal::kDeleteObject;
using sqlite_internal::kReleaseObject;

using sqlite_internal::Stmt;

// Statements. Their addresses key each connection's prepared-statement cache.
constexpr const char kCreateRepo[] =
    "INSERT INTO repos(type, ns, name, private, created_at, scope, read_scope) "
    "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT DO NOTHING";
constexpr const char kFindRepo[] =
    "SELECT id, private, created_at, scope, read_scope FROM repos WHERE type = ?1 AND ns = ?2 AND name = ?3";
constexpr const char kListRepos[] =
    "SELECT id, ns, name, private, created_at, scope, read_scope FROM repos WHERE type = ?1 "
    "AND (?2 IS NULL OR ns = ?2) AND (ns, name) > (?3, ?4) ORDER BY ns, name LIMIT ?5";
constexpr const char kCountRepos[] = "SELECT count(*) FROM repos WHERE type = ?1 AND ns = ?2";
constexpr const char kRepoByScope[] =
    "SELECT id, ns, name, private, created_at, scope, read_scope, type FROM repos "
    "WHERE scope = ?1 OR read_scope = ?1 LIMIT 1";
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
constexpr const char kDeleteRepoQuarantine[] = "DELETE FROM gc_repo_quarantine WHERE repo = ?1";
constexpr const char kAnyRepoQuarantine[] =
    "SELECT EXISTS (SELECT 1 FROM gc_repo_quarantine WHERE repo = ?1)";
constexpr const char kObjectQuarantine[] =
    "SELECT EXISTS (SELECT 1 FROM repo_objects WHERE repo = ?1 AND key = ?2), "
    "EXISTS (SELECT 1 FROM gc_repo_quarantine WHERE repo = ?1 AND key = ?2)";
constexpr const char kObjectExists[] =
    "SELECT EXISTS (SELECT 1 FROM repo_objects WHERE repo = ?1 AND key = ?2)";
constexpr const char kListObjects[] =
    "SELECT key, data FROM repo_objects WHERE repo = ?1 AND kind = ?2 AND key > ?3 ORDER BY key LIMIT ?4";
constexpr const char kDeleteRef[] = "DELETE FROM repo_refs WHERE repo = ?1 AND kind = ?2 AND name = ?3";

}  // namespace

// ---- Repositories

namespace {

// What a write needs of a repository's row: its type and its two scopes.
struct RepoRow {
  int64_t type = 0;
  std::string scope;
  std::string read_scope;
};

// The repository's row on the writer's connection (inside the write's transaction); kNotFound without one.
Result<RepoRow> ReadRepoRow(auto& c, int64_t id) {
  auto s = c.Prepare(kRepoById);
  if (!s.ok()) return s.error();
  s->Bind(1, id);
  const int rc = s->Step();
  if (rc == SQLITE_DONE) return RepoNotIndexed(id);
  if (rc != SQLITE_ROW) return c.Err("read repository", rc);
  return RepoRow{s->Int(0), std::string(s->Text(1)), std::string(s->Text(2))};
}

Status RepoExists(auto& c, int64_t id) {
  auto row = ReadRepoRow(c, id);
  if (!row.ok()) return row.error();
  return Ok{};
}

Status InsertObjects(auto& c, int64_t repo, const std::vector<RepoObject>& objects) {
  for (const RepoObject& o : objects) {
    if (o.key.empty() || o.key.size() > 32) return Malformed("object keys are 1 to 32 bytes");
    auto put = c.Prepare(kPutRepoObject);
    if (!put.ok()) return put.error();
    put->Bind(1, repo).Bind(2, std::span<const uint8_t>(o.key)).Bind(3, int64_t{o.kind});
    put->Bind(4, std::span<const uint8_t>(o.data));
    if (auto r = c.Run(*put, "insert object"); !r.ok()) return r;
  }
  return Ok{};
}

// A repository from a row that starts (id, ns, name, private, created_at, scope, read_scope).
RepoRecord RepoFromRow(const Stmt& s, RepoType type) {
  return RepoRecord{.id = s.Int(0),
                    .type = type,
                    .ns = std::string(s.Text(1)),
                    .name = std::string(s.Text(2)),
                    .is_private = s.Int(3) != 0,
                    .created_at = s.Int(4),
                    .scope = std::string(s.Text(5)),
                    .read_scope = std::string(s.Text(6))};
}

std::vector<uint8_t> Bytes(std::span<const uint8_t> b) {
  return {b.begin(), b.end()};
}

}  // namespace

Result<RepoRecord> SqliteIndex::CreateRepo(const NewRepo& repo) {
  RepoRecord out{.id = 0,
                 .type = repo.type,
                 .ns = repo.ns,
                 .name = repo.name,
                 .is_private = repo.is_private,
                 .created_at = repo.created_at,
                 .scope = repo.scope,
                 .read_scope = repo.read_scope};
  if (repo.scope.empty() || repo.read_scope.empty() || repo.scope == repo.read_scope) {
    return Malformed("a repository needs a scope and a read scope of its own");
  }
  auto st = Write([&](Conn& c) -> Status {
    auto put = c.Prepare(kCreateRepo);
    if (!put.ok()) return put.error();
    put->Bind(1, int64_t{static_cast<uint8_t>(repo.type)}).Bind(2, repo.ns).Bind(3, repo.name);
    put->Bind(4, int64_t{repo.is_private})
        .Bind(5, repo.created_at)
        .Bind(6, repo.scope)
        .Bind(7, repo.read_scope);
    if (auto r = c.Run(*put, "insert repository"); !r.ok()) return r;
    if (c.changes() == 0) return RepoExists(repo.ns, repo.name);
    out.id = sqlite3_last_insert_rowid(c.db());
    if (auto r = InsertObjects(c, out.id, repo.objects); !r.ok()) return r;
    for (const Ref& ref : repo.refs) {
      auto ins = c.Prepare(kInsertRef);
      if (!ins.ok()) return ins.error();
      ins->Bind(1, out.id).Bind(2, int64_t{static_cast<uint8_t>(ref.kind)}).Bind(3, ref.name);
      ins->Bind(4, std::span<const uint8_t>(ref.target));
      if (auto r = c.Run(*ins, "insert ref"); !r.ok()) return r;
    }
    return WriteAudit(c, repo.audit ? &*repo.audit : nullptr);
  });
  if (!st.ok()) return st.error();
  return out;
}

Result<RepoRecord> SqliteIndex::FindRepo(RepoType type, std::string_view ns, std::string_view name) {
  auto r = AcquireReader();
  if (!r.ok()) return r.error();
  auto s = (*r)->Prepare(kFindRepo);
  if (!s.ok()) return s.error();
  s->Bind(1, int64_t{static_cast<uint8_t>(type)}).Bind(2, ns).Bind(3, name);
  const int rc = s->Step();
  if (rc == SQLITE_DONE) return NotFound("repository " + std::string(ns) + "/" + std::string(name));
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

Result<RepoRecord> SqliteIndex::FindRepoByScope(std::string_view scope) {
  auto r = AcquireReader();
  if (!r.ok()) return r.error();
  auto s = (*r)->Prepare(kRepoByScope);
  if (!s.ok()) return s.error();
  s->Bind(1, scope);
  const int rc = s->Step();
  if (rc == SQLITE_DONE) return NotFound("scope " + std::string(scope) + " is no repository's");
  if (rc != SQLITE_ROW) return (*r)->Err("read repository", rc);
  return RepoFromRow(*s, static_cast<RepoType>(s->Int(7)));
}

Result<std::vector<RepoRecord>> SqliteIndex::ListRepos(
    RepoType type, std::optional<std::string_view> ns,
    std::optional<std::pair<std::string, std::string>> after, size_t limit) {
  if (limit > kMaxListedRepos) return Malformed("too many repositories in one listing");
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
    out.push_back(RepoFromRow(*s, type));
  }
  return out;
}

Result<uint64_t> SqliteIndex::CountRepos(RepoType type, std::string_view ns) {
  auto r = AcquireReader();
  if (!r.ok()) return r.error();
  auto s = (*r)->Prepare(kCountRepos);
  if (!s.ok()) return s.error();
  s->Bind(1, int64_t{static_cast<uint8_t>(type)}).Bind(2, ns);
  if (s->Step() != SQLITE_ROW) return (*r)->Err("count repositories", SQLITE_ERROR);
  return static_cast<uint64_t>(s->Int(0));
}

Status SqliteIndex::UpdateRepo(int64_t id, const RepoChange& change) {
  if (change.ns.has_value() != change.name.has_value()) {
    return Malformed("a move names both the namespace and the name");
  }
  return Write([&](Conn& c) -> Status {
    auto row = ReadRepoRow(c, id);
    if (!row.ok()) return row.error();
    const std::string& old_read_scope = row->read_scope;
    if (change.ns) {
      auto taken = c.Prepare(kFindRepo);
      if (!taken.ok()) return taken.error();
      taken->Bind(1, row->type).Bind(2, *change.ns).Bind(3, *change.name);
      const int rc = taken->Step();
      if (rc == SQLITE_ROW && taken->Int(0) != id) {
        return RepoExists(*change.ns, *change.name);
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
    return WriteAudit(c, change.audit ? &*change.audit : nullptr);
  });
}

Status SqliteIndex::DeleteRepo(int64_t id, const AuditEvent* audit) {
  return Write([&](Conn& c) -> Status {
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
    for (const char* sql :
         {kDeleteRepoRefs, kDeleteRepoObjects, kDeleteRepoQuarantine, kDeleteRepoFiles, kDeleteRepo}) {
      auto del = c.Prepare(sql);
      if (!del.ok()) return del.error();
      del->Bind(1, id);
      if (auto st = c.Run(*del, "delete repository"); !st.ok()) return st;
    }
    return WriteAudit(c, audit);
  });
}

Status SqliteIndex::PutRepoObjects(int64_t repo, const std::vector<RepoObject>& objects,
                                   const QuotaCharge* charge) {
  return Write([&](Conn& c) -> Status {
    if (auto st = RepoExists(c, repo); !st.ok()) return st;
    if (charge != nullptr) {
      if (auto charged = ApplyQuotaCharge(c, *charge); !charged.ok()) return charged;
    }
    if (auto st = InsertObjects(c, repo, objects); !st.ok()) return st;
    // What a mark found unreachable and a new commit names again is wanted: no sweep may take it now.
    auto any = c.Prepare(kAnyRepoQuarantine);
    if (!any.ok()) return any.error();
    any->Bind(1, repo);
    if (any->Step() != SQLITE_ROW) return c.Err("read the repository's quarantine", SQLITE_ERROR);
    if (any->Int(0) == 0) return Ok{};
    for (const RepoObject& o : objects) {
      auto release = c.Prepare(kReleaseObject);
      if (!release.ok()) return release.error();
      release->Bind(1, repo).Bind(2, std::span<const uint8_t>(o.key));
      if (auto st = c.Run(*release, "revive an object"); !st.ok()) return st;
    }
    return Ok{};
  });
}

Result<std::vector<ObjectRevival>> SqliteIndex::ReviveRepoObjects(
    int64_t repo, const std::vector<std::vector<uint8_t>>& keys) {
  if (keys.size() > kMaxObjectsPerRead) return Malformed("too many objects in one request");
  std::vector<ObjectRevival> out;
  auto st = Write([&](Conn& c) -> Status {
    out.assign(keys.size(), ObjectRevival::kAbsent);
    for (size_t i = 0; i < keys.size(); ++i) {
      auto q = c.Prepare(kObjectQuarantine);
      if (!q.ok()) return q.error();
      q->Bind(1, repo).Bind(2, std::span<const uint8_t>(keys[i]));
      if (q->Step() != SQLITE_ROW) return c.Err("read an object's quarantine", SQLITE_ERROR);
      if (q->Int(0) == 0) continue;
      if (q->Int(1) == 0) {
        out[i] = ObjectRevival::kPresent;
        continue;
      }
      auto release = c.Prepare(kReleaseObject);
      if (!release.ok()) return release.error();
      release->Bind(1, repo).Bind(2, std::span<const uint8_t>(keys[i]));
      if (auto r = c.Run(*release, "revive an object"); !r.ok()) return r;
      out[i] = ObjectRevival::kRevived;
    }
    return Ok{};
  });
  if (!st.ok()) return st.error();
  return out;
}

Result<size_t> SqliteIndex::DeleteRepoObjects(int64_t repo, const std::vector<std::vector<uint8_t>>& keys) {
  if (keys.size() > kMaxObjectsPerRead) return Malformed("too many objects in one request");
  size_t deleted = 0;
  auto st = Write([&](Conn& c) -> Status {
    deleted = 0;
    if (auto r = RepoExists(c, repo); !r.ok()) return r;
    for (const auto& key : keys) {
      for (const char* sql : {kReleaseObject, kDeleteObject}) {
        auto del = c.Prepare(sql);
        if (!del.ok()) return del.error();
        del->Bind(1, repo).Bind(2, std::span<const uint8_t>(key));
        if (auto r = c.Run(*del, "delete an object"); !r.ok()) return r;
      }
      deleted += static_cast<size_t>(c.changes());
    }
    return Ok{};
  });
  if (!st.ok()) return st.error();
  return deleted;
}

Result<std::vector<RepoObject>> SqliteIndex::ListRepoObjects(int64_t repo, uint8_t kind,
                                                             const std::optional<std::vector<uint8_t>>& after,
                                                             size_t limit) {
  if (limit > kMaxObjectsPerRead) return Malformed("too many objects in one read");
  auto r = AcquireReader();
  if (!r.ok()) return r.error();
  auto s = (*r)->Prepare(kListObjects);
  if (!s.ok()) return s.error();
  s->Bind(1, repo).Bind(2, int64_t{kind});
  s->Bind(3, after ? std::span<const uint8_t>(*after) : std::span<const uint8_t>());
  s->Bind(4, static_cast<int64_t>(limit));
  std::vector<RepoObject> out;
  for (;;) {
    const int rc = s->Step();
    if (rc == SQLITE_DONE) return out;
    if (rc != SQLITE_ROW) return (*r)->Err("list objects", rc);
    out.push_back(RepoObject{.key = Bytes(s->Blob(0)), .kind = kind, .data = Bytes(s->Blob(1))});
  }
}

Result<std::vector<std::optional<RepoObject>>> SqliteIndex::GetRepoObjects(
    int64_t repo, const std::vector<std::vector<uint8_t>>& keys) {
  if (keys.size() > kMaxObjectsPerRead) return Malformed("too many objects in one read");
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

Result<std::optional<RepoObjectHead>> SqliteIndex::GetRepoObjectHead(int64_t repo,
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

Result<std::vector<std::optional<RepoObjectHead>>> SqliteIndex::GetRepoObjectHeads(
    int64_t repo, const std::vector<std::vector<uint8_t>>& keys, size_t max_bytes) {
  if (keys.size() > kMaxObjectsPerRead) return Malformed("too many objects in one read");
  auto r = AcquireReader();
  if (!r.ok()) return r.error();
  std::vector<std::optional<RepoObjectHead>> out(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    auto s = (*r)->Prepare(kGetRepoObjectHead);
    if (!s.ok()) return s.error();
    s->Bind(1, repo).Bind(2, std::span<const uint8_t>(keys[i]));
    s->Bind(3, static_cast<int64_t>(std::min<size_t>(max_bytes, INT32_MAX)));
    const int rc = s->Step();
    if (rc == SQLITE_DONE) continue;
    if (rc != SQLITE_ROW) return (*r)->Err("read object", rc);
    out[i] = RepoObjectHead{.kind = static_cast<uint8_t>(s->Int(0)),
                            .size = static_cast<uint64_t>(s->Int(1)),
                            .data = Bytes(s->Blob(2))};
  }
  return out;
}

Result<std::vector<Ref>> SqliteIndex::ListRefs(int64_t repo) {
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

Status SqliteIndex::UpdateRef(int64_t repo, const RefUpdate& update) {
  // One writer: the read and the change below see no other write in between.
  return Write([&](Conn& c) -> Status {
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
      return update.expected ? RefMoved(update.name) : RefExists(update.name);
    }
    const char* sql = !update.target ? kDeleteRef : current ? kSetRef : kInsertRef;
    if (!update.target && !current) return Ok{};
    if (update.target) {
      // A ref never names what is not there: a collector may have swept an old commit meanwhile.
      auto exists = c.Prepare(kObjectExists);
      if (!exists.ok()) return exists.error();
      exists->Bind(1, repo).Bind(2, std::span<const uint8_t>(*update.target));
      if (exists->Step() != SQLITE_ROW) return c.Err("read an object", SQLITE_ERROR);
      if (exists->Int(0) == 0) return RefTargetGone(update.name);
    }
    auto set = c.Prepare(sql);
    if (!set.ok()) return set.error();
    set->Bind(1, repo).Bind(2, kind).Bind(3, update.name);
    if (update.target) set->Bind(4, std::span<const uint8_t>(*update.target));
    if (auto st = c.Run(*set, "update ref"); !st.ok()) return st;
    return WriteAudit(c, update.audit ? &*update.audit : nullptr);
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

Status SqliteIndex::ChangeBucket(int64_t repo, const std::vector<BucketChange>& changes,
                                 const AuditEvent* audit) {
  return Write([&](Conn& c) -> Status {
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
    return WriteAudit(c, audit);
  });
}

Result<std::vector<BucketFile>> SqliteIndex::ListBucket(int64_t repo, std::string_view prefix,
                                                        std::optional<std::string_view> from, size_t limit) {
  if (limit > kMaxListedFiles) return Malformed("too many files in one listing");
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

Result<std::vector<std::optional<BucketFile>>> SqliteIndex::GetBucketFiles(
    int64_t repo, const std::vector<std::string>& paths) {
  if (paths.size() > kMaxObjectsPerRead) return Malformed("too many paths in one read");
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

Result<BucketTotals> SqliteIndex::GetBucketTotals(int64_t repo) {
  auto r = AcquireReader();
  if (!r.ok()) return r.error();
  auto s = (*r)->Prepare(kBucketTotals);
  if (!s.ok()) return s.error();
  s->Bind(1, repo);
  const int rc = s->Step();
  if (rc != SQLITE_ROW) return (*r)->Err("sum bucket", rc);
  return BucketTotals{static_cast<uint64_t>(s->Int(0)), static_cast<uint64_t>(s->Int(1))};
}

}  // namespace cairn::index
