#include "index/records.h"

#include <algorithm>
#include <cstring>
#include <utility>

namespace cairn::index {

namespace {

template <typename T>
void Put(uint8_t*& p, T v) {
  std::memcpy(p, &v, sizeof v);  // little-endian hosts only (static_assert in xet/hash.cc)
  p += sizeof v;
}

template <typename T>
T Get(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

}  // namespace

xet::XorbChunk XorbEntry::chunk(size_t i) const {
  const uint8_t* p = packed.data() + i * kPackedChunkSize;
  return {.hash = Hash::FromBytes(p),
          .unpacked_size = Get<uint32_t>(p + 32),
          .end_offset = Get<uint32_t>(p + 36)};
}

xet::XorbLayout XorbEntry::ToLayout() const {
  xet::XorbLayout layout;
  layout.chunks.reserve(chunk_count);
  for (size_t i = 0; i < chunk_count; ++i) layout.chunks.push_back(chunk(i));
  return layout;
}

std::vector<uint8_t> PackLayout(const xet::XorbLayout& layout) {
  std::vector<uint8_t> out(layout.chunks.size() * kPackedChunkSize);
  uint8_t* p = out.data();
  for (const auto& c : layout.chunks) {
    std::memcpy(p, c.hash.bytes.data(), 32);
    p += 32;
    Put(p, c.unpacked_size);
    Put(p, c.end_offset);
  }
  return out;
}

XorbEntry MakeXorbEntry(const XorbHash& hash, const xet::XorbLayout& layout) {
  return {.hash = hash,
          .packed = PackLayout(layout),
          .chunk_count = static_cast<uint32_t>(layout.chunks.size()),
          .region_size = layout.chunk_region_size(),
          .unpacked_size = layout.unpacked_size(),
          .stored_at = 0};
}

Term FileEntry::term(size_t i) const {
  const uint8_t* p = packed_terms.data() + i * kPackedTermSize;
  return {.xorb = Hash::FromBytes(p),
          .chunk_start = Get<uint32_t>(p + 32),
          .chunk_end = Get<uint32_t>(p + 36),
          .unpacked_bytes = Get<uint32_t>(p + 40),
          .end_offset = Get<uint64_t>(p + 44)};
}

std::vector<XorbHash> DistinctTermXorbs(std::span<const uint8_t> packed_terms) {
  std::vector<XorbHash> out;
  for (size_t at = 0; at + kPackedTermSize <= packed_terms.size(); at += kPackedTermSize) {
    out.push_back(Hash::FromBytes(packed_terms.data() + at));
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

TermRange FileEntry::range(size_t i) const {
  const uint8_t* p = packed_ranges.data() + i * kPackedRangeSize;
  return {.start = Get<uint32_t>(p), .end = Get<uint32_t>(p + 4)};
}

size_t FileEntry::FindTerm(uint64_t offset) const {
  // First term whose end lies beyond `offset`.
  size_t lo = 0, hi = term_count;
  while (lo < hi) {
    const size_t mid = lo + (hi - lo) / 2;
    if (Get<uint64_t>(packed_terms.data() + mid * kPackedTermSize + 44) <= offset) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

std::vector<uint8_t> PackTerms(std::span<const xet::FileTerm> terms) {
  std::vector<uint8_t> out(terms.size() * kPackedTermSize);
  uint8_t* p = out.data();
  uint64_t end = 0;
  for (const auto& t : terms) {
    end += t.unpacked_bytes;
    std::memcpy(p, t.xorb.bytes.data(), 32);
    p += 32;
    Put(p, t.chunk_start);
    Put(p, t.chunk_end);
    Put(p, t.unpacked_bytes);
    Put(p, end);
  }
  return out;
}

Result<std::vector<uint8_t>> PackTermRanges(std::span<const xet::FileTerm> terms,
                                            const xet::LayoutLookup& layouts) {
  std::vector<uint8_t> out(terms.size() * kPackedRangeSize);
  uint8_t* p = out.data();
  for (const auto& t : terms) {
    const xet::XorbLayout* layout = layouts(t.xorb);
    if (layout == nullptr) return UnknownReference("xorb " + t.xorb.hex() + " has no layout");
    if (t.chunk_start >= t.chunk_end || t.chunk_end > layout->chunks.size()) {
      return Inconsistent("a term of xorb " + t.xorb.hex() + " is outside it");
    }
    Put(p, layout->begin_offset(t.chunk_start));
    Put(p, layout->chunks[t.chunk_end - 1].end_offset);
  }
  return out;
}

Result<FileCommit> MakeFileCommit(const xet::FileRecord& file, const xet::LayoutLookup& layouts) {
  FileCommit c = MakeFileCommit(file);
  auto ranges = PackTermRanges(file.terms, layouts);
  if (!ranges.ok()) return ranges.error();
  c.packed_ranges = std::move(*ranges);
  return c;
}

FileCommit MakeFileCommit(const xet::FileRecord& file) {
  return {.hash = file.hash,
          .packed_terms = PackTerms(file.terms),
          .term_count = static_cast<uint32_t>(file.terms.size()),
          .size = file.size(),
          .sha256 = file.sha256,
          .packed_ranges = {}};
}

Result<std::shared_ptr<const XorbEntry>> XorbEntryFromRow(const XorbHash& hash,
                                                          std::span<const uint8_t> packed,
                                                          int64_t chunk_count, int64_t region_size,
                                                          int64_t unpacked_size, int64_t stored_at) {
  if (chunk_count < 0 || packed.size() != static_cast<uint64_t>(chunk_count) * kPackedChunkSize) {
    return IoError("index row of xorb " + hash.hex() + " is corrupt");
  }
  auto e = std::make_shared<XorbEntry>();
  e->hash = hash;
  e->packed.assign(packed.begin(), packed.end());
  e->chunk_count = static_cast<uint32_t>(chunk_count);
  e->region_size = static_cast<uint32_t>(region_size);
  e->unpacked_size = static_cast<uint64_t>(unpacked_size);
  e->stored_at = stored_at;
  return std::shared_ptr<const XorbEntry>(std::move(e));
}

Result<std::shared_ptr<const FileEntry>> FileEntryFromRow(
    const FileHash& hash, std::span<const uint8_t> packed_terms, int64_t term_count, int64_t size,
    std::optional<Hash> sha256, std::span<const uint8_t> packed_ranges, int64_t created_at) {
  if (term_count < 0 || packed_terms.size() != static_cast<uint64_t>(term_count) * kPackedTermSize ||
      (!packed_ranges.empty() &&
       packed_ranges.size() != static_cast<uint64_t>(term_count) * kPackedRangeSize)) {
    return IoError("index row of file " + hash.hex() + " is corrupt");
  }
  auto e = std::make_shared<FileEntry>();
  e->hash = hash;
  e->packed_terms.assign(packed_terms.begin(), packed_terms.end());
  e->term_count = static_cast<uint32_t>(term_count);
  e->size = static_cast<uint64_t>(size);
  e->sha256 = sha256;
  e->packed_ranges.assign(packed_ranges.begin(), packed_ranges.end());
  e->created_at = created_at;
  return std::shared_ptr<const FileEntry>(std::move(e));
}

Status CheckShardCommit(const ShardCommit& commit) {
  for (const auto& f : commit.files) {
    const bool sized = f.packed_terms.size() == size_t{f.term_count} * kPackedTermSize;
    uint64_t end = 0;
    if (sized && f.term_count > 0) std::memcpy(&end, f.packed_terms.data() + f.packed_terms.size() - 8, 8);
    if (!sized || end != f.size) {
      return Malformed("file " + f.hash.hex() + ": packed terms do not match its term count and size");
    }
    if (!f.packed_ranges.empty() && f.packed_ranges.size() != size_t{f.term_count} * kPackedRangeSize) {
      return Malformed("file " + f.hash.hex() + ": term ranges do not match its term count");
    }
  }
  return Ok{};
}

Status CheckRepointing(const Repointing& repointing) {
  for (const auto& shard : repointing.shards) {
    if (auto st = CheckShardCommit(shard); !st.ok()) return st;
  }
  for (const auto& f : repointing.files) {
    const size_t terms = f.packed_terms.size() / kPackedTermSize;
    if (f.packed_terms.size() % kPackedTermSize != 0 ||
        (!f.packed_ranges.empty() && f.packed_ranges.size() != terms * kPackedRangeSize)) {
      return Malformed("file " + f.hash.hex() + ": packed terms and ranges do not agree");
    }
  }
  std::vector<XorbHash> replaced = repointing.replaced;
  std::sort(replaced.begin(), replaced.end());
  if (std::adjacent_find(replaced.begin(), replaced.end()) != replaced.end()) {
    return Malformed("a xorb is replaced twice in one step");
  }
  if (std::binary_search(replaced.begin(), replaced.end(), repointing.into)) {
    return Malformed("xorb " + repointing.into.hex() + " cannot replace itself");
  }
  return Ok{};
}

Result<std::vector<RevocationKey>> KeysOf(Result<std::vector<RevocationRecord>> page) {
  if (!page.ok()) return page.error();
  std::vector<RevocationKey> out;
  out.reserve(page->size());
  for (auto& r : *page) out.push_back(std::move(r.key));
  return out;
}

}  // namespace cairn::index
