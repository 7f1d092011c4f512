// Trust policies ("trusted publishers"): an account's admin says whose OpenID Connect id tokens may be
// exchanged for a short-lived token to its namespace (every repository, or one): the issuer, the audience,
// and the claims the id token must carry with their values (a CI provider's repository and branch, say), and
// whether the token reads or writes. This file holds their form; PeopleService keeps them (people_service.h),
// a node's Directory knows the live ones, and src/publish/ checks id tokens against them.
//
// Pure functions: any thread. Failures: kMalformed naming what is wrong.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"
#include "index/people_records.h"

namespace cairn::people {

using index::PublisherRecord;

// A claim an id token must carry, with the value it must have (compared exactly, as text).
struct Claim {
  std::string name;
  std::string value;
  bool operator==(const Claim&) const = default;
};

// What a new policy says. `repo` is a repository in namespace `ns` ("acme/model", "datasets/acme/data") or
// empty for every repository of the namespace.
struct PublisherSpec {
  std::string ns;
  std::string repo;
  std::string issuer;
  std::string audience;
  std::vector<Claim> claims;
  index::TokenRole role = index::TokenRole::kWrite;  // kRead or kWrite
};

inline constexpr size_t kMaxClaims = 16;
inline constexpr size_t kMaxClaimName = 64;
inline constexpr size_t kMaxClaimValue = 256;
inline constexpr size_t kMaxIssuer = 512;

// Kept in PublisherRecord::claims as one "name=value" line per claim.
std::string FormatClaims(const std::vector<Claim>& claims);
Result<std::vector<Claim>> ParseClaims(std::string_view text);
// "name=value": a claim as the command line and the API take it.
Result<Claim> ParseClaim(std::string_view text);

// An issuer cairn will fetch keys from: an https URL without query, fragment or credentials, or an http one
// on a loopback host (a provider on the same machine, as in the tests).
bool ValidIssuer(std::string_view issuer);
// Whether `repo` names a repository in namespace `ns` ("ns/name", "datasets/ns/name", "spaces/ns/name").
bool RepoInNamespace(std::string_view repo, std::string_view ns);

// A new policy's id: "tp_" and 16 hex digits, random.
Result<std::string> NewPublisherId();

// Checks a spec's form (not whether its namespace exists).
Status CheckPublisherSpec(const PublisherSpec& spec);

}  // namespace cairn::people
