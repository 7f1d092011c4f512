// The API's bound on a path's length (ValidPath: at most kMaxPathBytes) applied to the trees a client
// pushes or a mirror or bundle brings: a tree holds no path longer than the API would accept, so no listing
// serves one and no walk of the tree goes deeper than kMaxTreeDepth folders.
//
// The check walks without recursion, breadth first (a read of the trees not given per 1,000 of a level) and
// stops at the first level past kMaxTreeDepth, so a deep or long input costs no stack and a bounded walk.
// Pure over what `bodies` gives; thread-safe as that is. Failures: kLimit naming the path refused, or the
// error `bodies` returned.
#pragma once

#include <cstddef>
#include <functional>
#include <span>
#include <vector>

#include "common/error.h"
#include "hub/git_object.h"

namespace cairn::hub {

// A path's length at most (hub::ValidPath).
inline constexpr size_t kMaxPathBytes = 4096;
// A folder at this depth below the root has a path of at least 2 * depth - 1 bytes ("a/a/…/a"): no deeper
// one can hold a path within kMaxPathBytes.
inline constexpr size_t kMaxTreeDepth = (kMaxPathBytes + 1) / 2;

// Calls `found(i, body)` with the body of each tree of `ids` it holds (ids[i]); one it does not hold (not
// stored, or not a tree) is left out, and nothing under it is counted.
using TreeBodies = std::function<Status(const std::vector<ObjectId>& ids,
                                        const std::function<void(size_t, std::span<const uint8_t>)>& found)>;

// Whether every path under each of `roots` (tree ids), as the Hub lists them (a folder's name, a file's,
// joined by '/'), is at most kMaxPathBytes long. A tree that does not parse counts as empty (the caller
// refuses it).
Status CheckPathLengths(const std::vector<ObjectId>& roots, const TreeBodies& bodies);

}  // namespace cairn::hub
