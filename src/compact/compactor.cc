#include "compact/compactor.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "common/json_report.h"
#include "ingest/shard_records.h"
#include "xet/hashing.h"
#include "xet/shard.h"
#include "xet/xorb.h"

namespace cairn::compact {

namespace {

using xet::FileHash;
using xet::Hash;
using xet::XorbHash;

constexpr size_t kPage = index::CasIndex::kMaxScanned;
// A compaction shard stays well under the protocol's 64 MiB (xet::kMaxShardBytes): a scope with more files
// than that gets several.
constexpr size_t kShardBudget = 32ULL << 20;

// What the files use of one xorb: a flag per chunk, and the files (each once).
struct Use {
  std::vector<bool> live;
  std::vector<FileHash> files;
};

// A xorb to rewrite: its layout, and where each of its live chunks goes in the new xorb.
struct Replaced {
  XorbHash hash;
  std::shared_ptr<const xet::XorbLayout> layout;
  std::vector<bool> live;
  std::vector<uint32_t> moved_to;  // per chunk: its index in the new xorb (live chunks only)
};

// One new xorb and what it replaces.
struct Unit {
  std::vector<Replaced> replaced;
  std::vector<FileHash> files;
  uint64_t unpacked = 0;
  uint64_t region = 0;
  size_t chunks = 0;
};

template <typename Set>
Result<Set> LoadQuarantined(index::GcIndex& gc, index::GcKind kind) {
  Set out;
  std::optional<Hash> after;
  for (;;) {
    auto page = gc.ScanQuarantine(kind, after, kPage);
    if (!page) return page.error();
    for (const auto& q : *page) out.insert(q.hash);
    if (page->size() < kPage) return out;
    after = page->back().hash;
  }
}

// The chunk region bytes of the chunks flagged live.
uint64_t LiveBytes(const xet::XorbLayout& layout, const std::vector<bool>& live) {
  uint64_t bytes = 0;
  for (size_t i = 0; i < layout.chunks.size(); ++i) {
    if (i < live.size() && live[i]) bytes += layout.chunks[i].end_offset - layout.begin_offset(i);
  }
  return bytes;
}

// The shard's size for one file record (SerializeShard: a header, each term and its verification entry,
// the metadata extension).
size_t FileRecordBytes(const xet::FileRecord& f) {
  return xet::kShardEntrySize * (2 + 2 * f.terms.size());
}

}  // namespace

std::string CompactReport::ToJson() const {
  JsonReport r;
  r.Bool("dry_run", dry_run);
  r.Signed("started_at", started_at);
  r.Real("seconds", seconds);
  r.Number("files", files);
  r.Number("xorbs", xorbs);
  r.Number("candidates", candidates);
  r.Number("candidate_bytes", candidate_bytes);
  r.Number("compacted_xorbs", compacted_xorbs);
  r.Number("new_xorbs", new_xorbs);
  r.Number("files_moved", files_moved);
  r.Number("shards", shards);
  r.Number("replaced_bytes", replaced_bytes);
  r.Number("written_bytes", written_bytes);
  r.Number("freed_bytes", freed_bytes());
  r.Number("conflicts", conflicts);
  return r.Text();
}

Compactor::Compactor(index::CasIndex& cas, index::GcIndex& gc, cas::CasService& service,
                     CompactOptions options)
    : cas_(cas), gc_(gc), service_(service), options_(std::move(options)) {}

Status Compactor::Step(std::string_view step) const {
  return options_.hook ? options_.hook(step) : Status(Ok{});
}

namespace {

// Builds, stores and registers one unit's new xorb and moves its files (steps 3 of compactor.h).
class UnitWriter {
 public:
  UnitWriter(index::CasIndex& cas, index::GcIndex& gc, cas::CasService& service, CompactReport& report,
             const std::function<Status(std::string_view)>& step)
      : cas_(cas), gc_(gc), service_(service), report_(report), step_(step) {}

  Status Write(Unit& unit) {
    if (auto st = BuildXorb(unit); !st) return st;
    if (auto put = service_.PutXorb(hash_, body_); !put) return put.error();
    body_.clear();
    body_.shrink_to_fit();
    if (auto st = step_("xorb stored"); !st) return st;

    index::Repointing r;
    r.into = hash_;
    for (const auto& x : unit.replaced) r.replaced.push_back(x.hash);
    std::map<std::string, std::vector<size_t>> by_scope;  // scope -> records_ indices
    if (auto st = MoveFiles(unit, r, by_scope); !st) return st;
    size_t shards = 0;
    for (const auto& [scope, files] : by_scope) {
      if (auto st = Shards(scope, files, r, shards); !st) return st;
    }
    if (auto st = step_("shards stored"); !st) return st;
    if (auto st = gc_.Repoint(r); !st) {
      if (st.error().code == ErrorCode::kConflict) {
        ++report_.conflicts;  // a file was swept and registered again meanwhile: the next run sees it anew
        return Ok{};
      }
      return st;
    }
    ++report_.new_xorbs;
    report_.compacted_xorbs += unit.replaced.size();
    report_.files_moved += r.files.size();
    report_.shards += shards;
    report_.written_bytes += unit.region;
    for (const auto& x : unit.replaced) report_.replaced_bytes += x.layout->chunk_region_size();
    return step_("repointed");
  }

 private:
  // The new xorb: the live chunks of each replaced xorb in order, as stored.
  Status BuildXorb(Unit& unit) {
    body_.clear();
    body_.reserve(unit.region);
    layout_.chunks.clear();
    for (auto& x : unit.replaced) {
      const auto& chunks = x.layout->chunks;
      x.moved_to.assign(chunks.size(), 0);
      for (size_t i = 0; i < chunks.size();) {
        if (!x.live[i]) {
          ++i;
          continue;
        }
        size_t j = i;
        while (j < chunks.size() && x.live[j]) {
          x.moved_to[j] = static_cast<uint32_t>(layout_.chunks.size());
          const uint32_t stored = chunks[j].end_offset - x.layout->begin_offset(j);
          const uint32_t end = layout_.chunk_region_size() + stored;
          layout_.chunks.push_back({chunks[j].hash, chunks[j].unpacked_size, end});
          ++j;
        }
        const uint32_t begin = x.layout->begin_offset(i);
        const size_t at = body_.size();
        body_.resize(at + (chunks[j - 1].end_offset - begin));
        if (auto st = service_.ReadXorb(x.hash, begin, std::span(body_).subspan(at)); !st) {
          return Error{st.error().code, "read xorb " + x.hash.hex() + ": " + st.error().message};
        }
        i = j;
      }
    }
    hashed_ = layout_.hashed_chunks();
    hash_ = xet::XorbHashOf(hashed_);
    return Ok{};
  }

  // The unit's files with their new terms, into `r.files`, and the scopes that see each.
  Status MoveFiles(const Unit& unit, index::Repointing& r,
                   std::map<std::string, std::vector<size_t>>& by_scope) {
    std::unordered_map<XorbHash, const Replaced*, xet::HashHasher> replaced;
    for (const auto& x : unit.replaced) replaced.emplace(x.hash, &x);
    std::unordered_map<XorbHash, std::shared_ptr<const xet::XorbLayout>, xet::HashHasher> layouts;
    const xet::XorbLayout* mine = &layout_;
    Status lookup_failed = Ok{};
    const xet::LayoutLookup lookup = [&](const XorbHash& h) -> const xet::XorbLayout* {
      if (h == hash_) return mine;
      auto it = layouts.find(h);
      if (it == layouts.end()) {
        auto l = service_.Layout(h);
        if (!l) {
          if (lookup_failed) lookup_failed = l.error();
          return nullptr;
        }
        it = layouts.emplace(h, *l).first;
      }
      return it->second.get();
    };
    records_.clear();
    const auto& files = unit.files;
    for (size_t at = 0; at < files.size(); at += index::CasIndex::kMaxFilesPerRead) {
      const auto batch =
          std::span(files).subspan(at, std::min(index::CasIndex::kMaxFilesPerRead, files.size() - at));
      auto entries = cas_.GetFiles(batch);
      if (!entries) return entries.error();
      auto scopes = gc_.FileScopes(batch);
      if (!scopes) return scopes.error();
      for (size_t k = 0; k < batch.size(); ++k) {
        const auto& e = (*entries)[k];
        if (e == nullptr) {
          return Conflict("file " + batch[k].hex() + " went since the compaction read it");
        }
        xet::FileRecord rec{e->hash, {}, {}, e->sha256};
        for (size_t t = 0; t < e->term_count; ++t) {
          const index::Term term = e->term(t);
          xet::FileTerm ft{term.xorb, 0, term.unpacked_bytes, term.chunk_start, term.chunk_end};
          if (auto it = replaced.find(term.xorb); it != replaced.end()) {
            const Replaced& x = *it->second;
            if (term.chunk_end > x.live.size() || term.chunk_start >= term.chunk_end) {
              return Inconsistent("file " + e->hash.hex() + " has a term outside xorb " + x.hash.hex());
            }
            ft.xorb = hash_;
            ft.chunk_start = x.moved_to[term.chunk_start];
            ft.chunk_end = x.moved_to[term.chunk_end - 1] + 1;
            // Every chunk a term uses is live, so the term's chunks stay together in the new xorb.
            if (ft.chunk_end - ft.chunk_start != term.chunk_end - term.chunk_start) {
              return Inconsistent("file " + e->hash.hex() + ": a term's chunks did not stay together");
            }
          }
          const xet::XorbLayout* layout = lookup(ft.xorb);
          if (layout == nullptr) {
            if (!lookup_failed) return lookup_failed;
            return Inconsistent("file " + e->hash.hex() + " uses xorb " + ft.xorb.hex() +
                                ", which the index does not hold");
          }
          if (ft.chunk_end > layout->chunks.size()) {
            return Inconsistent("file " + e->hash.hex() + " has a term outside xorb " + ft.xorb.hex());
          }
          std::vector<xet::ChunkHash> hashes;
          for (uint32_t c = ft.chunk_start; c < ft.chunk_end; ++c) hashes.push_back(layout->chunks[c].hash);
          rec.verification.push_back(xet::RangeHashOf(hashes));
          rec.terms.push_back(ft);
        }
        auto ranges = index::PackTermRanges(rec.terms, lookup);
        if (!ranges) return ranges.error();
        r.files.push_back({e->hash, e->created_at, index::PackTerms(rec.terms), std::move(*ranges)});
        for (const auto& scope : (*scopes)[k]) by_scope[scope].push_back(records_.size());
        records_.push_back(std::move(rec));
      }
    }
    return Ok{};
  }

  // The scope's shards (as few as fit kShardBudget each), verified and stored, into `r.shards`.
  Status Shards(const std::string& scope, const std::vector<size_t>& files, index::Repointing& r,
                size_t& written) {
    const xet::XorbRecord listing = ingest::XorbRecordOf(hash_, hashed_, true);
    const size_t base = xet::kEmptyShardBytes + xet::XorbListingBytes(hashed_.size());
    for (size_t i = 0; i < files.size();) {
      xet::Shard shard;
      shard.xorbs.push_back(listing);
      size_t bytes = base;
      while (i < files.size() &&
             (shard.files.empty() || bytes + FileRecordBytes(records_[files[i]]) <= kShardBudget)) {
        bytes += FileRecordBytes(records_[files[i]]);
        shard.files.push_back(records_[files[i]]);
        ++i;
      }
      const std::vector<uint8_t> body = ingest::ShardUploadForm(shard);
      auto commit = service_.VerifyShard(body, scope);
      if (!commit) return commit.error();
      if (auto st = service_.StoreShard(*commit, body); !st) return st;
      r.shards.push_back(std::move(*commit));
      ++written;
    }
    return Ok{};
  }

  index::CasIndex& cas_;
  index::GcIndex& gc_;
  cas::CasService& service_;
  CompactReport& report_;
  const std::function<Status(std::string_view)>& step_;
  std::vector<uint8_t> body_;
  xet::XorbLayout layout_;
  std::vector<xet::HashedChunk> hashed_;
  XorbHash hash_;
  std::vector<xet::FileRecord> records_;
};

using HashSet = std::unordered_set<Hash, xet::HashHasher>;
using XorbUses = std::unordered_map<XorbHash, Use, xet::HashHasher>;

// Marks the chunks the files' terms use, and each file once per xorb it uses.
void MarkUses(const std::vector<std::shared_ptr<const index::FileEntry>>& entries, XorbUses& uses,
              CompactReport& report) {
  for (const auto& e : entries) {
    if (e == nullptr) continue;  // swept since the scan
    ++report.files;
    for (size_t t = 0; t < e->term_count; ++t) {
      const index::Term term = e->term(t);
      Use& use = uses[term.xorb];
      if (use.live.size() < term.chunk_end) use.live.resize(term.chunk_end, false);
      std::fill(use.live.begin() + term.chunk_start, use.live.begin() + term.chunk_end, true);
      if (use.files.empty() || use.files.back() != e->hash) use.files.push_back(e->hash);
    }
  }
}

// Step 1: what the files outside the collector's quarantine use.
Result<XorbUses> ReadUses(index::CasIndex& cas, const HashSet& dead_files, CompactReport& report) {
  XorbUses uses;
  std::optional<Hash> after;
  for (;;) {
    auto page = cas.Scan(index::CasIndex::Scanned::kFiles, after, kPage);
    if (!page) return page.error();
    std::vector<FileHash> live;
    for (const auto& f : *page) {
      if (!dead_files.contains(f)) live.push_back(f);
    }
    for (size_t at = 0; at < live.size(); at += index::CasIndex::kMaxFilesPerRead) {
      const auto batch =
          std::span(live).subspan(at, std::min(index::CasIndex::kMaxFilesPerRead, live.size() - at));
      auto entries = cas.GetFiles(batch);
      if (!entries) return entries.error();
      MarkUses(*entries, uses, report);
    }
    if (page->size() < kPage) break;
    after = page->back();
  }
  return uses;
}

// Adds xorb `x` to the last unit, or to a new one past the protocol's limits, when its live bytes are below
// the threshold.
Status PackIfBelowThreshold(const XorbHash& x, const std::shared_ptr<const xet::XorbLayout>& layout, Use& use,
                            double threshold, std::vector<Unit>& units, CompactReport& report) {
  if (use.live.size() > layout->chunks.size()) {
    return Inconsistent("a file uses chunks past the end of xorb " + x.hex());
  }
  use.live.resize(layout->chunks.size(), false);
  const uint64_t region = layout->chunk_region_size();
  const uint64_t live = LiveBytes(*layout, use.live);
  if (region == 0 || static_cast<double>(live) >= threshold * static_cast<double>(region)) return Ok{};
  ++report.candidates;
  report.candidate_bytes += region;
  uint64_t unpacked = 0;
  size_t chunks = 0;
  for (size_t i = 0; i < use.live.size(); ++i) {
    if (!use.live[i]) continue;
    unpacked += layout->chunks[i].unpacked_size;
    ++chunks;
  }
  if (units.empty() || units.back().unpacked + unpacked > xet::kMaxXorbUnpacked ||
      units.back().chunks + chunks > xet::kMaxXorbChunks) {
    units.emplace_back();
  }
  Unit& unit = units.back();
  unit.replaced.push_back({x, layout, std::move(use.live), {}});
  for (auto& f : use.files) unit.files.push_back(f);
  unit.unpacked += unpacked;
  unit.region += live;
  unit.chunks += chunks;
  return Ok{};
}

// Step 2: the xorbs below the threshold (quarantined ones aside), in hash order, packed into units.
Result<std::vector<Unit>> PlanUnits(cas::CasService& service, XorbUses& uses, const HashSet& dead_xorbs,
                                    const CompactOptions& options, CompactReport& report) {
  std::vector<XorbHash> order;
  for (const auto& [x, use] : uses) {
    if (!dead_xorbs.contains(x)) order.push_back(x);
  }
  std::sort(order.begin(), order.end());
  if (auto st = service.PrefetchXorbLayouts(order); !st) return st.error();
  std::vector<Unit> units;
  for (const XorbHash& x : order) {
    auto layout = service.Layout(x);
    if (!layout && layout.error().code == ErrorCode::kNotFound) continue;  // damage, fsck's to report
    if (!layout) return Error{layout.error().code, "xorb " + x.hex() + ": " + layout.error().message};
    if (auto st = PackIfBelowThreshold(x, *layout, uses[x], options.threshold, units, report); !st)
      return st.error();
  }
  for (auto& unit : units) {
    std::sort(unit.files.begin(), unit.files.end());
    unit.files.erase(std::unique(unit.files.begin(), unit.files.end()), unit.files.end());
  }
  if (options.max_new_xorbs != 0 && units.size() > options.max_new_xorbs) units.resize(options.max_new_xorbs);
  return units;
}

// A dry run's report: what writing the units would do.
void ReportUnits(const std::vector<Unit>& units, CompactReport& report) {
  for (const auto& unit : units) {
    ++report.new_xorbs;
    report.compacted_xorbs += unit.replaced.size();
    report.files_moved += unit.files.size();
    report.written_bytes += unit.region;
    for (const auto& x : unit.replaced) report.replaced_bytes += x.layout->chunk_region_size();
  }
}

}  // namespace

Result<CompactReport> Compactor::Run() {
  if (!(options_.threshold > 0 && options_.threshold <= 1)) {
    return Malformed("the compaction threshold is a share of a xorb's bytes, above 0 and at most 1");
  }
  const auto started = std::chrono::steady_clock::now();
  CompactReport report;
  report.dry_run = options_.dry_run;
  report.started_at = options_.clock->UnixSeconds();
  auto lock = gc_.LockGc();
  if (!lock) return lock.error();

  // 1. What the files use.
  auto dead_files = LoadQuarantined<HashSet>(gc_, index::GcKind::kFile);
  if (!dead_files) return dead_files.error();
  auto dead_xorbs = LoadQuarantined<HashSet>(gc_, index::GcKind::kXorb);
  if (!dead_xorbs) return dead_xorbs.error();
  auto uses = ReadUses(cas_, *dead_files, report);
  if (!uses) return uses.error();
  report.xorbs = uses->size();

  // 2. The xorbs below the threshold, in hash order, packed into units.
  auto units = PlanUnits(service_, *uses, *dead_xorbs, options_, report);
  if (!units) return units.error();
  if (auto st = Step("planned"); !st) return st.error();

  // 3. Each unit, in its own steps.
  if (options_.dry_run) {
    ReportUnits(*units, report);
  } else {
    const std::function<Status(std::string_view)> step = [this](std::string_view s) { return Step(s); };
    UnitWriter writer(cas_, gc_, service_, report, step);
    for (auto& unit : *units) {
      if (auto ok = (*lock)->Check(); !ok) return ok.error();
      if (auto st = writer.Write(unit); !st) return st.error();
    }
  }
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return report;
}

}  // namespace cairn::compact
