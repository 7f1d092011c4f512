// The index's records of people (src/people/ gives them meaning): accounts — users and organizations, which
// share one space of names —, the members of each organization with their role, and the tokens users hold,
// kept as a hash of each secret, never the secret, and the trust policies of trusted publishers. Accounts are
// never deleted (a disabled one keeps its name, so that no one else takes it over with its repositories); a
// removed membership and a revoked token stay as rows that say so, so that every node's refresh
// (PeopleIndex::PeopleChangedSince) learns of the removal.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "index/audit_records.h"

namespace cairn::index {

// Stored as their numbers: never renumber.
enum class AccountKind : uint8_t { kUser = 0, kOrg = 1 };
enum class OrgRole : uint8_t { kRead = 0, kWrite = 1, kAdmin = 2 };
enum class TokenRole : uint8_t { kRead = 0, kWrite = 1, kFineGrained = 2 };

struct AccountRecord {
  int64_t id = 0;  // never reused
  AccountKind kind = AccountKind::kUser;
  std::string name;          // the account's namespace; unique among users and organizations, case aside
  std::string full_name;     // shown beside the name; may be empty
  bool is_operator = false;  // a user who runs the site (users only)
  bool disabled = false;     // a user whose tokens are all refused
  int64_t created_at = 0;    // unix seconds
  int64_t changed = 0;       // the people generation of its last change
};

struct NewAccount {
  AccountKind kind = AccountKind::kUser;
  std::string name;
  std::string full_name = {};
  bool is_operator = false;
  int64_t created_at = 0;
  std::optional<AuditEvent> audit = std::nullopt;  // written with the account, when it is created
};

// What UpdateAccount changes: the fields given.
struct AccountChange {
  std::optional<std::string> full_name = std::nullopt;
  std::optional<bool> is_operator = std::nullopt;
  std::optional<bool> disabled = std::nullopt;
  std::optional<AuditEvent> audit = std::nullopt;  // written with the change, when it is made
};

// A user's membership of an organization.
struct MemberRecord {
  int64_t org = 0;
  int64_t user = 0;
  std::optional<OrgRole> role;  // nullopt: removed
  int64_t changed = 0;
};

// A token a user holds. The index stores and compares these fields; it reads none of `grants`.
struct TokenRecord {
  std::string id;  // public: shown in listings and the audit log, part of the token's text
  int64_t owner = 0;
  std::string name;  // the owner's label for it
  TokenRole role = TokenRole::kRead;
  std::string grants;                // fine-grained tokens: what they cover, in src/people/'s form
  std::vector<uint8_t> secret_hash;  // SHA-256 of the secret: 32 bytes
  int64_t created_at = 0;
  int64_t expires_at = 0;    // every token expires
  int64_t last_used_at = 0;  // coarse (PeopleIndex::NoteTokenUse); 0: never used
  int64_t revoked_at = 0;    // 0: live
  int64_t changed = 0;
};

// A trust policy (a "trusted publisher"): whose id tokens may be exchanged for a short-lived token to one
// namespace's repositories, issued by `issuer` for `audience` and carrying `claims`. The index stores and
// compares these fields; it reads none of `claims`.
struct PublisherRecord {
  std::string id;     // public: shown in listings, in the audit log and in the tokens it grants
  int64_t owner = 0;  // the account (user or organization) whose namespace it grants into
  std::string
      repo;  // the repository it grants ("acme/model", "datasets/acme/data"); empty: every one of owner's
  std::string issuer;
  std::string audience;
  std::string claims;                  // what the id token must carry, in src/people/'s form
  TokenRole role = TokenRole::kWrite;  // kRead or kWrite
  int64_t created_at = 0;
  int64_t revoked_at = 0;  // 0: live
  int64_t changed = 0;
};

// How account names are compared: ASCII letters without case (names are ASCII: hub::ValidName).
inline std::string FoldedName(std::string_view name) {
  std::string out(name);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

// Every change to people after a generation: what a node's refresh reads (PeopleIndex::PeopleChangedSince).
struct PeopleChanges {
  int64_t generation = 0;  // the newest change included
  std::vector<AccountRecord> accounts;
  std::vector<MemberRecord> members;
  std::vector<TokenRecord> tokens;
  std::vector<PublisherRecord> publishers;
};

// A browser's session (sign-in): the cookie carries its id and a secret; the index keeps the secret's
// SHA-256 only, like a token's.
// A person of a company's OpenID Connect provider (its issuer and their subject there) linked to a user.
struct IdentityRecord {
  std::string issuer;
  std::string subject;
  int64_t user = 0;
  int64_t created_at = 0;  // unix seconds
  friend bool operator==(const IdentityRecord&, const IdentityRecord&) = default;
};

struct SessionRecord {
  std::string id;                    // 32 lowercase hex digits
  std::vector<uint8_t> secret_hash;  // SHA-256 of the secret (32 bytes)
  int64_t user = 0;                  // the account signed in
  int64_t created_at = 0;            // unix seconds
  int64_t expires_at = 0;            // unix seconds: refused from then on
  std::string method;                // how they signed in: "password", "oidc"
  std::string client;                // the client's address then
  friend bool operator==(const SessionRecord&, const SessionRecord&) = default;
};

// A device's sign-in (RFC 8628, `hf auth login`): the device polls with its code, whose SHA-256 the index
// keeps; a person signed in to the pages approves or denies it by the short user code; a token is issued
// for it once.
enum class DeviceGrantState : uint8_t { kPending = 0, kApproved = 1, kDenied = 2, kIssued = 3 };
struct DeviceGrantRecord {
  std::vector<uint8_t> device_hash;  // SHA-256 of the device code (32 bytes)
  std::string user_code;             // "BCDF-GHJK"
  std::string client_id;
  int64_t created_at = 0;
  int64_t expires_at = 0;
  DeviceGrantState state = DeviceGrantState::kPending;
  int64_t user = 0;       // who approved or denied it (0: nobody yet)
  int64_t polled_at = 0;  // the device's last poll (0: none yet)
  friend bool operator==(const DeviceGrantRecord&, const DeviceGrantRecord&) = default;
};

}  // namespace cairn::index
