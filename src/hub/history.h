// What a repository's refs reach: every commit of their histories, the trees and blobs those commits name,
// and the links from the Git LFS pointers among the blobs to their Xet files. The garbage collector's mark
// reads it (what is live: every revision of every ref keeps downloading), a ref moved back onto an old commit
// revives it, and purge lists the large files it finds.
//
// Reads the index only (no cache: a collector must see what is stored now). Missing or unparsable objects are
// skipped, not errors (damage is fsck's to report). Thread-safety: pure functions over a thread-safe index.
// Failures: the index's, as values.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "hub/git_object.h"
#include "index/index.h"

namespace cairn::hub {

struct Reach {
  std::vector<std::vector<uint8_t>> keys;  // every object reached, once: commits, trees, blobs, links
  std::vector<xet::FileHash> files;        // the Xet files the links reached name, once each
  size_t missing =
      0;  // commits, trees and blobs named but not stored, and commits and trees that do not parse
};

// A large file met on the walk: the path it had and the commit that named it there.
struct ReachedPointer {
  LfsPointer pointer;
  std::string path;
  int64_t commit_time = 0;
};

struct WalkOptions {
  // Reads every commit and tree of the repository first, in pages, and walks them in memory: a page per 1,000
  // objects instead of a round trip per commit of a long history (the collector's mark). Memory: the
  // repository's commits and trees, at most 256 MiB of them (the rest is read as the walk meets it).
  bool preload = false;
  // Called for each LFS pointer blob the first time the walk meets it (newest commits first from each head).
  std::function<void(const ReachedPointer&)> on_pointer;
};

// From the commits `heads` (ids of commits of `repo`).
Result<Reach> ReachFrom(index::RepoIndex& index, int64_t repo, const std::vector<ObjectId>& heads,
                        const WalkOptions& options = {});
// From every ref of the repository (branches first, as ListRefs gives them).
Result<Reach> ReachFromRefs(index::RepoIndex& index, int64_t repo, const WalkOptions& options = {});

}  // namespace cairn::hub
