// The PostgreSQL backend's sign-in slice (index.h's SignInIndex): users' password hashes and browser
// sessions, each write one statement (with its audit event, AuditCte).
#include <optional>
#include <string>
#include <utility>

#include "index/failures.h"
#include "index/people_records.h"
#include "index/postgres/postgres_index.h"

namespace cairn::index {

namespace {

constexpr pg::Statement kGetPassword{"get_password", "SELECT hash FROM passwords WHERE account = $1::int8"};
// $2 NULL: the password is removed. Every session of the user ends with it.
const std::string kSetPasswordSql = R"sql(
WITH u AS (SELECT id FROM accounts WHERE id = $1::int8 AND kind = 0),
p AS (
  INSERT INTO passwords(account, hash) SELECT id, $2::text FROM u WHERE $2::text IS NOT NULL
  ON CONFLICT (account) DO UPDATE SET hash = excluded.hash),
dp AS (DELETE FROM passwords WHERE account IN (SELECT id FROM u) AND $2::text IS NULL),
s AS (DELETE FROM sessions WHERE user_id IN (SELECT id FROM u)),
)sql" + AuditCte(3, "u") + "SELECT count(*)::int8 FROM u";
const pg::Statement kSetPassword{"set_password", kSetPasswordSql.c_str()};
const std::string kCreateSessionSql = R"sql(
WITH u AS (SELECT id FROM accounts WHERE id = $3::int8 AND kind = 0),
s AS (
  INSERT INTO sessions(id, secret_hash, user_id, created_at, expires_at, method, client)
  SELECT $1::text, $2::bytea, id, $4::int8, $5::int8, $6::text, $7::text FROM u
  ON CONFLICT DO NOTHING RETURNING id),
)sql" + AuditCte(8, "s") + "SELECT (SELECT count(*) FROM u)::int8, (SELECT count(*) FROM s)::int8";
const pg::Statement kCreateSession{"create_session", kCreateSessionSql.c_str()};
constexpr pg::Statement kFindSession{"find_session",
                                     "SELECT id, secret_hash, user_id, created_at, expires_at, method, "
                                     "client FROM sessions WHERE id = $1::text"};
// One event however many sessions went (none when none did).
const std::string kDeleteSessionSql = "WITH d AS (DELETE FROM sessions WHERE id = $1::text RETURNING 1),\n" +
                                      AuditCte(2, "(SELECT 1 FROM d LIMIT 1) AS one") +
                                      "SELECT count(*)::int8 FROM d";
const pg::Statement kDeleteSession{"delete_session", kDeleteSessionSql.c_str()};
const std::string kDeleteSessionsOfSql =
    "WITH d AS (DELETE FROM sessions WHERE user_id = $1::int8 RETURNING 1),\n" +
    AuditCte(2, "(SELECT 1 FROM d LIMIT 1) AS one") + "SELECT count(*)::int8 FROM d";
const pg::Statement kDeleteSessionsOf{"delete_sessions_of", kDeleteSessionsOfSql.c_str()};
constexpr pg::Statement kPruneSessions{
    "prune_sessions",
    "WITH d AS (DELETE FROM sessions WHERE expires_at < $1::int8 RETURNING 1) "
    "SELECT count(*)::int8 FROM d"};

}  // namespace

Result<std::optional<std::string>> PostgresIndex::GetPassword(int64_t id) {
  auto rows = Query(kGetPassword, pg::Params().Int8(id));
  if (!rows.ok()) return rows.error();
  if (rows->size() == 0) return std::optional<std::string>();
  return std::optional<std::string>(std::string(rows->Text(0, 0)));
}

Status PostgresIndex::SetPassword(int64_t id, std::optional<std::string> hash, const AuditEvent* audit) {
  bool found = false;
  WriteRequest req{
      &kSetPassword, {}, [&](const pg::Rows& rows) { found = rows.size() == 1 && rows.Int8(0, 0) == 1; }};
  req.params.Int8(id);
  if (hash) {
    req.params.Text(*hash);
  } else {
    req.params.Null();
  }
  AuditParams(req.params, audit);
  if (auto st = writes_->Submit(req); !st.ok()) return st;
  if (!found) return AccountIdNotIndexed(id);
  return Ok{};
}

Status PostgresIndex::CreateSession(const SessionRecord& session, const AuditEvent* audit) {
  if (session.secret_hash.size() != 32) return Malformed("a session's secret hash is 32 bytes");
  bool user_ok = false;
  bool stored = false;
  WriteRequest req{&kCreateSession, {}, [&](const pg::Rows& rows) {
                     user_ok = rows.size() == 1 && rows.Int8(0, 0) == 1;
                     stored = rows.size() == 1 && rows.Int8(0, 1) == 1;
                   }};
  req.params.Text(session.id).Bytea(session.secret_hash).Int8(session.user).Int8(session.created_at);
  req.params.Int8(session.expires_at).Text(session.method).Text(session.client);
  AuditParams(req.params, audit);
  if (auto st = writes_->Submit(req); !st.ok()) return st;
  if (!user_ok) return AccountIdNotIndexed(session.user);
  if (!stored) return Error{ErrorCode::kConflict, "session " + session.id + " exists"};
  return Ok{};
}

Result<std::optional<SessionRecord>> PostgresIndex::FindSession(std::string_view id) {
  auto rows = Query(kFindSession, pg::Params().Text(id));
  if (!rows.ok()) return rows.error();
  if (rows->size() == 0) return std::optional<SessionRecord>();
  const auto hash = rows->Bytes(0, 1);
  return std::optional<SessionRecord>(SessionRecord{.id = std::string(rows->Text(0, 0)),
                                                    .secret_hash = {hash.begin(), hash.end()},
                                                    .user = rows->Int8(0, 2),
                                                    .created_at = rows->Int8(0, 3),
                                                    .expires_at = rows->Int8(0, 4),
                                                    .method = std::string(rows->Text(0, 5)),
                                                    .client = std::string(rows->Text(0, 6))});
}

Result<uint64_t> PostgresIndex::CountingWrite(const pg::Statement& statement, pg::Params params) {
  uint64_t n = 0;
  WriteRequest req{&statement, std::move(params), [&](const pg::Rows& rows) {
                     n = rows.size() == 1 ? static_cast<uint64_t>(rows.Int8(0, 0)) : 0;
                   }};
  if (auto st = writes_->Submit(req); !st.ok()) return st.error();
  return n;
}

Result<bool> PostgresIndex::DeleteSession(std::string_view id, const AuditEvent* audit) {
  pg::Params p;
  p.Text(id);
  AuditParams(p, audit);
  auto gone = CountingWrite(kDeleteSession, std::move(p));
  if (!gone.ok()) return gone.error();
  return *gone > 0;
}

Result<uint64_t> PostgresIndex::DeleteSessionsOf(int64_t id, const AuditEvent* audit) {
  pg::Params p;
  p.Int8(id);
  AuditParams(p, audit);
  return CountingWrite(kDeleteSessionsOf, std::move(p));
}

Result<uint64_t> PostgresIndex::PruneSessions(int64_t now) {
  return CountingWrite(kPruneSessions, pg::Params().Int8(now));
}

}  // namespace cairn::index
