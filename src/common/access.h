// How far a credential reaches into a namespace or a repository: the levels a person's roles and tokens
// grant (people/), which the authenticator carries (http/auth.h) and the Hub checks (hub/hub_service.h).
// Plain values: any thread.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>

namespace cairn {

// Ordered: each level includes the ones before it.
enum class Access : uint8_t {
  kNone,
  kRead,   // read private repositories
  kWrite,  // create repositories; commit, tag, branch
  kAdmin,  // settings, visibility, move, delete; an organization's members
};

constexpr std::string_view AccessName(Access a) {
  switch (a) {
    case Access::kRead:
      return "read";
    case Access::kWrite:
      return "write";
    case Access::kAdmin:
      return "admin";
    case Access::kNone:
      break;
  }
  return "none";
}

constexpr Access Lesser(Access a, Access b) {
  return std::min(a, b);
}

// One namespace ("acme") or repository ("acme/model", "datasets/acme/data") a credential reaches, and how
// far.
struct ScopeAccess {
  std::string scope;
  Access access = Access::kNone;
  bool operator==(const ScopeAccess&) const = default;
};

}  // namespace cairn
