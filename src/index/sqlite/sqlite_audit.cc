// The SQLite backend's audit log (index.h's AuditIndex): events written by the changes' own transactions
// (WriteAudit) or alone (AppendAudit), listed newest first, pruned by age.
#include <optional>
#include <string>
#include <vector>

#include "index/failures.h"
#include "index/sqlite/sqlite_conn.h"
#include "index/sqlite/sqlite_index.h"

namespace cairn::index {

namespace {

using sqlite_internal::Stmt;

constexpr const char kInsertAudit[] =
    "INSERT INTO audit_events(at, actor, token_id, client, action, ns, target, detail) "
    "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)";
// ?1 before id (NULL: newest), ?2 since, ?3 actor, ?4 ns, ?5 target (NULL: any), ?6 limit, ?7 the lowest id
// `since` can reach (0: any).
constexpr const char kListAudit[] =
    "SELECT id, at, actor, token_id, client, action, ns, target, detail FROM audit_events "
    "WHERE (?1 IS NULL OR id < ?1) AND (?2 IS NULL OR at >= ?2) AND (?3 IS NULL OR actor = ?3) "
    "AND (?4 IS NULL OR ns = ?4) AND (?5 IS NULL OR target = ?5) AND id >= ?7 ORDER BY id DESC LIMIT ?6";
constexpr const char kAuditIds[] = "SELECT min(id), max(id) FROM audit_events";
constexpr const char kAuditAtOrAfter[] = "SELECT id, at FROM audit_events WHERE id >= ?1 ORDER BY id LIMIT 1";
// Events are written in time order, up to the clocks of the nodes writing them: a bound found by time is
// taken this much earlier, so that an event a node with a slower clock wrote is not left out.
constexpr int64_t kClockSkew = 300;
// The events before the first one at or after ?1 in id order (the log's time order: no index by time), read
// from the oldest; never the newest event (the next id is the largest plus one: ids only grow).
constexpr const char kPruneAudit[] =
    "DELETE FROM audit_events WHERE id < coalesce((SELECT id FROM audit_events WHERE at >= ?1 ORDER BY id "
    "LIMIT 1), (SELECT max(id) FROM audit_events))";

AuditEvent EventFromRow(const Stmt& s) {
  return AuditEvent{.id = s.Int(0),
                    .at = s.Int(1),
                    .actor = std::string(s.Text(2)),
                    .token_id = std::string(s.Text(3)),
                    .client = std::string(s.Text(4)),
                    .action = std::string(s.Text(5)),
                    .ns = std::string(s.Text(6)),
                    .target = std::string(s.Text(7)),
                    .detail = std::string(s.Text(8))};
}

template <typename T>
void BindOptional(Stmt& s, int i, const std::optional<T>& v) {
  if (v) {
    s.Bind(i, *v);
  } else {
    s.BindNull(i);
  }
}

}  // namespace

Status SqliteIndex::WriteAudit(Conn& c, const AuditEvent* event) {
  if (event == nullptr) return Ok{};
  auto s = c.Prepare(kInsertAudit);
  if (!s.ok()) return s.error();
  s->Bind(1, event->at).Bind(2, event->actor).Bind(3, event->token_id).Bind(4, event->client);
  s->Bind(5, event->action).Bind(6, event->ns).Bind(7, event->target).Bind(8, event->detail);
  return c.Run(*s, "write audit event");
}

Status SqliteIndex::AppendAudit(const AuditEvent& event) {
  return Write([&](Conn& c) { return WriteAudit(c, &event); });
}

// The lowest id an event at or after `since` can have, by a binary search of the ids (each probe one seek):
// events are in time order by id, up to kClockSkew.
Result<int64_t> SqliteIndex::FirstAuditIdSince(Conn& c, int64_t since) {
  auto ids = c.Prepare(kAuditIds);
  if (!ids.ok()) return ids.error();
  if (const int rc = ids->Step(); rc != SQLITE_ROW) return c.Err("read audit ids", rc);
  if (ids->IsNull(0)) return int64_t{0};
  int64_t lo = ids->Int(0);
  int64_t hi = ids->Int(1) + 1;  // past every event: none is recent enough
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    auto probe = c.Prepare(kAuditAtOrAfter);  // reset when this borrow ends
    if (!probe.ok()) return probe.error();
    probe->Bind(1, mid);
    const int rc = probe->Step();
    if (rc == SQLITE_DONE) {
      hi = mid;
      continue;
    }
    if (rc != SQLITE_ROW) return c.Err("search audit events", rc);
    const int64_t id = probe->Int(0);
    const int64_t at = probe->Int(1);
    if (at >= since - kClockSkew) {
      hi = mid;
    } else {
      lo = id + 1;
    }
  }
  return lo;
}

Result<std::vector<AuditEvent>> SqliteIndex::ListAudit(const AuditFilter& filter,
                                                       std::optional<int64_t> before, size_t limit) {
  if (auto st = CheckPageLimit(limit, AuditIndex::kMaxListed); !st.ok()) return st.error();
  auto r = AcquireReader();
  if (!r.ok()) return r.error();
  int64_t lowest = 0;
  if (filter.since) {
    auto first = FirstAuditIdSince(**r, *filter.since);
    if (!first.ok()) return first.error();
    lowest = *first;
  }
  auto s = (*r)->Prepare(kListAudit);
  if (!s.ok()) return s.error();
  BindOptional(*s, 1, before);
  BindOptional(*s, 2, filter.since);
  BindOptional(*s, 3, filter.actor);
  BindOptional(*s, 4, filter.ns);
  BindOptional(*s, 5, filter.target);
  s->Bind(6, static_cast<int64_t>(limit)).Bind(7, lowest);
  std::vector<AuditEvent> out;
  int rc = SQLITE_ROW;
  while ((rc = s->Step()) == SQLITE_ROW) out.push_back(EventFromRow(*s));
  if (rc != SQLITE_DONE) return (*r)->Err("list audit events", rc);
  return out;
}

Result<uint64_t> SqliteIndex::PruneAudit(int64_t before) {
  uint64_t pruned = 0;
  auto st = Write([&](Conn& c) -> Status {
    auto s = c.Prepare(kPruneAudit);
    if (!s.ok()) return s.error();
    s->Bind(1, before);
    if (auto run = c.Run(*s, "prune audit events"); !run.ok()) return run;
    pruned = static_cast<uint64_t>(c.changes());
    return Ok{};
  });
  if (!st.ok()) return st.error();
  return pruned;
}

}  // namespace cairn::index
