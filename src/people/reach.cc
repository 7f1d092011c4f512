#include "people/reach.h"

#include <string_view>

namespace cairn::people {
namespace {

// The namespace of a grant's scope: "acme" for "acme", "acme/model" and "datasets/acme/data".
std::string_view GrantNamespace(std::string_view scope) {
  const size_t slash = scope.find('/');
  if (slash == std::string_view::npos) return scope;
  const std::string_view rest = scope.substr(slash + 1);
  const size_t second = rest.find('/');
  if (second == std::string_view::npos) return scope.substr(0, slash);
  return rest.substr(0, second);
}

// How far the user may act in namespace `ns`, whatever the token.
Access RightsIn(const Person& p, std::string_view ns) {
  if (ns == p.user) return Access::kAdmin;
  for (const auto& [org, role] : p.orgs) {
    if (org.name == ns && !org.disabled) return AccessOfRole(role);
  }
  return Access::kNone;
}

void Add(std::vector<ScopeAccess>& out, std::string scope, Access access) {
  if (access == Access::kNone) return;
  for (ScopeAccess& s : out) {
    if (s.scope == scope) {
      s.access = std::max(s.access, access);
      return;
    }
  }
  out.push_back(ScopeAccess{.scope = std::move(scope), .access = access});
}

}  // namespace

Access AccessOfRole(OrgRole role) {
  switch (role) {
    case OrgRole::kRead:
      return Access::kRead;
    case OrgRole::kWrite:
      return Access::kWrite;
    case OrgRole::kAdmin:
      return Access::kAdmin;
  }
  return Access::kNone;
}

std::vector<ScopeAccess> ReachOf(const Person& p) {
  std::vector<ScopeAccess> out;
  if (p.role == TokenRole::kFineGrained) {
    for (const Grant& g : p.grants) {
      const Access cap = g.write ? Access::kAdmin : Access::kRead;
      Add(out, g.scope, Lesser(cap, RightsIn(p, GrantNamespace(g.scope))));
    }
    return out;
  }
  const Access cap = p.role == TokenRole::kWrite ? Access::kAdmin : Access::kRead;
  Add(out, p.user, cap);
  for (const auto& [org, role] : p.orgs) {
    if (!org.disabled) Add(out, org.name, Lesser(cap, AccessOfRole(role)));
  }
  return out;
}

}  // namespace cairn::people
