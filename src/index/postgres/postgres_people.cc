// The PostgreSQL backend's people slice (index.h's PeopleIndex), one statement per write: each takes the
// next people generation (UPDATE of people_generation's one row, whose lock serializes people's changes
// across nodes until commit, so generations commit in order) and stamps the rows it changes with it.
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "index/failures.h"
#include "index/people_records.h"
#include "index/postgres/postgres_index.h"

namespace cairn::index {

namespace {

const std::string kCreateAccountSql =
    R"sql(
WITH g AS (UPDATE people_generation SET n = n + 1 RETURNING n),
a AS (
  INSERT INTO accounts(kind, name, folded, full_name, is_operator, created_at, changed)
  SELECT $1::int8, $2::text, $3::text, $4::text, $5::bool, $6::int8, g.n FROM g
  ON CONFLICT (folded) DO NOTHING RETURNING id, changed),
)sql" +
    AuditCte(7, "a") + R"sql(SELECT id, changed FROM a)sql";
const pg::Statement kCreateAccount{"create_account", kCreateAccountSql.c_str()};
constexpr pg::Statement kFindAccount{"find_account", R"sql(
SELECT id, kind, name, full_name, is_operator, disabled, created_at, changed FROM accounts
WHERE folded = $1::text)sql"};
constexpr pg::Statement kListAccounts{"list_accounts", R"sql(
SELECT id, kind, name, full_name, is_operator, disabled, created_at, changed FROM accounts
WHERE ($1::int8 IS NULL OR kind = $1::int8) AND folded > $2::text ORDER BY folded LIMIT $3::int8)sql"};
const std::string kUpdateAccountSql =
    R"sql(
WITH g AS (UPDATE people_generation SET n = n + 1 RETURNING n),
u AS (
  UPDATE accounts SET full_name = coalesce($2::text, full_name), is_operator = coalesce($3::bool, is_operator),
    disabled = coalesce($4::bool, disabled), changed = g.n
  FROM g WHERE id = $1::int8 RETURNING id),
s AS (DELETE FROM sessions WHERE user_id IN (SELECT id FROM u) AND $4::bool IS TRUE),
)sql" +
    AuditCte(5, "u") + R"sql(SELECT id FROM u)sql";
const pg::Statement kUpdateAccount{"update_account", kUpdateAccountSql.c_str()};
// $1 org, $2 user, $3 role (NULL: removed). Answers one row: whether the two are an organization and a user.
// Taken first in SetMember's transaction: every people change takes this row, so the statement after it sees
// every membership committed before (READ COMMITTED gives each statement a new snapshot).
constexpr pg::Statement kLockPeople{"lock_people", "SELECT n FROM people_generation FOR UPDATE"};
// Answers whether both accounts are what they must be, and whether the change leaves the organization an
// admin (or it had none).
const std::string kSetMemberSql =
    R"sql(
WITH a AS (
  SELECT 1 FROM accounts o, accounts u WHERE o.id = $1::int8 AND o.kind = 1 AND u.id = $2::int8 AND u.kind = 0),
keeps AS (
  SELECT 1 WHERE $3::int8 = 2
    OR NOT EXISTS (SELECT 1 FROM members WHERE org = $1::int8 AND member = $2::int8 AND role = 2)
    OR EXISTS (SELECT 1 FROM members WHERE org = $1::int8 AND member <> $2::int8 AND role = 2)),
ok AS (SELECT 1 FROM a, keeps),
g AS (UPDATE people_generation SET n = n + 1 WHERE EXISTS (SELECT 1 FROM ok) RETURNING n),
m AS (
  INSERT INTO members(org, member, role, changed) SELECT $1::int8, $2::int8, $3::int8, g.n FROM g
  WHERE $3::int8 IS NOT NULL
     OR EXISTS (SELECT 1 FROM members WHERE org = $1::int8 AND member = $2::int8 AND role IS NOT NULL)
  ON CONFLICT (org, member) DO UPDATE SET role = EXCLUDED.role, changed = EXCLUDED.changed
  WHERE members.role IS DISTINCT FROM EXCLUDED.role
  RETURNING 1),
)sql" +
    AuditCte(4, "m") + R"sql(SELECT (SELECT count(*) FROM a), (SELECT count(*) FROM keeps))sql";
const pg::Statement kSetMember{"set_member", kSetMemberSql.c_str()};
constexpr pg::Statement kMembersOfOrg{"members_of_org", R"sql(
SELECT org, member, role, changed FROM members WHERE org = $1::int8 AND role IS NOT NULL ORDER BY member)sql"};
constexpr pg::Statement kMembershipsOfUser{"memberships_of_user", R"sql(
SELECT org, member, role, changed FROM members WHERE member = $1::int8 AND role IS NOT NULL ORDER BY org)sql"};
// Answers one row: whether the owner is a user, whether the token was stored.
const std::string kCreateTokenSql =
    R"sql(
WITH ok AS (SELECT 1 FROM accounts WHERE id = $2::int8 AND kind = 0),
g AS (UPDATE people_generation SET n = n + 1 WHERE EXISTS (SELECT 1 FROM ok) RETURNING n),
t AS (
  INSERT INTO tokens(id, owner, name, role, grants, secret_hash, created_at, expires_at, changed)
  SELECT $1::text, $2::int8, $3::text, $4::int8, $5::text, $6::bytea, $7::int8, $8::int8, g.n FROM g
  ON CONFLICT (id) DO NOTHING RETURNING id),
)sql" +
    AuditCte(9, "t") + R"sql(SELECT (SELECT count(*) FROM ok), (SELECT count(*) FROM t))sql";
const pg::Statement kCreateToken{"create_token", kCreateTokenSql.c_str()};
constexpr pg::Statement kFindToken{"find_token", R"sql(
SELECT id, owner, name, role, grants, secret_hash, created_at, expires_at, last_used_at, revoked_at, changed
FROM tokens WHERE id = $1::text)sql"};
constexpr pg::Statement kListTokens{"list_tokens", R"sql(
SELECT id, owner, name, role, grants, secret_hash, created_at, expires_at, last_used_at, revoked_at, changed
FROM tokens WHERE ($1::int8 IS NULL OR owner = $1::int8) AND id > $2::text ORDER BY id LIMIT $3::int8)sql"};
// Answers one row: whether the token exists, whether this revoked it.
const std::string kRevokeTokenSql =
    R"sql(
WITH ex AS (SELECT revoked_at FROM tokens WHERE id = $1::text),
g AS (UPDATE people_generation SET n = n + 1 WHERE EXISTS (SELECT 1 FROM ex WHERE revoked_at = 0) RETURNING n),
u AS (UPDATE tokens SET revoked_at = $2::int8, changed = g.n FROM g WHERE id = $1::text AND revoked_at = 0
      RETURNING id),
)sql" +
    AuditCte(3, "u") + R"sql(SELECT (SELECT count(*) FROM ex), (SELECT count(*) FROM u))sql";
const pg::Statement kRevokeToken{"revoke_token", kRevokeTokenSql.c_str()};
// Answers one row: whether the owner is an account, whether the policy was stored.
const std::string kCreatePublisherSql =
    R"sql(
WITH ok AS (SELECT 1 FROM accounts WHERE id = $2::int8),
g AS (UPDATE people_generation SET n = n + 1 WHERE EXISTS (SELECT 1 FROM ok) RETURNING n),
t AS (
  INSERT INTO publishers(id, owner, repo, issuer, audience, claims, role, created_at, changed)
  SELECT $1::text, $2::int8, $3::text, $4::text, $5::text, $6::text, $7::int8, $8::int8, g.n FROM g
  ON CONFLICT (id) DO NOTHING RETURNING id),
)sql" +
    AuditCte(9, "t") + R"sql(SELECT (SELECT count(*) FROM ok), (SELECT count(*) FROM t))sql";
const pg::Statement kCreatePublisher{"create_publisher", kCreatePublisherSql.c_str()};
constexpr pg::Statement kGetAccounts{"get_accounts", R"sql(
SELECT id, kind, name, full_name, is_operator, disabled, created_at, changed FROM accounts
WHERE id = ANY($1::int8[]))sql"};
constexpr pg::Statement kFindPublisher{"find_publisher", R"sql(
SELECT id, owner, repo, issuer, audience, claims, role, created_at, revoked_at, changed
FROM publishers WHERE id = $1::text)sql"};
constexpr pg::Statement kListPublishers{"list_publishers", R"sql(
SELECT id, owner, repo, issuer, audience, claims, role, created_at, revoked_at, changed
FROM publishers WHERE ($1::int8 IS NULL OR owner = $1::int8) ORDER BY id)sql"};
// Answers one row: whether the policy exists, whether this revoked it.
const std::string kRevokePublisherSql =
    R"sql(
WITH ex AS (SELECT revoked_at FROM publishers WHERE id = $1::text),
g AS (UPDATE people_generation SET n = n + 1 WHERE EXISTS (SELECT 1 FROM ex WHERE revoked_at = 0) RETURNING n),
u AS (UPDATE publishers SET revoked_at = $2::int8, changed = g.n FROM g WHERE id = $1::text AND revoked_at = 0
      RETURNING id),
)sql" +
    AuditCte(3, "u") + R"sql(SELECT (SELECT count(*) FROM ex), (SELECT count(*) FROM u))sql";
const pg::Statement kRevokePublisher{"revoke_publisher", kRevokePublisherSql.c_str()};
constexpr pg::Statement kNoteTokenUses{"note_token_uses", R"sql(
UPDATE tokens SET last_used_at = GREATEST(last_used_at, u.at)
FROM unnest($1::text[], $2::int8[]) AS u(id, at) WHERE tokens.id = u.id)sql"};
constexpr pg::Statement kPeopleGeneration{"people_generation", "SELECT n FROM people_generation"};
// $1 after, $2 up to: rows stamped up to a generation already committed are all visible (generations commit
// in order), and a later one's rows wait for the next refresh.
constexpr pg::Statement kAccountsChanged{"accounts_changed", R"sql(
SELECT id, kind, name, full_name, is_operator, disabled, created_at, changed FROM accounts
WHERE changed > $1::int8 AND changed <= $2::int8 ORDER BY changed)sql"};
constexpr pg::Statement kMembersChanged{"members_changed", R"sql(
SELECT org, member, role, changed FROM members WHERE changed > $1::int8 AND changed <= $2::int8
ORDER BY changed)sql"};
constexpr pg::Statement kTokensChanged{"tokens_changed", R"sql(
SELECT id, owner, name, role, grants, secret_hash, created_at, expires_at, last_used_at, revoked_at, changed
FROM tokens WHERE changed > $1::int8 AND changed <= $2::int8 ORDER BY changed)sql"};
constexpr pg::Statement kPublishersChanged{"publishers_changed", R"sql(
SELECT id, owner, repo, issuer, audience, claims, role, created_at, revoked_at, changed
FROM publishers WHERE changed > $1::int8 AND changed <= $2::int8 ORDER BY changed)sql"};

AccountRecord AccountFromRow(const pg::Rows& rows, int i) {
  return AccountRecord{.id = rows.Int8(i, 0),
                       .kind = static_cast<AccountKind>(rows.Int8(i, 1)),
                       .name = std::string(rows.Text(i, 2)),
                       .full_name = std::string(rows.Text(i, 3)),
                       .is_operator = rows.Bool(i, 4),
                       .disabled = rows.Bool(i, 5),
                       .created_at = rows.Int8(i, 6),
                       .changed = rows.Int8(i, 7)};
}

MemberRecord MemberFromRow(const pg::Rows& rows, int i) {
  MemberRecord m{
      .org = rows.Int8(i, 0), .user = rows.Int8(i, 1), .role = std::nullopt, .changed = rows.Int8(i, 3)};
  if (!rows.IsNull(i, 2)) m.role = static_cast<OrgRole>(rows.Int8(i, 2));
  return m;
}

TokenRecord TokenFromRow(const pg::Rows& rows, int i) {
  const auto hash = rows.Bytes(i, 5);
  return TokenRecord{.id = std::string(rows.Text(i, 0)),
                     .owner = rows.Int8(i, 1),
                     .name = std::string(rows.Text(i, 2)),
                     .role = static_cast<TokenRole>(rows.Int8(i, 3)),
                     .grants = std::string(rows.Text(i, 4)),
                     .secret_hash = {hash.begin(), hash.end()},
                     .created_at = rows.Int8(i, 6),
                     .expires_at = rows.Int8(i, 7),
                     .last_used_at = rows.Int8(i, 8),
                     .revoked_at = rows.Int8(i, 9),
                     .changed = rows.Int8(i, 10)};
}

PublisherRecord PublisherFromRow(const pg::Rows& rows, int i) {
  return PublisherRecord{.id = std::string(rows.Text(i, 0)),
                         .owner = rows.Int8(i, 1),
                         .repo = std::string(rows.Text(i, 2)),
                         .issuer = std::string(rows.Text(i, 3)),
                         .audience = std::string(rows.Text(i, 4)),
                         .claims = std::string(rows.Text(i, 5)),
                         .role = static_cast<TokenRole>(rows.Int8(i, 6)),
                         .created_at = rows.Int8(i, 7),
                         .revoked_at = rows.Int8(i, 8),
                         .changed = rows.Int8(i, 9)};
}

template <typename Record>
std::vector<Record> AllRows(const pg::Rows& rows, Record (*from_row)(const pg::Rows&, int)) {
  std::vector<Record> out;
  out.reserve(static_cast<size_t>(rows.size()));
  for (int i = 0; i < rows.size(); ++i) out.push_back(from_row(rows, i));
  return out;
}

}  // namespace

Result<AccountRecord> PostgresIndex::CreateAccount(const NewAccount& account) {
  std::optional<std::pair<int64_t, int64_t>> made;  // id, generation
  WriteRequest req{&kCreateAccount, {}, [&](const pg::Rows& rows) {
                     if (rows.size() == 1) made = {rows.Int8(0, 0), rows.Int8(0, 1)};
                   }};
  req.params.Int8(static_cast<uint8_t>(account.kind)).Text(account.name).Text(FoldedName(account.name));
  req.params.Text(account.full_name).Bool(account.is_operator).Int8(account.created_at);
  AuditParams(req.params, account.audit ? &*account.audit : nullptr);
  if (auto st = writes_->Submit(req); !st.ok()) return st.error();
  if (!made) return AccountExists(account.name);
  return AccountRecord{.id = made->first,
                       .kind = account.kind,
                       .name = account.name,
                       .full_name = account.full_name,
                       .is_operator = account.is_operator,
                       .disabled = false,
                       .created_at = account.created_at,
                       .changed = made->second};
}

Result<AccountRecord> PostgresIndex::FindAccount(std::string_view name) {
  auto rows = Query(kFindAccount, pg::Params().Text(FoldedName(name)));
  if (!rows.ok()) return rows.error();
  if (rows->size() == 0) return AccountNotIndexed(name);
  return AccountFromRow(*rows, 0);
}

Result<std::vector<AccountRecord>> PostgresIndex::ListAccounts(std::optional<AccountKind> kind,
                                                               std::optional<std::string_view> after,
                                                               size_t limit) {
  if (auto st = CheckPageLimit(limit, PeopleIndex::kMaxListed); !st.ok()) return st.error();
  pg::Params p;
  if (kind) {
    p.Int8(static_cast<uint8_t>(*kind));
  } else {
    p.Null();
  }
  p.Text(FoldedName(after.value_or(""))).Int8(static_cast<int64_t>(limit));
  auto rows = Query(kListAccounts, p);
  if (!rows.ok()) return rows.error();
  return AllRows(*rows, AccountFromRow);
}

Status PostgresIndex::UpdateAccount(int64_t id, const AccountChange& change) {
  bool updated = false;
  WriteRequest req{&kUpdateAccount, {}, [&](const pg::Rows& rows) { updated = rows.size() == 1; }};
  req.params.Int8(id);
  if (change.full_name) {
    req.params.Text(*change.full_name);
  } else {
    req.params.Null();
  }
  if (change.is_operator) {
    req.params.Bool(*change.is_operator);
  } else {
    req.params.Null();
  }
  if (change.disabled) {
    req.params.Bool(*change.disabled);
  } else {
    req.params.Null();
  }
  AuditParams(req.params, change.audit ? &*change.audit : nullptr);
  if (auto st = writes_->Submit(req); !st.ok()) return st;
  if (!updated) return AccountIdNotIndexed(id);
  return Ok{};
}

Status PostgresIndex::SetMember(int64_t org, int64_t user, std::optional<OrgRole> role,
                                const AuditEvent* audit) {
  pg::Params params;
  params.Int8(org).Int8(user);
  if (role) {
    params.Int8(static_cast<uint8_t>(*role));
  } else {
    params.Null();
  }
  AuditParams(params, audit);
  const pg::Params none;
  const pg::Conn::BatchItem items[] = {{&kLockPeople, &none}, {&kSetMember, &params}};
  auto rows = RunTransactionRows(items);
  if (!rows.ok()) return rows.error();
  const pg::Rows& answer = (*rows)[1];
  if (answer.size() != 1 || answer.Int8(0, 0) != 1) return NoSuchMembership();
  if (answer.Int8(0, 1) != 1) return LastAdmin();
  return Ok{};
}

Result<std::vector<MemberRecord>> PostgresIndex::ListMembers(AccountKind of, int64_t id) {
  auto rows = Query(of == AccountKind::kOrg ? kMembersOfOrg : kMembershipsOfUser, pg::Params().Int8(id));
  if (!rows.ok()) return rows.error();
  return AllRows(*rows, MemberFromRow);
}

Status PostgresIndex::CreateToken(const TokenRecord& token, const AuditEvent* audit) {
  if (token.secret_hash.size() != 32) return Malformed("a token's secret hash is 32 bytes");
  bool owner_ok = false;
  bool stored = false;
  WriteRequest req{&kCreateToken, {}, [&](const pg::Rows& rows) {
                     owner_ok = rows.size() == 1 && rows.Int8(0, 0) == 1;
                     stored = rows.size() == 1 && rows.Int8(0, 1) == 1;
                   }};
  req.params.Text(token.id).Int8(token.owner).Text(token.name).Int8(static_cast<uint8_t>(token.role));
  req.params.Text(token.grants).Bytea(token.secret_hash).Int8(token.created_at).Int8(token.expires_at);
  AuditParams(req.params, audit);
  if (auto st = writes_->Submit(req); !st.ok()) return st;
  if (!owner_ok) return TokenOwnerNotIndexed(token.owner);
  if (!stored) return TokenExists(token.id);
  return Ok{};
}

Result<TokenRecord> PostgresIndex::FindToken(std::string_view id) {
  auto rows = Query(kFindToken, pg::Params().Text(id));
  if (!rows.ok()) return rows.error();
  if (rows->size() == 0) return TokenNotIndexed(id);
  return TokenFromRow(*rows, 0);
}

Result<std::vector<TokenRecord>> PostgresIndex::ListTokens(std::optional<int64_t> owner,
                                                           std::optional<std::string_view> after,
                                                           size_t limit) {
  if (auto st = CheckPageLimit(limit, PeopleIndex::kMaxListed); !st.ok()) return st.error();
  pg::Params p;
  if (owner) {
    p.Int8(*owner);
  } else {
    p.Null();
  }
  p.Text(after.value_or("")).Int8(static_cast<int64_t>(limit));
  auto rows = Query(kListTokens, p);
  if (!rows.ok()) return rows.error();
  return AllRows(*rows, TokenFromRow);
}

Result<bool> PostgresIndex::Revoke(const pg::Statement& statement, std::string_view id, int64_t at,
                                   const AuditEvent* audit, Error (*not_indexed)(std::string_view)) {
  bool exists = false;
  bool revoked = false;
  WriteRequest req{&statement, {}, [&](const pg::Rows& rows) {
                     exists = rows.size() == 1 && rows.Int8(0, 0) == 1;
                     revoked = rows.size() == 1 && rows.Int8(0, 1) == 1;
                   }};
  req.params.Text(id).Int8(at);
  AuditParams(req.params, audit);
  if (auto st = writes_->Submit(req); !st.ok()) return st.error();
  if (!exists) return not_indexed(id);
  return revoked;
}

Result<bool> PostgresIndex::RevokeToken(std::string_view id, int64_t at, const AuditEvent* audit) {
  return Revoke(kRevokeToken, id, at, audit, TokenNotIndexed);
}

Status PostgresIndex::CreatePublisher(const PublisherRecord& policy, const AuditEvent* audit) {
  if (policy.role != TokenRole::kRead && policy.role != TokenRole::kWrite) {
    return Malformed("a trust policy grants read or write");
  }
  bool owner_ok = false;
  bool stored = false;
  WriteRequest req{&kCreatePublisher, {}, [&](const pg::Rows& rows) {
                     owner_ok = rows.size() == 1 && rows.Int8(0, 0) == 1;
                     stored = rows.size() == 1 && rows.Int8(0, 1) == 1;
                   }};
  req.params.Text(policy.id).Int8(policy.owner).Text(policy.repo).Text(policy.issuer).Text(policy.audience);
  req.params.Text(policy.claims).Int8(static_cast<uint8_t>(policy.role)).Int8(policy.created_at);
  AuditParams(req.params, audit);
  if (auto st = writes_->Submit(req); !st.ok()) return st;
  if (!owner_ok) return PublisherOwnerNotIndexed(policy.owner);
  if (!stored) return PublisherExists(policy.id);
  return Ok{};
}

Result<std::vector<AccountRecord>> PostgresIndex::GetAccounts(std::span<const int64_t> ids) {
  if (auto st = CheckPageLimit(ids.size(), PeopleIndex::kMaxListed); !st.ok()) return st.error();
  pg::Params p;
  p.Int8Array(ids);
  auto rows = Query(kGetAccounts, p);
  if (!rows.ok()) return rows.error();
  return AllRows(*rows, AccountFromRow);
}

Result<PublisherRecord> PostgresIndex::FindPublisher(std::string_view id) {
  auto rows = Query(kFindPublisher, pg::Params().Text(id));
  if (!rows.ok()) return rows.error();
  if (rows->size() == 0) return PublisherNotIndexed(id);
  return PublisherFromRow(*rows, 0);
}

Result<std::vector<PublisherRecord>> PostgresIndex::ListPublishers(std::optional<int64_t> owner) {
  pg::Params p;
  if (owner) {
    p.Int8(*owner);
  } else {
    p.Null();
  }
  auto rows = Query(kListPublishers, p);
  if (!rows.ok()) return rows.error();
  return AllRows(*rows, PublisherFromRow);
}

Result<bool> PostgresIndex::RevokePublisher(std::string_view id, int64_t at, const AuditEvent* audit) {
  return Revoke(kRevokePublisher, id, at, audit, PublisherNotIndexed);
}

Status PostgresIndex::NoteTokenUses(const std::vector<std::pair<std::string, int64_t>>& uses) {
  if (uses.empty()) return Ok{};
  std::vector<std::string> ids;
  std::vector<int64_t> ats;
  for (const auto& [id, at] : uses) {
    ids.push_back(id);
    ats.push_back(at);
  }
  WriteRequest req{&kNoteTokenUses, {}, [](const pg::Rows&) {}};
  req.params.TextArray(ids).Int8Array(ats);
  return writes_->Submit(req);
}

Result<PeopleChanges> PostgresIndex::PeopleChangedSince(int64_t generation) {
  PeopleChanges out;
  auto g = Query(kPeopleGeneration, pg::Params());
  if (!g.ok()) return g.error();
  if (g->size() != 1) return IoError("postgres: the people generation is missing");
  out.generation = g->Int8(0, 0);
  if (out.generation <= generation) {
    out.generation = generation;
    return out;
  }
  const pg::Params p = pg::Params().Int8(generation).Int8(out.generation);
  auto accounts = Query(kAccountsChanged, p);
  if (!accounts.ok()) return accounts.error();
  out.accounts = AllRows(*accounts, AccountFromRow);
  auto members = Query(kMembersChanged, p);
  if (!members.ok()) return members.error();
  out.members = AllRows(*members, MemberFromRow);
  auto tokens = Query(kTokensChanged, p);
  if (!tokens.ok()) return tokens.error();
  out.tokens = AllRows(*tokens, TokenFromRow);
  auto publishers = Query(kPublishersChanged, p);
  if (!publishers.ok()) return publishers.error();
  out.publishers = AllRows(*publishers, PublisherFromRow);
  return out;
}

}  // namespace cairn::index
