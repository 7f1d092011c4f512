// Company sign-in through the pages: a person signs in at the company's OpenID Connect provider
// (RelyingParty) and gets a browser session of the user their subject is linked to (people/sign_in.h).
//
// A subject seen for the first time gets a user of its own when `create_users` is on: named by the
// `username_claim` (an e-mail address's part before '@'), refused when that name is taken — never linked to
// an existing user by name, which would hand a local account to whoever the provider calls by its name (an
// operator links such a user with `cairn user link`). With a `groups_claim`, every organization `groups`
// names has its members from the provider: at each sign-in the person gets the highest role their groups
// map to in it, or leaves it when none does (an organization's last admin stays).
//
// The attempt's secrets travel in a cookie (FlowCookie) the callback must present: without it, or older
// than kAttemptLife, or with another state, nothing is sent to the provider.
//
// Thread-safety: any thread. Ownership: borrows the relying party, the people and sign-in services and the
// clock, which outlive it. Failures: kUnauthorized for a refused answer (relying_party.h); kDenied for a
// disabled user, a subject linked to nobody when users are not created, or a name taken; kUnavailable when
// the provider could not be reached; the index's own.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "common/error.h"
#include "oidc/relying_party.h"
#include "people/directory.h"
#include "people/people_service.h"
#include "people/sign_in.h"

namespace cairn::oidc {

// A group of the provider's given a role in an organization: "group=org:role" ("ml-team=acme:write").
struct GroupRole {
  std::string group;
  std::string org;
  index::OrgRole role = index::OrgRole::kRead;
};
Result<GroupRole> ParseGroupRole(std::string_view text);

struct SsoSettings {
  std::string display_name = "single sign-on";  // the sign-in page's button: "Sign in with ..."
  std::string username_claim = "preferred_username";
  std::string groups_claim;  // empty: memberships are not the provider's
  std::vector<GroupRole> groups;
  bool create_users = true;
  std::chrono::seconds session_life{12 * 3600};
};

// An attempt as its cookie carries it, with when it began and where to go after.
struct Flow {
  Attempt attempt;
  int64_t began = 0;
  std::string next;
};
std::string FormatFlow(const Flow& flow);
std::optional<Flow> ParseFlow(std::string_view text);

class SingleSignOn {
 public:
  static constexpr int64_t kAttemptLife = 600;
  static constexpr size_t kMaxNext = 512;
  static constexpr std::string_view kMethod = "oidc";

  // A membership the sign-in changes is seen by this node before the session's first page when `people`
  // refreshes the node's directory (PeopleService's `directory`).
  SingleSignOn(SsoSettings settings, RelyingParty& party, people::PeopleService& people,
               people::SignInService& sign_in, const Clock& clock)
      : settings_(std::move(settings)), party_(party), people_(people), sign_in_(sign_in), clock_(clock) {}

  const SsoSettings& settings() const { return settings_; }

  struct Started {
    std::string url;     // the provider's, to redirect the browser to
    std::string cookie;  // the flow's (FormatFlow), for the callback
  };
  // A new attempt that returns to `next` (a path of this site) once signed in.
  Result<Started> Begin(std::string_view next);

  struct Finished {
    people::NewSession session;
    int64_t began = 0;  // when the session started: its cookie lives until session.expires
    std::string user;
    std::string next;
  };
  // The provider's redirect back (`state`, `code`) with the flow's cookie, from `client`.
  Result<Finished> Finish(std::string_view cookie, std::string_view state, std::string_view code,
                          std::string_view client);

 private:
  // The user `who` is linked to, made and linked first when they are new.
  Result<people::AccountRecord> UserFor(const Identity& who);
  // The name a new user of `who` takes.
  Result<std::string> NameFor(const Identity& who) const;
  // Sets `user`'s memberships of the organizations `groups` names from `who`'s groups; whether one changed.
  Result<bool> SyncGroups(const people::AccountRecord& user, const Identity& who);

  SsoSettings settings_;
  RelyingParty& party_;
  people::PeopleService& people_;
  people::SignInService& sign_in_;
  const Clock& clock_;
};

}  // namespace cairn::oidc
