// The PostgreSQL backend's audit log (index.h's AuditIndex). A change's event is written by the change's own
// statement: each audited statement ends with a CTE that inserts its eight parameters (AuditParams) into
// audit_events from the CTE that made the change, so the event exists exactly when the change does, in the
// same transaction. AppendAudit writes an event alone.
#include <optional>
#include <string>
#include <vector>

#include "index/failures.h"
#include "index/postgres/postgres_index.h"

namespace cairn::index {

namespace {

constexpr pg::Statement kAppendAudit{"append_audit", R"sql(
INSERT INTO audit_events(at, actor, token_id, client, action, ns, target, detail)
VALUES ($1::int8, $2::text, $3::text, $4::text, $5::text, $6::text, $7::text, $8::text))sql"};
// $1 before id (NULL: newest), $2 since, $3 actor, $4 ns, $5 target (NULL: any), $6 limit.
constexpr pg::Statement kListAudit{"list_audit", R"sql(
SELECT id, at, actor, token_id, client, action, ns, target, detail FROM audit_events
WHERE ($1::int8 IS NULL OR id < $1::int8) AND ($2::int8 IS NULL OR at >= $2::int8)
  AND ($3::text IS NULL OR actor = $3::text) AND ($4::text IS NULL OR ns = $4::text)
  AND ($5::text IS NULL OR target = $5::text)
ORDER BY id DESC LIMIT $6::int8)sql"};
// Never the newest event, as on SQLite (where that keeps ids growing).
constexpr pg::Statement kPruneAudit{"prune_audit", R"sql(
WITH d AS (
  DELETE FROM audit_events WHERE at < $1::int8 AND id < (SELECT max(id) FROM audit_events) RETURNING 1)
SELECT count(*)::int8 FROM d)sql"};

AuditEvent AuditEventFromRow(const pg::Rows& rows, int i) {
  return AuditEvent{.id = rows.Int8(i, 0),
                    .at = rows.Int8(i, 1),
                    .actor = std::string(rows.Text(i, 2)),
                    .token_id = std::string(rows.Text(i, 3)),
                    .client = std::string(rows.Text(i, 4)),
                    .action = std::string(rows.Text(i, 5)),
                    .ns = std::string(rows.Text(i, 6)),
                    .target = std::string(rows.Text(i, 7)),
                    .detail = std::string(rows.Text(i, 8))};
}

template <typename T>
void OptionalParam(pg::Params& p, const std::optional<T>& v) {
  if (!v) {
    p.Null();
  } else if constexpr (std::is_same_v<T, int64_t>) {
    p.Int8(*v);
  } else {
    p.Text(*v);
  }
}

}  // namespace

std::string AuditCte(int first, std::string_view rows) {
  std::string values = "$" + std::to_string(first) + "::int8";
  for (int i = 1; i < 8; ++i) values += ", $" + std::to_string(first + i) + "::text";
  return "au AS (\n  INSERT INTO audit_events(at, actor, token_id, client, action, ns, target, detail)\n  "
         "SELECT " +
         values + "\n  FROM " + std::string(rows) + " WHERE $" + std::to_string(first) +
         "::int8 IS NOT NULL)\n";
}

void PostgresIndex::AuditParams(pg::Params& params, const AuditEvent* event) {
  if (event == nullptr) {
    for (int i = 0; i < 8; ++i) params.Null();
    return;
  }
  params.Int8(event->at).Text(event->actor).Text(event->token_id).Text(event->client);
  params.Text(event->action).Text(event->ns).Text(event->target).Text(event->detail);
}

Status PostgresIndex::AppendAudit(const AuditEvent& event) {
  WriteRequest req{&kAppendAudit, {}, [](const pg::Rows&) {}};
  AuditParams(req.params, &event);
  return writes_->Submit(req);
}

Result<std::vector<AuditEvent>> PostgresIndex::ListAudit(const AuditFilter& filter,
                                                         std::optional<int64_t> before, size_t limit) {
  if (auto st = CheckPageLimit(limit, AuditIndex::kMaxListed); !st.ok()) return st.error();
  pg::Params p;
  OptionalParam(p, before);
  OptionalParam(p, filter.since);
  OptionalParam(p, filter.actor);
  OptionalParam(p, filter.ns);
  OptionalParam(p, filter.target);
  p.Int8(static_cast<int64_t>(limit));
  auto rows = Query(kListAudit, p);
  if (!rows.ok()) return rows.error();
  std::vector<AuditEvent> out;
  out.reserve(static_cast<size_t>(rows->size()));
  for (int i = 0; i < rows->size(); ++i) out.push_back(AuditEventFromRow(*rows, i));
  return out;
}

Result<uint64_t> PostgresIndex::PruneAudit(int64_t before) {
  int64_t pruned = 0;
  WriteRequest req{&kPruneAudit, {}, [&](const pg::Rows& rows) {
                     if (rows.size() == 1) pruned = rows.Int8(0, 0);
                   }};
  req.params.Int8(before);
  if (auto st = writes_->Submit(req); !st.ok()) return st.error();
  return static_cast<uint64_t>(pruned);
}

}  // namespace cairn::index
