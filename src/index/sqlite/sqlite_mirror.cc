// The SQLite backend's mirror slice (index.h's MirrorIndex): leases, one row per name, taken by an upsert
// whose update applies only to the holder's own row or a lapsed one; reads, one row per repository.
#include <string>

#include "index/records.h"
#include "index/sqlite/sqlite_conn.h"
#include "index/sqlite/sqlite_index.h"

namespace cairn::index {

namespace {

// ?1 name, ?2 holder, ?3 now, ?4 expires.
constexpr const char kTakeLease[] =
    "INSERT INTO leases(name, holder, expires) VALUES (?1, ?2, ?4) "
    "ON CONFLICT(name) DO UPDATE SET holder = excluded.holder, expires = excluded.expires "
    "WHERE leases.holder = excluded.holder OR leases.expires <= ?3";
constexpr const char kDropLease[] = "DELETE FROM leases WHERE name = ?1 AND holder = ?2";
constexpr const char kLeaseHolder[] = "SELECT holder FROM leases WHERE name = ?1 AND expires > ?2";
// ?1 repo, ?2 at. The repository must exist (no row for one deleted meanwhile: its cascade ran already).
constexpr const char kNoteMirrorRead[] =
    "INSERT INTO mirror_reads(repo, last_read) SELECT ?1, ?2 WHERE EXISTS (SELECT 1 FROM repos WHERE id = "
    "?1) "
    "ON CONFLICT(repo) DO UPDATE SET last_read = max(last_read, excluded.last_read)";
constexpr const char kListMirrorReads[] = "SELECT repo, last_read FROM mirror_reads ORDER BY last_read, repo";

}  // namespace

Result<bool> SqliteIndex::TakeLease(std::string_view name, std::string_view holder, int64_t now,
                                    int64_t expires) {
  if (auto st = CheckLeaseNames(name, holder); !st.ok()) return st.error();
  bool taken = false;
  auto st = Write([&](Conn& c) -> Status {
    auto s = c.Prepare(kTakeLease);
    if (!s.ok()) return s.error();
    s->Bind(1, name);
    s->Bind(2, holder);
    s->Bind(3, now);
    s->Bind(4, expires);
    if (auto run = c.Run(*s, "take lease"); !run.ok()) return run;
    taken = c.changes() == 1;
    return Ok{};
  });
  if (!st.ok()) return st.error();
  return taken;
}

Status SqliteIndex::DropLease(std::string_view name, std::string_view holder) {
  if (auto st = CheckLeaseNames(name, holder); !st.ok()) return st;
  return Write([&](Conn& c) -> Status {
    auto s = c.Prepare(kDropLease);
    if (!s.ok()) return s.error();
    s->Bind(1, name);
    s->Bind(2, holder);
    return c.Run(*s, "drop lease");
  });
}

Result<std::optional<std::string>> SqliteIndex::LeaseHolder(std::string_view name, int64_t now) {
  if (auto st = CheckLeaseName(name); !st.ok()) return st.error();
  auto r = AcquireReader();
  if (!r.ok()) return r.error();
  auto s = (*r)->Prepare(kLeaseHolder);
  if (!s.ok()) return s.error();
  s->Bind(1, name);
  s->Bind(2, now);
  const int rc = s->Step();
  if (rc == SQLITE_DONE) return std::optional<std::string>();
  if (rc != SQLITE_ROW) return (*r)->Err("read lease", rc);
  return std::optional<std::string>(std::string(s->Text(0)));
}

Status SqliteIndex::NoteMirrorRead(int64_t repo, int64_t at) {
  return Write([&](Conn& c) -> Status {
    auto s = c.Prepare(kNoteMirrorRead);
    if (!s.ok()) return s.error();
    s->Bind(1, repo);
    s->Bind(2, at);
    if (auto run = c.Run(*s, "note mirror read"); !run.ok()) return run;
    if (c.changes() == 0) return NotFound("no repository " + std::to_string(repo));
    return Ok{};
  });
}

Result<std::vector<MirrorRead>> SqliteIndex::ListMirrorReads() {
  auto r = AcquireReader();
  if (!r.ok()) return r.error();
  auto s = (*r)->Prepare(kListMirrorReads);
  if (!s.ok()) return s.error();
  std::vector<MirrorRead> out;
  int rc = SQLITE_ROW;
  while ((rc = s->Step()) == SQLITE_ROW) out.push_back(MirrorRead{.repo = s->Int(0), .last_read = s->Int(1)});
  if (rc != SQLITE_DONE) return (*r)->Err("list mirror reads", rc);
  return out;
}

}  // namespace cairn::index
