#include "quota/quota_service.h"

#include <algorithm>
#include <cstdio>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace cairn::quota {

namespace {

// Chunk index ranges [start, end) of one xorb; normalized: sorted, disjoint, not touching.
using Ranges = std::vector<std::pair<uint32_t, uint32_t>>;
// The chunks a set of files references, by xorb.
using ChunkSet = std::unordered_map<xet::XorbHash, Ranges, xet::HashHasher>;

void Normalize(Ranges& r) {
  std::sort(r.begin(), r.end());
  size_t out = 0;
  for (size_t i = 0; i < r.size(); ++i) {
    if (out > 0 && r[i].first <= r[out - 1].second) {
      r[out - 1].second = std::max(r[out - 1].second, r[i].second);
    } else {
      r[out++] = r[i];
    }
  }
  r.resize(out);
}

void AddFile(ChunkSet& set, const index::FileEntry& file) {
  for (size_t i = 0; i < file.term_count; ++i) {
    const index::Term t = file.term(i);
    Ranges& r = set[t.xorb];
    r.emplace_back(t.chunk_start, t.chunk_end);
    // A file's terms are mostly contiguous runs: merging as they grow keeps memory near the distinct ranges.
    if (r.size() >= 64 && (r.size() & (r.size() - 1)) == 0) Normalize(r);
  }
}

// a \ b, both normalized.
Ranges Subtract(const Ranges& a, const Ranges& b) {
  Ranges out;
  size_t j = 0;
  for (auto [start, end] : a) {
    while (j < b.size() && b[j].second <= start) ++j;
    for (size_t k = j; k < b.size() && b[k].first < end && start < end; ++k) {
      if (b[k].first > start) out.emplace_back(start, b[k].first);
      start = std::max(start, b[k].second);
    }
    if (start < end) out.emplace_back(start, end);
  }
  return out;
}

// The unpacked bytes of the chunks in `set` (each range normalized first), from the xorbs' layouts. A xorb
// the index no longer holds (swept meanwhile) adds nothing.
xet::Result<uint64_t> ChunkBytes(index::CasIndex& cas, ChunkSet& set) {
  std::vector<xet::XorbHash> hashes;
  hashes.reserve(set.size());
  for (auto& [xorb, ranges] : set) {
    Normalize(ranges);
    hashes.push_back(xorb);
  }
  uint64_t bytes = 0;
  for (size_t i = 0; i < hashes.size(); i += index::CasIndex::kMaxXorbsPerRead) {
    const size_t n = std::min(hashes.size() - i, index::CasIndex::kMaxXorbsPerRead);
    auto entries = cas.GetXorbs(std::span(hashes).subspan(i, n));
    if (!entries.ok()) return entries.error();
    for (size_t k = 0; k < n; ++k) {
      const auto& entry = (*entries)[k];
      if (!entry) continue;
      for (auto [start, end] : set[hashes[i + k]]) {
        for (uint32_t c = start; c < std::min(end, entry->chunk_count); ++c)
          bytes += entry->chunk(c).unpacked_size;
      }
    }
  }
  return bytes;
}

}  // namespace

struct QuotaService::Measured {
  Usage usage;
  uint64_t adds = 0;  // what the added files reference that the namespace does not yet
};

QuotaService::QuotaService(index::Index& index, const Clock& clock) : index_(index), clock_(clock) {}

xet::Result<QuotaService::Measured> QuotaService::MeasureWith(std::string_view ns,
                                                              std::span<const xet::FileHash> added) {
  Measured m;
  m.usage.ns = std::string(ns);
  ChunkSet base;
  std::unordered_set<xet::FileHash, xet::HashHasher> seen;
  const auto add_file = [&](const xet::FileHash& hash, ChunkSet& into) -> xet::Status {
    if (hash.is_zero() || !seen.insert(hash).second) return xet::Ok{};
    auto entry = index_.GetFile(hash);
    if (!entry.ok()) {
      if (entry.error().code == xet::ErrorCode::kNotFound) return xet::Ok{};  // swept meanwhile
      return entry.error();
    }
    AddFile(into, **entry);
    return xet::Ok{};
  };
  for (auto type : {index::RepoType::kModel, index::RepoType::kDataset, index::RepoType::kSpace,
                    index::RepoType::kBucket}) {
    std::optional<std::pair<std::string, std::string>> after;
    for (;;) {
      auto repos = index_.ListRepos(type, ns, after, index::RepoIndex::kMaxListedRepos);
      if (!repos.ok()) return repos.error();
      for (const auto& repo : *repos) {
        ++m.usage.repos;
        // Committed files: what the read scope sees.
        std::optional<xet::FileHash> after_file;
        for (;;) {
          auto files = index_.ListFiles(repo.read_scope, after_file, index::CasIndex::kMaxListedFiles);
          if (!files.ok()) return files.error();
          for (const auto& f : *files) {
            if (auto st = add_file(f.hash, base); !st.ok()) return st.error();
          }
          if (files->size() < index::CasIndex::kMaxListedFiles) break;
          after_file = files->back().hash;
        }
        std::optional<std::vector<uint8_t>> after_key;
        for (;;) {
          auto objects = index_.ScanRepoObjects(repo.id, after_key, index::CasIndex::kMaxScanned);
          if (!objects.ok()) return objects.error();
          for (const auto& o : *objects) m.usage.object_bytes += o.size;
          if (objects->size() < index::CasIndex::kMaxScanned) break;
          after_key = objects->back().key;
        }
      }
      if (repos->size() < index::RepoIndex::kMaxListedRepos) break;
      after = std::pair{repos->back().ns, repos->back().name};
    }
  }
  m.usage.files = seen.size();
  ChunkSet extra;
  for (const auto& f : added) {
    if (auto st = add_file(f, extra); !st.ok()) return st.error();
  }
  auto chunk_bytes = ChunkBytes(index_, base);
  if (!chunk_bytes.ok()) return chunk_bytes.error();
  m.usage.chunk_bytes = *chunk_bytes;
  m.usage.used = m.usage.chunk_bytes + m.usage.object_bytes;
  m.usage.exact = true;
  m.usage.measured_at = clock_.UnixSeconds();
  if (!extra.empty()) {
    for (auto& [xorb, ranges] : extra) {
      Normalize(ranges);
      if (auto it = base.find(xorb); it != base.end()) ranges = Subtract(ranges, it->second);
    }
    auto adds = ChunkBytes(index_, extra);
    if (!adds.ok()) return adds.error();
    m.adds = *adds;
  }
  return m;
}

xet::Result<Usage> QuotaService::Measure(std::string_view ns) {
  auto record = index_.GetQuota(ns);  // read first: the measure is of this generation
  if (!record.ok()) return record.error();
  auto m = MeasureWith(ns, {});
  if (!m.ok()) return m.error();
  if (*record) {
    const auto& q = **record;
    m->usage.limit = q.limit;
    auto recorded =
        index_.RecordQuotaMeasure(ns, {m->usage.used, q.pending, q.generation, m->usage.measured_at}, 0);
    if (!recorded.ok()) return recorded.error();
  }
  return std::move(m->usage);
}

xet::Result<std::optional<Usage>> QuotaService::Recorded(std::string_view ns) {
  auto record = index_.GetQuota(ns);
  if (!record.ok()) return record.error();
  if (!*record) return std::optional<Usage>();
  const auto& q = **record;
  Usage u;
  u.ns = q.ns;
  u.limit = q.limit;
  u.used = q.charged();
  u.exact = q.exact();
  u.measured_at = q.measured_at;
  return std::optional<Usage>(std::move(u));
}

xet::Status QuotaService::CheckRoom(std::string_view ns) {
  auto record = index_.GetQuota(ns);
  if (!record.ok()) return record.error();
  if (!*record || !(*record)->limit || (*record)->charged() < *(*record)->limit) return xet::Ok{};
  if ((*record)->exact()) return Full(**record, 0);
  // Full by an upper bound: measure before refusing.
  auto usage = Measure(ns);
  if (!usage.ok()) return usage.error();
  if (usage->used < *(*record)->limit) return xet::Ok{};
  index::QuotaRecord q = **record;
  q.used = usage->used;
  q.pending = 0;
  return Full(q, 0);
}

xet::Status QuotaService::CheckRoomForScope(std::string_view scope) {
  auto repo = index_.FindRepoByScope(scope);
  if (!repo.ok()) {
    if (repo.error().code == xet::ErrorCode::kNotFound) return xet::Ok{};  // a plain CAS scope
    return repo.error();
  }
  return CheckRoom(repo->ns);
}

Reservation& Reservation::operator=(Reservation&& o) noexcept {
  if (this != &o) {
    Reservation dropped(std::move(*this));
    index_ = std::exchange(o.index_, nullptr);
    ns_ = std::move(o.ns_);
    bytes_ = o.bytes_;
  }
  return *this;
}

Reservation::~Reservation() {
  // Released unpublished; should this fail, the reservation expires (index::QuotaIndex::RecordQuotaMeasure).
  if (index_ != nullptr) (void)index_->SettleQuota(ns_, bytes_, false);
}

xet::Status Reservation::Published() {
  if (index_ == nullptr) return xet::Ok{};
  auto* index = std::exchange(index_, nullptr);
  return index->SettleQuota(ns_, bytes_, true);
}

xet::Result<Reservation> QuotaService::Admit(std::string_view ns, std::span<const xet::FileHash> files,
                                             uint64_t object_bytes) {
  if (files.empty() && object_bytes == 0) return Reservation();
  auto record = index_.GetQuota(ns);
  if (!record.ok()) return record.error();
  if (!*record) return Reservation();
  // The quick path: every file at its full size (an upper bound of what it adds), when the record can be
  // trusted.
  if (!(*record)->stale && (*record)->measured_at != 0) {
    uint64_t upper = object_bytes;
    std::unordered_set<xet::FileHash, xet::HashHasher> once;
    for (const auto& f : files) {
      if (f.is_zero() || !once.insert(f).second) continue;
      auto entry = index_.GetFile(f);
      if (!entry.ok()) return entry.error();
      upper += (*entry)->size;
    }
    auto charged = index_.ChargeQuota(ns, upper);
    if (!charged.ok()) return charged.error();
    if (*charged) return Reservation(index_, std::string(ns), upper);
  }
  // Measure, and reserve what the commit really adds; a measure or a mark meanwhile makes it measure again.
  // The measure subtracts only what was published when it began (whose files it reads); reservations stay.
  constexpr int kAttempts = 3;
  uint64_t adds = 0;
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    auto before = index_.GetQuota(ns);
    if (!before.ok()) return before.error();
    if (!*before) return Reservation();
    const index::QuotaRecord q = **before;
    auto m = MeasureWith(ns, files);
    if (!m.ok()) return m.error();
    adds = m->adds + object_bytes;
    const index::QuotaMeasure measure{m->usage.used, q.pending, q.generation, m->usage.measured_at};
    auto recorded = index_.RecordQuotaMeasure(ns, measure, adds);
    if (!recorded.ok()) return recorded.error();
    if (*recorded) return Reservation(index_, std::string(ns), adds);
    auto after = index_.GetQuota(ns);
    if (!after.ok()) return after.error();
    if (!*after) return Reservation();
    if ((*after)->generation == q.generation) {
      // It does not fit: keep the measure (so what is shown is current), refuse the commit.
      (void)index_.RecordQuotaMeasure(ns, measure, 0);
      index::QuotaRecord now = **after;
      now.used = m->usage.used;
      now.pending = q.pending > now.pending ? 0 : now.pending - q.pending;
      return Full(now, adds);
    }
  }
  auto charged = index_.ChargeQuota(ns, adds);
  if (!charged.ok()) return charged.error();
  if (*charged) return Reservation(index_, std::string(ns), adds);
  auto last = index_.GetQuota(ns);
  if (!last.ok()) return last.error();
  if (!*last) return Reservation();
  return Full(**last, adds);
}

xet::Status QuotaService::MarkStale(std::optional<std::string_view> ns) {
  return index_.MarkQuotaStale(ns);
}

xet::Result<size_t> QuotaService::RefreshAll() {
  size_t measured = 0;
  std::optional<std::string> after;
  for (;;) {
    auto page = index_.ListQuotas(after, index::QuotaIndex::kMaxListedQuotas);
    if (!page.ok()) return page.error();
    for (const auto& q : *page) {
      if (q.exact()) continue;
      if (auto usage = Measure(q.ns); !usage.ok()) return usage.error();
      ++measured;
    }
    if (page->size() < index::QuotaIndex::kMaxListedQuotas) break;
    after = page->back().ns;
  }
  return measured;
}

xet::Status QuotaService::SetLimit(std::string_view ns, std::optional<uint64_t> limit) {
  return index_.SetQuotaLimit(ns, limit);
}

xet::Error QuotaService::Full(const index::QuotaRecord& q, uint64_t adds) const {
  std::string message = "Storage quota of namespace '" + q.ns + "' reached: " + FormatBytes(q.charged()) +
                        " used of " + FormatBytes(q.limit.value_or(0));
  if (adds > 0) message += ", and this would add " + FormatBytes(adds);
  message +=
      ". Delete files (the garbage collector frees them past its grace) or ask the operator to raise it"
      " (cairn quota set " +
      q.ns + " SIZE)";
  return xet::QuotaExceeded(std::move(message));
}

std::string FormatBytes(uint64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) return std::to_string(bytes) + " B";
  double v = static_cast<double>(bytes);
  size_t unit = 0;
  while (v >= 1024 && unit + 1 < std::size(kUnits)) {
    v /= 1024;
    ++unit;
  }
  char buf[32];
  (void)std::snprintf(buf, sizeof buf, "%.1f %s", v, kUnits[unit]);
  return buf;
}

}  // namespace cairn::quota
