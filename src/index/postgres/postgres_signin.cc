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
    "WITH d AS (DELETE FROM sessions WHERE expires_at < $1::int8 RETURNING 1), "
    "g AS (DELETE FROM device_grants WHERE expires_at < $1::int8 RETURNING 1) "
    "SELECT (SELECT count(*) FROM d)::int8 + (SELECT count(*) FROM g)::int8"};
constexpr pg::Statement kCreateDeviceGrant{
    "create_device_grant",
    "WITH g AS (INSERT INTO device_grants(device_hash, user_code, client_id, created_at, expires_at, state, "
    "user_id, polled_at) VALUES ($1::bytea, $2::text, $3::text, $4::int8, $5::int8, 0, 0, 0) ON CONFLICT DO "
    "NOTHING RETURNING 1) SELECT count(*)::int8 FROM g"};
constexpr pg::Statement kFindDeviceGrant{
    "find_device_grant",
    "SELECT device_hash, user_code, client_id, created_at, expires_at, state, user_id, polled_at FROM "
    "device_grants WHERE user_code = $1::text"};
// $1 user code, $2 user, $3 state, $4 now.
const std::string kDecideDeviceGrantSql = R"sql(
WITH u AS (
  UPDATE device_grants SET state = $3::int8, user_id = $2::int8
  WHERE user_code = $1::text AND state = 0 AND expires_at > $4::int8 RETURNING 1),
)sql" + AuditCte(5, "u") + "SELECT count(*)::int8 FROM u";
const pg::Statement kDecideDeviceGrant{"decide_device_grant", kDecideDeviceGrantSql.c_str()};
// The row as it was before this poll (the old poll time), and the new poll time written.
constexpr pg::Statement kPollDeviceGrant{
    "poll_device_grant",
    "WITH old AS (SELECT device_hash, user_code, client_id, created_at, expires_at, state, user_id, "
    "polled_at "
    "FROM device_grants WHERE device_hash = $1::bytea FOR UPDATE), "
    "u AS (UPDATE device_grants SET polled_at = $2::int8 WHERE device_hash IN (SELECT device_hash FROM old)) "
    "SELECT * FROM old"};
constexpr pg::Statement kIssueDeviceGrant{
    "issue_device_grant",
    "WITH u AS (UPDATE device_grants SET state = 3 WHERE device_hash = $1::bytea AND state = 1 RETURNING 1) "
    "SELECT count(*)::int8 FROM u"};

constexpr pg::Statement kFindIdentity{
    "find_identity", "SELECT user_id FROM identities WHERE issuer = $1::text AND subject = $2::text"};
const std::string kLinkIdentitySql = R"sql(
WITH u AS (SELECT id FROM accounts WHERE id = $3::int8 AND kind = 0),
l AS (
  INSERT INTO identities(issuer, subject, user_id, created_at) SELECT $1::text, $2::text, id, $4::int8 FROM u
  ON CONFLICT DO NOTHING RETURNING 1),
)sql" + AuditCte(5, "l") + "SELECT (SELECT count(*) FROM u)::int8, (SELECT count(*) FROM l)::int8";
const pg::Statement kLinkIdentity{"link_identity", kLinkIdentitySql.c_str()};
const std::string kUnlinkIdentitySql =
    "WITH d AS (DELETE FROM identities WHERE issuer = $1::text AND subject = $2::text RETURNING 1),\n" +
    AuditCte(3, "d") + "SELECT count(*)::int8 FROM d";
const pg::Statement kUnlinkIdentity{"unlink_identity", kUnlinkIdentitySql.c_str()};
constexpr pg::Statement kIdentitiesOf{
    "identities_of",
    "SELECT issuer, subject, user_id, created_at FROM identities WHERE user_id = "
    "$1::int8 ORDER BY issuer, subject"};

DeviceGrantRecord DeviceGrantFromRow(const pg::Rows& rows, int i) {
  const auto hash = rows.Bytes(i, 0);
  return DeviceGrantRecord{.device_hash = {hash.begin(), hash.end()},
                           .user_code = std::string(rows.Text(i, 1)),
                           .client_id = std::string(rows.Text(i, 2)),
                           .created_at = rows.Int8(i, 3),
                           .expires_at = rows.Int8(i, 4),
                           .state = static_cast<DeviceGrantState>(rows.Int8(i, 5)),
                           .user = rows.Int8(i, 6),
                           .polled_at = rows.Int8(i, 7)};
}

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

Status PostgresIndex::CreateDeviceGrant(const DeviceGrantRecord& grant) {
  if (grant.device_hash.size() != 32) return Malformed("a device code's hash is 32 bytes");
  pg::Params p;
  p.Bytea(grant.device_hash).Text(grant.user_code).Text(grant.client_id).Int8(grant.created_at);
  p.Int8(grant.expires_at);
  auto made = CountingWrite(kCreateDeviceGrant, std::move(p));
  if (!made.ok()) return made.error();
  if (*made == 0) return Error{ErrorCode::kConflict, "device grant " + grant.user_code + " exists"};
  return Ok{};
}

Result<std::optional<DeviceGrantRecord>> PostgresIndex::FindDeviceGrant(std::string_view user_code) {
  auto rows = Query(kFindDeviceGrant, pg::Params().Text(user_code));
  if (!rows.ok()) return rows.error();
  if (rows->size() == 0) return std::optional<DeviceGrantRecord>();
  return std::optional<DeviceGrantRecord>(DeviceGrantFromRow(*rows, 0));
}

Result<bool> PostgresIndex::DecideDeviceGrant(std::string_view user_code, int64_t user, bool approve,
                                              int64_t now, const AuditEvent* audit) {
  const auto state = approve ? DeviceGrantState::kApproved : DeviceGrantState::kDenied;
  pg::Params p;
  p.Text(user_code).Int8(user).Int8(static_cast<uint8_t>(state)).Int8(now);
  AuditParams(p, audit);
  auto decided = CountingWrite(kDecideDeviceGrant, std::move(p));
  if (!decided.ok()) return decided.error();
  return *decided > 0;
}

Result<std::optional<DeviceGrantRecord>> PostgresIndex::PollDeviceGrant(std::span<const uint8_t> device_hash,
                                                                        int64_t now) {
  std::optional<DeviceGrantRecord> out;
  WriteRequest req{&kPollDeviceGrant, {}, [&](const pg::Rows& rows) {
                     if (rows.size() == 1) out = DeviceGrantFromRow(rows, 0);
                   }};
  req.params.Bytea(device_hash).Int8(now);
  if (auto st = writes_->Submit(req); !st.ok()) return st.error();
  return out;
}

Result<bool> PostgresIndex::IssueDeviceGrant(std::span<const uint8_t> device_hash) {
  auto issued = CountingWrite(kIssueDeviceGrant, pg::Params().Bytea(device_hash));
  if (!issued.ok()) return issued.error();
  return *issued > 0;
}

Result<std::optional<int64_t>> PostgresIndex::FindIdentity(std::string_view issuer,
                                                           std::string_view subject) {
  auto rows = Query(kFindIdentity, pg::Params().Text(issuer).Text(subject));
  if (!rows.ok()) return rows.error();
  if (rows->size() == 0) return std::optional<int64_t>();
  return std::optional<int64_t>(rows->Int8(0, 0));
}

Status PostgresIndex::LinkIdentity(const IdentityRecord& identity, const AuditEvent* audit) {
  bool user_ok = false;
  bool stored = false;
  WriteRequest req{&kLinkIdentity, {}, [&](const pg::Rows& rows) {
                     user_ok = rows.size() == 1 && rows.Int8(0, 0) == 1;
                     stored = rows.size() == 1 && rows.Int8(0, 1) == 1;
                   }};
  req.params.Text(identity.issuer).Text(identity.subject).Int8(identity.user).Int8(identity.created_at);
  AuditParams(req.params, audit);
  if (auto st = writes_->Submit(req); !st.ok()) return st;
  if (!user_ok) return AccountIdNotIndexed(identity.user);
  if (!stored) return Error{ErrorCode::kConflict, "that subject is linked to a user already"};
  return Ok{};
}

Result<bool> PostgresIndex::UnlinkIdentity(std::string_view issuer, std::string_view subject,
                                           const AuditEvent* audit) {
  pg::Params params;
  params.Text(issuer).Text(subject);
  AuditParams(params, audit);
  auto n = CountingWrite(kUnlinkIdentity, std::move(params));
  if (!n.ok()) return n.error();
  return *n > 0;
}

Result<std::vector<IdentityRecord>> PostgresIndex::IdentitiesOf(int64_t id) {
  auto rows = Query(kIdentitiesOf, pg::Params().Int8(id));
  if (!rows.ok()) return rows.error();
  std::vector<IdentityRecord> out;
  for (int i = 0; i < rows->size(); ++i) {
    out.push_back(
        {std::string(rows->Text(i, 0)), std::string(rows->Text(i, 1)), rows->Int8(i, 2), rows->Int8(i, 3)});
  }
  return out;
}

}  // namespace cairn::index
