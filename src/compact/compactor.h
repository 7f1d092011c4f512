// Compaction: rewrites xorbs whose live share of bytes fell below a threshold (a folder uploaded in one go
// packs many small files into one xorb; deleting some leaves dead bytes inside a xorb that stays live) with
// their live chunks only, and moves the files that used them to the new xorbs (docs/operations.md,
// "Compaction").
//
// A run, under the index's collector lock (a collector and a compaction never run at once):
//  1. reads every file's terms and marks the chunks they use (files in the collector's quarantine, waiting
//     for their sweep, do not count: their chunks are dead already);
//  2. picks the xorbs whose live bytes are below `threshold` of their chunk region (quarantined ones aside:
//     the collector frees them whole) and packs their live chunks, in order and as stored (no recompression),
//     into new xorbs of at most the protocol's size;
//  3. for each new xorb: stores it through the CAS as an upload would (cas::CasService::PutXorb validates
//     every chunk) — step "xorb stored"; writes, per scope that sees the files using the replaced xorbs, a
//     shard describing those files with their new terms and listing the new xorb, verified as an uploaded
//     shard is (CasService::VerifyShard) and stored with its grant — "shards stored"; then moves the files,
//     registers the shards and marks the replaced xorbs superseded in one index transaction
//     (index::GcIndex::Repoint) — "repointed".
// A crash before the last step leaves a new xorb nothing uses (the collector frees it past its grace) and
// shards the index does not hold (fsck reports them unindexed, not damaged; a new run builds the same bytes
// from the same files and registers them); after it, the step is done. Nothing is ever between: the replaced
// xorbs stay stored, and whatever still names them (a reconstruction a client holds, a dedup answer, the
// 21-day cache of hf_xet) keeps reading them until the collector sweeps them, past its grace, once nothing
// uses them. The collector's report then says what compaction said it would free (CompactReport).
//
// Thread-safety: Run may be called from any thread; runs against one index are serialized by the lock. The
// index, store, CAS service and clock must outlive the compactor.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "cas/service.h"
#include "common/clock.h"
#include "common/error.h"
#include "index/index.h"

namespace cairn::compact {

struct CompactOptions {
  // A xorb is rewritten when its live bytes are less than this share of its chunk region (0 < t <= 1).
  double threshold = 0.5;
  // Plan and report; change nothing.
  bool dry_run = false;
  // At most this many new xorbs a run (0: no limit); the next run goes on.
  size_t max_new_xorbs = 0;
  // Tests: called after each step ("planned", then per new xorb "xorb stored", "shards stored",
  // "repointed"); an error ends the run there, as a kill would.
  std::function<Status(std::string_view step)> hook;
  const Clock* clock = &Clock::System();
};

struct CompactReport {
  bool dry_run = false;
  int64_t started_at = 0;  // unix seconds
  double seconds = 0;
  uint64_t files = 0;            // file records read
  uint64_t xorbs = 0;            // xorbs their terms use
  uint64_t candidates = 0;       // xorbs below the threshold
  uint64_t candidate_bytes = 0;  // their chunk regions
  uint64_t compacted_xorbs = 0;  // replaced by this run
  uint64_t new_xorbs = 0;        // written and registered
  uint64_t files_moved = 0;      // files given new terms
  uint64_t shards = 0;           // shards written for them
  uint64_t replaced_bytes =
      0;                       // chunk regions of the replaced xorbs: what the collector frees past its grace
  uint64_t written_bytes = 0;  // chunk regions of the new xorbs
  uint64_t conflicts = 0;      // steps given up because a file changed meanwhile (the next run retries)
  // What the store holds less once the collector has swept the replaced xorbs: replaced - written (a dry run:
  // what it would be).
  uint64_t freed_bytes() const { return replaced_bytes > written_bytes ? replaced_bytes - written_bytes : 0; }

  std::string ToJson() const;
};

class Compactor {
 public:
  // `cas`, `gc`: slices of the index `service` registers into.
  Compactor(index::CasIndex& cas, index::GcIndex& gc, cas::CasService& service, CompactOptions options);

  Result<CompactReport> Run();

 private:
  Status Step(std::string_view step) const;

  index::CasIndex& cas_;
  index::GcIndex& gc_;
  cas::CasService& service_;
  CompactOptions options_;
};

}  // namespace cairn::compact
