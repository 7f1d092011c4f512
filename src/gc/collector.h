// The garbage collector: frees the bytes of what nothing live references any more, late enough that no
// client can still count on them (docs/operations.md, "Deletion and garbage collection").
//
// A run, under the index's collector lock (one collector per index; others wait):
//  1. finishes the sweep of xorbs an earlier, interrupted run had claimed;
//  2. marks: every repository's refs are walked (hub/history.h); the objects of its history they do not reach
//     (a squashed history, a deleted branch's commits) are quarantined, and swept past the grace; every file
//     they reach, every file live by registration (index.h GcIndex: plain scopes, buckets' current files) and
//     the xorbs those use are wanted; a file or xorb that is not is quarantined, stamped with when a mark
//     first found it so; one wanted again is released;
//  3. sweeps what has been quarantined for longer than the grace period: the files (index records only),
//     then the xorbs, each in three steps: claim in the index (from then on nothing can revive it and no
//     dedup answer names it), delete its bytes, drop its record; a shard whose last xorb was claimed goes
//     the same way, with its grants (so that `cairn index rebuild` finds nothing of it).
// Every step is compare-and-delete in the index (GcIndex), so a write that named an object after the mark
// (a shard, a dedup answer, an upload, a commit) revived it and the sweep leaves it alone. A xorb is swept
// only when every file that uses it is swept in the same run. Killed at any point, a run leaves claims that
// the next one finishes and nothing else half done.
//
// Thread-safety: Run may be called from any thread; runs of one Collector (and of every process on the same
// index) are serialized by the lock. The index, store and clock must outlive the collector.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "common/clock.h"
#include "common/error.h"
#include "index/index.h"
#include "quota/quota_service.h"
#include "store/blob_store.h"

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
Status CheckGrace(std::string_view what, uint64_t grace_seconds, uint64_t dedup_key_expiry_seconds,
                  uint64_t transfer_url_ttl_seconds);
// 30 days: the minimum with the default settings (28 days and 1 hour), rounded up for clocks that disagree
// and uploads that take long.
inline constexpr uint64_t kDefaultGraceSeconds = 30 * 86400;

struct GcOptions {
  uint64_t grace_seconds = kDefaultGraceSeconds;
  bool dry_run = false;  // mark and report; change nothing
  size_t batch = 1000;   // objects per index transaction of a sweep (and store deletions between them)
  const Clock* clock = &Clock::System();
  // After sweeping repository objects, rewrite the index's database so their bytes leave its files at once
  // (ScrubDeleted with vacuum: SQLite VACUUM, PostgreSQL VACUUM FULL, which locks the tables while it runs).
  bool vacuum = false;
  // The mark's share of the time, in percent: after each page of the index it scans, it pauses so that its
  // reads take at most this share of the run (25: the mark takes about four times as long; 100: no pause).
  // Lowering the collector's CPU priority does not reach PostgreSQL, whose backend runs the mark's queries
  // beside those answering the server; pacing does (on 2 cores the reconstruction p99 while marking 10^6
  // files went from 5.2 ms at 100 % to 2.1 ms at 25 % and 1.5 ms at 10 %; BENCHMARKS.md).
  unsigned mark_share_percent = 25;
  // How the mark pauses: by default it sleeps; the scheduler waits on its stop instead, and an error ends the
  // run there.
  std::function<Status(std::chrono::nanoseconds)> pause;
  // Tests: called after each step of a run ("resumed", "repositories", "marked", "files swept", "claimed",
  // "deleted", "dropped"; "waiting for backups" each time its deletions find a backup running); an error
  // ends the run there, as a kill would.
  std::function<Status(std::string_view step)> hook;
  // Told when a run swept files or repository objects, so that the namespaces' quotas are measured again;
  // null: no quotas. Outlives the collector.
  quota::QuotaService* quota = nullptr;
  // Where a run that changed something is recorded (gc.run, when it ends: a run is many transactions), as
  // `actor`'s; null: nowhere. Outlives the collector.
  index::AuditIndex* audit = nullptr;
  index::AuditActor actor;
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
  uint64_t swept_shards = 0;     // shards all of whose xorbs went, deleted with their grants
  uint64_t reclaimed_shard_bytes = 0;
  uint64_t finished_revocations = 0;      // cleared revocations whose blobs this run deleted (cas/grant.h)
  double waited_for_backups = 0;          // seconds its deletions waited for running backups
  uint64_t repos = 0;                     // repositories walked (buckets aside)
  uint64_t unwalkable_repos = 0;          // part of their history missing or unreadable: none of it collected
  uint64_t reached_files = 0;             // files their refs reach
  uint64_t repo_objects = 0;              // their objects scanned
  uint64_t quarantined_repo_objects = 0;  // unreachable, after the mark
  uint64_t reclaimable_repo_bytes = 0;    // unreachable past the grace: what the sweep frees
  uint64_t swept_repo_objects = 0;        // deleted (past the grace)
  uint64_t quotas_measured = 0;           // namespaces' quotas measured again after the sweep
  uint64_t reclaimed_repo_bytes = 0;      // their bytes, in the index's database
  std::string scrub;                      // what ScrubDeleted did, when it ran

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
  uint64_t claimed_shards = 0;
};
Result<Lifecycle> ReadLifecycle(index::GcIndex& gc, int64_t now, uint64_t grace_seconds);
// The xorbs and shards a sweep has claimed and not dropped yet: their blobs may be gone
// (repair::FsckOptions).
Result<std::vector<xet::Hash>> BeingSwept(index::GcIndex& gc);

class Collector {
 public:
  // `cas`, `repos` and `gc` are three slices of one index.
  Collector(index::CasIndex& cas, index::RepoIndex& repos, index::GcIndex& gc, store::BlobStore& store,
            GcOptions options);

  Result<GcReport> Run();

 private:
  // One run's state and steps, in order (collector.cc).
  class Pass;

  Status Step(std::string_view step) const;
  // Records run `r` in options_.audit.
  void Record(const GcReport& r) const;
  // Takes the deletion hold (index.h HoldDeletions) into `hold` unless it is there already, waiting while
  // backups hold it: a backup copies every stored object its snapshot names, so none goes until it is done.
  Status HoldDeletions(std::unique_ptr<index::GcLock>& hold, GcReport& report) const;
  // Deletes the bytes of claimed xorbs, then their records (while the lock still holds).
  Status FinishClaimed(std::span<const xet::XorbHash> claimed, index::GcLock& lock,
                       std::unique_ptr<index::GcLock>& hold, GcReport& report, uint64_t& counter);
  // Deletes every claimed shard's blob and grants, then its record.
  Status FinishShards(index::GcLock& lock, std::unique_ptr<index::GcLock>& hold, GcReport& report);

  // Step 2's first half: walks each repository, quarantines, releases and sweeps its objects, and adds the
  // files its refs reach to `reached`.
  Status MarkRepositories(int64_t now, int64_t cutoff, std::vector<xet::FileHash>& reached, GcReport& report);
  Status MarkRepository(const index::RepoRecord& repo, int64_t now, int64_t cutoff,
                        std::vector<xet::FileHash>& reached, GcReport& report);

  index::CasIndex& cas_;
  index::RepoIndex& repos_;
  index::GcIndex& gc_;
  store::BlobStore& store_;
  GcOptions options_;
};

}  // namespace cairn::gc
