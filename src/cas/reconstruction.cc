#include "cas/reconstruction.h"

#include <sys/mman.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <unordered_map>

namespace cairn::cas {
namespace {

// Writes an answer into a std::string through a raw pointer. Room(n) makes space for n more bytes, growing
// the string a step at a time (within the capacity reserved up front), so the bytes zeroed by resize() are
// still in cache when they are overwritten; Finish() trims the string to what was written.
class Writer {
 public:
  explicit Writer(std::string& s) : s_(s), p_(s.data() + s.size()), end_(p_) {}

  void Room(size_t n) {
    if (static_cast<size_t>(end_ - p_) < n) Grow(n);
  }
  // The writes below need Room() first.
  void Put(std::string_view text) {
    std::memcpy(p_, text.data(), text.size());
    p_ += text.size();
  }
  void Char(char c) { *p_++ = c; }
  void U64(uint64_t v) { p_ = std::to_chars(p_, p_ + 20, v).ptr; }
  char*& pos() { return p_; }

  void Finish() { s_.resize(static_cast<size_t>(p_ - s_.data())); }

 private:
  static constexpr size_t kStep = 64 << 10;

  void Grow(size_t n) {
    const size_t used = static_cast<size_t>(p_ - s_.data());
    const size_t want = used + std::max(n, kStep);
    if (want > s_.capacity()) s_.reserve(std::max(want, 2 * s_.capacity()));
    s_.resize(want);
    p_ = s_.data() + used;
    end_ = s_.data() + s_.size();
  }

  std::string& s_;
  char* p_;
  char* end_;
};

// Reserves `n` bytes for an answer, asking for transparent huge pages when it is large: a fresh 40 MB answer
// otherwise takes ~10,000 page faults, which cost more than writing it.
void ReserveAnswer(std::string& out, size_t n) {
  out.reserve(n);
#ifdef MADV_HUGEPAGE
  constexpr uintptr_t kHuge = uintptr_t{2} << 20;
  if (out.capacity() >= 2 * kHuge) {
    const auto begin = reinterpret_cast<uintptr_t>(out.data());
    const uintptr_t first = (begin + kHuge - 1) & ~(kHuge - 1);
    const uintptr_t last = (begin + out.capacity()) & ~(kHuge - 1);
    // Advice only: if the kernel declines, the answer is written into ordinary pages.
    // NOLINTNEXTLINE(performance-no-int-to-ptr): an address rounded to a huge-page boundary
    if (last > first) madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE);
  }
#endif
}

struct ChunkSpan {
  uint32_t start;
  uint32_t end;  // exclusive
};

// A term kept in the answer.
struct PlannedTerm {
  uint32_t xorb;  // index into FetchPlan::xorbs
  ChunkSpan chunks;
  uint32_t bytes;
};

struct PlannedXorb {
  xet::XorbHash hash;
  const xet::XorbLayout* layout;
  XorbSigningState signing;      // hex form and MAC state, filled by Finish()
  std::vector<ChunkSpan> spans;  // sorted and merged by Finish()
};

// The xorbs and chunk ranges an answer must fetch, shared by every file of a batch.
class FetchPlan {
 public:
  explicit FetchPlan(const xet::LayoutLookup& layouts) : layouts_(layouts) {}

  // Index of `hash` in xorbs(), or -1 if the index has no layout for it.
  int64_t Xorb(const xet::XorbHash& hash) {
    if (!xorbs_.empty() && xorbs_[last_].hash == hash) return last_;  // consecutive terms often share a xorb
    if (auto it = index_.find(hash); it != index_.end()) return last_ = it->second;
    const xet::XorbLayout* layout = layouts_(hash);
    if (layout == nullptr) return -1;
    xorbs_.push_back({hash, layout, {}, {}});
    last_ = static_cast<uint32_t>(xorbs_.size() - 1);
    index_.emplace(hash, last_);
    return last_;
  }

  void Add(uint32_t xorb, ChunkSpan span) { xorbs_[xorb].spans.push_back(span); }

  // Sorts each xorb's spans and merges those that overlap or touch; prepares each xorb for signing.
  void Finish(const TransferUrlSigner& signer) {
    for (auto& x : xorbs_) {
      char hex[64];
      x.hash.write_hex(hex);
      signer.PrepareXorb(hex, &x.signing);
      auto& s = x.spans;
      const auto by_start = [](const ChunkSpan& a, const ChunkSpan& b) { return a.start < b.start; };
      if (!std::is_sorted(s.begin(), s.end(), by_start)) std::sort(s.begin(), s.end(), by_start);
      size_t out = 0;
      for (size_t i = 0; i < s.size(); ++i) {
        if (out > 0 && s[i].start <= s[out - 1].end) {
          s[out - 1].end = std::max(s[out - 1].end, s[i].end);
        } else {
          s[out++] = s[i];
        }
      }
      s.resize(out);
    }
  }

  std::vector<PlannedXorb>& xorbs() { return xorbs_; }

 private:
  const xet::LayoutLookup& layouts_;
  std::unordered_map<xet::XorbHash, uint32_t, xet::HashHasher> index_;
  std::vector<PlannedXorb> xorbs_;
  uint32_t last_ = 0;
};

ByteRange BytesOf(const xet::XorbLayout& layout, ChunkSpan s) {
  return {layout.begin_offset(s.start), static_cast<uint64_t>(layout.chunks[s.end - 1].end_offset) - 1};
}

// Plans the terms covering [start, end) of a file (end exclusive, already clamped to the file size).
// Returns false if a xorb has no layout.
bool PlanTerms(std::span<const FileTermRef> terms, uint64_t start, uint64_t end, FetchPlan& plan,
               std::vector<PlannedTerm>& out, uint64_t* offset_into_first) {
  *offset_into_first = 0;
  auto it = std::upper_bound(terms.begin(), terms.end(), start,
                             [](uint64_t s, const FileTermRef& t) { return s < t.end_offset; });
  for (; it != terms.end(); ++it) {
    const uint64_t term_start = it->end_offset - it->bytes;
    if (term_start >= end) break;
    const int64_t xi = plan.Xorb(it->xorb);
    if (xi < 0) return false;
    const auto x = static_cast<uint32_t>(xi);
    const xet::XorbLayout& layout = *plan.xorbs()[x].layout;
    if (it->chunk_end > layout.chunks.size() || it->chunk_start >= it->chunk_end) return false;
    ChunkSpan span{it->chunk_start, it->chunk_end};
    uint32_t bytes = it->bytes;
    if (term_start < start || it->end_offset > end) {
      // A boundary term: drop leading chunks that end at or before `start`, trailing ones not needed to reach
      // `end`.
      uint64_t pos = term_start;
      while (pos + layout.chunks[span.start].unpacked_size <= start)
        pos += layout.chunks[span.start++].unpacked_size;
      if (out.empty()) *offset_into_first = start - pos;
      uint64_t reach = pos;
      uint32_t last = span.start;
      while (last < span.end && reach < end) reach += layout.chunks[last++].unpacked_size;
      span.end = last;
      bytes = static_cast<uint32_t>(reach - pos);
    }
    out.push_back({x, span, bytes});
    plan.Add(x, span);
  }
  return true;
}

// Upper bounds on what one item of an answer takes (numbers at 20 digits), for Writer::Room().
constexpr size_t kMaxTermText = 200;
constexpr size_t kMaxRangeText = 150;
constexpr size_t kMaxEntryText = 200;  // a fetch entry besides its URL

void WriteTerms(Writer& w, const std::vector<PlannedTerm>& terms, const std::vector<PlannedXorb>& xorbs) {
  w.Room(2);
  w.Char('[');
  for (size_t i = 0; i < terms.size(); ++i) {
    const auto& t = terms[i];
    w.Room(kMaxTermText);
    if (i) w.Char(',');
    w.Put("{\"hash\":\"");
    w.Put({xorbs[t.xorb].signing.hex, 64});
    w.Put("\",\"unpacked_length\":");
    w.U64(t.bytes);
    w.Put(",\"range\":{\"start\":");
    w.U64(t.chunks.start);
    w.Put(",\"end\":");
    w.U64(t.chunks.end);
    w.Put("}}");
  }
  w.Char(']');
}

// Writes "<name>":{"start":<start>,"end":<end>} (`name` includes its quotes and colon).
void WriteRange(Writer& w, std::string_view name, uint64_t start, uint64_t end) {
  w.Put(name);
  w.Put("{\"start\":");
  w.U64(start);
  w.Put(",\"end\":");
  w.U64(end);
  w.Char('}');
}

void WriteXorbKey(Writer& w, const PlannedXorb& x) {
  w.Room(70);
  w.Char('"');
  w.Put({x.signing.hex, 64});
  w.Put("\":[");
}

// v1: one entry, and one signed URL, per merged chunk range.
void WriteFetchInfoV1(Writer& w, const std::vector<PlannedXorb>& xorbs, uint64_t expiry,
                      const TransferUrlSigner& signer) {
  w.Room(16);
  w.Put("\"fetch_info\":{");
  const size_t room = kMaxEntryText + signer.MaxUrlSize(1);
  for (size_t i = 0; i < xorbs.size(); ++i) {
    const auto& x = xorbs[i];
    if (i) w.Char(',');
    WriteXorbKey(w, x);
    for (size_t k = 0; k < x.spans.size(); ++k) {
      const ByteRange b = BytesOf(*x.layout, x.spans[k]);
      w.Room(room);
      if (k) w.Char(',');
      w.Char('{');
      WriteRange(w, "\"range\":", x.spans[k].start, x.spans[k].end);
      w.Put(",\"url\":\"");
      w.pos() = signer.WriteUrl(w.pos(), x.signing, &b, 1, expiry);
      w.Put("\",");
      WriteRange(w, "\"url_range\":", b.start, b.end);
      w.Char('}');
    }
    w.Room(2);
    w.Char(']');
  }
  w.Room(2);
  w.Char('}');
}

// v2: one signed URL per xorb (per kMaxRangesPerUrl ranges) listing chunk and byte ranges.
void WriteXorbsV2(Writer& w, const std::vector<PlannedXorb>& xorbs, uint64_t expiry,
                  const TransferUrlSigner& signer) {
  w.Room(16);
  w.Put("\"xorbs\":{");
  std::vector<ByteRange> bytes;
  for (size_t i = 0; i < xorbs.size(); ++i) {
    const auto& x = xorbs[i];
    if (i) w.Char(',');
    WriteXorbKey(w, x);
    bytes.clear();
    for (const auto& s : x.spans) bytes.push_back(BytesOf(*x.layout, s));
    for (size_t first = 0; first < x.spans.size(); first += kMaxRangesPerUrl) {
      const size_t n = std::min(kMaxRangesPerUrl, x.spans.size() - first);
      w.Room(kMaxEntryText + signer.MaxUrlSize(n));
      if (first) w.Char(',');
      w.Put("{\"url\":\"");
      w.pos() = signer.WriteUrl(w.pos(), x.signing, bytes.data() + first, n, expiry);
      w.Put("\",\"ranges\":[");
      for (size_t k = first; k < first + n; ++k) {
        w.Room(kMaxRangeText);
        if (k != first) w.Char(',');
        w.Char('{');
        WriteRange(w, "\"chunks\":", x.spans[k].start, x.spans[k].end);
        w.Char(',');
        WriteRange(w, "\"bytes\":", bytes[k].start, bytes[k].end);
        w.Char('}');
      }
      w.Room(2);
      w.Put("]}");
    }
    w.Room(1);
    w.Char(']');
  }
  w.Room(1);
  w.Char('}');
}

// Bytes an answer will take, closely enough to reserve once (a 40 MB answer must not be copied while it
// grows).
size_t EstimateSize(ApiVersion v, size_t terms, const std::vector<PlannedXorb>& xorbs,
                    const TransferUrlSigner& signer) {
  size_t spans = 0;
  for (const auto& x : xorbs) spans += x.spans.size();
  const size_t url = signer.base().size() + 170;
  const size_t per_span = v == ApiVersion::kV1 ? url + 110 : 90;
  return 256 + terms * 135 + spans * per_span + xorbs.size() * (url + 80);
}

}  // namespace

ReconstructionAnswer AnswerReconstruction(std::span<const FileTermRef> terms,
                                          const xet::LayoutLookup& layouts, const ReconstructionQuery& query,
                                          const TransferUrlSigner& signer) {
  ReconstructionAnswer answer;
  const uint64_t size = terms.empty() ? 0 : terms.back().end_offset;
  uint64_t start = 0;
  uint64_t end = size;
  if (query.range) {
    start = query.range->start;
    if (start >= size && !(size == 0 && start == 0)) {
      answer.status = ReconstructionStatus::kRangeNotSatisfiable;
      answer.detail = "range starts at or past the end of the file (" + std::to_string(size) + " bytes)";
      return answer;
    }
    end = std::min(query.range->end, size - (size > 0 ? 1 : 0)) + (size > 0 ? 1 : 0);
  }

  FetchPlan plan(layouts);
  std::vector<PlannedTerm> planned;
  planned.reserve(terms.size());
  uint64_t offset_into_first = 0;
  if (size > 0 && !PlanTerms(terms, start, end, plan, planned, &offset_into_first)) {
    answer.status = ReconstructionStatus::kMissingXorb;
    answer.detail = "the index references a xorb it has no layout for";
    return answer;
  }
  plan.Finish(signer);

  std::string& out = answer.body;
  ReserveAnswer(out, EstimateSize(query.version, planned.size(), plan.xorbs(), signer));
  Writer w(out);
  w.Room(64);
  w.Put("{\"offset_into_first_range\":");
  w.U64(offset_into_first);
  w.Put(",\"terms\":");
  WriteTerms(w, planned, plan.xorbs());
  w.Room(1);
  w.Char(',');
  if (query.version == ApiVersion::kV1) {
    WriteFetchInfoV1(w, plan.xorbs(), query.url_expiry_unix, signer);
  } else {
    WriteXorbsV2(w, plan.xorbs(), query.url_expiry_unix, signer);
  }
  w.Room(1);
  w.Char('}');
  w.Finish();
  return answer;
}

ReconstructionAnswer AnswerBatchReconstruction(std::span<const BatchFile> files,
                                               const xet::LayoutLookup& layouts, uint64_t url_expiry_unix,
                                               const TransferUrlSigner& signer) {
  ReconstructionAnswer answer;
  FetchPlan plan(layouts);
  std::vector<std::vector<PlannedTerm>> planned(files.size());
  for (size_t i = 0; i < files.size(); ++i) {
    const auto terms = files[i].terms;
    const uint64_t size = terms.empty() ? 0 : terms.back().end_offset;
    uint64_t offset = 0;
    if (size > 0 && !PlanTerms(terms, 0, size, plan, planned[i], &offset)) {
      answer.status = ReconstructionStatus::kMissingXorb;
      answer.detail = "the index references a xorb it has no layout for";
      return answer;
    }
  }
  plan.Finish(signer);
  std::string& out = answer.body;
  size_t terms = 0;
  for (const auto& p : planned) terms += p.size();
  ReserveAnswer(out, EstimateSize(ApiVersion::kV1, terms, plan.xorbs(), signer) + files.size() * 80);
  Writer w(out);
  w.Room(16);
  w.Put("{\"files\":{");
  for (size_t i = 0; i < files.size(); ++i) {
    w.Room(80);
    if (i) w.Char(',');
    w.Char('"');
    files[i].hash.write_hex(w.pos());
    w.pos() += 64;
    w.Put("\":");
    WriteTerms(w, planned[i], plan.xorbs());
  }
  w.Room(2);
  w.Put("},");
  WriteFetchInfoV1(w, plan.xorbs(), url_expiry_unix, signer);
  w.Room(1);
  w.Char('}');
  w.Finish();
  return answer;
}

}  // namespace cairn::cas
