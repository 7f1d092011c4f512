#include "people/people_service.h"

#include <algorithm>
#include <span>
#include <unordered_map>
#include <utility>

#include "common/utf8.h"
#include "people/directory.h"
#include "people/names.h"

namespace cairn::people {

namespace {

// A full name or a token's name: UTF-8 without control characters, at most kMaxTextBytes.
bool ValidLabel(std::string_view text, bool may_be_empty) {
  if (text.empty()) return may_be_empty;
  if (text.size() > PeopleService::kMaxTextBytes || !ValidUtf8(text) || HasC1Control(text)) return false;
  for (char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c == 0x7f) return false;
  }
  return true;
}

// A namespace ("acme") or a repository ("alice/model", "datasets/acme/data", "spaces/...", "buckets/...").
bool ValidGrantScope(std::string_view scope) {
  std::vector<std::string_view> parts;
  while (true) {
    const size_t slash = scope.find('/');
    parts.push_back(scope.substr(0, slash));
    if (slash == std::string_view::npos) break;
    scope.remove_prefix(slash + 1);
  }
  if (parts.size() == 3) {
    if (parts[0] != "datasets" && parts[0] != "spaces" && parts[0] != "buckets") return false;
    parts.erase(parts.begin());
  }
  if (parts.size() > 2) return false;
  for (std::string_view p : parts) {
    if (!ValidName(p)) return false;
  }
  return true;
}

}  // namespace

std::optional<OrgRole> ParseOrgRole(std::string_view name) {
  if (name == "read") return OrgRole::kRead;
  if (name == "write") return OrgRole::kWrite;
  if (name == "admin") return OrgRole::kAdmin;
  return std::nullopt;
}

std::string_view OrgRoleName(OrgRole role) {
  switch (role) {
    case OrgRole::kRead:
      return "read";
    case OrgRole::kWrite:
      return "write";
    case OrgRole::kAdmin:
      return "admin";
  }
  return "read";
}

std::optional<TokenRole> ParseTokenRole(std::string_view name) {
  if (name == "read") return TokenRole::kRead;
  if (name == "write") return TokenRole::kWrite;
  if (name == "fineGrained") return TokenRole::kFineGrained;
  return std::nullopt;
}

std::string_view TokenRoleName(TokenRole role) {
  switch (role) {
    case TokenRole::kRead:
      return "read";
    case TokenRole::kWrite:
      return "write";
    case TokenRole::kFineGrained:
      return "fineGrained";
  }
  return "read";
}

std::string FormatGrants(const std::vector<Grant>& grants) {
  std::string out;
  for (const Grant& g : grants) {
    if (!out.empty()) out += '\n';
    out += g.write ? "w " : "r ";
    out += g.scope;
  }
  return out;
}

Result<std::vector<Grant>> ParseGrants(std::string_view text) {
  std::vector<Grant> out;
  while (!text.empty()) {
    const size_t end = text.find('\n');
    const std::string_view line = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    if (line.size() < 3 || (line[0] != 'r' && line[0] != 'w') || line[1] != ' ' ||
        !ValidGrantScope(line.substr(2))) {
      return Malformed("a grant is \"r SCOPE\" or \"w SCOPE\" with a namespace or repository as its scope");
    }
    out.push_back(Grant{.scope = std::string(line.substr(2)), .write = line[0] == 'w'});
    if (out.size() > PeopleService::kMaxGrants) {
      return Malformed("at most " + std::to_string(PeopleService::kMaxGrants) + " grants a token");
    }
  }
  return out;
}

Result<AccountRecord> PeopleService::Create(const Actor& by, AccountKind kind, std::string_view name,
                                            std::string_view full_name, bool is_operator) {
  if (!AccountNameAllowed(name)) {
    return Malformed(
        "not a name for a user or organization: letters, digits, '-', '_' and '.', at most 96, "
        "and none the site uses");
  }
  if (!ValidLabel(full_name, true)) {
    return Malformed("a full name is at most " + std::to_string(kMaxTextBytes) +
                     " bytes of UTF-8 text without control characters");
  }
  const int64_t now = clock_.UnixSeconds();
  const bool user = kind == AccountKind::kUser;
  auto made = index_.CreateAccount(
      {.kind = kind,
       .name = std::string(name),
       .full_name = std::string(full_name),
       .is_operator = is_operator,
       .created_at = now,
       .audit = by.Event(now, user ? "user.create" : "org.create", std::string(name),
                         (user ? "user " : "org ") + std::string(name), is_operator ? "operator" : "")});
  if (!made.ok()) return made.error();
  if (auto st = Changed(); !st.ok()) return st.error();
  return made;
}

Status PeopleService::Changed() {
  if (directory_ == nullptr) return Ok{};
  return directory_->Refresh();
}

Result<AccountRecord> PeopleService::CreateUser(const Actor& by, std::string_view name,
                                                std::string_view full_name, bool is_operator) {
  return Create(by, AccountKind::kUser, name, full_name, is_operator);
}

Result<AccountRecord> PeopleService::CreateOrg(const Actor& by, std::string_view name,
                                               std::string_view full_name) {
  return Create(by, AccountKind::kOrg, name, full_name, false);
}

Result<AccountRecord> PeopleService::Find(std::string_view name, std::optional<AccountKind> kind) {
  auto found = index_.FindAccount(name);
  if (!found.ok()) return found.error();
  if (kind && found->kind != *kind) {
    return NotFound(std::string(*kind == AccountKind::kUser ? "no user " : "no organization ") +
                    std::string(name));
  }
  return found;
}

Result<AccountRecord> PeopleService::Get(int64_t id) {
  auto found = index_.GetAccounts(std::span<const int64_t>(&id, 1));
  if (!found.ok()) return found.error();
  if (found->empty()) return NotFound("no account " + std::to_string(id));
  return std::move(found->front());
}

Result<std::vector<AccountRecord>> PeopleService::List(std::optional<AccountKind> kind) {
  std::vector<AccountRecord> out;
  std::optional<std::string> after;
  while (true) {
    auto page = index_.ListAccounts(kind, after, index::PeopleIndex::kMaxListed);
    if (!page.ok()) return page.error();
    for (auto& a : *page) out.push_back(std::move(a));
    if (page->size() < index::PeopleIndex::kMaxListed) return out;
    after = out.back().name;
  }
}

Status PeopleService::SetDisabled(const Actor& by, std::string_view user, bool disabled) {
  auto found = Find(user, AccountKind::kUser);
  if (!found.ok()) return found.error();
  if (auto st = index_.UpdateAccount(
          found->id, {.disabled = disabled,
                      .audit = by.Event(clock_.UnixSeconds(), disabled ? "user.disable" : "user.enable",
                                        found->name, "user " + found->name)});
      !st.ok())
    return st;
  return Changed();
}

Status PeopleService::SetOperator(const Actor& by, std::string_view user, bool is_operator) {
  auto found = Find(user, AccountKind::kUser);
  if (!found.ok()) return found.error();
  if (auto st = index_.UpdateAccount(
          found->id, {.is_operator = is_operator,
                      .audit = by.Event(clock_.UnixSeconds(), "user.operator", found->name,
                                        "user " + found->name, is_operator ? "operator" : "not operator")});
      !st.ok())
    return st;
  return Changed();
}

Status PeopleService::SetRole(const Actor& by, std::string_view org, std::string_view user,
                              std::optional<OrgRole> role) {
  auto o = Find(org, AccountKind::kOrg);
  if (!o.ok()) return o.error();
  auto u = Find(user, AccountKind::kUser);
  if (!u.ok()) return u.error();
  const auto event = by.Event(clock_.UnixSeconds(), role ? "member.set" : "member.remove", o->name,
                              "member " + u->name, role ? std::string(OrgRoleName(*role)) : "");
  if (auto st = index_.SetMember(o->id, u->id, role, &event); !st.ok()) return st;
  return Changed();
}

Result<std::vector<Membership>> PeopleService::WithAccounts(const std::vector<index::MemberRecord>& members,
                                                            bool orgs) {
  // The accounts named, read by id a page at a time (ids are not names), then in the members' order.
  std::vector<int64_t> ids;
  for (const auto& m : members) ids.push_back(orgs ? m.org : m.user);
  std::unordered_map<int64_t, AccountRecord> named;
  for (size_t i = 0; i < ids.size(); i += index::PeopleIndex::kMaxListed) {
    const size_t n = std::min(ids.size() - i, index::PeopleIndex::kMaxListed);
    auto page = index_.GetAccounts(std::span<const int64_t>(ids).subspan(i, n));
    if (!page.ok()) return page.error();
    for (auto& a : *page) named.emplace(a.id, std::move(a));
  }
  std::vector<Membership> out;
  for (const auto& m : members) {
    auto it = named.find(orgs ? m.org : m.user);
    if (it != named.end() && m.role) out.push_back(Membership{.account = it->second, .role = *m.role});
  }
  return out;
}

Result<std::vector<Membership>> PeopleService::Members(std::string_view org) {
  auto o = Find(org, AccountKind::kOrg);
  if (!o.ok()) return o.error();
  auto members = index_.ListMembers(AccountKind::kOrg, o->id);
  if (!members.ok()) return members.error();
  return WithAccounts(*members, false);
}

Result<std::vector<Membership>> PeopleService::Organizations(std::string_view user) {
  auto u = Find(user, AccountKind::kUser);
  if (!u.ok()) return u.error();
  auto members = index_.ListMembers(AccountKind::kUser, u->id);
  if (!members.ok()) return members.error();
  return WithAccounts(*members, true);
}

Result<NewToken> PeopleService::CreateToken(const Actor& by, std::string_view owner, std::string_view name,
                                            TokenRole role, const std::vector<Grant>& grants,
                                            std::chrono::seconds life) {
  if (!ValidLabel(name, false)) {
    return Malformed("a token's name is 1 to " + std::to_string(kMaxTextBytes) +
                     " bytes of UTF-8 text without control characters");
  }
  if (life.count() <= 0 || life > kMaxTokenLife) {
    return Malformed("a token lives more than 0 seconds and at most " +
                     std::to_string(kMaxTokenLife.count()));
  }
  if ((role == TokenRole::kFineGrained) == grants.empty()) {
    return Malformed("a fine-grained token needs grants, and only it may have any");
  }
  const std::string grant_text = FormatGrants(grants);
  if (auto parsed = ParseGrants(grant_text); !parsed.ok()) return parsed.error();
  auto user = Find(owner, AccountKind::kUser);
  if (!user.ok()) return user.error();
  auto text = NewTokenText();
  if (!text.ok()) return text.error();
  const int64_t now = clock_.UnixSeconds();
  TokenRecord record{.id = text->id,
                     .owner = user->id,
                     .name = std::string(name),
                     .role = role,
                     .grants = grant_text,
                     .secret_hash = SecretHash(text->secret),
                     .created_at = now,
                     .expires_at = now + life.count()};
  const auto event =
      by.Event(now, "token.create", user->name, "token " + record.id,
               std::string(TokenRoleName(role)) + ", expires " + std::to_string(record.expires_at));
  if (auto st = index_.CreateToken(record, &event); !st.ok()) return st.error();
  if (auto st = Changed(); !st.ok()) return st.error();
  return NewToken{.record = std::move(record), .text = text->text()};
}

Result<std::vector<TokenRecord>> PeopleService::Tokens(std::optional<std::string_view> owner) {
  std::optional<int64_t> id;
  if (owner) {
    auto user = Find(*owner, AccountKind::kUser);
    if (!user.ok()) return user.error();
    id = user->id;
  }
  std::vector<TokenRecord> out;
  std::optional<std::string> after;
  while (true) {
    auto page = index_.ListTokens(id, after, index::PeopleIndex::kMaxListed);
    if (!page.ok()) return page.error();
    for (auto& t : *page) out.push_back(std::move(t));
    if (page->size() < index::PeopleIndex::kMaxListed) return out;
    after = out.back().id;
  }
}

Result<bool> PeopleService::Revoke(const Actor& by, std::string_view id) {
  const int64_t now = clock_.UnixSeconds();
  const auto event = by.Event(now, "token.revoke", "", "token " + std::string(id));
  auto revoked = index_.RevokeToken(id, now, &event);
  if (!revoked.ok()) return revoked.error();
  if (auto st = Changed(); !st.ok()) return st.error();
  return revoked;
}

}  // namespace cairn::people
