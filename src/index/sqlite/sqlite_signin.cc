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
constexpr const char kPruneDeviceGrants[] = "DELETE FROM device_grants WHERE expires_at < ?1";
constexpr const char kCreateDeviceGrant[] =
    "INSERT INTO device_grants(device_hash, user_code, client_id, created_at, expires_at, state, user_id, "
    "polled_at) VALUES (?1, ?2, ?3, ?4, ?5, 0, 0, 0) ON CONFLICT DO NOTHING";
constexpr const char kFindDeviceGrant[] =
    "SELECT device_hash, user_code, client_id, created_at, expires_at, state, user_id, polled_at FROM "
    "device_grants "
    "WHERE user_code = ?1";
constexpr const char kDeviceGrantByHash[] =
    "SELECT device_hash, user_code, client_id, created_at, expires_at, state, user_id, polled_at FROM "
    "device_grants "
    "WHERE device_hash = ?1";
// ?1 user code, ?2 user, ?3 state, ?4 now.
constexpr const char kDecideDeviceGrant[] =
    "UPDATE device_grants SET state = ?3, user_id = ?2 WHERE user_code = ?1 AND state = 0 AND expires_at > "
    "?4";
constexpr const char kPollDeviceGrant[] = "UPDATE device_grants SET polled_at = ?2 WHERE device_hash = ?1";
constexpr const char kIssueDeviceGrant[] =
    "UPDATE device_grants SET state = 3 WHERE device_hash = ?1 AND state = 1";

constexpr const char kFindIdentity[] = "SELECT user_id FROM identities WHERE issuer = ?1 AND subject = ?2";
constexpr const char kLinkIdentity[] =
    "INSERT INTO identities(issuer, subject, user_id, created_at) VALUES (?1, ?2, ?3, ?4) ON CONFLICT DO "
    "NOTHING";
constexpr const char kUnlinkIdentity[] = "DELETE FROM identities WHERE issuer = ?1 AND subject = ?2";
constexpr const char kIdentitiesOf[] =
    "SELECT issuer, subject, user_id, created_at FROM identities WHERE user_id = ?1 ORDER BY issuer, subject";

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

DeviceGrantRecord DeviceGrantFromRow(const Stmt& s) {
  const auto hash = s.Blob(0);
  return DeviceGrantRecord{.device_hash = {hash.begin(), hash.end()},
                           .user_code = std::string(s.Text(1)),
                           .client_id = std::string(s.Text(2)),
                           .created_at = s.Int(3),
                           .expires_at = s.Int(4),
                           .state = static_cast<DeviceGrantState>(s.Int(5)),
                           .user = s.Int(6),
                           .polled_at = s.Int(7)};
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
  auto sessions = DeleteSessions(kPruneSessions, now, nullptr);
  if (!sessions.ok()) return sessions.error();
  auto grants = DeleteSessions(kPruneDeviceGrants, now, nullptr);
  if (!grants.ok()) return grants.error();
  return *sessions + *grants;
}

Status SqliteIndex::CreateDeviceGrant(const DeviceGrantRecord& grant) {
  if (grant.device_hash.size() != 32) return Malformed("a device code's hash is 32 bytes");
  return Write([&](Conn& c) -> Status {
    auto s = c.Prepare(kCreateDeviceGrant);
    if (!s.ok()) return s.error();
    s->Bind(1, std::span<const uint8_t>(grant.device_hash)).Bind(2, grant.user_code).Bind(3, grant.client_id);
    s->Bind(4, grant.created_at).Bind(5, grant.expires_at);
    if (auto run = c.Run(*s, "create device grant"); !run.ok()) return run;
    if (c.changes() == 0) return Error{ErrorCode::kConflict, "device grant " + grant.user_code + " exists"};
    return Ok{};
  });
}

Result<std::optional<DeviceGrantRecord>> SqliteIndex::DeviceGrantIn(Conn& c, const char* sql,
                                                                    std::span<const uint8_t> hash,
                                                                    std::string_view user_code) {
  auto s = c.Prepare(sql);
  if (!s.ok()) return s.error();
  if (hash.empty()) {
    s->Bind(1, user_code);
  } else {
    s->Bind(1, hash);
  }
  const int rc = s->Step();
  if (rc == SQLITE_DONE) return std::optional<DeviceGrantRecord>();
  if (rc != SQLITE_ROW) return c.Err("read device grant", rc);
  return std::optional<DeviceGrantRecord>(DeviceGrantFromRow(*s));
}

Result<std::optional<DeviceGrantRecord>> SqliteIndex::FindDeviceGrant(std::string_view user_code) {
  auto r = AcquireReader();
  if (!r.ok()) return r.error();
  return DeviceGrantIn(**r, kFindDeviceGrant, {}, user_code);
}

Result<bool> SqliteIndex::DecideDeviceGrant(std::string_view user_code, int64_t user, bool approve,
                                            int64_t now, const AuditEvent* audit) {
  bool decided = false;
  auto st = Write([&](Conn& c) -> Status {
    auto s = c.Prepare(kDecideDeviceGrant);
    if (!s.ok()) return s.error();
    const auto state = approve ? DeviceGrantState::kApproved : DeviceGrantState::kDenied;
    s->Bind(1, user_code).Bind(2, user).Bind(3, int64_t{static_cast<uint8_t>(state)}).Bind(4, now);
    if (auto run = c.Run(*s, "decide device grant"); !run.ok()) return run;
    decided = c.changes() > 0;
    return decided ? WriteAudit(c, audit) : Status(Ok{});
  });
  if (!st.ok()) return st.error();
  return decided;
}

Result<std::optional<DeviceGrantRecord>> SqliteIndex::PollDeviceGrant(std::span<const uint8_t> device_hash,
                                                                      int64_t now) {
  std::optional<DeviceGrantRecord> out;
  auto st = Write([&](Conn& c) -> Status {
    auto found = DeviceGrantIn(c, kDeviceGrantByHash, device_hash, {});
    if (!found.ok()) return found.error();
    out = std::move(*found);
    if (!out) return Ok{};
    auto s = c.Prepare(kPollDeviceGrant);
    if (!s.ok()) return s.error();
    s->Bind(1, device_hash).Bind(2, now);
    return c.Run(*s, "poll device grant");
  });
  if (!st.ok()) return st.error();
  return out;
}

Result<bool> SqliteIndex::IssueDeviceGrant(std::span<const uint8_t> device_hash) {
  bool issued = false;
  auto st = Write([&](Conn& c) -> Status {
    auto s = c.Prepare(kIssueDeviceGrant);
    if (!s.ok()) return s.error();
    s->Bind(1, device_hash);
    if (auto run = c.Run(*s, "issue device grant"); !run.ok()) return run;
    issued = c.changes() > 0;
    return Ok{};
  });
  if (!st.ok()) return st.error();
  return issued;
}

Result<std::optional<int64_t>> SqliteIndex::FindIdentity(std::string_view issuer, std::string_view subject) {
  auto r = AcquireReader();
  if (!r.ok()) return r.error();
  auto s = (*r)->Prepare(kFindIdentity);
  if (!s.ok()) return s.error();
  s->Bind(1, issuer).Bind(2, subject);
  const int rc = s->Step();
  if (rc == SQLITE_DONE) return std::optional<int64_t>();
  if (rc != SQLITE_ROW) return (*r)->Err("read identity", rc);
  return std::optional<int64_t>(s->Int(0));
}

Status SqliteIndex::LinkIdentity(const IdentityRecord& identity, const AuditEvent* audit) {
  return Write([&](Conn& c) -> Status {
    auto user = IsUserIn(c, identity.user);
    if (!user.ok()) return user.error();
    if (!*user) return AccountIdNotIndexed(identity.user);
    auto s = c.Prepare(kLinkIdentity);
    if (!s.ok()) return s.error();
    s->Bind(1, identity.issuer).Bind(2, identity.subject).Bind(3, identity.user).Bind(4, identity.created_at);
    if (auto run = c.Run(*s, "link identity"); !run.ok()) return run;
    if (c.changes() == 0) return Error{ErrorCode::kConflict, "that subject is linked to a user already"};
    return WriteAudit(c, audit);
  });
}

Result<bool> SqliteIndex::UnlinkIdentity(std::string_view issuer, std::string_view subject,
                                         const AuditEvent* audit) {
  bool gone = false;
  auto st = Write([&](Conn& c) -> Status {
    auto s = c.Prepare(kUnlinkIdentity);
    if (!s.ok()) return s.error();
    s->Bind(1, issuer).Bind(2, subject);
    if (auto run = c.Run(*s, "unlink identity"); !run.ok()) return run;
    gone = c.changes() > 0;
    return gone ? WriteAudit(c, audit) : Status(Ok{});
  });
  if (!st.ok()) return st.error();
  return gone;
}

Result<std::vector<IdentityRecord>> SqliteIndex::IdentitiesOf(int64_t id) {
  auto r = AcquireReader();
  if (!r.ok()) return r.error();
  auto s = (*r)->Prepare(kIdentitiesOf);
  if (!s.ok()) return s.error();
  s->Bind(1, id);
  std::vector<IdentityRecord> out;
  for (int rc = s->Step(); rc != SQLITE_DONE; rc = s->Step()) {
    if (rc != SQLITE_ROW) return (*r)->Err("list identities", rc);
    out.push_back({std::string(s->Text(0)), std::string(s->Text(1)), s->Int(2), s->Int(3)});
  }
  return out;
}

}  // namespace cairn::index
