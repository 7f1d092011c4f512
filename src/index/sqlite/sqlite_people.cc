// The SQLite backend's people slice (index.h's PeopleIndex): accounts, members and tokens, each change
// stamped with the next people generation (one row, people_generation) in the change's own transaction.
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "index/failures.h"
#include "index/people_records.h"
#include "index/sqlite/sqlite_conn.h"
#include "index/sqlite/sqlite_index.h"

namespace cairn::index {

namespace {

using sqlite_internal::Stmt;

// Statements. Their addresses key each connection's prepared-statement cache.
constexpr const char kNextGeneration[] = "UPDATE people_generation SET n = n + 1 RETURNING n";
constexpr const char kGeneration[] = "SELECT n FROM people_generation";
constexpr const char kCreateAccount[] =
    "INSERT INTO accounts(kind, name, folded, full_name, is_operator, created_at, changed) "
    "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT(folded) DO NOTHING";
constexpr const char kFindAccount[] =
    "SELECT id, kind, name, full_name, is_operator, disabled, created_at, changed FROM accounts "
    "WHERE folded = ?1";
constexpr const char kAccountById[] =
    "SELECT id, kind, name, full_name, is_operator, disabled, created_at, changed FROM accounts WHERE id = "
    "?1";
// ?1 kind or NULL (both), ?2 folded name after, ?3 limit.
constexpr const char kListAccounts[] =
    "SELECT id, kind, name, full_name, is_operator, disabled, created_at, changed FROM accounts "
    "WHERE (?1 IS NULL OR kind = ?1) AND folded > ?2 ORDER BY folded LIMIT ?3";
constexpr const char kUpdateAccount[] =
    "UPDATE accounts SET full_name = coalesce(?2, full_name), is_operator = coalesce(?3, is_operator), "
    "disabled = coalesce(?4, disabled), changed = ?5 WHERE id = ?1";
// A disabled user's browser sessions end with the change (signing in again needs them enabled).
constexpr const char kEndSessionsOf[] = "DELETE FROM sessions WHERE user_id = ?1";
constexpr const char kAccountsChanged[] =
    "SELECT id, kind, name, full_name, is_operator, disabled, created_at, changed FROM accounts "
    "WHERE changed > ?1 AND changed <= ?2 ORDER BY changed";
// ?1 org, ?2 user, ?3 role (NULL: removed), ?4 generation. A removal of no membership writes nothing.
constexpr const char kSetMember[] =
    "INSERT INTO members(org, member, role, changed) SELECT ?1, ?2, ?3, ?4 WHERE ?3 IS NOT NULL "
    "OR EXISTS (SELECT 1 FROM members WHERE org = ?1 AND member = ?2 AND role IS NOT NULL) "
    "ON CONFLICT(org, member) DO UPDATE SET role = excluded.role, changed = excluded.changed "
    "WHERE members.role IS NOT excluded.role";
// 1 when changing member ?2 of ?1 to role ?3 (NULL: removed) leaves the organization an admin, or it had
// none.
constexpr const char kKeepsAdmin[] =
    "SELECT ?3 IS 2 OR NOT EXISTS (SELECT 1 FROM members WHERE org = ?1 AND member = ?2 AND role = 2) "
    "OR EXISTS (SELECT 1 FROM members WHERE org = ?1 AND member <> ?2 AND role = 2)";
constexpr const char kMembersOfOrg[] =
    "SELECT org, member, role, changed FROM members WHERE org = ?1 AND role IS NOT NULL ORDER BY member";
constexpr const char kMembershipsOfUser[] =
    "SELECT org, member, role, changed FROM members WHERE member = ?1 AND role IS NOT NULL ORDER BY org";
constexpr const char kMembersChanged[] =
    "SELECT org, member, role, changed FROM members WHERE changed > ?1 AND changed <= ?2 ORDER BY changed";
constexpr const char kCreateToken[] =
    "INSERT INTO tokens(id, owner, name, role, grants, secret_hash, created_at, expires_at, changed) "
    "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) ON CONFLICT(id) DO NOTHING";
constexpr const char kFindToken[] =
    "SELECT id, owner, name, role, grants, secret_hash, created_at, expires_at, last_used_at, revoked_at, "
    "changed FROM tokens WHERE id = ?1";
// ?1 owner or NULL (everybody's), ?2 id after, ?3 limit.
constexpr const char kListTokens[] =
    "SELECT id, owner, name, role, grants, secret_hash, created_at, expires_at, last_used_at, revoked_at, "
    "changed FROM tokens WHERE (?1 IS NULL OR owner = ?1) AND id > ?2 ORDER BY id LIMIT ?3";
constexpr const char kTokensChanged[] =
    "SELECT id, owner, name, role, grants, secret_hash, created_at, expires_at, last_used_at, revoked_at, "
    "changed FROM tokens WHERE changed > ?1 AND changed <= ?2 ORDER BY changed";
constexpr const char kRevokeToken[] =
    "UPDATE tokens SET revoked_at = ?2, changed = ?3 WHERE id = ?1 AND revoked_at = 0";
constexpr const char kTokenExists[] = "SELECT 1 FROM tokens WHERE id = ?1";
constexpr const char kCreatePublisher[] =
    "INSERT INTO publishers(id, owner, repo, issuer, audience, claims, role, created_at, changed) "
    "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) ON CONFLICT(id) DO NOTHING";
constexpr const char kFindPublisher[] =
    "SELECT id, owner, repo, issuer, audience, claims, role, created_at, revoked_at, changed FROM publishers "
    "WHERE id = ?1";
// ?1 owner or NULL (everybody's).
constexpr const char kListPublishers[] =
    "SELECT id, owner, repo, issuer, audience, claims, role, created_at, revoked_at, changed FROM publishers "
    "WHERE (?1 IS NULL OR owner = ?1) ORDER BY id";
constexpr const char kPublishersChanged[] =
    "SELECT id, owner, repo, issuer, audience, claims, role, created_at, revoked_at, changed FROM publishers "
    "WHERE changed > ?1 AND changed <= ?2 ORDER BY changed";
constexpr const char kPublisherExists[] = "SELECT 1 FROM publishers WHERE id = ?1";
constexpr const char kRevokePublisher[] =
    "UPDATE publishers SET revoked_at = ?2, changed = ?3 WHERE id = ?1 AND revoked_at = 0";
constexpr const char kNoteTokenUse[] = "UPDATE tokens SET last_used_at = max(last_used_at, ?2) WHERE id = ?1";

AccountRecord AccountFromRow(const Stmt& s) {
  return AccountRecord{.id = s.Int(0),
                       .kind = static_cast<AccountKind>(s.Int(1)),
                       .name = std::string(s.Text(2)),
                       .full_name = std::string(s.Text(3)),
                       .is_operator = s.Int(4) != 0,
                       .disabled = s.Int(5) != 0,
                       .created_at = s.Int(6),
                       .changed = s.Int(7)};
}

MemberRecord MemberFromRow(const Stmt& s) {
  MemberRecord m{.org = s.Int(0), .user = s.Int(1), .role = std::nullopt, .changed = s.Int(3)};
  if (!s.IsNull(2)) m.role = static_cast<OrgRole>(s.Int(2));
  return m;
}

TokenRecord TokenFromRow(const Stmt& s) {
  const auto hash = s.Blob(5);
  return TokenRecord{.id = std::string(s.Text(0)),
                     .owner = s.Int(1),
                     .name = std::string(s.Text(2)),
                     .role = static_cast<TokenRole>(s.Int(3)),
                     .grants = std::string(s.Text(4)),
                     .secret_hash = {hash.begin(), hash.end()},
                     .created_at = s.Int(6),
                     .expires_at = s.Int(7),
                     .last_used_at = s.Int(8),
                     .revoked_at = s.Int(9),
                     .changed = s.Int(10)};
}

PublisherRecord PublisherFromRow(const Stmt& s) {
  return PublisherRecord{.id = std::string(s.Text(0)),
                         .owner = s.Int(1),
                         .repo = std::string(s.Text(2)),
                         .issuer = std::string(s.Text(3)),
                         .audience = std::string(s.Text(4)),
                         .claims = std::string(s.Text(5)),
                         .role = static_cast<TokenRole>(s.Int(6)),
                         .created_at = s.Int(7),
                         .revoked_at = s.Int(8),
                         .changed = s.Int(9)};
}

// Collects every row of a statement already bound.
template <typename Record, typename Connection, typename FromRow>
Result<std::vector<Record>> Rows(Connection& c, Stmt& s, FromRow from_row, const char* what) {
  std::vector<Record> out;
  int rc = SQLITE_ROW;
  while ((rc = s.Step()) == SQLITE_ROW) out.push_back(from_row(s));
  if (rc != SQLITE_DONE) return c.Err(what, rc);
  return out;
}

}  // namespace

// The next people generation, taken inside the writer's transaction.
Result<int64_t> SqliteIndex::NextPeopleGeneration(Conn& c) {
  auto s = c.Prepare(kNextGeneration);
  if (!s.ok()) return s.error();
  const int rc = s->Step();
  if (rc != SQLITE_ROW) return c.Err("next people generation", rc);
  return s->Int(0);
}

Result<std::vector<AccountRecord>> SqliteIndex::GetAccounts(std::span<const int64_t> ids) {
  if (auto st = CheckPageLimit(ids.size(), PeopleIndex::kMaxListed); !st.ok()) return st.error();
  auto r = AcquireReader();
  if (!r.ok()) return r.error();
  std::vector<AccountRecord> out;
  for (const int64_t id : ids) {
    auto found = AccountIn(**r, id);
    if (!found.ok()) return found.error();
    if (*found) out.push_back(std::move(**found));
  }
  return out;
}

// The account `id` as a writer sees it; nullopt when none.
Result<std::optional<AccountRecord>> SqliteIndex::AccountIn(Conn& c, int64_t id) {
  auto s = c.Prepare(kAccountById);
  if (!s.ok()) return s.error();
  s->Bind(1, id);
  const int rc = s->Step();
  if (rc == SQLITE_DONE) return std::optional<AccountRecord>();
  if (rc != SQLITE_ROW) return c.Err("read account", rc);
  return std::optional<AccountRecord>(AccountFromRow(*s));
}

Result<AccountRecord> SqliteIndex::CreateAccount(const NewAccount& account) {
  AccountRecord out{.id = 0,
                    .kind = account.kind,
                    .name = account.name,
                    .full_name = account.full_name,
                    .is_operator = account.is_operator,
                    .disabled = false,
                    .created_at = account.created_at,
                    .changed = 0};
  const std::string folded = FoldedName(account.name);
  auto st = Write([&](Conn& c) -> Status {
    auto generation = NextPeopleGeneration(c);
    if (!generation.ok()) return generation.error();
    auto s = c.Prepare(kCreateAccount);
    if (!s.ok()) return s.error();
    s->Bind(1, int64_t{static_cast<uint8_t>(account.kind)}).Bind(2, account.name).Bind(3, folded);
    s->Bind(4, account.full_name).Bind(5, int64_t{account.is_operator}).Bind(6, account.created_at);
    s->Bind(7, *generation);
    if (auto run = c.Run(*s, "create account"); !run.ok()) return run;
    if (c.changes() == 0) return AccountExists(account.name);
    out.id = sqlite3_last_insert_rowid(c.db());
    out.changed = *generation;
    return WriteAudit(c, account.audit ? &*account.audit : nullptr);
  });
  if (!st.ok()) return st.error();
  return out;
}

Result<AccountRecord> SqliteIndex::FindAccount(std::string_view name) {
  const std::string folded = FoldedName(name);
  auto r = AcquireReader();
  if (!r.ok()) return r.error();
  auto s = (*r)->Prepare(kFindAccount);
  if (!s.ok()) return s.error();
  s->Bind(1, folded);
  const int rc = s->Step();
  if (rc == SQLITE_DONE) return AccountNotIndexed(name);
  if (rc != SQLITE_ROW) return (*r)->Err("read account", rc);
  return AccountFromRow(*s);
}

Result<std::vector<AccountRecord>> SqliteIndex::ListAccounts(std::optional<AccountKind> kind,
                                                             std::optional<std::string_view> after,
                                                             size_t limit) {
  if (auto st = CheckPageLimit(limit, PeopleIndex::kMaxListed); !st.ok()) return st.error();
  const std::string from = FoldedName(after.value_or(""));
  auto r = AcquireReader();
  if (!r.ok()) return r.error();
  auto s = (*r)->Prepare(kListAccounts);
  if (!s.ok()) return s.error();
  if (kind) {
    s->Bind(1, int64_t{static_cast<uint8_t>(*kind)});
  } else {
    s->BindNull(1);
  }
  s->Bind(2, from).Bind(3, static_cast<int64_t>(limit));
  return Rows<AccountRecord>(**r, *s, AccountFromRow, "list accounts");
}

Status SqliteIndex::UpdateAccount(int64_t id, const AccountChange& change) {
  return Write([&](Conn& c) -> Status {
    auto generation = NextPeopleGeneration(c);
    if (!generation.ok()) return generation.error();
    auto s = c.Prepare(kUpdateAccount);
    if (!s.ok()) return s.error();
    s->Bind(1, id);
    if (change.full_name) {
      s->Bind(2, *change.full_name);
    } else {
      s->BindNull(2);
    }
    if (change.is_operator) {
      s->Bind(3, int64_t{*change.is_operator});
    } else {
      s->BindNull(3);
    }
    if (change.disabled) {
      s->Bind(4, int64_t{*change.disabled});
    } else {
      s->BindNull(4);
    }
    s->Bind(5, *generation);
    if (auto run = c.Run(*s, "update account"); !run.ok()) return run;
    if (c.changes() == 0) return AccountIdNotIndexed(id);
    if (change.disabled == true) {
      auto end = c.Prepare(kEndSessionsOf);
      if (!end.ok()) return end.error();
      end->Bind(1, id);
      if (auto run = c.Run(*end, "end sessions"); !run.ok()) return run;
    }
    return WriteAudit(c, change.audit ? &*change.audit : nullptr);
  });
}

namespace {

// ?1 the organization, ?2 the user, ?3 the role (NULL: no member).
void BindMembership(Stmt& s, int64_t org, int64_t user, std::optional<OrgRole> role) {
  s.Bind(1, org).Bind(2, user);
  if (role) {
    s.Bind(3, int64_t{static_cast<uint8_t>(*role)});
  } else {
    s.BindNull(3);
  }
}

}  // namespace

// Whether the change leaves `org` an admin (or it had none): read in the change's transaction.
Result<bool> SqliteIndex::KeepsAdmin(Conn& c, int64_t org, int64_t user, std::optional<OrgRole> role) {
  auto s = c.Prepare(kKeepsAdmin);
  if (!s.ok()) return s.error();
  BindMembership(*s, org, user, role);
  if (const int rc = s->Step(); rc != SQLITE_ROW) return c.Err("check the organization's admins", rc);
  return s->Int(0) == 1;
}

Status SqliteIndex::SetMember(int64_t org, int64_t user, std::optional<OrgRole> role,
                              const AuditEvent* audit) {
  return Write([&](Conn& c) -> Status {
    auto o = AccountIn(c, org);
    if (!o.ok()) return o.error();
    auto u = AccountIn(c, user);
    if (!u.ok()) return u.error();
    if (!*o || (*o)->kind != AccountKind::kOrg || !*u || (*u)->kind != AccountKind::kUser) {
      return NoSuchMembership();
    }
    if (auto keeps = KeepsAdmin(c, org, user, role); !keeps.ok() || !*keeps) {
      return keeps.ok() ? LastAdmin() : keeps.error();
    }
    auto generation = NextPeopleGeneration(c);
    if (!generation.ok()) return generation.error();
    auto s = c.Prepare(kSetMember);
    if (!s.ok()) return s.error();
    BindMembership(*s, org, user, role);
    s->Bind(4, *generation);
    if (auto run = c.Run(*s, "set member"); !run.ok()) return run;
    return c.changes() == 0 ? Ok{} : WriteAudit(c, audit);  // a role it had already is no change
  });
}

Result<std::vector<MemberRecord>> SqliteIndex::ListMembers(AccountKind of, int64_t id) {
  auto r = AcquireReader();
  if (!r.ok()) return r.error();
  auto s = (*r)->Prepare(of == AccountKind::kOrg ? kMembersOfOrg : kMembershipsOfUser);
  if (!s.ok()) return s.error();
  s->Bind(1, id);
  return Rows<MemberRecord>(**r, *s, MemberFromRow, "list members");
}

Status SqliteIndex::CreateToken(const TokenRecord& token, const AuditEvent* audit) {
  if (token.secret_hash.size() != 32) return Malformed("a token's secret hash is 32 bytes");
  return Write([&](Conn& c) -> Status {
    auto owner = AccountIn(c, token.owner);
    if (!owner.ok()) return owner.error();
    if (!*owner || (*owner)->kind != AccountKind::kUser) return TokenOwnerNotIndexed(token.owner);
    auto generation = NextPeopleGeneration(c);
    if (!generation.ok()) return generation.error();
    auto s = c.Prepare(kCreateToken);
    if (!s.ok()) return s.error();
    s->Bind(1, token.id).Bind(2, token.owner).Bind(3, token.name);
    s->Bind(4, int64_t{static_cast<uint8_t>(token.role)}).Bind(5, token.grants);
    s->Bind(6, std::span<const uint8_t>(token.secret_hash))
        .Bind(7, token.created_at)
        .Bind(8, token.expires_at);
    s->Bind(9, *generation);
    if (auto run = c.Run(*s, "create token"); !run.ok()) return run;
    if (c.changes() == 0) return TokenExists(token.id);
    return WriteAudit(c, audit);
  });
}

Result<TokenRecord> SqliteIndex::FindToken(std::string_view id) {
  auto r = AcquireReader();
  if (!r.ok()) return r.error();
  auto s = (*r)->Prepare(kFindToken);
  if (!s.ok()) return s.error();
  s->Bind(1, id);
  const int rc = s->Step();
  if (rc == SQLITE_DONE) return TokenNotIndexed(id);
  if (rc != SQLITE_ROW) return (*r)->Err("read token", rc);
  return TokenFromRow(*s);
}

Result<std::vector<TokenRecord>> SqliteIndex::ListTokens(std::optional<int64_t> owner,
                                                         std::optional<std::string_view> after,
                                                         size_t limit) {
  if (auto st = CheckPageLimit(limit, PeopleIndex::kMaxListed); !st.ok()) return st.error();
  auto r = AcquireReader();
  if (!r.ok()) return r.error();
  auto s = (*r)->Prepare(kListTokens);
  if (!s.ok()) return s.error();
  if (owner) {
    s->Bind(1, *owner);
  } else {
    s->BindNull(1);
  }
  s->Bind(2, after.value_or("")).Bind(3, static_cast<int64_t>(limit));
  return Rows<TokenRecord>(**r, *s, TokenFromRow, "list tokens");
}

Result<bool> SqliteIndex::Revoke(const RevokeSql& sql, std::string_view id, int64_t at,
                                 const AuditEvent* audit) {
  bool revoked = false;
  auto st = Write([&](Conn& c) -> Status {
    auto exists = c.Prepare(sql.exists);
    if (!exists.ok()) return exists.error();
    exists->Bind(1, id);
    const int rc = exists->Step();
    if (rc == SQLITE_DONE) return sql.not_indexed(id);
    if (rc != SQLITE_ROW) return c.Err(sql.what, rc);
    auto generation = NextPeopleGeneration(c);
    if (!generation.ok()) return generation.error();
    auto s = c.Prepare(sql.revoke);
    if (!s.ok()) return s.error();
    s->Bind(1, id).Bind(2, at).Bind(3, *generation);
    if (auto run = c.Run(*s, sql.what); !run.ok()) return run;
    revoked = c.changes() == 1;
    return revoked ? WriteAudit(c, audit) : Ok{};
  });
  if (!st.ok()) return st.error();
  return revoked;
}

Result<bool> SqliteIndex::RevokeToken(std::string_view id, int64_t at, const AuditEvent* audit) {
  return Revoke({kTokenExists, kRevokeToken, TokenNotIndexed, "revoke token"}, id, at, audit);
}

Status SqliteIndex::CreatePublisher(const PublisherRecord& policy, const AuditEvent* audit) {
  if (policy.role != TokenRole::kRead && policy.role != TokenRole::kWrite) {
    return Malformed("a trust policy grants read or write");
  }
  return Write([&](Conn& c) -> Status {
    auto owner = AccountIn(c, policy.owner);
    if (!owner.ok()) return owner.error();
    if (!*owner) return PublisherOwnerNotIndexed(policy.owner);
    auto generation = NextPeopleGeneration(c);
    if (!generation.ok()) return generation.error();
    auto s = c.Prepare(kCreatePublisher);
    if (!s.ok()) return s.error();
    s->Bind(1, policy.id).Bind(2, policy.owner).Bind(3, policy.repo).Bind(4, policy.issuer);
    s->Bind(5, policy.audience).Bind(6, policy.claims).Bind(7, int64_t{static_cast<uint8_t>(policy.role)});
    s->Bind(8, policy.created_at).Bind(9, *generation);
    if (auto run = c.Run(*s, "create trust policy"); !run.ok()) return run;
    if (c.changes() == 0) return PublisherExists(policy.id);
    return WriteAudit(c, audit);
  });
}

Result<PublisherRecord> SqliteIndex::FindPublisher(std::string_view id) {
  auto r = AcquireReader();
  if (!r.ok()) return r.error();
  auto s = (*r)->Prepare(kFindPublisher);
  if (!s.ok()) return s.error();
  s->Bind(1, id);
  const int rc = s->Step();
  if (rc == SQLITE_DONE) return PublisherNotIndexed(id);
  if (rc != SQLITE_ROW) return (*r)->Err("find trust policy", rc);
  return PublisherFromRow(*s);
}

Result<std::vector<PublisherRecord>> SqliteIndex::ListPublishers(std::optional<int64_t> owner) {
  auto r = AcquireReader();
  if (!r.ok()) return r.error();
  auto s = (*r)->Prepare(kListPublishers);
  if (!s.ok()) return s.error();
  if (owner) {
    s->Bind(1, *owner);
  } else {
    s->BindNull(1);
  }
  return Rows<PublisherRecord>(**r, *s, PublisherFromRow, "list trust policies");
}

Result<bool> SqliteIndex::RevokePublisher(std::string_view id, int64_t at, const AuditEvent* audit) {
  return Revoke({kPublisherExists, kRevokePublisher, PublisherNotIndexed, "revoke trust policy"}, id, at,
                audit);
}

Status SqliteIndex::NoteTokenUses(const std::vector<std::pair<std::string, int64_t>>& uses) {
  if (uses.empty()) return Ok{};
  return Write([&](Conn& c) -> Status {
    for (const auto& [id, at] : uses) {
      auto s = c.Prepare(kNoteTokenUse);
      if (!s.ok()) return s.error();
      s->Bind(1, id).Bind(2, at);
      if (auto run = c.Run(*s, "note token use"); !run.ok()) return run;
    }
    return Ok{};
  });
}

Result<PeopleChanges> SqliteIndex::PeopleChangedSince(int64_t generation) {
  auto r = AcquireReader();
  if (!r.ok()) return r.error();
  PeopleChanges out;
  auto g = (*r)->Prepare(kGeneration);
  if (!g.ok()) return g.error();
  if (const int rc = g->Step(); rc != SQLITE_ROW) return (*r)->Err("read people generation", rc);
  out.generation = g->Int(0);
  if (out.generation <= generation) {
    out.generation = generation;
    return out;
  }
  // Rows up to the generation read, as on PostgreSQL: a change committed after it waits for the next refresh.
  const auto changed = [&](const char* sql, auto from_row, auto& into, const char* what) -> Status {
    auto s = (*r)->Prepare(sql);
    if (!s.ok()) return s.error();
    s->Bind(1, generation).Bind(2, out.generation);
    auto rows = Rows<typename std::decay_t<decltype(into)>::value_type>(**r, *s, from_row, what);
    if (!rows.ok()) return rows.error();
    into = std::move(*rows);
    return Ok{};
  };
  if (auto st = changed(kAccountsChanged, AccountFromRow, out.accounts, "accounts changed"); !st.ok()) {
    return st.error();
  }
  if (auto st = changed(kMembersChanged, MemberFromRow, out.members, "members changed"); !st.ok()) {
    return st.error();
  }
  if (auto st = changed(kTokensChanged, TokenFromRow, out.tokens, "tokens changed"); !st.ok())
    return st.error();
  if (auto st = changed(kPublishersChanged, PublisherFromRow, out.publishers, "trust policies changed");
      !st.ok()) {
    return st.error();
  }
  return out;
}

}  // namespace cairn::index
