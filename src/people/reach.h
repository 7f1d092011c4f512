// What a person's token reaches: each namespace and repository it may act in, and how far, from the user's
// own namespace (everything), their organizations (by role: read, write, admin) and the token's role (read
// caps every level at read; write leaves them; a fine-grained token reaches only the namespaces and
// repositories it lists, each no further than "r" (read) or "w" (whatever the user may do there) and never
// beyond the user's own rights). A disabled organization reaches nothing. Pure function; any thread.
#pragma once

#include <vector>

#include "common/access.h"
#include "people/directory.h"

namespace cairn::people {

// The level a role in an organization grants.
Access AccessOfRole(OrgRole role);

// The person's reach now; a scope appears once.
std::vector<ScopeAccess> ReachOf(const Person& person);

}  // namespace cairn::people
