// The SQLite backend's CAS slice (index.h's CasIndex): xorbs, files, scopes, shards, dedup, scans, counts.
#include <string>
#include <utility>

#include "index/failures.h"
#include "index/sqlite/sqlite_conn.h"
#include "index/sqlite/sqlite_index.h"

namespace cairn::index {

namespace {
using sqlite_internal::kFileSize;

// Statements. Their addresses key each connection's prepared-statement cache.
static_assert(Index::kMaxDedupHits == 32, "the LIMIT of kDedupAny and kDedupScoped");
constexpr const char kGetXorb[] =
    "SELECT layout, chunk_count, region_size, unpacked_size, stored_at FROM xorbs WHERE hash = ?1";
constexpr const char kHasXorb[] = "SELECT 1 FROM xorbs WHERE hash = ?1";
constexpr const char kShardClaimed[] = "SELECT 1 FROM gc_quarantine WHERE kind = 2 AND hash = ?1";
constexpr const char kPutShardScope[] =
    "INSERT INTO shard_scopes(shard, scope) VALUES (?1, ?2) ON CONFLICT DO NOTHING";
constexpr const char kPutXorb[] =
    "INSERT INTO xorbs(hash, layout, chunk_count, region_size, unpacked_size, stored_at) "
    "VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT(hash) DO NOTHING";
constexpr const char kGetFile[] =
    "SELECT terms, term_count, size, sha256, ranges, created_at FROM files WHERE hash = ?1";
constexpr const char kFileVisible[] = "SELECT 1 FROM file_scopes WHERE file = ?1 AND scope = ?2";
constexpr const char kVisibleFileRecord[] =
    "SELECT f.created_at FROM file_scopes s JOIN files f ON f.hash = s.file WHERE s.file = ?1 AND s.scope = "
    "?2";
constexpr const char kGetVisibleFile[] =
    "SELECT terms, term_count, size, sha256, ranges, created_at FROM files WHERE hash = ?1 "
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
constexpr const char kShrinkScope[] =
    "UPDATE scope_totals SET files = files - 1, bytes = bytes - ?2 WHERE scope = ?1";
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
constexpr const char kDropScope[] = "DELETE FROM file_scopes WHERE file = ?1 AND scope = ?2";
constexpr const char kRecordRevocation[] =
    "INSERT INTO revocations(file, scope, cleared) VALUES (?1, ?2, 0) "
    "ON CONFLICT(file, scope) DO UPDATE SET cleared = 0";
constexpr const char kRevokedBefore[] =
    "SELECT 1 FROM revocations WHERE file = ?1 AND scope = ?2 AND cleared = 0";
constexpr const char kClearRevocation[] =
    "UPDATE revocations SET cleared = 1 WHERE file = ?1 AND scope = ?2 AND cleared = 0";
constexpr const char kListRevocations[] =
    "SELECT file, scope, cleared FROM revocations WHERE file > ?1 OR (file = ?1 AND scope > ?2) "
    "ORDER BY file, scope LIMIT ?3";
constexpr const char kListClearedRevocations[] =
    "SELECT file, scope, cleared FROM revocations WHERE cleared = 1 AND (file > ?1 OR (file = ?1 AND scope > "
    "?2)) "
    "ORDER BY file, scope LIMIT ?3";
constexpr const char kForgetRevocation[] =
    "DELETE FROM revocations WHERE file = ?1 AND scope = ?2 AND cleared = 1";

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
constexpr const char kStats[] =
    "SELECT xorbs, files, chunks, stored_bytes, shards, unpacked_bytes, file_bytes FROM counters WHERE id = "
    "1";

}  // namespace

// ---- Writes

Result<bool> SqliteIndex::PutXorb(const XorbHash& hash, const xet::XorbLayout& layout) {
  const XorbEntry e = MakeXorbEntry(hash, layout);
  bool inserted = false;
  auto st = Write([&](Conn& c) -> Status {
    auto put = c.Prepare(kPutXorb);
    if (!put.ok()) return put.error();
    put->Bind(1, hash).Bind(2, e.packed).Bind(3, int64_t{e.chunk_count}).Bind(4, int64_t{e.region_size});
    put->Bind(5, static_cast<int64_t>(e.unpacked_size)).Bind(6, options_.clock->UnixSeconds());
    if (auto r = c.Run(*put, "insert xorb"); !r.ok()) return r;
    if (c.changes() == 0) return Ok{};  // already registered: immutable, nothing to do
    auto bump = c.Prepare(kBumpCounters);
    if (!bump.ok()) return bump.error();
    bump->Bind(1, int64_t{1}).Bind(2, int64_t{0}).Bind(3, int64_t{e.chunk_count});
    bump->Bind(4, int64_t{e.region_size}).Bind(5, int64_t{0});
    bump->Bind(6, static_cast<int64_t>(e.unpacked_size)).Bind(7, int64_t{0});
    if (auto r = c.Run(*bump, "count xorb"); !r.ok()) return r;
    inserted = true;
    return Ok{};
  });
  if (!st.ok()) return st.error();
  return inserted;
}

Result<bool> SqliteIndex::ClearRevocation(Conn& c, const FileHash& file, std::string_view scope) {
  auto clear = c.Prepare(kClearRevocation);
  if (!clear.ok()) return clear.error();
  clear->Bind(1, file).Bind(2, scope);
  if (auto r = c.Run(*clear, "clear a revocation"); !r.ok()) return r.error();
  return c.changes() > 0;
}

Result<CommitOutcome> SqliteIndex::CommitShard(const ShardCommit& commit) {
  // Checked here, before the request joins a batch; the CHECK constraints are the backstop.
  if (auto st = CheckShardCommit(commit); !st.ok()) return st.error();
  CommitOutcome outcome;
  auto st = Write([&](Conn& c) -> Status {
    outcome = {};
    return RegisterShard(c, commit, options_.clock->UnixSeconds(), outcome);
  });
  if (!st.ok()) return st.error();
  return outcome;
}

Status SqliteIndex::RegisterShard(Conn& c, const ShardCommit& commit, int64_t now, CommitOutcome& outcome) {
  std::vector<XorbHash> named(commit.xorbs.listed);
  named.insert(named.end(), commit.xorbs.referenced.begin(), commit.xorbs.referenced.end());
  std::vector<FileHash> files;
  for (const auto& f : commit.files) files.push_back(f.hash);
  if (auto revived = Revive(c, named, files); !revived.ok()) return revived;
  if (auto st = CheckShardNames(c, commit, named); !st.ok()) return st;
  if (auto st = PutShardRows(c, commit, now, outcome); !st.ok()) return st;
  AddedFiles added;
  if (auto st = PutShardFiles(c, commit, now, outcome, added); !st.ok()) return st;
  if (auto st = PutShardDedup(c, commit); !st.ok()) return st;
  if (added.files == 0 && outcome.already_existed) return Ok{};
  auto bump = c.Prepare(kBumpCounters);
  if (!bump.ok()) return bump.error();
  const bool new_shard = !outcome.already_existed;
  bump->Bind(1, int64_t{0}).Bind(2, added.files).Bind(3, int64_t{0});
  bump->Bind(4, new_shard ? static_cast<int64_t>(commit.shard_size) : 0).Bind(5, int64_t{new_shard});
  bump->Bind(6, int64_t{0}).Bind(7, added.bytes);
  return c.Run(*bump, "count shard");
}

Status SqliteIndex::CheckShardNames(Conn& c, const ShardCommit& commit, std::span<const XorbHash> named) {
  {
    // A shard the collector is deleting (it named only swept xorbs): once it is gone, a retry registers
    // it anew.
    auto claimed = c.Prepare(kShardClaimed);
    if (!claimed.ok()) return claimed.error();
    claimed->Bind(1, commit.shard);
    const int rc = claimed->Step();
    if (rc == SQLITE_ROW) return NamedBeingDeleted();
    if (rc != SQLITE_DONE) return c.Err("read the quarantine", rc);
  }
  // Checked here, in the transaction, not only by the service: the collector may have deleted one since
  // the service read its layout (from a cache), and a shard committed before writes no neighbourhood rows
  // whose foreign keys would notice.
  for (const auto& x : named) {
    auto has = c.Prepare(kHasXorb);
    if (!has.ok()) return has.error();
    has->Bind(1, x);
    const int rc = has->Step();
    if (rc == SQLITE_DONE) return NamedXorbNotStored();
    if (rc != SQLITE_ROW) return c.Err("read xorb", rc);
  }
  return Ok{};
}

Status SqliteIndex::PutShardRows(Conn& c, const ShardCommit& commit, int64_t now, CommitOutcome& outcome) {
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
          return Error{r.error().code, "xorb " + x.hex() + " of the shard: " + r.error().message};
        }
      }
    }
  }
  auto granted = c.Prepare(kPutShardScope);
  if (!granted.ok()) return granted.error();
  granted->Bind(1, commit.shard).Bind(2, std::string_view(commit.scope));
  if (auto r = c.Run(*granted, "record the shard's scope"); !r.ok()) return r;
  outcome.new_scope = c.changes() > 0;
  return Ok{};
}

Status SqliteIndex::PutShardFiles(Conn& c, const ShardCommit& commit, int64_t now, CommitOutcome& outcome,
                                  AddedFiles& added) {
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
      ++added.files;
      added.bytes += static_cast<int64_t>(f.size);
    }
    auto scope = c.Prepare(kPutScope);
    if (!scope.ok()) return scope.error();
    scope->Bind(1, f.hash).Bind(2, std::string_view(commit.scope));
    if (auto r = c.Run(*scope, "insert file scope"); !r.ok()) return r;
    if (c.changes() > 0) {
      ++scope_files;
      scope_bytes += static_cast<int64_t>(f.size);
      auto cleared = ClearRevocation(c, f.hash, commit.scope);
      if (!cleared.ok()) return cleared.error();
      if (*cleared) outcome.cleared_revocations.push_back(f.hash);
    }
  }
  if (scope_files == 0) return Ok{};
  auto bump = c.Prepare(kBumpScope);
  if (!bump.ok()) return bump.error();
  bump->Bind(1, std::string_view(commit.scope)).Bind(2, scope_files).Bind(3, scope_bytes);
  return c.Run(*bump, "count the scope's files");
}

Status SqliteIndex::PutShardDedup(Conn& c, const ShardCommit& commit) {
  for (const auto& d : commit.dedup) {
    auto dedup = c.Prepare(kPutDedup);
    if (!dedup.ok()) return dedup.error();
    dedup->Bind(1, d.chunk).Bind(2, std::string_view(commit.scope)).Bind(3, d.xorb).Bind(4, commit.shard);
    if (auto r = c.Run(*dedup, "insert dedup entry"); !r.ok()) {
      return Error{r.error().code, "dedup entry for chunk " + d.chunk.hex() + " in xorb " + d.xorb.hex() +
                                       ": " + r.error().message};
    }
  }
  return Ok{};
}

// ---- Reads

Result<std::shared_ptr<const XorbEntry>> SqliteIndex::GetXorb(const XorbHash& hash) {
  auto r = AcquireReader();
  if (!r.ok()) return r.error();
  auto s = (*r)->Prepare(kGetXorb);
  if (!s.ok()) return s.error();
  s->Bind(1, hash);
  const int rc = s->Step();
  if (rc == SQLITE_DONE) return XorbNotIndexed(hash);
  if (rc != SQLITE_ROW) return (*r)->Err("read xorb", rc);
  return XorbEntryFromRow(hash, s->Blob(0), s->Int(1), s->Int(2), s->Int(3), s->Int(4));
}

Result<std::vector<std::shared_ptr<const XorbEntry>>> SqliteIndex::GetXorbs(
    std::span<const XorbHash> hashes) {
  if (hashes.size() > kMaxXorbsPerRead) return Malformed("too many xorbs in one read");
  // In process, one statement per xorb costs no more than one for all of them.
  std::vector<std::shared_ptr<const XorbEntry>> out;
  out.reserve(hashes.size());
  for (const auto& h : hashes) {
    auto e = GetXorb(h);
    if (!e.ok() && e.error().code != ErrorCode::kNotFound) return e.error();
    out.push_back(e.ok() ? *e : nullptr);
  }
  return out;
}

Result<bool> SqliteIndex::HasXorb(const XorbHash& hash) {
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

Result<std::vector<std::shared_ptr<const FileEntry>>> SqliteIndex::GetFiles(
    std::span<const FileHash> hashes) {
  if (hashes.size() > kMaxFilesPerRead) return Malformed("too many files in one read");
  std::vector<std::shared_ptr<const FileEntry>> out(hashes.size());
  for (size_t i = 0; i < hashes.size(); ++i) {  // a local read each: no round trip to save
    auto e = ReadFile(hashes[i], std::nullopt);
    if (e.ok()) {
      out[i] = std::move(*e);
    } else if (e.error().code != ErrorCode::kNotFound) {
      return e.error();
    }
  }
  return out;
}

Result<std::shared_ptr<const FileEntry>> SqliteIndex::GetFile(const FileHash& hash) {
  return ReadFile(hash, std::nullopt);
}

Result<std::shared_ptr<const FileEntry>> SqliteIndex::GetVisibleFile(const FileHash& hash,
                                                                     std::string_view scope) {
  return ReadFile(hash, scope);
}

Result<std::shared_ptr<const FileEntry>> SqliteIndex::ReadFile(const FileHash& hash,
                                                               std::optional<std::string_view> scope) {
  auto r = AcquireReader();
  if (!r.ok()) return r.error();
  auto s = (*r)->Prepare(scope ? kGetVisibleFile : kGetFile);
  if (!s.ok()) return s.error();
  s->Bind(1, hash);
  if (scope) s->Bind(2, *scope);
  const int rc = s->Step();
  if (rc == SQLITE_DONE) return FileNotIndexed(hash);
  if (rc != SQLITE_ROW) return (*r)->Err("read file", rc);
  return FileEntryFromRow(hash, s->Blob(0), s->Int(1), s->Int(2), s->IsNull(3) ? std::nullopt : s->HashCol(3),
                          s->Blob(4), s->Int(5));
}

Result<std::optional<int64_t>> SqliteIndex::VisibleFileRecord(const FileHash& hash, std::string_view scope) {
  auto r = AcquireReader();
  if (!r.ok()) return r.error();
  auto s = (*r)->Prepare(kVisibleFileRecord);
  if (!s.ok()) return s.error();
  s->Bind(1, hash).Bind(2, scope);
  const int rc = s->Step();
  if (rc == SQLITE_ROW) return std::optional<int64_t>(s->Int(0));
  if (rc == SQLITE_DONE) return std::optional<int64_t>();
  return (*r)->Err("read file scope", rc);
}

Result<bool> SqliteIndex::FileVisibleTo(const FileHash& hash, std::string_view scope) {
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

Result<std::optional<FileHash>> SqliteIndex::FileBySha256(const Hash& sha256,
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

Result<std::vector<ListedFile>> SqliteIndex::ListFiles(std::string_view scope, std::optional<FileHash> after,
                                                       size_t limit) {
  if (limit > kMaxListedFiles)
    return Malformed("at most " + std::to_string(kMaxListedFiles) + " files a page");
  auto r = AcquireReader();
  if (!r.ok()) return r.error();
  auto s = (*r)->Prepare(kListFiles);
  if (!s.ok()) return s.error();
  // Every hash sorts after the empty blob.
  s->Bind(1, scope);
  s->BindAfter(2, after);
  s->Bind(3, static_cast<int64_t>(limit));
  std::vector<ListedFile> out;
  for (;;) {
    const int rc = s->Step();
    if (rc == SQLITE_DONE) return out;
    if (rc != SQLITE_ROW) return (*r)->Err("list files", rc);
    auto hash = s->HashCol(0);
    if (!hash) return IoError("a files row has a hash that is not 32 bytes");
    out.push_back(
        {*hash, static_cast<uint64_t>(s->Int(1)), s->IsNull(2) ? std::nullopt : s->HashCol(2), s->Int(3)});
  }
}

Result<std::vector<Hash>> SqliteIndex::Scan(Scanned what, std::optional<Hash> after, size_t limit) {
  if (limit > kMaxScanned) return Malformed("at most " + std::to_string(kMaxScanned) + " hashes a page");
  auto r = AcquireReader();
  if (!r.ok()) return r.error();
  auto s = (*r)->Prepare(what == Scanned::kXorbs   ? kScanXorbs
                         : what == Scanned::kFiles ? kScanFiles
                                                   : kScanShards);
  if (!s.ok()) return s.error();
  s->BindAfter(1, after);
  s->Bind(2, static_cast<int64_t>(limit));
  std::vector<Hash> out;
  for (;;) {
    const int rc = s->Step();
    if (rc == SQLITE_DONE) return out;
    if (rc != SQLITE_ROW) return (*r)->Err("scan the index", rc);
    auto hash = s->HashCol(0);
    if (!hash) return IoError("an index row has a hash that is not 32 bytes");
    out.push_back(*hash);
  }
}

Result<ScopeTotals> SqliteIndex::ScopeStats(std::string_view scope) {
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

Result<std::optional<ShardInfo>> SqliteIndex::GetShard(const Hash& shard) {
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

Result<std::shared_ptr<const ShardXorbs>> SqliteIndex::GetShardXorbs(const Hash& shard) {
  // The shard row first: its xorbs were committed with it, so every later read sees them all.
  auto known = GetShard(shard);
  if (!known) return known.error();
  if (!known->has_value()) return ShardNotIndexed(shard);
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
    if (!xorb) return IoError("index row of shard " + shard.hex() + " is corrupt");
    (s->Int(1) != 0 ? e->listed : e->referenced).push_back(*xorb);
  }
  return std::shared_ptr<const ShardXorbs>(std::move(e));
}

Result<std::vector<DedupHit>> SqliteIndex::LookupDedup(const ChunkHash& chunk,
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

Status SqliteIndex::ShareFiles(std::span<const FileHash> hashes, std::string_view scope,
                               const QuotaCharge* charge) {
  if (hashes.size() > kMaxSharedFiles) return Malformed("too many files shared at once");
  if (hashes.empty()) return Ok{};
  return Write([&](Conn& c) -> Status {
    if (auto revived = ReviveFilesAndTheirXorbs(c, hashes); !revived.ok()) return revived;
    if (charge != nullptr) {
      if (auto charged = ApplyQuotaCharge(c, *charge); !charged.ok()) return charged;
    }
    int64_t files = 0;
    int64_t bytes = 0;
    for (const FileHash& hash : hashes) {
      auto size = c.Prepare(kFileSize);
      if (!size.ok()) return size.error();
      size->Bind(1, hash);
      const int rc = size->Step();
      if (rc == SQLITE_DONE) return SharedFileNotIndexed();
      if (rc != SQLITE_ROW) return c.Err("read file", rc);
      const int64_t file_bytes = size->Int(0);
      auto put = c.Prepare(kPutScope);
      if (!put.ok()) return put.error();
      put->Bind(1, hash).Bind(2, scope);
      if (auto st = c.Run(*put, "insert file scope"); !st.ok()) return st;
      if (c.changes() == 0) continue;  // the scope had it already
      if (auto cleared = ClearRevocation(c, hash, scope); !cleared.ok()) return cleared.error();
      ++files;
      bytes += file_bytes;
    }
    if (files == 0) return Ok{};
    auto bump = c.Prepare(kBumpScope);
    if (!bump.ok()) return bump.error();
    bump->Bind(1, scope).Bind(2, files).Bind(3, bytes);
    return c.Run(*bump, "count the scope's files");
  });
}

Result<Unregistered> SqliteIndex::UnregisterFile(const FileHash& hash, std::string_view scope) {
  Unregistered outcome = Unregistered::kNotVisible;
  auto st = Write([&](Conn& c) -> Status {
    auto drop = c.Prepare(kDropScope);
    if (!drop.ok()) return drop.error();
    drop->Bind(1, hash).Bind(2, scope);
    if (auto r = c.Run(*drop, "delete file scope"); !r.ok()) return r;
    if (c.changes() == 0) {  // the scope did not see it
      auto before = c.Prepare(kRevokedBefore);
      if (!before.ok()) return before.error();
      before->Bind(1, hash).Bind(2, scope);
      const int rc = before->Step();
      if (rc == SQLITE_ROW) outcome = Unregistered::kRemovedBefore;
      if (rc != SQLITE_ROW && rc != SQLITE_DONE) return c.Err("read revocation", rc);
      return Ok{};
    }
    auto size = c.Prepare(kFileSize);
    if (!size.ok()) return size.error();
    size->Bind(1, hash);
    const int rc = size->Step();
    if (rc == SQLITE_DONE) return IoError("file " + hash.hex() + " is visible to a scope but has no row");
    if (rc != SQLITE_ROW) return c.Err("read file", rc);
    auto shrink = c.Prepare(kShrinkScope);
    if (!shrink.ok()) return shrink.error();
    shrink->Bind(1, scope).Bind(2, size->Int(0));
    if (auto r = c.Run(*shrink, "count the scope's files"); !r.ok()) return r;
    auto record = c.Prepare(kRecordRevocation);
    if (!record.ok()) return record.error();
    record->Bind(1, hash).Bind(2, scope);
    if (auto r = c.Run(*record, "record the revocation"); !r.ok()) return r;
    outcome = Unregistered::kRemoved;
    return Ok{};
  });
  if (!st.ok()) return st.error();
  return outcome;
}

Result<std::vector<RevocationRecord>> SqliteIndex::RevocationPage(const char* sql,
                                                                  const std::optional<RevocationKey>& after,
                                                                  size_t limit) {
  if (limit > kMaxListedFiles)
    return Malformed("at most " + std::to_string(kMaxListedFiles) + " revocations a page");
  auto r = AcquireReader();
  if (!r.ok()) return r.error();
  auto s = (*r)->Prepare(sql);
  if (!s.ok()) return s.error();
  // Bound, not copied: both kept alive until the statement is done.
  const std::optional<Hash> after_file = after ? std::optional<Hash>(after->file) : std::nullopt;
  const std::string after_scope = after ? after->scope : std::string();
  s->BindAfter(1, after_file);
  s->Bind(2, std::string_view(after_scope));
  s->Bind(3, static_cast<int64_t>(limit));
  std::vector<RevocationRecord> out;
  for (;;) {
    const int rc = s->Step();
    if (rc == SQLITE_DONE) return out;
    if (rc != SQLITE_ROW) return (*r)->Err("list revocations", rc);
    auto file = s->HashCol(0);
    if (!file) return IoError("a revocations row has a file that is not 32 bytes");
    out.push_back({{*file, std::string(s->Text(1))}, s->Int(2) != 0});
  }
}

Result<std::vector<RevocationRecord>> SqliteIndex::ListRevocations(std::optional<RevocationKey> after,
                                                                   size_t limit) {
  return RevocationPage(kListRevocations, after, limit);
}

Result<std::vector<RevocationKey>> SqliteIndex::ListClearedRevocations(std::optional<RevocationKey> after,
                                                                       size_t limit) {
  return KeysOf(RevocationPage(kListClearedRevocations, after, limit));
}

Status SqliteIndex::ForgetRevocations(std::span<const RevocationKey> revocations) {
  if (revocations.empty()) return Ok{};
  return Write([&](Conn& c) -> Status {
    for (const auto& k : revocations) {
      auto forget = c.Prepare(kForgetRevocation);
      if (!forget.ok()) return forget.error();
      forget->Bind(1, k.file).Bind(2, std::string_view(k.scope));
      if (auto r = c.Run(*forget, "forget a revocation"); !r.ok()) return r;
    }
    return Ok{};
  });
}

Result<IndexStats> SqliteIndex::Stats() {
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
