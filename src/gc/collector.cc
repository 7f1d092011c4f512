#include "gc/collector.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <optional>
#include <set>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "cas/grant.h"
#include "common/json_report.h"
#include "hub/file_link.h"
#include "hub/history.h"

namespace cairn::gc {

namespace {

using index::GcKind;
using index::Quarantined;
using xet::Hash;

constexpr size_t kPage = index::CasIndex::kMaxScanned;
// Files come with their terms (200 a file in the benchmarks): a smaller page keeps each read short, so the
// pauses between them spread the mark's load.
constexpr size_t kFilePage = 1000;

// A set of hashes built once and then only asked: a sorted vector (32 bytes a hash, where a hash set takes
// about three times that; a mark holds one entry per xorb). Repeats are squeezed out whenever the vector
// doubles, so memory follows the distinct hashes, not the references (a xorb 200 files share is added 200
// times).
class HashSet {
 public:
  void Add(const Hash& h) {
    v_.push_back(h);
    if (v_.size() >= squeeze_at_) {
      Freeze();
      squeeze_at_ = std::max<size_t>(2 * v_.size(), kMinSqueeze);
    }
  }
  void Freeze() {
    std::sort(v_.begin(), v_.end());
    v_.erase(std::unique(v_.begin(), v_.end()), v_.end());
  }
  bool Has(const Hash& h) const { return std::binary_search(v_.begin(), v_.end(), h); }

 private:
  static constexpr size_t kMinSqueeze = 1 << 20;
  std::vector<Hash> v_;
  size_t squeeze_at_ = kMinSqueeze;
};

using QuarantineMap = std::unordered_map<Hash, Quarantined, xet::HashHasher>;

Result<QuarantineMap> LoadQuarantine(index::GcIndex& gc, GcKind kind) {
  QuarantineMap out;
  std::optional<Hash> after;
  for (;;) {
    auto page = gc.ScanQuarantine(kind, after, kPage);
    if (!page.ok()) return page.error();
    for (const Quarantined& q : *page) out.emplace(q.hash, q);
    if (page->size() < kPage) return out;
    after = page->back().hash;
  }
}

// Paces a scan (GcOptions::mark_share_percent): Page() after each page pauses in proportion to the time
// the page took, so that the index answers others between the mark's reads.
class Pacer {
 public:
  explicit Pacer(const GcOptions& o) : share_(std::clamp(o.mark_share_percent, 1u, 100u)), pause_(o.pause) {}
  Status Page() {
    if (share_ >= 100) return Ok{};
    const auto busy = std::chrono::steady_clock::now() - start_;
    const auto wait = std::chrono::duration_cast<std::chrono::nanoseconds>(busy * (100 - share_) / share_);
    Status st = Ok{};
    if (pause_) {
      st = pause_(wait);
    } else {
      std::this_thread::sleep_for(wait);
    }
    start_ = std::chrono::steady_clock::now();
    return st;
  }

 private:
  const unsigned share_;
  const std::function<Status(std::chrono::nanoseconds)>& pause_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

// Runs `fn` on consecutive slices of at most `n` elements of `all`.
template <typename T, typename Fn>
Status InBatches(const std::vector<T>& all, size_t n, Fn fn) {
  for (size_t at = 0; at < all.size(); at += n) {
    if (auto st = fn(std::span<const T>(all).subspan(at, std::min(n, all.size() - at))); !st.ok()) return st;
  }
  return Ok{};
}

}  // namespace

uint64_t MinimumGraceSeconds(uint64_t dedup_key_expiry_seconds, uint64_t transfer_url_ttl_seconds) {
  return kClientShardCacheSeconds + dedup_key_expiry_seconds + transfer_url_ttl_seconds;
}

std::string Days(uint64_t seconds) {
  const uint64_t days = seconds / 86400;
  const uint64_t hours = seconds % 86400 / 3600;
  return std::to_string(days) + " d" + (hours != 0 ? " " + std::to_string(hours) + " h" : "");
}

Status CheckGrace(std::string_view what, uint64_t grace_seconds, uint64_t dedup_key_expiry_seconds,
                  uint64_t transfer_url_ttl_seconds) {
  const uint64_t minimum = MinimumGraceSeconds(dedup_key_expiry_seconds, transfer_url_ttl_seconds);
  if (grace_seconds >= minimum) return Ok{};
  return Malformed(std::string(what) + ": a grace of " + Days(grace_seconds) + " is shorter than the " +
                   Days(minimum) +
                   " clients may still count on what was deleted (their shard cache keeps own uploads 21 "
                   "d, a dedup answer is usable for dedup_key_expiry, a transfer URL for "
                   "transfer_url_ttl; docs/operations.md): an upload of theirs could then fail");
}

std::string GcReport::ToJson() const {
  JsonReport r;
  r.Bool("dry_run", dry_run);
  r.Signed("started_at", started_at);
  r.Real("seconds", seconds);
  r.Number("files", files);
  r.Number("live_files", live_files);
  r.Number("xorbs", xorbs);
  r.Number("newly_quarantined", newly_quarantined);
  r.Number("released", released);
  r.Number("quarantined_files", quarantined_files);
  r.Number("quarantined_xorbs", quarantined_xorbs);
  r.Number("quarantined_bytes", quarantined_bytes);
  r.Number("reclaimable_xorbs", reclaimable_xorbs);
  r.Number("reclaimable_bytes", reclaimable_bytes);
  r.Number("swept_files", swept_files);
  r.Number("swept_xorbs", swept_xorbs);
  r.Number("reclaimed_bytes", reclaimed_bytes);
  r.Number("resumed_xorbs", resumed_xorbs);
  r.Number("swept_shards", swept_shards);
  r.Number("reclaimed_shard_bytes", reclaimed_shard_bytes);
  r.Number("finished_revocations", finished_revocations);
  r.Real("waited_for_backups", waited_for_backups);
  r.Number("repos", repos);
  r.Number("unwalkable_repos", unwalkable_repos);
  r.Number("reached_files", reached_files);
  r.Number("repo_objects", repo_objects);
  r.Number("quarantined_repo_objects", quarantined_repo_objects);
  r.Number("reclaimable_repo_bytes", reclaimable_repo_bytes);
  r.Number("swept_repo_objects", swept_repo_objects);
  r.Number("quotas_measured", quotas_measured);
  r.Number("reclaimed_repo_bytes", reclaimed_repo_bytes);
  r.String("scrub", scrub);
  return r.Text();
}

Result<std::vector<xet::Hash>> BeingSwept(index::GcIndex& gc) {
  std::vector<xet::Hash> out;
  for (GcKind kind : {GcKind::kXorb, GcKind::kShard}) {
    auto q = LoadQuarantine(gc, kind);
    if (!q.ok()) return q.error();
    for (const auto& [h, r] : *q) {
      if (r.claimed_at != 0) out.push_back(h);
    }
  }
  return out;
}

Result<Lifecycle> ReadLifecycle(index::GcIndex& gc, int64_t now, uint64_t grace_seconds) {
  Lifecycle out;
  auto shards = LoadQuarantine(gc, GcKind::kShard);
  if (!shards.ok()) return shards.error();
  out.claimed_shards = shards->size();
  const int64_t cutoff = now - static_cast<int64_t>(grace_seconds);
  for (GcKind kind : {GcKind::kFile, GcKind::kXorb}) {
    auto q = LoadQuarantine(gc, kind);
    if (!q.ok()) return q.error();
    for (const auto& [h, r] : *q) {
      if (kind == GcKind::kFile) {
        ++out.quarantined_files;
        continue;
      }
      ++out.quarantined_xorbs;
      out.quarantined_bytes += r.bytes;
      if (r.claimed_at != 0) {
        ++out.claimed_xorbs;
      } else if (r.since <= cutoff) {
        ++out.reclaimable_xorbs;
        out.reclaimable_bytes += r.bytes;
      }
    }
  }
  return out;
}

Collector::Collector(index::CasIndex& cas, index::RepoIndex& repos, index::GcIndex& gc,
                     store::BlobStore& store, GcOptions options)
    : cas_(cas), repos_(repos), gc_(gc), store_(store), options_(std::move(options)) {}

Status Collector::MarkRepositories(int64_t now, int64_t cutoff, std::vector<xet::FileHash>& reached,
                                   GcReport& report) {
  for (auto type : {index::RepoType::kModel, index::RepoType::kDataset, index::RepoType::kSpace}) {
    std::optional<std::pair<std::string, std::string>> after;
    for (;;) {
      auto page = repos_.ListRepos(type, std::nullopt, after, index::RepoIndex::kMaxListedRepos);
      if (!page.ok()) return page.error();
      for (const auto& repo : *page) {
        if (auto st = MarkRepository(repo, now, cutoff, reached, report); !st.ok()) return st;
      }
      if (page->size() < index::RepoIndex::kMaxListedRepos) break;
      after = std::pair{page->back().ns, page->back().name};
    }
  }
  return Ok{};
}

Status Collector::MarkRepository(const index::RepoRecord& repo, int64_t now, int64_t cutoff,
                                 std::vector<xet::FileHash>& reached, GcReport& report) {
  ++report.repos;
  hub::WalkOptions walk;
  walk.preload = true;  // a long history costs pages, not a round trip per commit
  auto reach = hub::ReachFromRefs(repos_, repo.id, walk);
  if (!reach.ok()) return reach.error();
  if (reach->missing > 0) {
    // Part of its history is missing or unreadable (damage fsck reports): what that part reaches is unknown,
    // so nothing of the repository is collected this run, and every large file it links stays live.
    ++report.unwalkable_repos;
    std::optional<std::vector<uint8_t>> after;
    for (;;) {
      auto links =
          repos_.ListRepoObjects(repo.id, hub::FileLink::kKind, after, index::RepoIndex::kMaxObjectsPerRead);
      if (!links.ok()) return links.error();
      for (const auto& l : *links) {
        if (auto file = hub::FileLink::FileNamed(l)) reached.push_back(*file);
      }
      if (links->size() < index::RepoIndex::kMaxObjectsPerRead) return Ok{};
      after = links->back().key;
    }
  }
  report.reached_files += reach->files.size();
  reached.insert(reached.end(), reach->files.begin(), reach->files.end());
  const std::set<std::vector<uint8_t>> live(reach->keys.begin(), reach->keys.end());
  // Every object of the repository: reached ones are released, the others quarantined, and those
  // unreachable for longer than the grace deleted (compare and delete: a commit or a ref naming one again
  // since the walk revived it).
  std::vector<std::vector<uint8_t>> fresh, wanted;
  std::vector<index::RepoObjectMark> sweep;
  std::optional<std::vector<uint8_t>> after;
  Pacer pacer(options_);
  for (;;) {
    auto page = gc_.ScanRepoObjects(repo.id, after, kPage);
    if (!page.ok()) return page.error();
    for (auto& o : *page) {
      ++report.repo_objects;
      if (live.contains(o.key)) {
        if (o.since != 0) wanted.push_back(o.key);
        continue;
      }
      ++report.quarantined_repo_objects;
      if (o.since == 0) {
        fresh.push_back(o.key);
      } else if (o.since <= cutoff) {
        report.reclaimable_repo_bytes += o.size;
        sweep.push_back(o);
      }
    }
    if (auto st = pacer.Page(); !st.ok()) return st;
    if (page->size() < kPage) break;
    after = page->back().key;
  }
  if (options_.dry_run) return Ok{};
  if (auto st = InBatches(fresh, kPage,
                          [&](std::span<const std::vector<uint8_t>> b) {
                            return gc_.QuarantineRepoObjects(repo.id, {b.begin(), b.end()}, now);
                          });
      !st.ok()) {
    return st;
  }
  if (auto st = InBatches(wanted, kPage,
                          [&](std::span<const std::vector<uint8_t>> b) {
                            return gc_.ReleaseRepoObjects(repo.id, {b.begin(), b.end()});
                          });
      !st.ok()) {
    return st;
  }
  return InBatches(sweep, options_.batch, [&](std::span<const index::RepoObjectMark> b) -> Status {
    auto swept = gc_.SweepRepoObjects(repo.id, b);
    if (!swept.ok()) return swept.error();
    report.swept_repo_objects += swept->objects;
    report.reclaimed_repo_bytes += swept->bytes;
    return Ok{};
  });
}

Status Collector::Step(std::string_view step) const {
  return options_.hook ? options_.hook(step) : Status(Ok{});
}

Status Collector::HoldDeletions(std::unique_ptr<index::GcLock>& hold, GcReport& report) const {
  const auto t0 = std::chrono::steady_clock::now();
  while (hold == nullptr) {
    auto got = gc_.HoldDeletions(index::GcIndex::DeletionHold::kExclusive, /*wait=*/false);
    if (!got.ok()) return got.error();
    hold = std::move(*got);
    if (hold != nullptr) break;
    if (auto st = Step("waiting for backups"); !st.ok()) return st;
    constexpr auto kRetry = std::chrono::seconds(1);
    if (options_.pause) {
      if (auto st = options_.pause(kRetry); !st.ok()) return st;
    } else {
      std::this_thread::sleep_for(kRetry);
    }
  }
  report.waited_for_backups += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return Ok{};
}

Status Collector::FinishClaimed(std::span<const xet::XorbHash> claimed, index::GcLock& lock,
                                std::unique_ptr<index::GcLock>& hold, GcReport& report, uint64_t& counter) {
  if (claimed.empty()) return Ok{};
  if (auto st = HoldDeletions(hold, report); !st.ok()) return st;
  // A collector that lost its lock may have been replaced by another, which may have finished these
  // claims and let the xorbs be uploaded again: it must not delete them now.
  if (auto st = lock.Check(); !st.ok()) return st;
  if (auto del = store_.DeleteMany(store::BlobKind::kXorb, claimed); !del.ok()) return del;
  if (auto st = Step("deleted"); !st.ok()) return st;
  auto dropped = gc_.DropXorbs(claimed);
  if (!dropped.ok()) return dropped.error();
  counter += dropped->objects;
  report.reclaimed_bytes += dropped->bytes;
  return Step("dropped");
}

Status Collector::FinishShards(index::GcLock& lock, std::unique_ptr<index::GcLock>& hold, GcReport& report) {
  auto claimed = LoadQuarantine(gc_, GcKind::kShard);
  if (!claimed.ok()) return claimed.error();
  std::vector<Hash> shards;
  for (const auto& [h, q] : *claimed) shards.push_back(h);
  if (shards.empty()) return Ok{};
  if (auto st = HoldDeletions(hold, report); !st.ok()) return st;
  std::sort(shards.begin(), shards.end());
  std::optional<std::map<Hash, std::vector<Hash>>> legacy;  // shard -> its grants, read when first needed
  return InBatches(shards, options_.batch, [&](std::span<const Hash> batch) -> Status {
    auto scopes = gc_.ShardScopes(batch);
    if (!scopes.ok()) return scopes.error();
    std::vector<Hash> grants;
    std::vector<Hash> unrecorded(batch.begin(), batch.end());  // shards registered before schema 12
    for (const auto& s : *scopes) {
      grants.push_back(cas::GrantName({s.shard, s.scope}));
      unrecorded.erase(std::remove(unrecorded.begin(), unrecorded.end(), s.shard), unrecorded.end());
    }
    if (!unrecorded.empty()) {
      // Their scopes are known only to their grants: every grant is read, once a run, for such shards.
      if (!legacy) {
        legacy.emplace();
        std::vector<Hash> all;
        if (auto st = store_.List(store::BlobKind::kGrant, [&](const Hash& h) { all.push_back(h); });
            !st.ok())
          return st;
        for (const Hash& name : all) {
          auto bytes = store_.ReadWhole(store::BlobKind::kGrant, name);
          if (!bytes.ok()) continue;  // gone meanwhile, or damage fsck reports
          if (auto grant = cas::ParseGrant(*bytes); grant.ok()) (*legacy)[grant->shard].push_back(name);
        }
      }
      for (const Hash& shard : unrecorded) {
        if (auto it = legacy->find(shard); it != legacy->end())
          grants.insert(grants.end(), it->second.begin(), it->second.end());
      }
    }
    if (auto st = lock.Check(); !st.ok()) return st;
    // Grants first: a grant naming no stored shard is what fsck calls damage, a shard without grants is not.
    if (auto del = store_.DeleteMany(store::BlobKind::kGrant, grants); !del.ok()) return del;
    if (auto del = store_.DeleteMany(store::BlobKind::kShard, batch); !del.ok()) return del;
    if (auto st = Step("shards deleted"); !st.ok()) return st;
    auto dropped = gc_.DropShards(batch);
    if (!dropped.ok()) return dropped.error();
    report.swept_shards += dropped->objects;
    report.reclaimed_shard_bytes += dropped->bytes;
    return Ok{};
  });
}

// One run of the collector (Collector::Run), its steps in order: 1. the claims of an interrupted run
// finished; 2. the mark (repositories, then files, then xorbs) and its record in the quarantine; 3. the
// sweep. Holds the quarantines as loaded, what the mark found and the report, which the steps share.
// Ownership: borrows the collector; owns the collector's lock of the index (taken before the pass, held to
// its end) and the deletion hold (taken before the first deletion, held to the end, released before the
// lock). Not thread-safe: runs on the caller's thread. Failures: the first step that fails ends the run
// with its error.
class Collector::Pass {
 public:
  Pass(Collector& collector, std::unique_ptr<index::GcLock> lock)
      : c_(collector),
        lock_(std::move(lock)),
        now_(c_.options_.clock->UnixSeconds()),
        cutoff_(now_ - static_cast<int64_t>(c_.options_.grace_seconds)) {
    report_.dry_run = c_.options_.dry_run;
    report_.started_at = now_;
  }

  Result<GcReport> Run() {
    if (auto st = LoadQuarantines(); !st.ok()) return st.error();
    // 1. Claims of an interrupted run: nothing can revive them, so their sweep goes on whatever the mark
    // says.
    if (!c_.options_.dry_run) {
      if (auto st = ResumeClaims(); !st.ok()) return st.error();
    }
    if (auto st = c_.Step("resumed"); !st.ok()) return st.error();
    // 2a. Repositories: their unreachable history, and the files their refs reach.
    if (auto st = MarkRepositories(); !st.ok()) return st.error();
    if (auto st = c_.Step("repositories"); !st.ok()) return st.error();
    if (auto st = MarkFilesAndXorbs(); !st.ok()) return st.error();
    if (auto st = CountQuarantined(); !st.ok()) return st.error();
    if (c_.options_.dry_run) {
      report_.seconds = Seconds();
      return report_;
    }
    if (auto st = RecordMark(); !st.ok()) return st.error();
    if (auto st = c_.Step("marked"); !st.ok()) return st.error();
    // 3. Sweep: files first (records only), then xorbs.
    if (auto st = SweepFiles(); !st.ok()) return st.error();
    if (auto st = c_.Step("files swept"); !st.ok()) return st.error();
    if (auto st = SweepXorbs(); !st.ok()) return st.error();
    if (auto st = c_.FinishShards(*lock_, deletions_, report_); !st.ok()) return st.error();
    if (auto st = AfterSweep(); !st.ok()) return st.error();
    report_.seconds = Seconds();
    return report_;
  }

 private:
  double Seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  }

  Status LoadQuarantines() {
    auto files_q = LoadQuarantine(c_.gc_, GcKind::kFile);
    if (!files_q.ok()) return files_q.error();
    files_q_ = std::move(*files_q);
    auto xorbs_q = LoadQuarantine(c_.gc_, GcKind::kXorb);
    if (!xorbs_q.ok()) return xorbs_q.error();
    xorbs_q_ = std::move(*xorbs_q);
    return Ok{};
  }

  Status ResumeClaims() {
    std::vector<xet::XorbHash> claimed;
    for (const auto& [h, q] : xorbs_q_) {
      if (q.claimed_at != 0) claimed.push_back(h);
    }
    if (auto st = InBatches(claimed, c_.options_.batch,
                            [&](std::span<const xet::XorbHash> b) {
                              return c_.FinishClaimed(b, *lock_, deletions_, report_, report_.resumed_xorbs);
                            });
        !st.ok()) {
      return st;
    }
    for (const auto& h : claimed) xorbs_q_.erase(h);
    if (auto st = c_.FinishShards(*lock_, deletions_, report_); !st.ok()) return st;
    // Revocations a registration cleared and a crash or a failed delete left in the store.
    auto finished = cas::FinishClearedRevocations(c_.cas_, c_.store_);
    if (!finished.ok()) return finished.error();
    report_.finished_revocations = *finished;
    return Ok{};
  }

  Status MarkRepositories() {
    std::vector<xet::FileHash> reached_list;
    if (auto st = c_.MarkRepositories(now_, cutoff_, reached_list, report_); !st.ok()) return st;
    for (const auto& f : reached_list) reached_.Add(f);
    reached_.Freeze();
    return Ok{};
  }

  // 2. Mark. Files: live ones want their xorbs; unreferenced ones inside the grace keep theirs; the rest
  // go now, and with them, xorbs no file that stays uses. The two scans share one pace.
  Status MarkFilesAndXorbs() {
    Pacer pacer(c_.options_);
    if (auto st = MarkFiles(pacer); !st.ok()) return st;
    return MarkXorbs(pacer);
  }

  Status MarkFiles(Pacer& pacer) {
    std::optional<Hash> after;
    for (;;) {
      auto page = c_.gc_.ScanFileXorbs(after, kFilePage);
      if (!page.ok()) return page.error();
      for (const index::FileXorbs& f : *page) {
        ++report_.files;
        auto q = files_q_.find(f.hash);
        if (f.registered || reached_.Has(f.hash)) {
          ++report_.live_files;
          for (const auto& x : f.xorbs) wanted_.Add(x);
          if (q != files_q_.end()) released_files_.push_back(f.hash);
        } else if (q != files_q_.end() && q->second.since <= cutoff_) {
          sweep_files_.push_back(q->second);
        } else {
          for (const auto& x : f.xorbs) kept_.Add(x);
          if (q == files_q_.end()) new_files_.push_back(f.hash);
        }
      }
      if (auto st = pacer.Page(); !st.ok()) return st;
      if (page->size() < kFilePage) break;
      after = page->back().hash;
    }
    wanted_.Freeze();
    kept_.Freeze();
    return Ok{};
  }

  // Xorbs: every registered one is wanted, kept, or unreferenced (quarantined; swept past the grace).
  Status MarkXorbs(Pacer& pacer) {
    std::optional<Hash> after;
    for (;;) {
      auto page = c_.cas_.Scan(index::CasIndex::Scanned::kXorbs, after, kPage);
      if (!page.ok()) return page.error();
      for (const Hash& x : *page) {
        ++report_.xorbs;
        auto q = xorbs_q_.find(x);
        if (wanted_.Has(x)) {
          if (q != xorbs_q_.end()) released_xorbs_.push_back(x);
        } else if (q == xorbs_q_.end()) {
          new_xorbs_.push_back(x);
        } else if (q->second.since <= cutoff_ && !kept_.Has(x)) {
          sweep_xorbs_.push_back(q->second);
        }
      }
      if (auto st = pacer.Page(); !st.ok()) return st;
      if (page->size() < kPage) break;
      after = page->back();
    }
    return Ok{};
  }

  // The quarantine after the mark, for the report.
  Status CountQuarantined() {
    report_.newly_quarantined = new_files_.size() + new_xorbs_.size();
    report_.released = released_files_.size() + released_xorbs_.size();
    report_.quarantined_files = files_q_.size() + new_files_.size() - released_files_.size();
    report_.quarantined_xorbs = xorbs_q_.size() + new_xorbs_.size() - released_xorbs_.size();
    for (const auto& [h, q] : xorbs_q_) report_.quarantined_bytes += q.bytes;
    for (const auto& x : released_xorbs_) report_.quarantined_bytes -= xorbs_q_.at(x).bytes;
    for (const auto& q : sweep_xorbs_) {
      ++report_.reclaimable_xorbs;
      report_.reclaimable_bytes += q.bytes;
    }
    if (new_xorbs_.empty()) return Ok{};
    // Their sizes, for the report (the quarantine records sizes of what it already holds).
    return InBatches(new_xorbs_, index::CasIndex::kMaxXorbsPerRead, [&](std::span<const Hash> b) -> Status {
      auto entries = c_.cas_.GetXorbs(b);
      if (!entries.ok()) return entries.error();
      for (const auto& e : *entries) {
        if (e) report_.quarantined_bytes += e->region_size;
      }
      return Ok{};
    });
  }

  // What is newly unreferenced goes into the quarantine; what is referenced again leaves it.
  Status RecordMark() {
    for (auto [kind, hashes] :
         {std::pair{GcKind::kFile, &new_files_}, std::pair{GcKind::kXorb, &new_xorbs_}}) {
      if (auto st =
              InBatches(*hashes, kPage,
                        [&, k = kind](std::span<const Hash> b) { return c_.gc_.Quarantine(k, b, now_); });
          !st.ok()) {
        return st;
      }
    }
    for (auto [kind, hashes] :
         {std::pair{GcKind::kFile, &released_files_}, std::pair{GcKind::kXorb, &released_xorbs_}}) {
      if (auto st = InBatches(*hashes, kPage,
                              [&, k = kind](std::span<const Hash> b) { return c_.gc_.Release(k, b); });
          !st.ok()) {
        return st;
      }
    }
    return Ok{};
  }

  Status SweepFiles() {
    return InBatches(sweep_files_, c_.options_.batch, [&](std::span<const Quarantined> b) -> Status {
      auto swept = c_.gc_.SweepFiles(b);
      if (!swept.ok()) return swept.error();
      report_.swept_files += swept->objects;
      return Ok{};
    });
  }

  Status SweepXorbs() {
    return InBatches(sweep_xorbs_, c_.options_.batch, [&](std::span<const Quarantined> b) -> Status {
      // Claimed under the hold: a claim made while a backup runs would refuse uploads naming the xorb until
      // the backup ends.
      if (auto s = c_.HoldDeletions(deletions_, report_); !s.ok()) return s;
      auto claimed = c_.gc_.ClaimXorbs(b, c_.options_.clock->UnixSeconds());
      if (!claimed.ok()) return claimed.error();
      if (auto s = c_.Step("claimed"); !s.ok()) return s;
      return c_.FinishClaimed(*claimed, *lock_, deletions_, report_, report_.swept_xorbs);
    });
  }

  Status AfterSweep() {
    // What was deleted from the index's database leaves its files (a purged secret in a small file).
    if (report_.swept_repo_objects > 0 || c_.options_.vacuum) {
      auto scrub = c_.gc_.ScrubDeleted(c_.options_.vacuum);
      if (!scrub.ok()) return scrub.error();
      report_.scrub = std::move(*scrub);
    }
    // Files and objects swept leave the namespaces' usage: the quotas measure again now.
    if (c_.options_.quota != nullptr && (report_.swept_files > 0 || report_.swept_repo_objects > 0)) {
      if (auto st = c_.options_.quota->MarkStale(std::nullopt); !st.ok()) return st;
      auto measured = c_.options_.quota->RefreshAll();
      if (!measured.ok()) return measured.error();
      report_.quotas_measured = *measured;
    }
    return Ok{};
  }

  Collector& c_;
  // Declared first: released last, after the hold.
  std::unique_ptr<index::GcLock> lock_;
  std::unique_ptr<index::GcLock> deletions_;  // the deletion hold: taken before the first deletion
  const std::chrono::steady_clock::time_point t0_ = std::chrono::steady_clock::now();
  const int64_t now_;
  const int64_t cutoff_;  // quarantined before it: past the grace
  GcReport report_;
  QuarantineMap files_q_, xorbs_q_;
  HashSet reached_;  // files the repositories' refs reach
  HashSet wanted_;   // xorbs of live files
  HashSet kept_;     // xorbs of unreferenced files that stay (inside the grace)
  std::vector<Hash> new_files_, released_files_, new_xorbs_, released_xorbs_;
  std::vector<Quarantined> sweep_files_, sweep_xorbs_;
};

Result<GcReport> Collector::Run() {
  auto lock = gc_.LockGc();
  if (!lock.ok()) return lock.error();
  auto report = Pass(*this, std::move(*lock)).Run();
  if (report.ok() && !report->dry_run && options_.audit != nullptr) Record(*report);
  return report;
}

void Collector::Record(const GcReport& r) const {
  const std::string detail = "swept " + std::to_string(r.swept_files) + " files, " +
                             std::to_string(r.swept_xorbs + r.resumed_xorbs) + " xorbs (" +
                             std::to_string(r.reclaimed_bytes) + " bytes), " +
                             std::to_string(r.swept_repo_objects) + " history objects; " +
                             std::to_string(r.newly_quarantined) + " newly unreferenced";
  const auto event = options_.actor.Event(r.started_at, "gc.run", "", "", detail);
  // The run's work is done and stands: a log that cannot take its record is reported, not the run failed.
  if (auto st = options_.audit->AppendAudit(event); !st.ok()) {
    spdlog::warn("gc: the run was not recorded in the audit log: {}", st.error().message);
  }
}

}  // namespace cairn::gc
