// The SQLite backend's quota slice (index.h's QuotaIndex): one row per namespace with a quota.
#include <optional>
#include <string>
#include <vector>

#include "index/failures.h"
#include "index/sqlite/sqlite_conn.h"
#include "index/sqlite/sqlite_index.h"

namespace cairn::index {

namespace {

// Statements. Their addresses key each connection's prepared-statement cache.
constexpr const char kGetQuota[] =
    "SELECT namespace, limit_bytes, used_bytes, pending_bytes, reserved_bytes, reserved_at, measured_at, "
    "generation, stale "
    "FROM quotas WHERE namespace = ?1";
constexpr const char kListQuotas[] =
    "SELECT namespace, limit_bytes, used_bytes, pending_bytes, reserved_bytes, reserved_at, measured_at, "
    "generation, stale "
    "FROM quotas WHERE namespace > ?1 ORDER BY namespace LIMIT ?2";
constexpr const char kSetQuotaLimit[] =
    "INSERT INTO quotas(namespace, limit_bytes) VALUES (?1, ?2) "
    "ON CONFLICT(namespace) DO UPDATE SET limit_bytes = excluded.limit_bytes";
constexpr const char kDeleteQuota[] = "DELETE FROM quotas WHERE namespace = ?1";
// ?2 publish, ?3 reserve, ?4 settle, ?5 check (1/0), ?6 now.
constexpr const char kApplyQuotaCharge[] = R"sql(
UPDATE quotas SET pending_bytes = pending_bytes + ?2 + ?4, reserved_bytes = max(reserved_bytes - ?4, 0) + ?3,
  reserved_at = CASE WHEN ?3 > 0 THEN ?6 ELSE reserved_at END
WHERE namespace = ?1 AND (?5 = 0 OR limit_bytes IS NULL
  OR used_bytes + pending_bytes + reserved_bytes + ?2 + ?3 <= limit_bytes))sql";
// ?2 bytes, ?3 1: published.
constexpr const char kSettleQuota[] =
    "UPDATE quotas SET reserved_bytes = max(reserved_bytes - ?2, 0), "
    "pending_bytes = pending_bytes + CASE WHEN ?3 = 1 THEN ?2 ELSE 0 END WHERE namespace = ?1";
constexpr const char kHasQuota[] = "SELECT 1 FROM quotas WHERE namespace = ?1";
// ?2 used, ?3 pending seen, ?4 charge, ?5 measured at, ?6 generation seen, ?7 oldest reservation kept.
constexpr const char kRecordQuotaMeasure[] = R"sql(
UPDATE quotas SET used_bytes = ?2, pending_bytes = max(pending_bytes - ?3, 0),
  reserved_bytes = CASE WHEN reserved_at < ?7 THEN 0 ELSE reserved_bytes END + ?4,
  reserved_at = CASE WHEN ?4 > 0 THEN ?5 ELSE reserved_at END,
  measured_at = ?5, generation = generation + 1, stale = 0
WHERE namespace = ?1 AND generation = ?6 AND (?4 = 0 OR limit_bytes IS NULL OR
  ?2 + max(pending_bytes - ?3, 0) + CASE WHEN reserved_at < ?7 THEN 0 ELSE reserved_bytes END + ?4 <= limit_bytes))sql";
constexpr const char kMarkQuotaStale[] =
    "UPDATE quotas SET stale = 1, generation = generation + 1 WHERE namespace = ?1";
constexpr const char kMarkAllQuotasStale[] = "UPDATE quotas SET stale = 1, generation = generation + 1";

QuotaRecord QuotaFromRow(const sqlite_internal::Stmt& s) {
  QuotaRecord q;
  q.ns = std::string(s.Text(0));
  if (!s.IsNull(1)) q.limit = static_cast<uint64_t>(s.Int(1));
  q.used = static_cast<uint64_t>(s.Int(2));
  q.pending = static_cast<uint64_t>(s.Int(3));
  q.reserved = static_cast<uint64_t>(s.Int(4));
  q.reserved_at = s.Int(5);
  q.measured_at = s.Int(6);
  q.generation = s.Int(7);
  q.stale = s.Int(8) != 0;
  return q;
}

// Byte counts are stored as SQLite's signed 64-bit integers.
Status CheckBytes(uint64_t bytes) {
  if (bytes > static_cast<uint64_t>(INT64_MAX)) return Malformed("a byte count past 2^63 - 1");
  return Ok{};
}

}  // namespace

Result<std::optional<QuotaRecord>> SqliteIndex::GetQuota(std::string_view ns) {
  auto r = AcquireReader();
  if (!r.ok()) return r.error();
  auto s = (*r)->Prepare(kGetQuota);
  if (!s.ok()) return s.error();
  s->Bind(1, ns);
  const int rc = s->Step();
  if (rc == SQLITE_DONE) return std::optional<QuotaRecord>();
  if (rc != SQLITE_ROW) return (*r)->Err("read quota", rc);
  return std::optional<QuotaRecord>(QuotaFromRow(*s));
}

Result<std::vector<QuotaRecord>> SqliteIndex::ListQuotas(std::optional<std::string_view> after,
                                                         size_t limit) {
  if (limit > kMaxListedQuotas) return Malformed("at most " + std::to_string(kMaxListedQuotas) + " quotas");
  auto r = AcquireReader();
  if (!r.ok()) return r.error();
  auto s = (*r)->Prepare(kListQuotas);
  if (!s.ok()) return s.error();
  s->Bind(1, after.value_or("")).Bind(2, static_cast<int64_t>(limit));
  std::vector<QuotaRecord> out;
  int rc = SQLITE_ROW;
  while ((rc = s->Step()) == SQLITE_ROW) out.push_back(QuotaFromRow(*s));
  if (rc != SQLITE_DONE) return (*r)->Err("list quotas", rc);
  return out;
}

Status SqliteIndex::SetQuotaLimit(std::string_view ns, std::optional<uint64_t> limit,
                                  const AuditEvent* audit) {
  if (limit) {
    if (auto st = CheckBytes(*limit); !st.ok()) return st;
  }
  return Write([&](Conn& c) -> Status {
    auto s = c.Prepare(kSetQuotaLimit);
    if (!s.ok()) return s.error();
    s->Bind(1, ns);
    if (limit) {
      s->Bind(2, static_cast<int64_t>(*limit));
    } else {
      s->BindNull(2);
    }
    if (auto run = c.Run(*s, "set quota"); !run.ok()) return run;
    return WriteAudit(c, audit);
  });
}

Result<bool> SqliteIndex::DeleteQuota(std::string_view ns, const AuditEvent* audit) {
  bool deleted = false;
  auto st = Write([&](Conn& c) -> Status {
    auto s = c.Prepare(kDeleteQuota);
    if (!s.ok()) return s.error();
    s->Bind(1, ns);
    if (auto run = c.Run(*s, "delete quota"); !run.ok()) return run;
    deleted = c.changes() == 1;
    return deleted ? WriteAudit(c, audit) : Status(Ok{});
  });
  if (!st.ok()) return st.error();
  return deleted;
}

Status SqliteIndex::ApplyQuotaCharge(Conn& c, const QuotaCharge& charge) {
  for (uint64_t v : {charge.publish, charge.reserve, charge.settle}) {
    if (auto st = CheckBytes(v); !st.ok()) return st;
  }
  auto s = c.Prepare(kApplyQuotaCharge);
  if (!s.ok()) return s.error();
  s->Bind(1, std::string_view(charge.ns))
      .Bind(2, static_cast<int64_t>(charge.publish))
      .Bind(3, static_cast<int64_t>(charge.reserve))
      .Bind(4, static_cast<int64_t>(charge.settle))
      .Bind(5, int64_t{charge.check ? 1 : 0})
      .Bind(6, options_.clock->UnixSeconds());
  if (auto run = c.Run(*s, "charge quota"); !run.ok()) return run;
  if (c.changes() == 1) return Ok{};
  auto has = c.Prepare(kHasQuota);  // no record: no quota to keep
  if (!has.ok()) return has.error();
  has->Bind(1, std::string_view(charge.ns));
  const int rc = has->Step();
  if (rc == SQLITE_DONE) return Ok{};
  if (rc != SQLITE_ROW) return c.Err("read quota", rc);
  return QuotaHasNoRoom();
}

Status SqliteIndex::SettleQuota(std::string_view ns, uint64_t bytes, bool published) {
  if (auto st = CheckBytes(bytes); !st.ok()) return st;
  return Write([&](Conn& c) -> Status {
    auto s = c.Prepare(kSettleQuota);
    if (!s.ok()) return s.error();
    s->Bind(1, ns).Bind(2, static_cast<int64_t>(bytes)).Bind(3, int64_t{published ? 1 : 0});
    return c.Run(*s, "settle quota");
  });
}

Result<bool> SqliteIndex::RecordQuotaMeasure(std::string_view ns, const QuotaMeasure& measure,
                                             uint64_t charge) {
  for (uint64_t v : {measure.used, measure.pending_seen, charge}) {
    if (auto st = CheckBytes(v); !st.ok()) return st.error();
  }
  bool recorded = false;
  auto st = Write([&](Conn& c) -> Status {
    auto s = c.Prepare(kRecordQuotaMeasure);
    if (!s.ok()) return s.error();
    s->Bind(1, ns)
        .Bind(2, static_cast<int64_t>(measure.used))
        .Bind(3, static_cast<int64_t>(measure.pending_seen))
        .Bind(4, static_cast<int64_t>(charge))
        .Bind(5, measure.at)
        .Bind(6, measure.generation_seen)
        .Bind(7, measure.at - kQuotaReservationLife);
    if (auto run = c.Run(*s, "record quota measure"); !run.ok()) return run;
    recorded = c.changes() == 1;
    return Ok{};
  });
  if (!st.ok()) return st.error();
  return recorded;
}

Status SqliteIndex::MarkQuotaStale(std::optional<std::string_view> ns) {
  return Write([&](Conn& c) -> Status {
    if (!ns) return c.Step(kMarkAllQuotasStale);
    auto s = c.Prepare(kMarkQuotaStale);
    if (!s.ok()) return s.error();
    s->Bind(1, *ns);
    return c.Run(*s, "mark quota stale");
  });
}

}  // namespace cairn::index
