// People as an operator (the command line) and, next, the API manage them: users and organizations, which
// share one space of names (people/names.h), members of organizations with a role (read, write, admin), and
// the tokens users hold. Every token has an owner, a name, a role and a lifetime (at most kMaxTokenLife); its
// text is returned once, when it is made, and only the SHA-256 of its secret is kept (token_text.h).
//
// Thread-safety: every method may be called concurrently (the index serializes people's changes).
// Ownership: borrows the index and the clock, which must outlive the service.
// Failures: kMalformed for a name, role or text the site does not accept; kConflict for a name taken;
// kNotFound for an unknown user, organization or token; the index's own failures (kIo, kUnavailable) as they
// are.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "common/error.h"
#include "index/index.h"
#include "people/publishers.h"
#include "people/token_text.h"

namespace cairn::people {

using index::AccountKind;
using index::AccountRecord;
using index::OrgRole;
using index::TokenRecord;
using index::TokenRole;

// "read", "write", "admin" and back.
std::optional<OrgRole> ParseOrgRole(std::string_view name);
std::string_view OrgRoleName(OrgRole role);
// "read", "write", "fineGrained" (as the Hub names them) and back.
std::optional<TokenRole> ParseTokenRole(std::string_view name);
std::string_view TokenRoleName(TokenRole role);

// What a fine-grained token covers: a namespace ("acme") or a repository ("alice/model",
// "datasets/acme/data", "spaces/acme/app"), to read or also to write. Kept in TokenRecord::grants as one
// line per grant: "r SCOPE" or "w SCOPE".
struct Grant {
  std::string scope;
  bool write = false;
  bool operator==(const Grant&) const = default;
};
std::string FormatGrants(const std::vector<Grant>& grants);
// kMalformed for anything FormatGrants does not write, or a scope that names no namespace or repository.
Result<std::vector<Grant>> ParseGrants(std::string_view text);

// Who makes a change (index/audit_records.h).
using Actor = index::AuditActor;

// A token just made: its record, and its text, which nothing keeps.
struct NewToken {
  TokenRecord record;
  std::string text;
};

// A member of an organization, or an organization a user is a member of.
struct Membership {
  AccountRecord account;
  OrgRole role = OrgRole::kRead;
};

class Directory;  // people/directory.h

class PeopleService {
 public:
  static constexpr std::chrono::seconds kMaxTokenLife{366LL * 24 * 3600};
  static constexpr size_t kMaxTextBytes = 100;  // a full name, a token's name
  static constexpr size_t kMaxGrants = 64;

  // `directory` (optional; it outlives the service) is this node's view of people: it is refreshed after each
  // change made here, so that this node's checks see the change at once (the other nodes at their periodic
  // refresh). A refresh that fails is the change's error, though the change is made.
  PeopleService(index::PeopleIndex& index, const Clock& clock, Directory* directory = nullptr)
      : index_(index), clock_(clock), directory_(directory) {}

  // Every change is recorded in the audit log as `by`'s, in its own transaction (index.h's AuditIndex).
  Result<AccountRecord> CreateUser(const Actor& by, std::string_view name, std::string_view full_name,
                                   bool is_operator);
  Result<AccountRecord> CreateOrg(const Actor& by, std::string_view name, std::string_view full_name);
  // The account of that name and kind (nullopt: either); kNotFound when there is none of the kind.
  Result<AccountRecord> Find(std::string_view name, std::optional<AccountKind> kind);
  // The account with id `id`; kNotFound when none.
  Result<AccountRecord> Get(int64_t id);
  // Every account of `kind` (nullopt: both), in name order.
  Result<std::vector<AccountRecord>> List(std::optional<AccountKind> kind);

  // A disabled user's tokens are all refused; the user keeps the name, the repositories and the memberships.
  Status SetDisabled(const Actor& by, std::string_view user, bool disabled);
  Status SetOperator(const Actor& by, std::string_view user, bool is_operator);

  // Makes `user` a member of `org` with `role`, or no member (nullopt).
  Status SetRole(const Actor& by, std::string_view org, std::string_view user, std::optional<OrgRole> role);
  // The members of an organization, or the organizations of a user, with their roles.
  Result<std::vector<Membership>> Members(std::string_view org);
  Result<std::vector<Membership>> Organizations(std::string_view user);

  // A new token for `owner`, valid from now for `life` (0 < life <= kMaxTokenLife). A fine-grained token
  // needs grants (and only it may have any).
  Result<NewToken> CreateToken(const Actor& by, std::string_view owner, std::string_view name, TokenRole role,
                               const std::vector<Grant>& grants, std::chrono::seconds life);
  // The tokens `owner` holds (nullopt: everybody's), revoked and expired ones included, in id order.
  Result<std::vector<TokenRecord>> Tokens(std::optional<std::string_view> owner);
  // Revokes token `id` now; false when it was revoked already.
  Result<bool> Revoke(const Actor& by, std::string_view id);

  // A new trust policy (publishers.h) for the account `spec.ns` names (kNotFound when none).
  Result<PublisherRecord> CreatePublisher(const Actor& by, const PublisherSpec& spec);
  // The policies of namespace `ns` (nullopt: every namespace's), revoked ones included, in id order.
  Result<std::vector<PublisherRecord>> Publishers(std::optional<std::string_view> ns);
  // Revokes policy `id` now (the tokens exchanged under it stop working with it); false when it was revoked
  // already.
  Result<bool> RevokePublisher(const Actor& by, std::string_view id);
  // Policy `id` when namespace `ns` owns it; kNotFound otherwise (none, or another namespace's).
  Result<PublisherRecord> FindPublisher(std::string_view ns, std::string_view id);

 private:
  Result<AccountRecord> Create(const Actor& by, AccountKind kind, std::string_view name,
                               std::string_view full_name, bool is_operator);
  Result<std::vector<Membership>> WithAccounts(const std::vector<index::MemberRecord>& members, bool orgs);

  // After a change: the directory refreshed (when there is one).
  Status Changed();

  index::PeopleIndex& index_;
  const Clock& clock_;
  Directory* directory_;
};

}  // namespace cairn::people
