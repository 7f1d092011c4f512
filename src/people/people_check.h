// The people part of `cairn fsck`: the index's accounts, memberships, tokens and trust policies checked
// against the rules cairn writes them by (what the schema itself enforces — a hash's length, the roles'
// values, unique names — is not checked again). cairn never writes what this finds; a database edited by
// hand, a restore of a damaged copy or a bug would. Each finding says whether it is damage (something that
// grants what it should not, grants nothing it should, or that no node will ever read) or a notice:
//  - accounts: a name outside the Hub's rules; the operator flag on an organization;
//  - memberships: of something that is no organization, or by something that is no user;
//  - tokens: an owner that is no user; a fine-grained token whose grants do not parse (refused on use);
//  - trust policies: an owner that is unknown; a repository outside its owner's namespace; an issuer that is
//    not https (or loopback http); no claims, or claims that do not parse;
//  - any row stamped with a people generation past the index's own: every node's refresh skips it until the
//    generation passes it, so a revocation there would be ignored (damage);
//  - a notice: an organization without an admin (nobody can change its members but an operator).
//
// Read-only. Failures: an error value when the index cannot be read; what it finds is findings.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/error.h"
#include "index/index.h"

namespace cairn::people {

struct PeopleFinding {
  std::string what;    // "account", "member", "token", "publisher"
  std::string id;      // the account's name, "org/user", the token's or the policy's id
  std::string detail;  // printable
  bool damage = true;  // false: a notice
};

struct PeopleCheckReport {
  uint64_t accounts = 0, members = 0, tokens = 0, publishers = 0;
  int64_t generation = 0;  // the index's people generation
  std::vector<PeopleFinding> findings;
  bool damaged() const {
    for (const auto& f : findings) {
      if (f.damage) return true;
    }
    return false;
  }
};

Result<PeopleCheckReport> CheckPeople(index::PeopleIndex& index);

}  // namespace cairn::people
