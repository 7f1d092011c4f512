#include "oidc/single_sign_on.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <utility>

#include "common/base64.h"
#include "common/utf8.h"
#include "people/names.h"

namespace cairn::oidc {

namespace {

constexpr std::string_view kFlowVersion = "f1";

std::vector<std::string_view> Split(std::string_view text, char sep) {
  std::vector<std::string_view> out;
  for (size_t start = 0;;) {
    const size_t end = text.find(sep, start);
    out.push_back(text.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
    if (end == std::string_view::npos) return out;
    start = end + 1;
  }
}

Error Denied(std::string why) {
  return Error{ErrorCode::kDenied, std::move(why)};
}

// The provider's "name" claim as a full name cairn keeps: cut to PeopleService::kMaxTextBytes on a
// character's boundary; empty when it is not text a label may hold (control characters, bad UTF-8).
std::string FullName(const Identity& who) {
  const auto claim = who.claims.find("name");
  if (claim == who.claims.end()) return {};
  std::string name = claim->second.substr(0, people::PeopleService::kMaxTextBytes);
  if (name.size() < claim->second.size()) {  // the last character, when the cut split it, goes
    size_t lead = name.size();
    while (lead > 0 && (static_cast<unsigned char>(name[lead - 1]) & 0xC0) == 0x80) --lead;
    if (lead > 0) {
      const auto c = static_cast<unsigned char>(name[lead - 1]);
      const size_t length = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
      if (name.size() - (lead - 1) < length) name.resize(lead - 1);
    }
  }
  const bool control = std::any_of(name.begin(), name.end(), [](char ch) {
    const auto c = static_cast<unsigned char>(ch);
    return c < 0x20 || c == 0x7f;
  });
  return control || !ValidUtf8(name) || HasC1Control(name) ? std::string() : name;
}

}  // namespace

Result<GroupRole> ParseGroupRole(std::string_view text) {
  const size_t eq = text.rfind('=');
  const size_t colon = text.rfind(':');
  if (eq == std::string_view::npos || colon == std::string_view::npos || colon < eq || eq == 0)
    return Malformed("a group's role is GROUP=ORG:ROLE (read, write or admin)");
  auto role = people::ParseOrgRole(text.substr(colon + 1));
  const std::string_view org = text.substr(eq + 1, colon - eq - 1);
  if (!role || !people::ValidName(org))
    return Malformed("a group's role is GROUP=ORG:ROLE (read, write or admin)");
  return GroupRole{.group = std::string(text.substr(0, eq)), .org = std::string(org), .role = *role};
}

std::string FormatFlow(const Flow& flow) {
  return std::string(kFlowVersion) + "." + flow.attempt.state + "." + flow.attempt.nonce + "." +
         flow.attempt.verifier + "." + std::to_string(flow.began) + "." + Base64Encode(flow.next, true);
}

std::optional<Flow> ParseFlow(std::string_view text) {
  if (text.size() > 1024) return std::nullopt;
  const auto parts = Split(text, '.');
  if (parts.size() != 6 || parts[0] != kFlowVersion) return std::nullopt;
  Flow flow;
  flow.attempt = {std::string(parts[1]), std::string(parts[2]), std::string(parts[3])};
  for (const std::string* s : {&flow.attempt.state, &flow.attempt.nonce, &flow.attempt.verifier}) {
    if (!IsAttemptSecret(*s)) return std::nullopt;
  }
  const auto [end, ec] = std::from_chars(parts[4].data(), parts[4].data() + parts[4].size(), flow.began);
  if (ec != std::errc() || end != parts[4].data() + parts[4].size()) return std::nullopt;
  auto next = Base64Decode(parts[5], true);
  if (!next) return std::nullopt;
  flow.next.assign(next->begin(), next->end());
  return flow;
}

Result<SingleSignOn::Started> SingleSignOn::Begin(std::string_view next) {
  auto begun = party_.Begin();
  if (!begun) return begun.error();
  Flow flow{.attempt = std::move(begun->first),
            .began = clock_.UnixSeconds(),
            .next = next.size() <= kMaxNext ? std::string(next) : "/"};
  return Started{.url = std::move(begun->second), .cookie = FormatFlow(flow)};
}

Result<SingleSignOn::Finished> SingleSignOn::Finish(std::string_view cookie, std::string_view state,
                                                    std::string_view code, std::string_view client) {
  const auto flow = ParseFlow(cookie);
  const int64_t now = clock_.UnixSeconds();
  if (!flow || flow->began > now + RelyingParty::kLeeway || now - flow->began > kAttemptLife) {
    return Error{ErrorCode::kUnauthorized,
                 "this sign-in was not started from this browser, or took too long: sign in again"};
  }
  auto who = party_.Finish(flow->attempt, state, code);
  if (!who) return who.error();
  auto user = UserFor(*who);
  if (!user) return user.error();
  if (user->disabled) return Denied("user " + user->name + " is disabled");
  if (auto changed = SyncGroups(*user, *who); !changed) return changed.error();
  auto session = sign_in_.Start(user->id, kMethod, client, now + settings_.session_life.count());
  if (!session) return session.error();
  return Finished{.session = std::move(*session), .began = now, .user = user->name, .next = flow->next};
}

Result<std::string> SingleSignOn::NameFor(const Identity& who) const {
  const auto claim = who.claims.find(settings_.username_claim);
  if (claim == who.claims.end() || claim->second.empty())
    return Denied("the provider gave no " + settings_.username_claim + " to name a new user by");
  std::string name = claim->second.substr(0, claim->second.find('@'));
  if (!people::AccountNameAllowed(name))
    return Denied("\"" + name.substr(0, 96) +
                  "\" cannot name a user here: ask an operator to link your sign-in");
  return name;
}

Result<people::AccountRecord> SingleSignOn::UserFor(const Identity& who) {
  auto linked = sign_in_.LinkedUser(who.issuer, who.subject);
  if (!linked) return linked.error();
  if (*linked) return people_.Get(**linked);
  if (!settings_.create_users)
    return Denied("no user of this server is linked to your sign-in: ask an operator to link one");
  auto name = NameFor(who);
  if (!name) return name.error();
  const people::Actor by{.actor = "sso", .token_id = "", .client = ""};
  auto made = people_.CreateUser(by, *name, FullName(who), false);
  if (!made) {
    if (made.error().code == ErrorCode::kConflict)
      return Denied("the name " + *name + " is taken by another user: ask an operator to link your sign-in");
    return made.error();
  }
  if (auto st = sign_in_.Link(by, made->name, who.issuer, who.subject); !st) return st.error();
  return made;
}

Result<bool> SingleSignOn::SyncGroups(const people::AccountRecord& user, const Identity& who) {
  if (settings_.groups_claim.empty() || settings_.groups.empty()) return false;
  const auto listed = who.lists.find(settings_.groups_claim);
  const std::vector<std::string> none;
  const std::vector<std::string>& groups = listed == who.lists.end() ? none : listed->second;
  // Each organization named: the highest role a group of the person's maps to, or none.
  std::map<std::string, std::optional<index::OrgRole>> wanted;
  for (const auto& g : settings_.groups) {
    auto& role = wanted[index::FoldedName(g.org)];
    if (std::find(groups.begin(), groups.end(), g.group) == groups.end()) continue;
    if (!role || *role < g.role) role = g.role;
  }
  auto current = people_.Organizations(user.name);
  if (!current) return current.error();
  const people::Actor by{.actor = "sso", .token_id = "", .client = ""};
  bool changed = false;
  for (const auto& entry : wanted) {
    const std::string& org = entry.first;
    const std::optional<index::OrgRole>& role = entry.second;
    const auto it = std::find_if(current->begin(), current->end(), [&](const people::Membership& m) {
      return index::FoldedName(m.account.name) == org;
    });
    const std::optional<index::OrgRole> had =
        it == current->end() ? std::nullopt : std::optional<index::OrgRole>(it->role);
    if (had == role) continue;
    auto st = people_.SetRole(by, org, user.name, role);
    // An organization that is not there yet, or whose last admin this is, keeps what it has.
    if (!st && st.error().code != ErrorCode::kNotFound && st.error().code != ErrorCode::kConflict)
      return st.error();
    changed = changed || st.ok();
  }
  return changed;
}

}  // namespace cairn::oidc
