// The SQLite backend's garbage-collection slice (index.h's GcIndex) and ReviveXorbs, the CAS's side of it.
#include <fcntl.h>
#include <sys/file.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <string>
#include <thread>
#include <utility>

#include "common/posix_io.h"
#include "common/unique_fd.h"
#include "index/failures.h"
#include "index/sqlite/sqlite_conn.h"
#include "index/sqlite/sqlite_index.h"

namespace cairn::index {

namespace {
using sqlite_internal::kDeleteObject;
using sqlite_internal::kFileSize;
using sqlite_internal::kReleaseObject;

// Statements. Their addresses key each connection's prepared-statement cache.
constexpr const char kXorbUse[] =
    "SELECT q.claimed_at, EXISTS (SELECT 1 FROM compacted_xorbs c WHERE c.xorb = x.hash) "
    "FROM xorbs x LEFT JOIN gc_quarantine q ON q.kind = 0 AND q.hash = x.hash WHERE x.hash = ?1";
constexpr const char kReleaseOne[] =
    "DELETE FROM gc_quarantine WHERE kind = ?1 AND hash = ?2 AND claimed_at = 0";
constexpr const char kQuarantineOne[] =
    "INSERT INTO gc_quarantine(kind, hash, since, claimed_at) VALUES (?1, ?2, ?3, 0) ON CONFLICT DO NOTHING";
// A file is live by registration when a plain scope (no repository's) sees it or a bucket names it
// (records.h FileXorbs); what repositories commit is live by reachability (the collector walks their refs).
constexpr const char kScanFileXorbs[] = R"sql(
SELECT f.hash, f.size, f.terms,
  EXISTS (SELECT 1 FROM file_scopes s WHERE s.file = f.hash
            AND NOT EXISTS (SELECT 1 FROM repos r WHERE r.scope = s.scope)
            AND NOT EXISTS (SELECT 1 FROM repos r WHERE r.read_scope = s.scope))
  OR EXISTS (SELECT 1 FROM bucket_files b WHERE b.file = f.hash)
FROM files f WHERE f.hash > ?1 ORDER BY f.hash LIMIT ?2)sql";
constexpr const char kScanQuarantine[] =
    "SELECT q.hash, q.since, q.claimed_at, "
    "COALESCE((SELECT region_size FROM xorbs x WHERE q.kind = 0 AND x.hash = q.hash), "
    "         (SELECT size FROM files f WHERE q.kind = 1 AND f.hash = q.hash), "
    "         (SELECT size FROM shards s WHERE q.kind = 2 AND s.hash = q.hash), 0) "
    "FROM gc_quarantine q WHERE q.kind = ?1 AND q.hash > ?2 ORDER BY q.hash LIMIT ?3";
constexpr const char kTakeFile[] =
    "DELETE FROM gc_quarantine WHERE kind = 1 AND hash = ?1 AND since = ?2 AND claimed_at = 0";
constexpr const char kFileScopes[] = "SELECT scope FROM file_scopes WHERE file = ?1";
constexpr const char kFileScopesInOrder[] = "SELECT scope FROM file_scopes WHERE file = ?1 ORDER BY scope";
constexpr const char kRepointFile[] =
    "UPDATE files SET terms = ?2, ranges = ?3, created_at = max(?4, created_at + 1) "
    "WHERE hash = ?1 AND created_at = ?5 AND term_count = ?6";
constexpr const char kSupersede[] =
    "INSERT INTO compacted_xorbs(xorb, into_xorb, compacted_at) VALUES (?1, ?2, ?3) "
    "ON CONFLICT(xorb) DO UPDATE SET into_xorb = excluded.into_xorb, compacted_at = excluded.compacted_at";
constexpr const char kUncountScope[] =
    "UPDATE scope_totals SET files = files - 1, bytes = bytes - ?2 WHERE scope = ?1";
constexpr const char kDropEmptyScope[] = "DELETE FROM scope_totals WHERE scope = ?1 AND files <= 0";
constexpr const char kDeleteFileScopes[] = "DELETE FROM file_scopes WHERE file = ?1";
constexpr const char kDeleteFile[] = "DELETE FROM files WHERE hash = ?1";
constexpr const char kClaimXorb[] =
    "UPDATE gc_quarantine SET claimed_at = ?3 WHERE kind = 0 AND hash = ?1 AND since = ?2 AND claimed_at = 0";
constexpr const char kDeleteDedupOfXorb[] = "DELETE FROM dedup WHERE xorb = ?1";
constexpr const char kShardsOfXorb[] = "SELECT DISTINCT shard FROM shard_xorbs WHERE xorb = ?1";
// A shard whose last xorb went: quarantined claimed (GcKind::kShard).
constexpr const char kClaimDeadShard[] =
    "INSERT INTO gc_quarantine(kind, hash, since, claimed_at) SELECT 2, ?1, ?2, ?2 "
    "WHERE NOT EXISTS (SELECT 1 FROM shard_xorbs WHERE shard = ?1) "
    "AND EXISTS (SELECT 1 FROM shards WHERE hash = ?1) ON CONFLICT DO NOTHING";
constexpr const char kShardScopes[] = "SELECT scope FROM shard_scopes WHERE shard = ?1";
constexpr const char kTakeClaimedShard[] =
    "DELETE FROM gc_quarantine WHERE kind = 2 AND hash = ?1 AND claimed_at <> 0";
constexpr const char kShardSize[] = "SELECT size FROM shards WHERE hash = ?1";
constexpr const char kDeleteShard[] = "DELETE FROM shards WHERE hash = ?1";
constexpr const char kDeleteShardScopes[] = "DELETE FROM shard_scopes WHERE shard = ?1";
constexpr const char kUncountShard[] =
    "UPDATE counters SET shards = shards - 1, stored_bytes = stored_bytes - ?1 WHERE id = 1";
constexpr const char kDeleteNeighbourhoodOfXorb[] = "DELETE FROM shard_xorbs WHERE xorb = ?1";
constexpr const char kTakeClaimedXorb[] =
    "DELETE FROM gc_quarantine WHERE kind = 0 AND hash = ?1 AND claimed_at <> 0";
constexpr const char kXorbSizes[] =
    "SELECT chunk_count, region_size, unpacked_size FROM xorbs WHERE hash = ?1";
constexpr const char kDeleteXorb[] = "DELETE FROM xorbs WHERE hash = ?1";
constexpr const char kUncount[] =
    "UPDATE counters SET xorbs = xorbs - ?1, files = files - ?2, chunks = chunks - ?3, "
    "stored_bytes = stored_bytes - ?4, unpacked_bytes = unpacked_bytes - ?5, file_bytes = file_bytes - ?6 "
    "WHERE id = 1";
constexpr const char kAnyQuarantined[] = "SELECT EXISTS (SELECT 1 FROM gc_quarantine)";
constexpr const char kFileTerms[] = "SELECT terms FROM files WHERE hash = ?1";

constexpr const char kScanRepoObjects[] =
    "SELECT o.key, length(o.data), COALESCE(q.since, 0) FROM repo_objects o "
    "LEFT JOIN gc_repo_quarantine q ON q.repo = o.repo AND q.key = o.key "
    "WHERE o.repo = ?1 AND o.key > ?2 ORDER BY o.key LIMIT ?3";
constexpr const char kQuarantineObject[] =
    "INSERT INTO gc_repo_quarantine(repo, key, since) SELECT ?1, ?2, ?3 "
    "WHERE EXISTS (SELECT 1 FROM repo_objects WHERE repo = ?1 AND key = ?2) ON CONFLICT DO NOTHING";
constexpr const char kTakeObject[] =
    "DELETE FROM gc_repo_quarantine WHERE repo = ?1 AND key = ?2 AND since = ?3";
constexpr const char kObjectSize[] = "SELECT length(data) FROM repo_objects WHERE repo = ?1 AND key = ?2";
constexpr const char kTruncateLog[] = "PRAGMA wal_checkpoint(TRUNCATE)";

constexpr int64_t Kind(GcKind k) {
  return static_cast<int64_t>(k);
}

class FileGcLock final : public GcLock {
 public:
  explicit FileGcLock(UniqueFd fd) : fd_(std::move(fd)) {}
  Status Check() override { return Ok{}; }  // held until the descriptor closes

 private:
  UniqueFd fd_;
};

}  // namespace

Result<XorbUse> SqliteIndex::UseOf(Conn& c, const XorbHash& xorb, bool* quarantined) {
  auto s = c.Prepare(kXorbUse);
  if (!s.ok()) return s.error();
  s->Bind(1, xorb);
  const int rc = s->Step();
  if (rc == SQLITE_DONE) return XorbUse::kAbsent;
  if (rc != SQLITE_ROW) return c.Err("read a xorb's quarantine", rc);
  if (!s->IsNull(0) && s->Int(0) != 0) return XorbUse::kBeingSwept;
  // Asking about a superseded xorb does not revive it: only a write that names it (a shard) does.
  if (s->Int(1) != 0) return XorbUse::kSuperseded;
  if (s->IsNull(0)) return XorbUse::kStored;
  if (quarantined != nullptr) *quarantined = true;
  return XorbUse::kStored;
}

Status SqliteIndex::Uncount(Conn& c, const SweptTotals& xorbs, int64_t chunks, int64_t unpacked,
                            const SweptTotals& files) {
  auto s = c.Prepare(kUncount);
  if (!s.ok()) return s.error();
  s->Bind(1, static_cast<int64_t>(xorbs.objects)).Bind(2, static_cast<int64_t>(files.objects));
  s->Bind(3, chunks).Bind(4, static_cast<int64_t>(xorbs.bytes)).Bind(5, unpacked);
  s->Bind(6, static_cast<int64_t>(files.bytes));
  return c.Run(*s, "count what was swept");
}

// ---- Revival: what writes that name xorbs and files do before they count on them

Result<bool> SqliteIndex::AnyQuarantined(Conn& c) {
  auto any = c.Prepare(kAnyQuarantined);
  if (!any.ok()) return any.error();
  const int rc = any->Step();
  if (rc != SQLITE_ROW) return c.Err("read the quarantine", rc);
  return any->Int(0) != 0;
}

Status SqliteIndex::Revive(Conn& c, std::span<const XorbHash> xorbs, std::span<const FileHash> files) {
  auto any = AnyQuarantined(c);
  if (!any.ok()) return any.error();
  if (!*any) return Ok{};  // nothing is quarantined: the usual case, one read
  return ReleaseNamed(c, xorbs, files);
}

Status SqliteIndex::ReleaseNamed(Conn& c, std::span<const XorbHash> xorbs, std::span<const FileHash> files) {
  for (const XorbHash& x : xorbs) {
    auto use = UseOf(c, x, nullptr);
    if (!use.ok()) return use.error();
    if (*use == XorbUse::kBeingSwept) {
      return NamedBeingDeleted();
    }
    auto release = c.Prepare(kReleaseOne);
    if (!release.ok()) return release.error();
    release->Bind(1, Kind(GcKind::kXorb)).Bind(2, x);
    if (auto st = c.Run(*release, "revive a xorb"); !st.ok()) return st;
  }
  for (const FileHash& f : files) {
    auto release = c.Prepare(kReleaseOne);
    if (!release.ok()) return release.error();
    release->Bind(1, Kind(GcKind::kFile)).Bind(2, f);
    if (auto st = c.Run(*release, "revive a file"); !st.ok()) return st;
  }
  return Ok{};
}

Status SqliteIndex::ReviveFilesAndTheirXorbs(Conn& c, std::span<const FileHash> files) {
  auto any = AnyQuarantined(c);
  if (!any.ok()) return any.error();
  if (!*any) return Ok{};
  std::vector<XorbHash> xorbs;
  for (const FileHash& f : files) {
    auto terms = c.Prepare(kFileTerms);
    if (!terms.ok()) return terms.error();
    terms->Bind(1, f);
    const int rc = terms->Step();
    if (rc == SQLITE_DONE) continue;
    if (rc != SQLITE_ROW) return c.Err("read a file's terms", rc);
    for (const XorbHash& x : DistinctTermXorbs(terms->Blob(0))) xorbs.push_back(x);
  }
  std::sort(xorbs.begin(), xorbs.end());
  xorbs.erase(std::unique(xorbs.begin(), xorbs.end()), xorbs.end());
  return ReleaseNamed(c, xorbs, files);
}

Result<std::vector<XorbUse>> SqliteIndex::ReviveXorbs(std::span<const XorbHash> xorbs) {
  if (xorbs.size() > kMaxXorbsPerRead) return Malformed("too many xorbs in one read");
  std::vector<XorbUse> out(xorbs.size(), XorbUse::kAbsent);
  bool any_quarantined = false;
  {
    auto r = AcquireReader();
    if (!r.ok()) return r.error();
    for (size_t i = 0; i < xorbs.size(); ++i) {
      auto use = UseOf(**r, xorbs[i], &any_quarantined);
      if (!use.ok()) return use.error();
      out[i] = *use;
    }
  }
  if (!any_quarantined) return out;  // a read only, as long as nothing named is quarantined
  // Revive in a write, where the answer is final: a sweep may have claimed one since the read.
  auto st = Write([&](Conn& c) -> Status {
    for (size_t i = 0; i < xorbs.size(); ++i) {
      bool quarantined = false;
      auto use = UseOf(c, xorbs[i], &quarantined);
      if (!use.ok()) return use.error();
      out[i] = *use;
      if (!quarantined) continue;
      auto release = c.Prepare(kReleaseOne);
      if (!release.ok()) return release.error();
      release->Bind(1, Kind(GcKind::kXorb)).Bind(2, xorbs[i]);
      if (auto r = c.Run(*release, "revive a xorb"); !r.ok()) return r;
    }
    return Ok{};
  });
  if (!st.ok()) return st.error();
  return out;
}

// ---- Mark

Result<std::vector<FileXorbs>> SqliteIndex::ScanFileXorbs(std::optional<FileHash> after, size_t limit) {
  if (limit > kMaxScanned) return Malformed("at most " + std::to_string(kMaxScanned) + " files a page");
  auto r = AcquireReader();
  if (!r.ok()) return r.error();
  auto s = (*r)->Prepare(kScanFileXorbs);
  if (!s.ok()) return s.error();
  s->BindAfter(1, after);
  s->Bind(2, static_cast<int64_t>(limit));
  std::vector<FileXorbs> out;
  for (;;) {
    const int rc = s->Step();
    if (rc == SQLITE_DONE) return out;
    if (rc != SQLITE_ROW) return (*r)->Err("scan files and their xorbs", rc);
    auto hash = s->HashCol(0);
    if (!hash) return IoError("a files row has a hash that is not 32 bytes");
    out.push_back({*hash, static_cast<uint64_t>(s->Int(1)), DistinctTermXorbs(s->Blob(2)), s->Int(3) != 0});
  }
}

Result<std::vector<Quarantined>> SqliteIndex::ScanQuarantine(GcKind kind, std::optional<Hash> after,
                                                             size_t limit) {
  if (limit > kMaxScanned) return Malformed("at most " + std::to_string(kMaxScanned) + " hashes a page");
  auto r = AcquireReader();
  if (!r.ok()) return r.error();
  auto s = (*r)->Prepare(kScanQuarantine);
  if (!s.ok()) return s.error();
  s->Bind(1, Kind(kind));
  s->BindAfter(2, after);
  s->Bind(3, static_cast<int64_t>(limit));
  std::vector<Quarantined> out;
  for (;;) {
    const int rc = s->Step();
    if (rc == SQLITE_DONE) return out;
    if (rc != SQLITE_ROW) return (*r)->Err("scan the quarantine", rc);
    auto hash = s->HashCol(0);
    if (!hash) return IoError("a gc_quarantine row has a hash that is not 32 bytes");
    out.push_back({*hash, s->Int(1), s->Int(2), static_cast<uint64_t>(s->Int(3))});
  }
}

Status SqliteIndex::Quarantine(GcKind kind, std::span<const Hash> hashes, int64_t since) {
  if (hashes.empty()) return Ok{};
  return Write([&](Conn& c) -> Status {
    for (const Hash& h : hashes) {
      auto put = c.Prepare(kQuarantineOne);
      if (!put.ok()) return put.error();
      put->Bind(1, Kind(kind)).Bind(2, h).Bind(3, since);
      if (auto st = c.Run(*put, "quarantine"); !st.ok()) return st;
    }
    return Ok{};
  });
}

Status SqliteIndex::Release(GcKind kind, std::span<const Hash> hashes) {
  if (hashes.empty()) return Ok{};
  return Write([&](Conn& c) -> Status {
    for (const Hash& h : hashes) {
      auto release = c.Prepare(kReleaseOne);
      if (!release.ok()) return release.error();
      release->Bind(1, Kind(kind)).Bind(2, h);
      if (auto st = c.Run(*release, "release"); !st.ok()) return st;
    }
    return Ok{};
  });
}

// ---- Sweep

Result<SweptTotals> SqliteIndex::SweepFiles(std::span<const Quarantined> files) {
  SweptTotals swept;
  if (files.empty()) return swept;
  auto st = Write([&](Conn& c) -> Status {
    swept = {};
    for (const Quarantined& q : files) {
      auto take = c.Prepare(kTakeFile);
      if (!take.ok()) return take.error();
      take->Bind(1, q.hash).Bind(2, q.since);
      if (auto r = c.Run(*take, "take a file from the quarantine"); !r.ok()) return r;
      if (c.changes() == 0) continue;  // revived since the mark, or claimed: not ours to delete
      auto size = c.Prepare(kFileSize);
      if (!size.ok()) return size.error();
      size->Bind(1, q.hash);
      const int rc = size->Step();
      if (rc == SQLITE_DONE) continue;
      if (rc != SQLITE_ROW) return c.Err("read file", rc);
      const int64_t bytes = size->Int(0);
      std::vector<std::string> scopes;
      {
        auto list = c.Prepare(kFileScopes);
        if (!list.ok()) return list.error();
        list->Bind(1, q.hash);
        for (int s = list->Step(); s != SQLITE_DONE; s = list->Step()) {
          if (s != SQLITE_ROW) return c.Err("read file scopes", s);
          scopes.emplace_back(list->Text(0));
        }
      }
      for (const std::string& scope : scopes) {
        auto uncount = c.Prepare(kUncountScope);
        if (!uncount.ok()) return uncount.error();
        uncount->Bind(1, std::string_view(scope)).Bind(2, bytes);
        if (auto r = c.Run(*uncount, "uncount a scope's file"); !r.ok()) return r;
        auto drop = c.Prepare(kDropEmptyScope);
        if (!drop.ok()) return drop.error();
        drop->Bind(1, std::string_view(scope));
        if (auto r = c.Run(*drop, "drop an empty scope's totals"); !r.ok()) return r;
      }
      for (const char* sql : {kDeleteFileScopes, kDeleteFile}) {
        auto del = c.Prepare(sql);
        if (!del.ok()) return del.error();
        del->Bind(1, q.hash);
        if (auto r = c.Run(*del, "delete a file"); !r.ok()) return r;
      }
      ++swept.objects;
      swept.bytes += static_cast<uint64_t>(bytes);
    }
    if (swept.objects == 0) return Ok{};
    return Uncount(c, {}, 0, 0, swept);
  });
  if (!st.ok()) return st.error();
  return swept;
}

Result<std::vector<XorbHash>> SqliteIndex::ClaimXorbs(std::span<const Quarantined> xorbs, int64_t now) {
  std::vector<XorbHash> claimed;
  if (xorbs.empty()) return claimed;
  auto st = Write([&](Conn& c) -> Status {
    claimed.clear();
    std::vector<Hash> shards;  // those the claimed xorbs were in
    for (const Quarantined& q : xorbs) {
      auto claim = c.Prepare(kClaimXorb);
      if (!claim.ok()) return claim.error();
      claim->Bind(1, q.hash).Bind(2, q.since).Bind(3, now);
      if (auto r = c.Run(*claim, "claim a xorb"); !r.ok()) return r;
      if (c.changes() == 0) continue;  // revived since the mark
      auto of = c.Prepare(kShardsOfXorb);
      if (!of.ok()) return of.error();
      of->Bind(1, q.hash);
      for (int rc = of->Step(); rc != SQLITE_DONE; rc = of->Step()) {
        if (rc != SQLITE_ROW) return c.Err("read a xorb's shards", rc);
        if (auto h = of->HashCol(0)) shards.push_back(*h);
      }
      // What would name it to a client: its dedup entries, then the shard neighbourhoods it is in.
      for (const char* sql : {kDeleteDedupOfXorb, kDeleteNeighbourhoodOfXorb}) {
        auto del = c.Prepare(sql);
        if (!del.ok()) return del.error();
        del->Bind(1, q.hash);
        if (auto r = c.Run(*del, "unname a claimed xorb"); !r.ok()) return r;
      }
      claimed.push_back(q.hash);
    }
    for (const Hash& s : shards) {
      auto dead = c.Prepare(kClaimDeadShard);
      if (!dead.ok()) return dead.error();
      dead->Bind(1, s).Bind(2, now);
      if (auto r = c.Run(*dead, "claim a shard"); !r.ok()) return r;
    }
    return Ok{};
  });
  if (!st.ok()) return st.error();
  return claimed;
}

Result<SweptTotals> SqliteIndex::DropXorbs(std::span<const XorbHash> xorbs) {
  SweptTotals swept;
  if (xorbs.empty()) return swept;
  auto st = Write([&](Conn& c) -> Status {
    swept = {};
    int64_t chunks = 0;
    int64_t unpacked = 0;
    for (const XorbHash& x : xorbs) {
      auto take = c.Prepare(kTakeClaimedXorb);
      if (!take.ok()) return take.error();
      take->Bind(1, x);
      if (auto r = c.Run(*take, "take a claimed xorb"); !r.ok()) return r;
      if (c.changes() == 0) continue;
      auto sizes = c.Prepare(kXorbSizes);
      if (!sizes.ok()) return sizes.error();
      sizes->Bind(1, x);
      const int rc = sizes->Step();
      if (rc == SQLITE_DONE) continue;
      if (rc != SQLITE_ROW) return c.Err("read xorb", rc);
      chunks += sizes->Int(0);
      swept.bytes += static_cast<uint64_t>(sizes->Int(1));
      unpacked += sizes->Int(2);
      auto del = c.Prepare(kDeleteXorb);
      if (!del.ok()) return del.error();
      del->Bind(1, x);
      if (auto r = c.Run(*del, "delete a xorb"); !r.ok()) return r;
      ++swept.objects;
    }
    if (swept.objects == 0) return Ok{};
    return Uncount(c, swept, chunks, unpacked, {});
  });
  if (!st.ok()) return st.error();
  return swept;
}

// ---- Shards

// ---- Compaction

Result<std::vector<std::vector<std::string>>> SqliteIndex::FileScopes(std::span<const FileHash> files) {
  if (files.size() > kMaxFilesPerRead) return Malformed("too many files in one read");
  auto r = AcquireReader();
  if (!r.ok()) return r.error();
  std::vector<std::vector<std::string>> out(files.size());
  for (size_t i = 0; i < files.size(); ++i) {
    auto s = (*r)->Prepare(kFileScopesInOrder);
    if (!s.ok()) return s.error();
    s->Bind(1, files[i]);
    for (int rc = s->Step(); rc != SQLITE_DONE; rc = s->Step()) {
      if (rc != SQLITE_ROW) return (*r)->Err("read a file's scopes", rc);
      out[i].emplace_back(s->Text(0));
    }
  }
  return out;
}

Status SqliteIndex::Repoint(const Repointing& repointing) {
  if (auto st = CheckRepointing(repointing); !st.ok()) return st;
  return Write([&](Conn& c) -> Status {
    const int64_t now = options_.clock->UnixSeconds();
    {
      auto has = c.Prepare(kXorbUse);
      if (!has.ok()) return has.error();
      has->Bind(1, repointing.into);
      const int rc = has->Step();
      if (rc == SQLITE_DONE) return NamedXorbNotStored();
      if (rc != SQLITE_ROW) return c.Err("read xorb", rc);
    }
    for (const auto& shard : repointing.shards) {
      CommitOutcome outcome;
      if (auto st = RegisterShard(c, shard, now, outcome); !st.ok()) return st;
    }
    for (const auto& f : repointing.files) {
      auto up = c.Prepare(kRepointFile);
      if (!up.ok()) return up.error();
      up->Bind(1, f.hash).Bind(2, f.packed_terms);
      if (f.packed_ranges.empty()) {
        up->BindNull(3);
      } else {
        up->Bind(3, f.packed_ranges);
      }
      up->Bind(4, now)
          .Bind(5, f.record)
          .Bind(6, static_cast<int64_t>(f.packed_terms.size() / kPackedTermSize));
      if (auto r = c.Run(*up, "repoint a file"); !r.ok()) return r;
      if (c.changes() == 0) {
        return FileChangedSinceCompaction();
      }
    }
    for (const auto& x : repointing.replaced) {
      auto use = UseOf(c, x, nullptr);
      if (!use.ok()) return use.error();
      if (*use == XorbUse::kAbsent) return NamedXorbNotStored();
      if (*use == XorbUse::kBeingSwept) return NamedBeingDeleted();
      auto dedup = c.Prepare(kDeleteDedupOfXorb);
      if (!dedup.ok()) return dedup.error();
      dedup->Bind(1, x);
      if (auto r = c.Run(*dedup, "delete a replaced xorb's dedup entries"); !r.ok()) return r;
      auto mark = c.Prepare(kSupersede);
      if (!mark.ok()) return mark.error();
      mark->Bind(1, x).Bind(2, repointing.into).Bind(3, now);
      if (auto r = c.Run(*mark, "mark a xorb superseded"); !r.ok()) return r;
    }
    return Ok{};
  });
}

Result<std::vector<ShardScope>> SqliteIndex::ShardScopes(std::span<const Hash> shards) {
  auto r = AcquireReader();
  if (!r.ok()) return r.error();
  std::vector<ShardScope> out;
  for (const Hash& shard : shards) {
    auto s = (*r)->Prepare(kShardScopes);
    if (!s.ok()) return s.error();
    s->Bind(1, shard);
    for (int rc = s->Step(); rc != SQLITE_DONE; rc = s->Step()) {
      if (rc != SQLITE_ROW) return (*r)->Err("read a shard's scopes", rc);
      out.push_back({shard, std::string(s->Text(0))});
    }
  }
  return out;
}

Result<SweptTotals> SqliteIndex::DropShards(std::span<const Hash> shards) {
  SweptTotals swept;
  if (shards.empty()) return swept;
  auto st = Write([&](Conn& c) -> Status {
    swept = {};
    for (const Hash& shard : shards) {
      auto take = c.Prepare(kTakeClaimedShard);
      if (!take.ok()) return take.error();
      take->Bind(1, shard);
      if (auto r = c.Run(*take, "take a claimed shard"); !r.ok()) return r;
      if (c.changes() == 0) continue;
      auto size = c.Prepare(kShardSize);
      if (!size.ok()) return size.error();
      size->Bind(1, shard);
      const int rc = size->Step();
      if (rc != SQLITE_ROW && rc != SQLITE_DONE) return c.Err("read a shard", rc);
      const int64_t bytes = rc == SQLITE_ROW ? size->Int(0) : -1;
      // Its dedup entries went with its xorbs (each names one of them).
      for (const char* sql : {kDeleteShardScopes, kDeleteShard}) {
        auto del = c.Prepare(sql);
        if (!del.ok()) return del.error();
        del->Bind(1, shard);
        if (auto r = c.Run(*del, "delete a shard"); !r.ok()) return r;
      }
      if (bytes < 0) continue;
      auto uncount = c.Prepare(kUncountShard);
      if (!uncount.ok()) return uncount.error();
      uncount->Bind(1, bytes);
      if (auto r = c.Run(*uncount, "count what was swept"); !r.ok()) return r;
      ++swept.objects;
      swept.bytes += static_cast<uint64_t>(bytes);
    }
    return Ok{};
  });
  if (!st.ok()) return st.error();
  return swept;
}

// ---- Repository objects

Result<std::vector<RepoObjectMark>> SqliteIndex::ScanRepoObjects(
    int64_t repo, const std::optional<std::vector<uint8_t>>& after, size_t limit) {
  if (limit > kMaxScanned) return Malformed("at most " + std::to_string(kMaxScanned) + " objects a page");
  auto r = AcquireReader();
  if (!r.ok()) return r.error();
  auto s = (*r)->Prepare(kScanRepoObjects);
  if (!s.ok()) return s.error();
  s->Bind(1, repo).Bind(2, after ? std::span<const uint8_t>(*after) : std::span<const uint8_t>());
  s->Bind(3, static_cast<int64_t>(limit));
  std::vector<RepoObjectMark> out;
  for (;;) {
    const int rc = s->Step();
    if (rc == SQLITE_DONE) return out;
    if (rc != SQLITE_ROW) return (*r)->Err("scan a repository's objects", rc);
    const auto key = s->Blob(0);
    out.push_back({{key.begin(), key.end()}, static_cast<uint64_t>(s->Int(1)), s->Int(2)});
  }
}

Status SqliteIndex::QuarantineRepoObjects(int64_t repo, const std::vector<std::vector<uint8_t>>& keys,
                                          int64_t since) {
  if (keys.size() > kMaxScanned) return Malformed("too many objects in one request");
  if (keys.empty()) return Ok{};
  return Write([&](Conn& c) -> Status {
    for (const auto& key : keys) {
      auto put = c.Prepare(kQuarantineObject);
      if (!put.ok()) return put.error();
      put->Bind(1, repo).Bind(2, std::span<const uint8_t>(key)).Bind(3, since);
      if (auto st = c.Run(*put, "quarantine an object"); !st.ok()) return st;
    }
    return Ok{};
  });
}

Status SqliteIndex::ReleaseRepoObjects(int64_t repo, const std::vector<std::vector<uint8_t>>& keys) {
  if (keys.size() > kMaxScanned) return Malformed("too many objects in one request");
  if (keys.empty()) return Ok{};
  return Write([&](Conn& c) -> Status {
    for (const auto& key : keys) {
      auto release = c.Prepare(kReleaseObject);
      if (!release.ok()) return release.error();
      release->Bind(1, repo).Bind(2, std::span<const uint8_t>(key));
      if (auto st = c.Run(*release, "release an object"); !st.ok()) return st;
    }
    return Ok{};
  });
}

Result<SweptTotals> SqliteIndex::SweepRepoObjects(int64_t repo, std::span<const RepoObjectMark> objects) {
  if (objects.size() > kMaxScanned) return Malformed("too many objects in one request");
  SweptTotals swept;
  if (objects.empty()) return swept;
  auto st = Write([&](Conn& c) -> Status {
    swept = {};
    for (const RepoObjectMark& o : objects) {
      auto take = c.Prepare(kTakeObject);
      if (!take.ok()) return take.error();
      take->Bind(1, repo).Bind(2, std::span<const uint8_t>(o.key)).Bind(3, o.since);
      if (auto r = c.Run(*take, "take a quarantined object"); !r.ok()) return r;
      if (c.changes() == 0) continue;  // revived since the mark
      auto size = c.Prepare(kObjectSize);
      if (!size.ok()) return size.error();
      size->Bind(1, repo).Bind(2, std::span<const uint8_t>(o.key));
      const int rc = size->Step();
      if (rc == SQLITE_DONE) continue;
      if (rc != SQLITE_ROW) return c.Err("read an object", rc);
      swept.bytes += static_cast<uint64_t>(size->Int(0));
      auto del = c.Prepare(kDeleteObject);
      if (!del.ok()) return del.error();
      del->Bind(1, repo).Bind(2, std::span<const uint8_t>(o.key));
      if (auto r = c.Run(*del, "delete an object"); !r.ok()) return r;
      ++swept.objects;
    }
    return Ok{};
  });
  if (!st.ok()) return st.error();
  return swept;
}

Result<std::string> SqliteIndex::ScrubDeleted(bool vacuum) {
  // A connection of its own: VACUUM and a checkpoint cannot run inside the writer's transactions. Deleted
  // rows were zeroed where they lay (the writer's secure_delete); what is left is the write-ahead log, whose
  // old frames hold pages as they were before, and with `vacuum` the free pages' space.
  Conn c;
  if (auto st = c.Open(options_.path, /*read_only=*/false, options_.busy_timeout_ms); !st.ok())
    return st.error();
  if (auto st = c.Exec("PRAGMA secure_delete = ON"); !st.ok()) return st.error();
  std::string done;
  if (vacuum) {
    if (auto st = c.Exec("VACUUM"); !st.ok()) return st.error();
    done = "vacuumed; ";
  }
  // TRUNCATE waits for readers (the busy timeout) and answers busy when one stayed: try again a few times.
  for (int attempt = 0; attempt < 20; ++attempt) {
    auto s = c.Prepare(kTruncateLog);
    if (!s.ok()) return s.error();
    const int rc = s->Step();
    if (rc != SQLITE_ROW) return c.Err("checkpoint", rc);
    const bool busy = s->Int(0) != 0;
    if (!busy) return done + "write-ahead log truncated";
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return Unavailable("sqlite: readers kept the write-ahead log from being truncated; run again");
}

Result<std::unique_ptr<GcLock>> SqliteIndex::LockGc() {
  // One box: a lock on a file beside the database, which the kernel drops when the process dies.
  const std::string path = options_.path + "-gc.lock";
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  if (!fd.valid()) return IoError("open " + path + ": " + ErrnoText(errno));
  while (::flock(fd.get(), LOCK_EX) != 0) {
    if (errno != EINTR) return IoError("lock " + path + ": " + ErrnoText(errno));
  }
  return std::unique_ptr<GcLock>(new FileGcLock(std::move(fd)));
}

Result<std::unique_ptr<GcLock>> SqliteIndex::HoldDeletions(DeletionHold mode, bool wait) {
  const std::string path = options_.path + "-deletions.lock";
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  if (!fd.valid()) return IoError("open " + path + ": " + ErrnoText(errno));
  const int op = (mode == DeletionHold::kShared ? LOCK_SH : LOCK_EX) | (wait ? 0 : LOCK_NB);
  while (::flock(fd.get(), op) != 0) {
    if (errno == EWOULDBLOCK && !wait) return std::unique_ptr<GcLock>();
    if (errno != EINTR) return IoError("lock " + path + ": " + ErrnoText(errno));
  }
  return std::unique_ptr<GcLock>(new FileGcLock(std::move(fd)));
}

}  // namespace cairn::index
