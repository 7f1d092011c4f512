#include "people/directory.h"

#include "people/token_text.h"

namespace cairn::people {

Status Directory::Refresh() {
  std::lock_guard refreshing(refresh_mu_);
  auto changes = index_.PeopleChangedSince(generation());
  if (!changes.ok()) return changes.error();
  std::unique_lock lock(mu_);
  for (auto& a : changes->accounts) accounts_[a.id] = std::move(a);
  for (const auto& m : changes->members) {
    if (m.role) {
      roles_[{m.user, m.org}] = *m.role;
    } else {
      roles_.erase({m.user, m.org});
    }
  }
  for (auto& t : changes->tokens) tokens_[t.id] = std::move(t);
  for (auto& p : changes->publishers) publishers_[p.id] = std::move(p);
  generation_ = std::max(generation_, changes->generation);
  return Ok{};
}

namespace {

// Whether the account owning a policy may act: an organization always, a user while not disabled.
bool OwnerMayAct(const std::unordered_map<int64_t, AccountRecord>& accounts, int64_t owner) {
  const auto it = accounts.find(owner);
  return it != accounts.end() && !it->second.disabled;
}

}  // namespace

std::vector<Directory::Publisher> Directory::PublishersOf(std::string_view ns) const {
  std::shared_lock lock(mu_);
  std::vector<Publisher> out;
  for (const auto& [id, p] : publishers_) {
    if (p.revoked_at != 0 || !OwnerMayAct(accounts_, p.owner)) continue;
    const AccountRecord& owner = accounts_.at(p.owner);
    if (index::FoldedName(owner.name) == index::FoldedName(ns)) out.push_back({p, owner.name});
  }
  return out;
}

bool Directory::PublisherLive(std::string_view id) const {
  std::shared_lock lock(mu_);
  const auto it = publishers_.find(std::string(id));
  return it != publishers_.end() && it->second.revoked_at == 0 && OwnerMayAct(accounts_, it->second.owner);
}

int64_t Directory::generation() const {
  std::shared_lock lock(mu_);
  return generation_;
}

void Directory::RefreshForUnknown() {
  {
    std::lock_guard lock(refresh_mu_);
    const int64_t now = clock_.UnixSeconds();
    if (now != unknown_second_) {
      unknown_second_ = now;
      unknown_refreshes_ = 0;
    }
    if (unknown_refreshes_ == kUnknownRefreshesPerSecond) return;
    ++unknown_refreshes_;
  }
  (void)Refresh();  // a failure leaves the token unknown: refused, as it would be without the refresh
}

Result<Person> Directory::Verify(std::string_view text) {
  const auto parsed = ParseTokenText(text);
  if (!parsed) return Unauthorized("invalid token: not a token of this server");
  const int64_t now = clock_.UnixSeconds();
  for (int attempt = 0; attempt < 2; ++attempt) {
    {
      std::shared_lock lock(mu_);
      auto it = tokens_.find(parsed->id);
      if (it != tokens_.end()) {
        auto person = PersonOf(it->second, parsed->secret, now);
        lock.unlock();
        if (person.ok()) NoteUse(parsed->id, now);
        return person;
      }
    }
    if (attempt == 0) RefreshForUnknown();
  }
  return Unauthorized("invalid token: unknown token " + parsed->id);
}

std::optional<Directory::Holder> Directory::HolderOf(std::string_view text) const {
  const auto parsed = ParseTokenText(text);
  if (!parsed) return std::nullopt;
  std::shared_lock lock(mu_);
  auto it = tokens_.find(parsed->id);
  if (it == tokens_.end() || !SameHash(SecretHash(parsed->secret), it->second.secret_hash))
    return std::nullopt;
  auto owner = accounts_.find(it->second.owner);
  if (owner == accounts_.end()) return std::nullopt;
  return Holder{.user = owner->second.name, .token_id = it->second.id};
}

Result<Person> Directory::PersonOf(const TokenRecord& token, std::string_view secret, int64_t now) const {
  if (!SameHash(SecretHash(secret), token.secret_hash)) return Unauthorized("invalid token: " + token.id);
  if (token.revoked_at != 0) return Unauthorized("token " + token.id + " was revoked");
  if (token.expires_at <= now) return Unauthorized("token " + token.id + " has expired");
  auto owner = accounts_.find(token.owner);
  if (owner == accounts_.end() || owner->second.kind != AccountKind::kUser) {
    return Unauthorized("token " + token.id + ": its owner is unknown");
  }
  if (owner->second.disabled) return Unauthorized("token " + token.id + ": its owner is disabled");
  auto grants = ParseGrants(token.grants);
  if (!grants.ok()) return Unauthorized("token " + token.id + ": its grants are damaged");
  Person p{.user_id = owner->second.id,
           .user = owner->second.name,
           .full_name = owner->second.full_name,
           .is_operator = owner->second.is_operator,
           .token_id = token.id,
           .token_name = token.name,
           .role = token.role,
           .grants = std::move(*grants),
           .expires = token.expires_at,
           .orgs = OrgsOf(owner->second.id)};
  return p;
}

std::vector<std::pair<AccountRecord, OrgRole>> Directory::OrgsOf(int64_t user_id) const {
  std::vector<std::pair<AccountRecord, OrgRole>> out;
  for (auto it = roles_.lower_bound({user_id, 0}); it != roles_.end() && it->first.first == user_id; ++it) {
    auto org = accounts_.find(it->first.second);
    if (org != accounts_.end()) out.emplace_back(org->second, it->second);
  }
  return out;
}

Result<Person> Directory::SessionPerson(int64_t user_id, int64_t expires, std::string_view session) const {
  std::shared_lock lock(mu_);
  auto user = accounts_.find(user_id);
  if (user == accounts_.end() || user->second.kind != AccountKind::kUser) {
    return Unauthorized("the session's user is unknown");
  }
  if (user->second.disabled) return Unauthorized("the session's user is disabled");
  return Person{.user_id = user_id,
                .user = user->second.name,
                .full_name = user->second.full_name,
                .is_operator = user->second.is_operator,
                .token_id = std::string(session),
                .token_name = "browser session",
                .role = TokenRole::kWrite,
                .grants = {},
                .expires = expires,
                .orgs = OrgsOf(user_id)};
}

void Directory::NoteUse(const std::string& id, int64_t now) {
  std::lock_guard lock(uses_mu_);
  auto [it, fresh] = noted_.try_emplace(id, now);
  if (!fresh && now - it->second < kUseResolution) return;
  it->second = now;
  uses_.emplace_back(id, now);
}

std::vector<std::pair<std::string, int64_t>> Directory::TakeUses() {
  std::lock_guard lock(uses_mu_);
  return std::exchange(uses_, {});
}

}  // namespace cairn::people
