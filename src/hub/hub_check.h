// The Hub's part of `cairn fsck`: stored repository data that today's rules would refuse. An older cairn (or
// a database written by hand) may hold ref names git refuses, paths a file system reads as .git or that carry
// control characters, paths longer than kMaxPathBytes, trees naming an entry twice, commits whose messages
// run past the bounds, bucket files with malformed media types. The Hub serves such data safely (leaves such
// paths out, cuts such messages, answers such types as application/octet-stream); this reports where it is,
// so an operator can fix or remove it.
//
// Read-only: it changes nothing. Thread-safety: one call at a time per index is not required; it only reads.
// Failures: an error value when the index cannot be read; what it finds is findings, not errors.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/printable.h"
#include "hub/hub_service.h"
#include "index/index.h"

namespace cairn::hub {

struct HubFinding {
  std::string what;    // "ref", "path", "tree", "commit", "bucket-path", "content-type"
  std::string repo;    // "models/alice/m", "buckets/alice/b"
  std::string detail;  // printable (common/printable.h): every byte outside printable ASCII is written \xNN
};

struct HubCheckReport {
  uint64_t repos = 0, refs = 0, commits = 0, trees = 0, bucket_files = 0;
  std::vector<HubFinding> findings;
};

// Walks every repository: its refs, every commit reachable from them and every tree those commits name (each
// object once, without recursion, no deeper than a path kMaxPathBytes long), and every bucket's files.
Result<HubCheckReport> CheckHub(index::RepoIndex& index,
                                const std::function<void(const std::string&)>& progress = nullptr);

}  // namespace cairn::hub
