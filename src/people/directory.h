// What one node knows of people, to tell whom a person's token speaks for without asking the index on each
// request: every token (by id, with the SHA-256 of its secret), every account and every membership, kept
// current by Refresh, which reads only what changed since the last one (PeopleIndex::PeopleChangedSince).
// The server refreshes every interval; a token the directory does not know yet (made on another node since)
// makes Verify refresh at once, at most kUnknownRefreshesPerSecond times a second, so garbage tokens cannot
// make it hammer the index.
// A token revoked, a user disabled or a membership changed on any node is therefore refused or seen here
// within one refresh interval (plus one refresh's time); so is a trust policy created or revoked.
//
// Thread-safety: every method may be called from any thread (Verify shares a lock with the other readers).
// Ownership: borrows the index and the clock, which must outlive the directory.
// Failures: Verify answers kUnauthorized for every token it refuses (not one of this form, unknown, a wrong
// secret, revoked, expired, its owner disabled), in words that name no secret; Refresh the index's failures.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "common/error.h"
#include "index/index.h"
#include "people/people_service.h"

namespace cairn::people {

// Whom a verified token speaks for, and what it grants.
struct Person {
  int64_t user_id = 0;
  std::string user;  // the user's name: their namespace
  std::string full_name;
  bool is_operator = false;
  std::string token_id;
  std::string token_name;
  TokenRole role = TokenRole::kRead;
  std::vector<Grant> grants;  // fine-grained tokens
  int64_t expires = 0;        // the token's expiry (unix seconds): what it mints expires no later
  std::vector<std::pair<AccountRecord, OrgRole>> orgs;  // the user's organizations, with their roles
};

class Directory {
 public:
  // A token's last use is noted at most once this often (seconds): last use is coarse, not a write a request.
  static constexpr int64_t kUseResolution = 60;
  // Unknown tokens refresh the directory at most this often a second: tokens made elsewhere a moment ago work
  // at once (several in a row too), and a flood of made-up ones costs the index at most this many reads.
  static constexpr int kUnknownRefreshesPerSecond = 10;

  Directory(index::PeopleIndex& index, const Clock& clock) : index_(index), clock_(clock) {}

  // Reads every change since the last refresh.
  Status Refresh();
  // The person the token's text speaks for, now.
  Result<Person> Verify(std::string_view text);
  // Whose token `text` is — its owner's name and its id — when its secret matches a token the directory
  // knows, whether or not it still stands (revoked, expired, its owner disabled); nullopt otherwise. Names
  // who made a refused attempt (the audit log); it grants nothing.
  struct Holder {
    std::string user;
    std::string token_id;
  };
  std::optional<Holder> HolderOf(std::string_view text) const;
  // The person a browser session of user `user_id` speaks for, now: as a write token of theirs would (their
  // namespace and organizations by role), expiring at `expires`, named `session` in the audit log.
  // kUnauthorized when the user is unknown to this node or disabled: a disabled user's sessions end here
  // within one refresh, like their tokens.
  Result<Person> SessionPerson(int64_t user_id, int64_t expires, std::string_view session) const;
  // The generation read last.
  int64_t generation() const;
  // A live trust policy and the name of the namespace it grants into.
  struct Publisher {
    PublisherRecord record;
    std::string ns;
  };
  // The live policies of namespace `ns` whose owner may act (a disabled user's grant nothing).
  std::vector<Publisher> PublishersOf(std::string_view ns) const;
  // Whether policy `id` is live and its owner may act: a token exchanged under it works only while it is.
  bool PublisherLive(std::string_view id) const;

  // Refreshes because something asked for was unknown (a token, a trust policy made on another node a moment
  // ago), unless kUnknownRefreshesPerSecond such refreshes ran this second.
  void RefreshForUnknown();

  // The uses Verify noted since the last call (token id, time), for PeopleIndex::NoteTokenUses.
  std::vector<std::pair<std::string, int64_t>> TakeUses();

 private:
  Result<Person> PersonOf(const TokenRecord& token, std::string_view secret, int64_t now) const;
  // The user's organizations and roles (under mu_).
  std::vector<std::pair<AccountRecord, OrgRole>> OrgsOf(int64_t user_id) const;
  void NoteUse(const std::string& id, int64_t now);

  index::PeopleIndex& index_;
  const Clock& clock_;

  mutable std::shared_mutex mu_;
  int64_t generation_ = 0;
  std::unordered_map<std::string, TokenRecord> tokens_;
  std::unordered_map<int64_t, AccountRecord> accounts_;
  std::map<std::pair<int64_t, int64_t>, OrgRole> roles_;         // (user, org) -> role
  std::unordered_map<std::string, PublisherRecord> publishers_;  // revoked ones too: a later row replaces

  std::mutex refresh_mu_;       // one refresh at a time
  int64_t unknown_second_ = 0;  // the second the refreshes below were counted in
  int unknown_refreshes_ = 0;

  std::mutex uses_mu_;
  std::unordered_map<std::string, int64_t> noted_;     // token id -> last use noted
  std::vector<std::pair<std::string, int64_t>> uses_;  // not yet taken
};

}  // namespace cairn::people
