// The garbage collector: frees the bytes of what nothing live references any more, late enough that no
// client can still count on them (docs/operations.md, "Deletion and garbage collection").
//
// A run, under the index's collector lock (one collector per index; others wait):
//  1. finishes the sweep of xorbs an earlier, interrupted run had claimed;
//  2. marks: every file live by registration (index.h GcIndex) and the xorbs they use are wanted; a file or
//     xorb that is not is quarantined, stamped with when a mark first found it so; one wanted again is
//     released;
//  3. sweeps what has been quarantined for longer than the grace period: the files (index records only),
//     then the xorbs, each in three steps: claim in the index (from then on nothing can revive it and no
//     dedup answer names it), delete its bytes, drop its record.
// Every step is compare-and-delete in the index (GcIndex), so a write that named an object after the mark
// (a shard, a dedup answer, an upload, a commit) revived it and the sweep leaves it alone. A xorb is swept
// only when every file that uses it is swept in the same run. Killed at any point, a run leaves claims that
// the next one finishes and nothing else half done.
//
// Thread-safety: Run may be called from any thread; runs of one Collector (and of every process on the same
// index) are serialized by the lock. The index, store and clock must outlive the collector.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "common/clock.h"
#include "index/index.h"
#include "store/blob_store.h"
#include "xet/result.h"

namespace cairn::gc {

// What the clients may still hold when an object becomes unreferenced (docs/operations.md):
// hf_xet keeps the shards of its own uploads, and the xorb metadata it keeps to resume one, for 3 weeks
// (MDB_SHARD_LOCAL_CACHE_EXPIRATION) and dedups new files against them without asking the server.
inline constexpr uint64_t kClientShardCacheSeconds = 21 * 86400;
// The least grace that covers the clients: their shard cache, plus how long a dedup answer may be used
// (the server's dedup_key_expiry), plus the longest transfer URL (transfer_url_ttl).
uint64_t MinimumGraceSeconds(uint64_t dedup_key_expiry_seconds, uint64_t transfer_url_ttl_seconds);
// "28 d 1 h": a grace period as the messages and reports give it.
std::string Days(uint64_t seconds);
// Ok when `grace_seconds` covers the clients (MinimumGraceSeconds); otherwise kMalformed, saying what the
// clients hold and for how long (for the setting or flag named `what`).
xet::Status CheckGrace(std::string_view what, uint64_t grace_seconds, uint64_t dedup_key_expiry_seconds,
                       uint64_t transfer_url_ttl_seconds);
// 30 days: the minimum with the default settings (28 days and 1 hour), rounded up for clocks that disagree
// and uploads that take long.
inline constexpr uint64_t kDefaultGraceSeconds = 30 * 86400;

struct GcOptions {
  uint64_t grace_seconds = kDefaultGraceSeconds;
  bool dry_run = false;  // mark and report; change nothing
  size_t batch = 1000;   // objects per index transaction of a sweep (and store deletions between them)
  const Clock* clock = &Clock::System();
  // Tests: called after each step of a run ("resumed", "marked", "files swept", "claimed", "deleted",
  // "dropped"); an error ends the run there, as a kill would.
  std::function<xet::Status(std::string_view step)> hook;
};

struct GcReport {
  bool dry_run = false;
  int64_t started_at = 0;  // unix seconds
  double seconds = 0;
  uint64_t files = 0;              // registered files scanned
  uint64_t live_files = 0;         // live by registration
  uint64_t xorbs = 0;              // registered xorbs scanned
  uint64_t newly_quarantined = 0;  // files and xorbs this mark found unreferenced for the first time
  uint64_t released = 0;           // files and xorbs wanted again
  uint64_t quarantined_files = 0;  // in quarantine after the mark, swept ones included
  uint64_t quarantined_xorbs = 0;
  uint64_t quarantined_bytes = 0;  // their chunk regions
  uint64_t reclaimable_xorbs = 0;  // past the grace at this run: what the sweep frees (a dry run: would)
  uint64_t reclaimable_bytes = 0;
  uint64_t swept_files = 0;
  uint64_t swept_xorbs = 0;
  uint64_t reclaimed_bytes = 0;  // chunk regions of the xorbs deleted
  uint64_t resumed_xorbs = 0;    // claimed by an interrupted run and deleted by this one

  std::string ToJson() const;
};

// What the quarantine holds now (`cairn fsck` shows it): unreferenced files and xorbs inside the grace, those
// past it (reclaimable: the next run frees them), and xorbs an interrupted sweep claimed (the next run
// finishes them). None of it is damage: every quarantined object is still whole.
struct Lifecycle {
  uint64_t quarantined_files = 0;
  uint64_t quarantined_xorbs = 0;
  uint64_t quarantined_bytes = 0;  // chunk regions of the quarantined xorbs
  uint64_t reclaimable_xorbs = 0;  // quarantined for longer than the grace at `now`
  uint64_t reclaimable_bytes = 0;
  uint64_t claimed_xorbs = 0;  // by a sweep that did not finish
};
xet::Result<Lifecycle> ReadLifecycle(index::GcIndex& gc, int64_t now, uint64_t grace_seconds);

class Collector {
 public:
  // `cas` and `gc` are two slices of one index.
  Collector(index::CasIndex& cas, index::GcIndex& gc, store::BlobStore& store, GcOptions options);

  xet::Result<GcReport> Run();

 private:
  xet::Status Step(std::string_view step) const;
  // Deletes the bytes of claimed xorbs, then their records (while the lock still holds).
  xet::Status FinishClaimed(std::span<const xet::XorbHash> claimed, index::GcLock& lock, GcReport& report,
                            uint64_t& counter);

  index::CasIndex& cas_;
  index::GcIndex& gc_;
  store::BlobStore& store_;
  GcOptions options_;
};

}  // namespace cairn::gc
