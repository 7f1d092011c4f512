// The PostgreSQL backend's quota slice (index.h's QuotaIndex), one statement per call: READ COMMITTED
// re-checks an UPDATE's condition on the newest row, so two nodes charging at once never pass the limit.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "index/postgres/postgres_index.h"

namespace cairn::index {

namespace {

constexpr pg::Statement kGetQuota{
    "get_quota",
    "SELECT namespace, limit_bytes, used_bytes, pending_bytes, reserved_bytes, reserved_at, measured_at, "
    "generation, stale "
    "FROM quotas WHERE namespace = $1::text"};
constexpr pg::Statement kListQuotas{
    "list_quotas",
    "SELECT namespace, limit_bytes, used_bytes, pending_bytes, reserved_bytes, reserved_at, measured_at, "
    "generation, stale "
    "FROM quotas WHERE namespace > $1::text ORDER BY namespace LIMIT $2::int8"};
// $3..$10: the audit event (NULLs: none), written in the statement that makes the change.
const std::string kSetQuotaLimitSql =
    R"sql(
WITH q AS (
  INSERT INTO quotas(namespace, limit_bytes) VALUES ($1::text, $2::int8)
  ON CONFLICT (namespace) DO UPDATE SET limit_bytes = EXCLUDED.limit_bytes RETURNING 1),
)sql" +
    AuditCte(3, "q") + R"sql(SELECT count(*)::int8 FROM q)sql";
const pg::Statement kSetQuotaLimit{"set_quota_limit", kSetQuotaLimitSql.c_str()};
// $2..$9: the audit event, written only when a record was deleted.
const std::string kDeleteQuotaSql =
    R"sql(
WITH d AS (DELETE FROM quotas WHERE namespace = $1::text RETURNING namespace),
)sql" +
    AuditCte(2, "d") + R"sql(SELECT namespace FROM d)sql";
const pg::Statement kDeleteQuota{"delete_quota", kDeleteQuotaSql.c_str()};
constexpr pg::Statement kSettleQuota{
    "settle_quota",
    "UPDATE quotas SET reserved_bytes = GREATEST(reserved_bytes - $2::int8, 0), "
    "pending_bytes = pending_bytes + CASE WHEN $3::bool THEN $2::int8 ELSE 0 END WHERE namespace = $1::text"};
// $2 used, $3 pending seen, $4 charge, $5 measured at, $6 generation seen, $7 oldest reservation kept.
constexpr pg::Statement kRecordQuotaMeasure{"record_quota_measure", R"sql(
UPDATE quotas SET used_bytes = $2::int8, pending_bytes = GREATEST(pending_bytes - $3::int8, 0),
  reserved_bytes = CASE WHEN reserved_at < $7::int8 THEN 0 ELSE reserved_bytes END + $4::int8,
  reserved_at = CASE WHEN $4::int8 > 0 THEN $5::int8 ELSE reserved_at END,
  measured_at = $5::int8, generation = generation + 1, stale = false
WHERE namespace = $1::text AND generation = $6::int8 AND ($4::int8 = 0 OR limit_bytes IS NULL OR
  $2::int8 + GREATEST(pending_bytes - $3::int8, 0) + CASE WHEN reserved_at < $7::int8 THEN 0 ELSE reserved_bytes END
  + $4::int8 <= limit_bytes)
RETURNING namespace)sql"};
constexpr pg::Statement kMarkQuotaStale{
    "mark_quota_stale",
    "UPDATE quotas SET stale = true, generation = generation + 1 WHERE namespace = $1::text"};
constexpr pg::Statement kMarkAllQuotasStale{"mark_all_quotas_stale",
                                            "UPDATE quotas SET stale = true, generation = generation + 1"};

QuotaRecord QuotaFromRow(const pg::Rows& rows, int i) {
  QuotaRecord q;
  q.ns = std::string(rows.Text(i, 0));
  if (!rows.IsNull(i, 1)) q.limit = static_cast<uint64_t>(rows.Int8(i, 1));
  q.used = static_cast<uint64_t>(rows.Int8(i, 2));
  q.pending = static_cast<uint64_t>(rows.Int8(i, 3));
  q.reserved = static_cast<uint64_t>(rows.Int8(i, 4));
  q.reserved_at = rows.Int8(i, 5);
  q.measured_at = rows.Int8(i, 6);
  q.generation = rows.Int8(i, 7);
  q.stale = rows.Bool(i, 8);
  return q;
}

Status CheckBytes(uint64_t bytes) {
  if (bytes > static_cast<uint64_t>(INT64_MAX)) return Malformed("a byte count past 2^63 - 1");
  return Ok{};
}

}  // namespace

Result<std::optional<QuotaRecord>> PostgresIndex::GetQuota(std::string_view ns) {
  auto rows = Query(kGetQuota, pg::Params().Text(ns));
  if (!rows.ok()) return rows.error();
  if (rows->size() == 0) return std::optional<QuotaRecord>();
  return std::optional<QuotaRecord>(QuotaFromRow(*rows, 0));
}

Result<std::vector<QuotaRecord>> PostgresIndex::ListQuotas(std::optional<std::string_view> after,
                                                           size_t limit) {
  if (limit > kMaxListedQuotas) return Malformed("at most " + std::to_string(kMaxListedQuotas) + " quotas");
  auto rows = Query(kListQuotas, pg::Params().Text(after.value_or("")).Int8(static_cast<int64_t>(limit)));
  if (!rows.ok()) return rows.error();
  std::vector<QuotaRecord> out;
  for (int i = 0; i < rows->size(); ++i) out.push_back(QuotaFromRow(*rows, i));
  return out;
}

Status PostgresIndex::SetQuotaLimit(std::string_view ns, std::optional<uint64_t> limit,
                                    const AuditEvent* audit) {
  pg::Params p;
  p.Text(ns);
  if (limit) {
    if (auto st = CheckBytes(*limit); !st.ok()) return st;
    p.Int8(static_cast<int64_t>(*limit));
  } else {
    p.Null();
  }
  AuditParams(p, audit);
  auto rows = Query(kSetQuotaLimit, p);
  if (!rows.ok()) return rows.error();
  return Ok{};
}

Result<bool> PostgresIndex::DeleteQuota(std::string_view ns, const AuditEvent* audit) {
  pg::Params p;
  p.Text(ns);
  AuditParams(p, audit);
  auto rows = Query(kDeleteQuota, p);
  if (!rows.ok()) return rows.error();
  return rows->size() == 1;
}

Status PostgresIndex::QuotaChargeParams(pg::Params& params, const QuotaCharge* charge) const {
  if (charge == nullptr) {
    params.Null().Int8(0).Int8(0).Int8(0).Bool(false).Int8(0);
    return Ok{};
  }
  for (uint64_t v : {charge->publish, charge->reserve, charge->settle}) {
    if (auto st = CheckBytes(v); !st.ok()) return st;
  }
  params.Text(charge->ns)
      .Int8(static_cast<int64_t>(charge->publish))
      .Int8(static_cast<int64_t>(charge->reserve))
      .Int8(static_cast<int64_t>(charge->settle))
      .Bool(charge->check)
      .Int8(options_.clock->UnixSeconds());
  return Ok{};
}

Status PostgresIndex::SettleQuota(std::string_view ns, uint64_t bytes, bool published) {
  if (auto st = CheckBytes(bytes); !st.ok()) return st;
  auto rows = Query(kSettleQuota, pg::Params().Text(ns).Int8(static_cast<int64_t>(bytes)).Bool(published));
  if (!rows.ok()) return rows.error();
  return Ok{};
}

Result<bool> PostgresIndex::RecordQuotaMeasure(std::string_view ns, const QuotaMeasure& measure,
                                               uint64_t charge) {
  for (uint64_t v : {measure.used, measure.pending_seen, charge}) {
    if (auto st = CheckBytes(v); !st.ok()) return st.error();
  }
  auto rows = Query(kRecordQuotaMeasure, pg::Params()
                                             .Text(ns)
                                             .Int8(static_cast<int64_t>(measure.used))
                                             .Int8(static_cast<int64_t>(measure.pending_seen))
                                             .Int8(static_cast<int64_t>(charge))
                                             .Int8(measure.at)
                                             .Int8(measure.generation_seen)
                                             .Int8(measure.at - kQuotaReservationLife));
  if (!rows.ok()) return rows.error();
  return rows->size() == 1;
}

Status PostgresIndex::MarkQuotaStale(std::optional<std::string_view> ns) {
  auto rows = ns ? Query(kMarkQuotaStale, pg::Params().Text(*ns)) : Query(kMarkAllQuotasStale, pg::Params());
  if (!rows.ok()) return rows.error();
  return Ok{};
}

}  // namespace cairn::index
