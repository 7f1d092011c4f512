#include "xet/shard.h"

#include <algorithm>
#include <bit>
#include <cassert>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

#include "xet/bytes.h"
#include "xet/hashing.h"

namespace cairn::xet {
namespace {

constexpr uint8_t kShardTag[32] = {0x48, 0x46, 0x52, 0x65, 0x70, 0x6f, 0x4d, 0x65, 0x74, 0x61, 0x44,
                                   0x61, 0x74, 0x61, 0x00, 0x55, 0x69, 0x67, 0x45, 0x6a, 0x7b, 0x81,
                                   0x57, 0x83, 0xa5, 0xbd, 0xd9, 0x5c, 0xcd, 0xd1, 0x4a, 0xa9};

enum class EntryKind { kRecord, kBookend, kBadBookend };

// A bookend is 32 bytes of 0xFF then 16 zero bytes. 32 × 0xFF with anything else after is corrupt.
EntryKind Classify(const uint8_t* e) {
  for (int i = 0; i < 32; ++i) {
    if (e[i] != 0xFF) return EntryKind::kRecord;
  }
  for (int i = 32; i < 48; ++i) {
    if (e[i] != 0) return EntryKind::kBadBookend;
  }
  return EntryKind::kBookend;
}

// Sequential reader over 48-byte entries; every access is bounds-checked by the caller via remaining().
class EntryReader {
 public:
  explicit EntryReader(std::span<const uint8_t> b) : b_(b) {}
  size_t pos() const { return pos_; }
  size_t remaining_entries() const { return (b_.size() - pos_) / kShardEntrySize; }
  bool has_entry() const { return b_.size() - pos_ >= kShardEntrySize; }
  const uint8_t* take() {
    const uint8_t* p = b_.data() + pos_;
    pos_ += kShardEntrySize;
    return p;
  }

 private:
  std::span<const uint8_t> b_;
  size_t pos_ = kShardHeaderSize;
};

uint32_t U32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

std::string Nth(const char* what, size_t i) {
  return std::string(what) + " " + std::to_string(i);
}

ShardFooter ReadFooter(std::span<const uint8_t> f) {
  ShardFooter o;
  o.file_info_offset = LoadU64(f, 8);
  o.xorb_info_offset = LoadU64(f, 16);
  o.file_lookup_offset = LoadU64(f, 24);
  o.file_lookup_num_entry = LoadU64(f, 32);
  o.xorb_lookup_offset = LoadU64(f, 40);
  o.xorb_lookup_num_entry = LoadU64(f, 48);
  o.chunk_lookup_offset = LoadU64(f, 56);
  o.chunk_lookup_num_entry = LoadU64(f, 64);
  o.chunk_hash_hmac_key = Hash::FromBytes(f.data() + 72);
  o.creation_timestamp = LoadU64(f, 104);
  o.key_expiry = LoadU64(f, 112);
  o.stored_bytes_on_disk = LoadU64(f, 168);
  o.materialized_bytes = LoadU64(f, 176);
  o.stored_bytes = LoadU64(f, 184);
  o.footer_offset = LoadU64(f, 192);
  return o;
}

}  // namespace

uint64_t FileRecord::size() const {
  uint64_t n = 0;
  for (const auto& t : terms) n += t.unpacked_bytes;
  return n;
}

namespace {

// The 48-byte header: tag, version, footer size (0 or 200), which it returns.
Result<uint64_t> ParseShardHeader(std::span<const uint8_t> bytes) {
  if (bytes.size() > kMaxShardBytes) return LimitExceeded("shard larger than 64 MiB");
  if (bytes.size() < kShardHeaderSize) return Malformed("shard shorter than its 48-byte header");
  if (std::memcmp(bytes.data(), kShardTag, 32) != 0) return Malformed("not a shard: bad header tag");
  const uint64_t version = LoadU64(bytes, 32);
  if (version != kShardVersion) return Malformed("unsupported shard version " + std::to_string(version));
  const uint64_t footer_size = LoadU64(bytes, 40);
  if (footer_size != 0 && footer_size != kShardFooterSize) {
    return Malformed("shard footer size must be 0 or 200, not " + std::to_string(footer_size));
  }
  return footer_size;
}

// The next entry of a section, or nullptr at its bookend.
Result<const uint8_t*> NextSectionEntry(EntryReader& r, std::string_view section) {
  if (!r.has_entry())
    return Malformed("truncated shard: " + std::string(section) + " section has no bookend");
  const size_t at = r.pos();
  const uint8_t* e = r.take();
  const EntryKind kind = Classify(e);
  if (kind == EntryKind::kBookend) return static_cast<const uint8_t*>(nullptr);
  if (kind == EntryKind::kBadBookend) {
    return Malformed("corrupt bookend in " + std::string(section) + " section at byte " + std::to_string(at));
  }
  return e;
}

// One file record: its header entry `e` (already taken), then its terms, verification entries and metadata.
// Every file of a shard has verification entries or none does (`with_verification`, set by the first).
Result<FileRecord> ParseFileRecord(EntryReader& r, const uint8_t* e, size_t index,
                                   std::optional<bool>& with_verification) {
  FileRecord f;
  f.hash = Hash::FromBytes(e);
  const uint32_t flags = U32(e + 32);
  const uint32_t n = U32(e + 36);
  const bool verification = flags & kFileFlagVerification;
  const bool ext = flags & kFileFlagMetadataExt;
  if (with_verification && *with_verification != verification) {
    return Malformed(Nth("file", index) + ": some files have verification entries and some do not");
  }
  with_verification = verification;
  // Entries that follow the header, computed in 64 bits and held to u32 as the format requires.
  const uint64_t following = uint64_t{n} * (verification ? 2 : 1) + (ext ? 1 : 0);
  if (following > UINT32_MAX) return Malformed(Nth("file", index) + ": entry count overflows u32");
  if (following > r.remaining_entries()) {
    return Malformed(Nth("file", index) + " declares " + std::to_string(n) +
                     " terms; the shard is truncated");
  }
  f.terms.resize(n);
  for (uint32_t i = 0; i < n; ++i) {
    const uint8_t* t = r.take();
    FileTerm& term = f.terms[i];
    term.xorb = Hash::FromBytes(t);
    term.xorb_flags = U32(t + 32);
    term.unpacked_bytes = U32(t + 36);
    term.chunk_start = U32(t + 40);
    term.chunk_end = U32(t + 44);
    if (term.chunk_start >= term.chunk_end) {
      return Malformed(Nth("file", index) + " " + Nth("term", i) + ": empty or inverted chunk range");
    }
  }
  if (verification) {
    f.verification.resize(n);
    for (uint32_t i = 0; i < n; ++i) f.verification[i] = Hash::FromBytes(r.take());
  }
  if (ext) f.sha256 = Hash::FromBytes(r.take());
  return f;
}

// A section's records, each parsed by `parse` (its header entry, its index) until the section's bookend.
template <typename Record, typename Parse>
Status ParseSection(EntryReader& r, std::string_view section, std::vector<Record>& out, Parse parse) {
  for (;;) {
    auto e = NextSectionEntry(r, section);
    if (!e.ok()) return e.error();
    if (*e == nullptr) return Ok{};
    auto record = parse(*e, out.size());
    if (!record.ok()) return record.error();
    out.push_back(std::move(*record));
  }
}

// One xorb record: its header entry `e` (already taken), then its chunks.
Result<XorbRecord> ParseXorbRecord(EntryReader& r, const uint8_t* e, size_t index) {
  XorbRecord x;
  x.hash = Hash::FromBytes(e);
  x.flags = U32(e + 32);
  const uint32_t n = U32(e + 36);
  x.bytes_in_xorb = U32(e + 40);
  x.bytes_on_disk = U32(e + 44);
  if (n > r.remaining_entries()) {
    return Malformed(Nth("xorb", index) + " declares " + std::to_string(n) +
                     " chunks; the shard is truncated");
  }
  x.chunks.resize(n);
  for (uint32_t i = 0; i < n; ++i) {
    const uint8_t* c = r.take();
    XorbChunkRecord& chunk = x.chunks[i];
    chunk.hash = Hash::FromBytes(c);
    chunk.byte_start = U32(c + 32);
    chunk.size = U32(c + 36);
    chunk.flags = U32(c + 40);
  }
  return x;
}

}  // namespace

Result<Shard> ParseShard(std::span<const uint8_t> bytes) {
  auto footer_size = ParseShardHeader(bytes);
  if (!footer_size.ok()) return footer_size.error();
  Shard shard;
  EntryReader r(bytes);
  std::optional<bool> with_verification;
  auto file = [&](const uint8_t* e, size_t i) { return ParseFileRecord(r, e, i, with_verification); };
  if (auto st = ParseSection(r, "file", shard.files, file); !st.ok()) return st.error();
  auto xorb = [&](const uint8_t* e, size_t i) { return ParseXorbRecord(r, e, i); };
  if (auto st = ParseSection(r, "xorb", shard.xorbs, xorb); !st.ok()) return st.error();
  if (*footer_size == kShardFooterSize) {
    if (bytes.size() - r.pos() < kShardFooterSize) return Malformed("shard announces a footer but has none");
    const auto f = bytes.subspan(bytes.size() - kShardFooterSize);
    const uint64_t fv = LoadU64(f, 0);
    if (fv != kShardFooterVersion) return Malformed("unsupported shard footer version " + std::to_string(fv));
    shard.footer = ReadFooter(f);
  }
  return shard;
}

namespace {

// A lookup table row: a truncated hash and the entry it points at.
struct Lookup {
  uint64_t key;
  uint32_t a;
  uint32_t b;
};

// Sorts by (key, a, b) for rows appended in increasing (a, b) order, as the writer appends them: a stable
// sort by key suffices. Keys are truncated hashes, so uniform: one pass scatters the rows into buckets by
// their top bits (~64 rows each), then each bucket is sorted in cache. A dedup answer's chunk table has up to
// ~10^6 rows; for 262,144 this takes 9-12 ms against 18-22 ms for std::sort (and an 8-pass LSD radix sort).
void SortLookups(std::vector<Lookup>& rows) {
  const auto by_key = [](const Lookup& x, const Lookup& y) { return x.key < y.key; };
  if (rows.size() < 256) {
    std::stable_sort(rows.begin(), rows.end(), by_key);
    return;
  }
  const int bits = std::clamp(static_cast<int>(std::bit_width(rows.size() / 64)) - 1, 1, 16);
  const int shift = 64 - bits;
  std::vector<size_t> start((size_t{1} << bits) + 1, 0);
  for (const auto& r : rows) ++start[(r.key >> shift) + 1];
  for (size_t i = 1; i < start.size(); ++i) start[i] += start[i - 1];
  std::vector<Lookup> sorted(rows.size());
  std::vector<size_t> next(start.begin(), start.end() - 1);
  for (const auto& r : rows) sorted[next[r.key >> shift]++] = r;  // stable within a bucket
  for (size_t b = 0; b + 1 < start.size(); ++b) {
    std::stable_sort(sorted.begin() + static_cast<ptrdiff_t>(start[b]),
                     sorted.begin() + static_cast<ptrdiff_t>(start[b + 1]), by_key);
  }
  rows.swap(sorted);
}

}  // namespace

namespace {

// Writes one shard, section by section, into `out`; the footer gathers the offsets and totals on the way.
class ShardWriter {
 public:
  ShardWriter(const Shard& shard, const ShardWriteOptions& options) : shard_(shard), options_(options) {}

  std::vector<uint8_t> Write() && {
    Reserve();
    PutBytes(out_, kShardTag, 32);
    PutU64(out_, kShardVersion);
    PutU64(out_, kShardFooterSize);
    FileSection();
    XorbSection();
    PutTable(file_lookup_, false, &footer_.file_lookup_offset, &footer_.file_lookup_num_entry);
    PutTable(xorb_lookup_, false, &footer_.xorb_lookup_offset, &footer_.xorb_lookup_num_entry);
    PutTable(chunk_lookup_, true, &footer_.chunk_lookup_offset, &footer_.chunk_lookup_num_entry);
    Footer();
    return std::move(out_);
  }

 private:
  // The whole shard's size, allocated once.
  void Reserve() {
    size_t entries = 2;
    size_t chunks = 0;
    for (const auto& f : shard_.files)
      entries += 1 + f.terms.size() + f.verification.size() + (f.sha256 ? 1 : 0);
    for (const auto& x : shard_.xorbs) {
      entries += 1 + x.chunks.size();
      chunks += x.chunks.size();
    }
    const size_t tables =
        options_.lookup_tables ? 12 * (shard_.files.size() + shard_.xorbs.size()) + 16 * chunks : 0;
    out_.reserve(kShardHeaderSize + entries * kShardEntrySize + tables + kShardFooterSize);
    file_lookup_.reserve(shard_.files.size());
    xorb_lookup_.reserve(shard_.xorbs.size());
    chunk_lookup_.reserve(chunks);
  }

  void Bookend() {
    out_.insert(out_.end(), 32, 0xFF);
    PutZeros(out_, 16);
  }
  uint32_t EntryIndex(uint64_t section_start) const {
    return static_cast<uint32_t>((out_.size() - section_start) / kShardEntrySize);
  }

  void FileSection() {
    footer_.file_info_offset = out_.size();
    // As the stock client does, a shard with verification flags every file, empty ones included (they have
    // no entries to carry); readers reject shards where only some files are flagged.
    const bool shard_verified = std::any_of(shard_.files.begin(), shard_.files.end(),
                                            [](const FileRecord& f) { return !f.verification.empty(); });
    for (const auto& f : shard_.files) FileRecordEntries(f, shard_verified);
    Bookend();
  }

  void FileRecordEntries(const FileRecord& f, bool shard_verified) {
    // A caller's bug, not input: the format has no way to express a partial verification list.
    assert(f.verification.empty() || f.verification.size() == f.terms.size());
    const bool verification = !f.verification.empty() || (shard_verified && f.terms.empty());
    file_lookup_.push_back({f.hash.truncated(), EntryIndex(footer_.file_info_offset), 0});
    PutBytes(out_, f.hash.bytes.data(), 32);
    PutU32(out_, (verification ? kFileFlagVerification : 0) | (f.sha256 ? kFileFlagMetadataExt : 0));
    PutU32(out_, static_cast<uint32_t>(f.terms.size()));
    PutU64(out_, 0);
    for (const auto& t : f.terms) {
      PutBytes(out_, t.xorb.bytes.data(), 32);
      PutU32(out_, t.xorb_flags);
      PutU32(out_, t.unpacked_bytes);
      PutU32(out_, t.chunk_start);
      PutU32(out_, t.chunk_end);
      footer_.materialized_bytes += t.unpacked_bytes;
    }
    for (const auto& v : f.verification) {
      PutBytes(out_, v.bytes.data(), 32);
      PutZeros(out_, 16);
    }
    if (f.sha256) {
      PutBytes(out_, f.sha256->bytes.data(), 32);
      PutZeros(out_, 16);
    }
  }

  void XorbSection() {
    footer_.xorb_info_offset = out_.size();
    const ChunkHashKeyer keyed(options_.hmac_key);
    for (const auto& x : shard_.xorbs) XorbRecordEntries(x, keyed);
    Bookend();
  }

  void XorbRecordEntries(const XorbRecord& x, const ChunkHashKeyer& keyed) {
    const uint32_t header_index = EntryIndex(footer_.xorb_info_offset);
    xorb_lookup_.push_back({x.hash.truncated(), header_index, 0});
    PutBytes(out_, x.hash.bytes.data(), 32);
    PutU32(out_, x.flags);
    PutU32(out_, static_cast<uint32_t>(x.chunks.size()));
    PutU32(out_, x.bytes_in_xorb);
    PutU32(out_, x.bytes_on_disk);
    footer_.stored_bytes += x.bytes_in_xorb;
    footer_.stored_bytes_on_disk += x.bytes_on_disk;
    for (uint32_t i = 0; i < x.chunks.size(); ++i) {
      const auto& c = x.chunks[i];
      const ChunkHash shown = keyed(c.hash);
      chunk_lookup_.push_back({shown.truncated(), header_index, i});
      PutBytes(out_, shown.bytes.data(), 32);
      PutU32(out_, c.byte_start);
      PutU32(out_, c.size);
      PutU32(out_, c.flags);
      PutU32(out_, 0);
    }
  }

  void PutTable(std::vector<Lookup>& table, bool wide, uint64_t* offset, uint64_t* count) {
    *offset = out_.size();
    *count = 0;
    if (!options_.lookup_tables) return;
    SortLookups(table);
    for (const auto& l : table) {
      PutU64(out_, l.key);
      PutU32(out_, l.a);
      if (wide) PutU32(out_, l.b);
    }
    *count = table.size();
  }

  void Footer() {
    footer_.footer_offset = out_.size();
    PutU64(out_, kShardFooterVersion);
    PutU64(out_, footer_.file_info_offset);
    PutU64(out_, footer_.xorb_info_offset);
    PutU64(out_, footer_.file_lookup_offset);
    PutU64(out_, footer_.file_lookup_num_entry);
    PutU64(out_, footer_.xorb_lookup_offset);
    PutU64(out_, footer_.xorb_lookup_num_entry);
    PutU64(out_, footer_.chunk_lookup_offset);
    PutU64(out_, footer_.chunk_lookup_num_entry);
    PutBytes(out_, options_.hmac_key.bytes.data(), 32);
    PutU64(out_, options_.creation_timestamp);
    PutU64(out_, options_.key_expiry);
    PutZeros(out_, 48);
    PutU64(out_, footer_.stored_bytes_on_disk);
    PutU64(out_, footer_.materialized_bytes);
    PutU64(out_, footer_.stored_bytes);
    PutU64(out_, footer_.footer_offset);
  }

  const Shard& shard_;
  const ShardWriteOptions& options_;
  std::vector<uint8_t> out_;
  ShardFooter footer_;
  std::vector<Lookup> file_lookup_;
  std::vector<Lookup> xorb_lookup_;
  std::vector<Lookup> chunk_lookup_;
};

}  // namespace

std::vector<uint8_t> SerializeShard(const Shard& shard, const ShardWriteOptions& options) {
  return ShardWriter(shard, options).Write();
}

}  // namespace cairn::xet
