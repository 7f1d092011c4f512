#include "cas/reconstruction.h"

#include <algorithm>
#include <cstring>
#include <unordered_map>

#include "common/allocator.h"

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
  void U64(uint64_t v) { p_ = WriteDecimal(p_, v); }
  char*& pos() { return p_; }

  void Finish() { s_.resize(static_cast<size_t>(p_ - s_.data())); }

 private:
  static constexpr size_t kStep = 64 << 10;

  void Grow(size_t n) {
    const size_t used = static_cast<size_t>(p_ - s_.data());
    // A step at a time within the reserved capacity; past it (an estimate fell short), grow geometrically.
    const size_t want = std::max(used + n, std::min(used + kStep, s_.capacity()));
    if (want > s_.capacity()) s_.reserve(std::max(want, 2 * s_.capacity()));
    s_.resize(want);
    p_ = s_.data() + used;
    end_ = s_.data() + s_.size();
  }

  std::string& s_;
  char* p_;
  char* end_;
};

// Reserves `n` bytes for an answer, in transparent huge pages when it is large: a fresh 40 MB answer
// otherwise takes ~10,000 page faults, which cost more than writing it.
void ReserveAnswer(std::string& out, size_t n) {
  out.reserve(n);
  if (out.capacity() >= 2 * kHugePageSize) AdviseHugePages(out.data(), out.capacity());
}

bool SameHash(const xet::Hash& a, const xet::Hash& b) {
  return ((a.word(0) ^ b.word(0)) | (a.word(1) ^ b.word(1)) | (a.word(2) ^ b.word(2)) |
          (a.word(3) ^ b.word(3))) == 0;
}

// The xorbs and chunk ranges an answer must fetch, shared by every file of a batch.
class FetchPlan {
 public:
  explicit FetchPlan(const xet::LayoutLookup& layouts) : layouts_(layouts), slots_(kInitialSlots, kEmpty) {}

  // Index of `hash` in xorbs(). Called once per term: an open-addressing table of indices keyed by the
  // hash's first word keeps the lookup to one or two loads.
  uint32_t Xorb(const xet::XorbHash& hash) {
    if (!xorbs_.empty() && SameHash(xorbs_[last_].hash, hash)) return last_;  // neighbours often share a xorb
    const size_t mask = slots_.size() - 1;
    size_t slot = static_cast<size_t>(hash.word(0)) & mask;
    for (; slots_[slot] != kEmpty; slot = (slot + 1) & mask) {
      if (SameHash(xorbs_[slots_[slot]].hash, hash)) return last_ = slots_[slot];
    }
    last_ = static_cast<uint32_t>(xorbs_.size());
    xorbs_.push_back({hash, nullptr, false, {}, {}});
    slots_[slot] = last_;
    if (2 * xorbs_.size() > slots_.size()) Rehash();
    return last_;
  }

  // The layout of xorbs()[x], looked up the first time it is needed; null when the index has none.
  const xet::XorbLayout* Layout(uint32_t x) {
    PlannedXorb& px = xorbs_[x];
    if (px.layout == nullptr && !px.layout_missing) {
      px.layout = layouts_(px.hash);
      px.layout_missing = px.layout == nullptr;
    }
    return px.layout;
  }

  void Add(uint32_t xorb, XorbSpan span) { xorbs_[xorb].spans.push_back(span); }

  // Sorts each xorb's spans and merges those that overlap or touch; prepares each xorb for signing.
  void Finish(const TransferUrlSigner& signer) {
    for (auto& x : xorbs_) {
      char hex[64];
      x.hash.write_hex(hex);
      signer.PrepareXorb(hex, &x.signing);
      auto& s = x.spans;
      const auto by_start = [](const XorbSpan& a, const XorbSpan& b) {
        return a.chunks.start < b.chunks.start;
      };
      if (!std::is_sorted(s.begin(), s.end(), by_start)) std::sort(s.begin(), s.end(), by_start);
      size_t out = 0;
      for (size_t i = 0; i < s.size(); ++i) {
        if (out > 0 && s[i].chunks.start <= s[out - 1].chunks.end) {
          // Bytes grow with chunks: the union of touching or overlapping runs is one run of bytes.
          s[out - 1].chunks.end = std::max(s[out - 1].chunks.end, s[i].chunks.end);
          s[out - 1].end_byte = std::max(s[out - 1].end_byte, s[i].end_byte);
        } else {
          s[out++] = s[i];
        }
      }
      s.resize(out);
    }
  }

  std::vector<PlannedXorb>& xorbs() { return xorbs_; }

 private:
  static constexpr uint32_t kEmpty = UINT32_MAX;
  static constexpr size_t kInitialSlots = 64;

  void Rehash() {
    slots_.assign(2 * slots_.size(), kEmpty);
    const size_t mask = slots_.size() - 1;
    for (uint32_t i = 0; i < xorbs_.size(); ++i) {
      size_t slot = static_cast<size_t>(xorbs_[i].hash.word(0)) & mask;
      while (slots_[slot] != kEmpty) slot = (slot + 1) & mask;
      slots_[slot] = i;
    }
  }

  const xet::LayoutLookup& layouts_;
  std::vector<uint32_t> slots_;  // indices into xorbs_, a power of two in size, at most half full
  std::vector<PlannedXorb> xorbs_;
  uint32_t last_ = 0;
};

// A span's bytes as URLs give them (end inclusive).
ByteRange BytesOf(const XorbSpan& s) {
  return {s.first_byte, static_cast<uint64_t>(s.end_byte) - 1};
}

// Plans the terms covering [start, end) of a file (end exclusive, already clamped to the file size). A term's
// bytes in its xorb come from the index's record of them; the xorb's layout is read only for a term without
// one, or one that the range cuts (to drop the chunks outside the range). Returns false if a term needs a
// layout the index does not have, or does not fit it.
bool PlanTerms(std::span<const FileTermRef> terms, uint64_t start, uint64_t end, FetchPlan& plan,
               std::vector<PlannedTerm>& out, uint64_t* offset_into_first) {
  *offset_into_first = 0;
  auto it = std::upper_bound(terms.begin(), terms.end(), start,
                             [](uint64_t s, const FileTermRef& t) { return s < t.end_offset; });
  for (; it != terms.end(); ++it) {
    const uint64_t term_start = it->end_offset - it->bytes;
    if (term_start >= end) break;
    if (it->chunk_start >= it->chunk_end) return false;
    const uint32_t x = plan.Xorb(it->xorb);
    ChunkSpan span{it->chunk_start, it->chunk_end};
    uint32_t bytes = it->bytes;
    XorbSpan fetch{span, it->range_start, it->range_end};
    const bool cut = term_start < start || it->end_offset > end;
    if (cut || it->range_end == 0) {
      const xet::XorbLayout* layout = plan.Layout(x);
      if (layout == nullptr || it->chunk_end > layout->chunks.size()) return false;
      if (cut) {
        // A boundary term: drop leading chunks that end at or before `start`, trailing ones not needed to
        // reach `end`.
        uint64_t pos = term_start;
        while (pos + layout->chunks[span.start].unpacked_size <= start)
          pos += layout->chunks[span.start++].unpacked_size;
        if (out.empty()) *offset_into_first = start - pos;
        uint64_t reach = pos;
        uint32_t last = span.start;
        while (last < span.end && reach < end) reach += layout->chunks[last++].unpacked_size;
        span.end = last;
        bytes = static_cast<uint32_t>(reach - pos);
      }
      fetch = {span, layout->begin_offset(span.start), layout->chunks[span.end - 1].end_offset};
    }
    out.push_back({x, span, bytes});
    plan.Add(x, fetch);
  }
  return true;
}

// Upper bounds on what one item of an answer takes (numbers at their widest), for Writer::Room() and for
// reserving each part once.
constexpr size_t kMaxTermText = 121 + 3 * 10;  // 64 hex digits, three 32-bit numbers, the JSON around
constexpr size_t kMaxRangeText = 2 * 10 + 2 * 20 + 60;  // a chunk range and a byte range, as in v2
constexpr size_t kMaxEntryText = 200;                   // a fetch entry besides its URL

// Writes terms [first, last) of `terms`, each after a comma but the file's first.
void WriteTerms(Writer& w, const std::vector<PlannedTerm>& terms, size_t first, size_t last,
                const std::vector<PlannedXorb>& xorbs) {
  for (size_t i = first; i < last; ++i) {
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
void WriteFetchInfoV1(Writer& w, const PlannedXorb& x, uint64_t expiry, const TransferUrlSigner& signer) {
  WriteXorbKey(w, x);
  const size_t room = kMaxEntryText + signer.MaxUrlSize(1);
  for (size_t k = 0; k < x.spans.size(); ++k) {
    const ByteRange b = BytesOf(x.spans[k]);
    w.Room(room);
    if (k) w.Char(',');
    w.Char('{');
    WriteRange(w, "\"range\":", x.spans[k].chunks.start, x.spans[k].chunks.end);
    w.Put(",\"url\":\"");
    w.pos() = signer.WriteUrl(w.pos(), x.signing, &b, 1, expiry);
    w.Put("\",");
    WriteRange(w, "\"url_range\":", b.start, b.end);
    w.Char('}');
  }
  w.Room(1);
  w.Char(']');
}

// v2: one signed URL per xorb (per kMaxRangesPerUrl ranges) listing chunk and byte ranges.
void WriteXorbV2(Writer& w, const PlannedXorb& x, uint64_t expiry, const TransferUrlSigner& signer,
                 std::vector<ByteRange>& bytes) {
  WriteXorbKey(w, x);
  bytes.clear();
  for (const auto& s : x.spans) bytes.push_back(BytesOf(s));
  const size_t per_url = signer.presigned() ? 1 : kMaxRangesPerUrl;
  for (size_t first = 0; first < x.spans.size(); first += per_url) {
    const size_t n = std::min(per_url, x.spans.size() - first);
    w.Room(kMaxEntryText + signer.MaxUrlSize(n));
    if (first) w.Char(',');
    w.Put("{\"url\":\"");
    w.pos() = signer.WriteUrl(w.pos(), x.signing, bytes.data() + first, n, expiry);
    w.Put("\",\"ranges\":[");
    for (size_t k = first; k < first + n; ++k) {
      w.Room(kMaxRangeText);
      if (k != first) w.Char(',');
      w.Char('{');
      WriteRange(w, "\"chunks\":", x.spans[k].chunks.start, x.spans[k].chunks.end);
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

// Bytes a xorb's fetch entries take at most (reserved up front; the writers check room as they go).
size_t MaxXorbText(ApiVersion v, const PlannedXorb& x, const TransferUrlSigner& signer) {
  if (v == ApiVersion::kV1) return 80 + x.spans.size() * (kMaxEntryText + signer.MaxUrlSize(1));
  const size_t per_url = signer.presigned() ? 1 : kMaxRangesPerUrl;
  const size_t urls = (x.spans.size() + per_url - 1) / per_url;
  return 80 + urls * (kMaxEntryText + signer.MaxUrlSize(0)) +
         x.spans.size() * (kMaxRangeText + signer.MaxUrlSize(1) - signer.MaxUrlSize(0));
}

// Terms (and spans) per part: large enough that a part's bookkeeping is noise, small enough that a
// 100,000-term answer spreads over every worker.
constexpr size_t kTermsPerPart = 8192;
constexpr size_t kSpansPerPartV1 = 2048;
constexpr size_t kSpansPerPartV2 = 8192;
// Below this (at most; a typical answer of ~100 terms is ~40 KB) the parts are written on the caller's
// thread: handing them to the pool costs more in wake-ups than it saves.
constexpr size_t kParallelAnswerBytes = 1 << 20;

// An answer cut into parts: fixed text, and runs of terms or xorbs that the workers write concurrently, each
// into its own string. The HTTP layer sends the parts in order, so they are never joined.
class PartsBuilder {
 public:
  void Text(std::string_view text) {
    if (parts_.empty() || last_deferred_) parts_.emplace_back();
    parts_.back().append(text);
    last_deferred_ = false;
  }

  // A part written later by `write`, which needs at most `max_size` bytes.
  void Deferred(size_t max_size, std::function<void(Writer&)> write) {
    tasks_.push_back({parts_.size(), max_size, std::move(write)});
    parts_.emplace_back();
    last_deferred_ = true;
  }

  // Terms of one file, split into parts.
  void Terms(const std::vector<PlannedTerm>& terms, const std::vector<PlannedXorb>& xorbs) {
    Text("[");
    for (size_t first = 0; first < terms.size(); first += kTermsPerPart) {
      const size_t last = std::min(terms.size(), first + kTermsPerPart);
      Deferred((last - first) * kMaxTermText,
               [&terms, &xorbs, first, last](Writer& w) { WriteTerms(w, terms, first, last, xorbs); });
    }
    Text("]");
  }

  // The fetch section's xorbs, split into parts by their number of spans.
  void Xorbs(ApiVersion v, const std::vector<PlannedXorb>& xorbs, uint64_t expiry,
             const TransferUrlSigner& signer) {
    const size_t per_part = v == ApiVersion::kV1 ? kSpansPerPartV1 : kSpansPerPartV2;
    for (size_t first = 0; first < xorbs.size();) {
      size_t last = first;
      size_t spans = 0;
      size_t max_size = 0;
      while (last < xorbs.size() && (last == first || spans < per_part)) {
        spans += xorbs[last].spans.size();
        max_size += 1 + MaxXorbText(v, xorbs[last], signer);
        ++last;
      }
      Deferred(max_size, [v, &xorbs, &signer, expiry, first, last](Writer& w) {
        std::vector<ByteRange> bytes;
        for (size_t i = first; i < last; ++i) {
          if (i) {
            w.Room(1);
            w.Char(',');
          }
          if (v == ApiVersion::kV1) {
            WriteFetchInfoV1(w, xorbs[i], expiry, signer);
          } else {
            WriteXorbV2(w, xorbs[i], expiry, signer, bytes);
          }
        }
      });
      first = last;
    }
  }

  std::vector<std::string> Build(WorkerPool* pool) {
    const auto run = [this](size_t i) {
      Task& t = tasks_[i];
      std::string& out = parts_[t.part];
      ReserveAnswer(out, t.max_size);
      Writer w(out);
      t.write(w);
      w.Finish();
    };
    size_t bytes = 0;
    for (const Task& t : tasks_) bytes += t.max_size;
    if (pool != nullptr && tasks_.size() > 1 && bytes >= kParallelAnswerBytes) {
      pool->ParallelFor(tasks_.size(), run);
    } else {
      for (size_t i = 0; i < tasks_.size(); ++i) run(i);
    }
    std::erase_if(parts_, [](const std::string& p) { return p.empty(); });
    return std::move(parts_);
  }

 private:
  struct Task {
    size_t part;
    size_t max_size;
    std::function<void(Writer&)> write;
  };
  std::vector<std::string> parts_;
  std::vector<Task> tasks_;
  bool last_deferred_ = false;
};

}  // namespace

std::string ReconstructionAnswer::Text() const {
  std::string out;
  size_t n = 0;
  for (const auto& p : body) n += p.size();
  out.reserve(n);
  for (const auto& p : body) out += p;
  return out;
}

size_t ReconstructionAnswer::size() const {
  size_t n = 0;
  for (const auto& p : body) n += p.size();
  return n;
}

size_t ReconstructionPlan::MemoryBytes() const {
  size_t n = sizeof(*this) + terms.capacity() * sizeof(PlannedTerm) + xorbs.capacity() * sizeof(PlannedXorb) +
             holds.capacity() * sizeof(holds[0]);
  for (const auto& x : xorbs) n += x.spans.capacity() * sizeof(XorbSpan);
  return n;
}

ReconstructionPlan PlanReconstruction(std::span<const FileTermRef> terms, const xet::LayoutLookup& layouts,
                                      std::optional<ByteRange> range, const TransferUrlSigner& signer) {
  ReconstructionPlan out;
  const uint64_t size = terms.empty() ? 0 : terms.back().end_offset;
  uint64_t start = 0;
  uint64_t end = size;
  if (range) {
    start = range->start;
    if (start >= size && !(size == 0 && start == 0)) {
      out.status = ReconstructionStatus::kRangeNotSatisfiable;
      out.detail = "range starts at or past the end of the file (" + std::to_string(size) + " bytes)";
      return out;
    }
    end = std::min(range->end, size - (size > 0 ? 1 : 0)) + (size > 0 ? 1 : 0);
  }

  FetchPlan plan(layouts);
  out.terms.reserve(terms.size());
  if (size > 0 && !PlanTerms(terms, start, end, plan, out.terms, &out.offset_into_first)) {
    out.status = ReconstructionStatus::kMissingXorb;
    out.detail = "the index references a xorb it has no layout for, or a term outside its xorb";
    out.terms.clear();
    return out;
  }
  plan.Finish(signer);
  out.xorbs = std::move(plan.xorbs());
  return out;
}

ReconstructionAnswer WriteReconstruction(const ReconstructionPlan& plan, ApiVersion version,
                                         uint64_t url_expiry_unix, const TransferUrlSigner& signer,
                                         WorkerPool* pool) {
  ReconstructionAnswer answer;
  answer.status = plan.status;
  answer.detail = plan.detail;
  if (plan.status != ReconstructionStatus::kOk) return answer;
  PartsBuilder parts;
  parts.Text("{\"offset_into_first_range\":" + std::to_string(plan.offset_into_first) + ",\"terms\":");
  parts.Terms(plan.terms, plan.xorbs);
  parts.Text(version == ApiVersion::kV1 ? ",\"fetch_info\":{" : ",\"xorbs\":{");
  parts.Xorbs(version, plan.xorbs, url_expiry_unix, signer);
  parts.Text("}}");
  answer.body = parts.Build(pool);
  return answer;
}

ReconstructionAnswer AnswerReconstruction(std::span<const FileTermRef> terms,
                                          const xet::LayoutLookup& layouts, const ReconstructionQuery& query,
                                          const TransferUrlSigner& signer, WorkerPool* pool) {
  const ReconstructionPlan plan = PlanReconstruction(terms, layouts, query.range, signer);
  return WriteReconstruction(plan, query.version, query.url_expiry_unix, signer, pool);
}

ReconstructionAnswer AnswerBatchReconstruction(std::span<const BatchFile> files,
                                               const xet::LayoutLookup& layouts, uint64_t url_expiry_unix,
                                               const TransferUrlSigner& signer, WorkerPool* pool) {
  ReconstructionAnswer answer;
  FetchPlan plan(layouts);
  std::vector<std::vector<PlannedTerm>> planned(files.size());
  for (size_t i = 0; i < files.size(); ++i) {
    const auto terms = files[i].terms;
    const uint64_t size = terms.empty() ? 0 : terms.back().end_offset;
    uint64_t offset = 0;
    if (size > 0 && !PlanTerms(terms, 0, size, plan, planned[i], &offset)) {
      answer.status = ReconstructionStatus::kMissingXorb;
      answer.detail = "the index references a xorb it has no layout for, or a term outside its xorb";
      return answer;
    }
  }
  plan.Finish(signer);

  PartsBuilder parts;
  parts.Text("{\"files\":{");
  for (size_t i = 0; i < files.size(); ++i) {
    char key[68];
    key[0] = i ? ',' : '"';
    size_t n = 1;
    if (i) key[n++] = '"';
    files[i].hash.write_hex(key + n);
    n += 64;
    key[n++] = '"';
    key[n++] = ':';
    parts.Text({key, n});
    parts.Terms(planned[i], plan.xorbs());
  }
  parts.Text("},\"fetch_info\":{");
  parts.Xorbs(ApiVersion::kV1, plan.xorbs(), url_expiry_unix, signer);
  parts.Text("}}");
  answer.body = parts.Build(pool);
  return answer;
}

}  // namespace cairn::cas
