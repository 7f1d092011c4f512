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
Result<uint64_t> ChunkBytes(index::CasIndex& cas, ChunkSet& set) {
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

Result<QuotaService::Measured> QuotaService::MeasureWith(std::string_view ns,
                                                         std::span<const xet::FileHash> added) {
  Measured m;
  m.usage.ns = std::string(ns);
  ChunkSet base;
  std::unordered_set<xet::FileHash, xet::HashHasher> seen;
  // Files are read in batches (one round trip each on PostgreSQL); one swept meanwhile adds nothing.
  std::vector<xet::FileHash> pending;
  const auto flush = [&](ChunkSet& into) -> Status {
    for (size_t i = 0; i < pending.size(); i += index::CasIndex::kMaxFilesPerRead) {
      const size_t n = std::min(pending.size() - i, index::CasIndex::kMaxFilesPerRead);
      auto entries = index_.GetFiles(std::span(pending).subspan(i, n));
      if (!entries.ok()) return entries.error();
      for (const auto& e : *entries) {
        if (e) AddFile(into, *e);
      }
    }
    pending.clear();
    return Ok{};
  };
  const auto add_file = [&](const xet::FileHash& hash, ChunkSet& into) -> Status {
    if (hash.is_zero() || !seen.insert(hash).second) return Ok{};
    pending.push_back(hash);
    if (pending.size() >= 16 * index::CasIndex::kMaxFilesPerRead) return flush(into);
    return Ok{};
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
  if (auto st = flush(base); !st.ok()) return st.error();
  m.usage.files = seen.size();
  ChunkSet extra;
  for (const auto& f : added) {
    if (auto st = add_file(f, extra); !st.ok()) return st.error();
  }
  if (auto st = flush(extra); !st.ok()) return st.error();
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

Result<Usage> QuotaService::Measure(std::string_view ns) {
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

Result<std::optional<Usage>> QuotaService::Recorded(std::string_view ns) {
  auto record = index_.GetQuota(ns);
  if (!record.ok()) return record.error();
  if (!*record) return std::optional<Usage>();
  return std::optional<Usage>(UsageOf(**record));
}

Usage UsageOf(const index::QuotaRecord& q) {
  Usage u;
  u.ns = q.ns;
  u.limit = q.limit;
  u.used = q.charged();
  u.exact = q.exact();
  u.measured_at = q.measured_at;
  return u;
}

Status QuotaService::CheckRoom(std::string_view ns) {
  auto record = index_.GetQuota(ns);
  if (!record.ok()) return record.error();
  if (!*record || !(*record)->limit || (*record)->charged() < *(*record)->limit) return Ok{};
  if ((*record)->exact()) return QuotaFull(**record, 0);
  // Full by an upper bound: measure before refusing.
  auto usage = Measure(ns);
  if (!usage.ok()) return usage.error();
  if (usage->used < *(*record)->limit) return Ok{};
  index::QuotaRecord q = **record;
  q.used = usage->used;
  q.pending = 0;
  return QuotaFull(q, 0);
}

Status QuotaService::CheckRoomForScope(std::string_view scope) {
  auto repo = index_.FindRepoByScope(scope);
  if (!repo.ok()) {
    if (repo.error().code == ErrorCode::kNotFound) return Ok{};  // a plain CAS scope
    return repo.error();
  }
  return CheckRoom(repo->ns);
}

Admission::Admission(index::QuotaIndex& index, std::string ns, uint64_t object_bytes, uint64_t file_bytes)
    : index_(&index), ns_(std::move(ns)), object_bytes_(object_bytes), file_bytes_(file_bytes) {}

Admission::Admission(Admission&& o) noexcept
    : index_(std::exchange(o.index_, nullptr)),
      ns_(std::move(o.ns_)),
      object_bytes_(o.object_bytes_),
      file_bytes_(o.file_bytes_),
      stored_(o.stored_),
      published_(o.published_) {}

Admission& Admission::operator=(Admission&& o) noexcept {
  if (this != &o) {
    Admission dropped(std::move(*this));
    index_ = std::exchange(o.index_, nullptr);
    ns_ = std::move(o.ns_);
    object_bytes_ = o.object_bytes_;
    file_bytes_ = o.file_bytes_;
    stored_ = o.stored_;
    published_ = o.published_;
  }
  return *this;
}

Admission::~Admission() {
  // Reserved by the objects' write, never published: released (should this fail, the reservation expires).
  if (index_ != nullptr && stored_ && !published_ && file_bytes_ > 0)
    (void)index_->SettleQuota(ns_, file_bytes_, false);
}

const index::QuotaCharge* Admission::ObjectsCharge() {
  if (index_ == nullptr || object_bytes_ + file_bytes_ == 0) return nullptr;
  charge_ = {.ns = ns_, .publish = object_bytes_, .reserve = file_bytes_, .settle = 0, .check = true};
  return &charge_;
}

const index::QuotaCharge* Admission::FilesCharge() {
  if (index_ == nullptr || file_bytes_ == 0) return nullptr;
  if (stored_) {
    charge_ = {.ns = ns_, .publish = 0, .reserve = 0, .settle = file_bytes_, .check = false};
  } else {
    charge_ = {.ns = ns_, .publish = file_bytes_, .reserve = 0, .settle = 0, .check = true};
  }
  return &charge_;
}

Error Admission::Explain(Error e) const {
  if (e.code != ErrorCode::kQuota || index_ == nullptr) return e;
  auto record = index_->GetQuota(ns_);
  if (!record.ok() || !*record) return e;
  return QuotaFull(**record, object_bytes_ + file_bytes_);
}

Result<Admission> QuotaService::Admit(std::string_view ns, std::span<const xet::FileHash> files,
                                      uint64_t object_bytes) {
  if (files.empty() && object_bytes == 0) return Admission();
  auto record = index_.GetQuota(ns);
  if (!record.ok()) return record.error();
  if (!*record) return Admission();
  const index::QuotaRecord& q = **record;
  // The quick path: every file at its full size (an upper bound of what it adds), when the record can be
  // trusted and that fits; the writes check it again, atomically.
  if (!q.stale && q.measured_at != 0) {
    uint64_t file_bytes = 0;
    std::unordered_set<xet::FileHash, xet::HashHasher> once;
    std::vector<xet::FileHash> distinct;
    for (const auto& f : files) {
      if (!f.is_zero() && once.insert(f).second) distinct.push_back(f);
    }
    for (size_t i = 0; i < distinct.size(); i += index::CasIndex::kMaxFilesPerRead) {
      const size_t n = std::min(distinct.size() - i, index::CasIndex::kMaxFilesPerRead);
      auto entries = index_.GetFiles(std::span(distinct).subspan(i, n));
      if (!entries.ok()) return entries.error();
      for (size_t k = 0; k < n; ++k) {
        if (!(*entries)[k]) return NotFound("file " + distinct[i + k].hex() + " is not in the index");
        file_bytes += (*entries)[k]->size;
      }
    }
    if (!q.limit || q.charged() + object_bytes + file_bytes <= *q.limit)
      return Admission(index_, std::string(ns), object_bytes, file_bytes);
  }
  // Measure, and charge what the commit really adds. The measure subtracts only what was published when it
  // began (whose files it reads); reservations stay.
  auto m = MeasureWith(ns, files);
  if (!m.ok()) return m.error();
  const index::QuotaMeasure measure{m->usage.used, q.pending, q.generation, m->usage.measured_at};
  if (auto recorded = index_.RecordQuotaMeasure(ns, measure, 0); !recorded.ok()) return recorded.error();
  auto now = index_.GetQuota(ns);
  if (!now.ok()) return now.error();
  if (!*now) return Admission();
  if ((*now)->limit && (*now)->charged() + object_bytes + m->adds > *(*now)->limit)
    return QuotaFull(**now, object_bytes + m->adds);
  return Admission(index_, std::string(ns), object_bytes, m->adds);
}

Status QuotaService::MarkStale(std::optional<std::string_view> ns) {
  return index_.MarkQuotaStale(ns);
}

Result<size_t> QuotaService::RefreshAll() {
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

Status QuotaService::SetLimit(const index::AuditActor& by, std::string_view ns,
                              std::optional<uint64_t> limit) {
  const auto event = by.Event(clock_.UnixSeconds(), "quota.set", std::string(ns), "quota " + std::string(ns),
                              limit ? "limit " + std::to_string(*limit) + " bytes" : "no limit");
  return index_.SetQuotaLimit(ns, limit, &event);
}

Error QuotaFull(const index::QuotaRecord& q, uint64_t adds) {
  std::string message = "Storage quota of namespace '" + q.ns + "' reached: " + FormatBytes(q.charged()) +
                        " used of " + FormatBytes(q.limit.value_or(0));
  if (adds > 0) message += ", and this would add " + FormatBytes(adds);
  message +=
      ". Delete files (the garbage collector frees them past its grace) or ask the operator to raise it"
      " (cairn quota set " +
      q.ns + " SIZE)";
  return QuotaExceeded(std::move(message));
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
