// The SQLite backend's sign-in slice (index.h's SignInIndex): users' password hashes and browser sessions.
#include <optional>
#include <string>
#include <utility>

#include "index/failures.h"
#include "index/people_records.h"
#include "index/sqlite/sqlite_conn.h"
#include "index/sqlite/sqlite_index.h"

namespace cairn::index {

namespace {

using sqlite_internal::Stmt;

constexpr const char kGetPassword[] = "SELECT hash FROM passwords WHERE account = ?1";
constexpr const char kSetPassword[] =
    "INSERT INTO passwords(account, hash) VALUES (?1, ?2) ON CONFLICT(account) DO UPDATE SET hash = ?2";
constexpr const char kDropPassword[] = "DELETE FROM passwords WHERE account = ?1";
constexpr const char kCreateSession[] =
    "INSERT INTO sessions(id, secret_hash, user_id, created_at, expires_at, method, client) "
    "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT(id) DO NOTHING";
constexpr const char kFindSession[] =
    "SELECT id, secret_hash, user_id, created_at, expires_at, method, client FROM sessions WHERE id = ?1";
constexpr const char kDeleteSession[] = "DELETE FROM sessions WHERE id = ?1";
constexpr const char kDeleteSessionsOf[] = "DELETE FROM sessions WHERE user_id = ?1";
constexpr const char kPruneSessions[] = "DELETE FROM sessions WHERE expires_at < ?1";

SessionRecord SessionFromRow(const Stmt& s) {
  const auto hash = s.Blob(1);
  return SessionRecord{.id = std::string(s.Text(0)),
                       .secret_hash = {hash.begin(), hash.end()},
                       .user = s.Int(2),
                       .created_at = s.Int(3),
                       .expires_at = s.Int(4),
                       .method = std::string(s.Text(5)),
                       .client = std::string(s.Text(6))};
}

}  // namespace

Result<bool> SqliteIndex::IsUserIn(Conn& c, int64_t id) {
  auto owner = AccountIn(c, id);
  if (!owner.ok()) return owner.error();
  return *owner && (*owner)->kind == AccountKind::kUser;
}

Result<std::optional<std::string>> SqliteIndex::GetPassword(int64_t id) {
  auto r = AcquireReader();
  if (!r.ok()) return r.error();
  auto s = (*r)->Prepare(kGetPassword);
  if (!s.ok()) return s.error();
  s->Bind(1, id);
  const int rc = s->Step();
  if (rc == SQLITE_DONE) return std::optional<std::string>();
  if (rc != SQLITE_ROW) return (*r)->Err("read password", rc);
  return std::optional<std::string>(std::string(s->Text(0)));
}

Status SqliteIndex::SetPassword(int64_t id, std::optional<std::string> hash, const AuditEvent* audit) {
  return Write([&](Conn& c) -> Status {
    auto user = IsUserIn(c, id);
    if (!user.ok()) return user.error();
    if (!*user) return AccountIdNotIndexed(id);
    auto s = c.Prepare(hash ? kSetPassword : kDropPassword);
    if (!s.ok()) return s.error();
    s->Bind(1, id);
    if (hash) s->Bind(2, *hash);
    if (auto run = c.Run(*s, "set password"); !run.ok()) return run;
    auto end = c.Prepare(kDeleteSessionsOf);
    if (!end.ok()) return end.error();
    end->Bind(1, id);
    if (auto run = c.Run(*end, "end sessions"); !run.ok()) return run;
    return WriteAudit(c, audit);
  });
}

Status SqliteIndex::CreateSession(const SessionRecord& session, const AuditEvent* audit) {
  if (session.secret_hash.size() != 32) return Malformed("a session's secret hash is 32 bytes");
  return Write([&](Conn& c) -> Status {
    auto user = IsUserIn(c, session.user);
    if (!user.ok()) return user.error();
    if (!*user) return AccountIdNotIndexed(session.user);
    auto s = c.Prepare(kCreateSession);
    if (!s.ok()) return s.error();
    s->Bind(1, session.id).Bind(2, std::span<const uint8_t>(session.secret_hash)).Bind(3, session.user);
    s->Bind(4, session.created_at)
        .Bind(5, session.expires_at)
        .Bind(6, session.method)
        .Bind(7, session.client);
    if (auto run = c.Run(*s, "create session"); !run.ok()) return run;
    if (c.changes() == 0) return Error{ErrorCode::kConflict, "session " + session.id + " exists"};
    return WriteAudit(c, audit);
  });
}

Result<std::optional<SessionRecord>> SqliteIndex::FindSession(std::string_view id) {
  auto r = AcquireReader();
  if (!r.ok()) return r.error();
  auto s = (*r)->Prepare(kFindSession);
  if (!s.ok()) return s.error();
  s->Bind(1, id);
  const int rc = s->Step();
  if (rc == SQLITE_DONE) return std::optional<SessionRecord>();
  if (rc != SQLITE_ROW) return (*r)->Err("read session", rc);
  return std::optional<SessionRecord>(SessionFromRow(*s));
}

// Runs `sql` (?1 bound to `key`) in a write with `audit` when it deleted something; how many rows went.
template <typename Key>
Result<uint64_t> SqliteIndex::DeleteSessions(const char* sql, Key key, const AuditEvent* audit) {
  uint64_t gone = 0;
  auto st = Write([&](Conn& c) -> Status {
    auto s = c.Prepare(sql);
    if (!s.ok()) return s.error();
    s->Bind(1, key);
    if (auto run = c.Run(*s, "end sessions"); !run.ok()) return run;
    gone = static_cast<uint64_t>(c.changes());
    return gone > 0 ? WriteAudit(c, audit) : Status(Ok{});
  });
  if (!st.ok()) return st.error();
  return gone;
}

Result<bool> SqliteIndex::DeleteSession(std::string_view id, const AuditEvent* audit) {
  auto gone = DeleteSessions(kDeleteSession, id, audit);
  if (!gone.ok()) return gone.error();
  return *gone > 0;
}

Result<uint64_t> SqliteIndex::DeleteSessionsOf(int64_t id, const AuditEvent* audit) {
  return DeleteSessions(kDeleteSessionsOf, id, audit);
}

Result<uint64_t> SqliteIndex::PruneSessions(int64_t now) {
  return DeleteSessions(kPruneSessions, now, nullptr);
}

}  // namespace cairn::index
