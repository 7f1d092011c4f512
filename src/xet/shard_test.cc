#include "xet/shard.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "xet/hashing.h"
#include "xet/test_support.h"

namespace cairn::xet {
namespace {

using Bytes = std::vector<uint8_t>;
using testing::Contains;
using testing::GetU32;
using testing::GetU64;
using testing::SetU64;

// Protocol §4.2: "HFRepoMetaData", NUL, then 17 fixed bytes.
constexpr uint8_t kTag[32] = {0x48, 0x46, 0x52, 0x65, 0x70, 0x6f, 0x4d, 0x65, 0x74, 0x61, 0x44,
                              0x61, 0x74, 0x61, 0x00, 0x55, 0x69, 0x67, 0x45, 0x6a, 0x7b, 0x81,
                              0x57, 0x83, 0xa5, 0xbd, 0xd9, 0x5c, 0xcd, 0xd1, 0x4a, 0xa9};

// A pseudo-random hash, distinct per seed.
Hash H(uint64_t seed) {
  return ChunkHashOf(testing::SplitMix64Bytes(seed, 16));
}

XorbRecord MakeXorb(uint64_t seed, std::vector<uint32_t> sizes, std::vector<uint32_t> flags,
                    uint32_t on_disk) {
  XorbRecord x;
  x.hash = H(seed);
  x.bytes_on_disk = on_disk;
  for (size_t i = 0; i < sizes.size(); ++i) {
    x.chunks.push_back({H(seed * 100 + i), x.bytes_in_xorb, sizes[i], flags[i]});
    x.bytes_in_xorb += sizes[i];
  }
  return x;
}

// Two files with terms, verification and SHA-256 around an empty file; two xorbs.
Shard SampleShard() {
  Shard s;
  s.xorbs.push_back(
      MakeXorb(100, {1000, 2000, 3000, 4000}, {kChunkFlagGlobalDedup, 0, kChunkFlagGlobalDedup, 0}, 9000));
  s.xorbs.push_back(MakeXorb(200, {500, 600, 700}, {0, kChunkFlagGlobalDedup, 0}, 1850));
  const Hash xa = s.xorbs[0].hash;
  const Hash xb = s.xorbs[1].hash;

  FileRecord f0;
  f0.hash = H(1);
  f0.terms = {{xa, 0, 3000, 0, 2}, {xb, 0, 1300, 1, 3}};
  f0.verification = {H(11), H(12)};
  f0.sha256 = H(13);

  FileRecord empty;  // zero terms, zero hash

  FileRecord f2;
  f2.hash = H(2);
  f2.terms = {{xa, 0, 7000, 2, 4}};
  f2.verification = {H(21)};
  f2.sha256 = H(22);

  s.files = {f0, empty, f2};
  return s;
}

// Sizes of the sample shard as serialized (entries are 48 bytes).
constexpr size_t kSampleFileEntries = 6 + 1 + 4;                        // f0: 1+2+2+1, empty: 1, f2: 1+1+1+1
constexpr size_t kSampleXorbEntries = 5 + 4;                            // 1+4, 1+3
constexpr size_t kXorbInfoOffset = 48 + 48 * (kSampleFileEntries + 1);  // 624
constexpr size_t kFileLookupOffset = kXorbInfoOffset + 48 * (kSampleXorbEntries + 1);  // 1104
constexpr size_t kXorbLookupOffset = kFileLookupOffset + 12 * 3;
constexpr size_t kChunkLookupOffset = kXorbLookupOffset + 12 * 2;
constexpr size_t kFooterOffset = kChunkLookupOffset + 16 * 7;

void ExpectSameFiles(const std::vector<FileRecord>& actual, const std::vector<FileRecord>& expected) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    SCOPED_TRACE("file " + std::to_string(i));
    const FileRecord& a = actual[i];
    const FileRecord& e = expected[i];
    EXPECT_EQ(a.hash, e.hash);
    ASSERT_EQ(a.terms.size(), e.terms.size());
    for (size_t t = 0; t < e.terms.size(); ++t) {
      SCOPED_TRACE("term " + std::to_string(t));
      EXPECT_EQ(a.terms[t].xorb, e.terms[t].xorb);
      EXPECT_EQ(a.terms[t].xorb_flags, e.terms[t].xorb_flags);
      EXPECT_EQ(a.terms[t].unpacked_bytes, e.terms[t].unpacked_bytes);
      EXPECT_EQ(a.terms[t].chunk_start, e.terms[t].chunk_start);
      EXPECT_EQ(a.terms[t].chunk_end, e.terms[t].chunk_end);
    }
    EXPECT_EQ(a.verification, e.verification);
    EXPECT_EQ(a.sha256, e.sha256);
    EXPECT_EQ(a.size(), e.size());
  }
}

void ExpectSameXorbs(const std::vector<XorbRecord>& actual, const std::vector<XorbRecord>& expected,
                     const HmacKey& key = {}) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    SCOPED_TRACE("xorb " + std::to_string(i));
    const XorbRecord& a = actual[i];
    const XorbRecord& e = expected[i];
    EXPECT_EQ(a.hash, e.hash);
    EXPECT_EQ(a.flags, e.flags);
    EXPECT_EQ(a.bytes_in_xorb, e.bytes_in_xorb);
    EXPECT_EQ(a.bytes_on_disk, e.bytes_on_disk);
    ASSERT_EQ(a.chunks.size(), e.chunks.size());
    for (size_t c = 0; c < e.chunks.size(); ++c) {
      SCOPED_TRACE("chunk " + std::to_string(c));
      EXPECT_EQ(a.chunks[c].hash, HmacChunkHash(key, e.chunks[c].hash));
      EXPECT_EQ(a.chunks[c].byte_start, e.chunks[c].byte_start);
      EXPECT_EQ(a.chunks[c].size, e.chunks[c].size);
      EXPECT_EQ(a.chunks[c].flags, e.chunks[c].flags);
    }
  }
}

// Hand-built shard bytes for inputs the serializer would never produce.
struct RawShard {
  Bytes bytes;

  explicit RawShard(uint64_t footer_size = 0) {
    bytes.assign(kTag, kTag + 32);
    bytes.resize(48);
    SetU64(bytes, 32, kShardVersion);
    SetU64(bytes, 40, footer_size);
  }
  // Any 48-byte entry: a hash and four u32 fields (file header: flags, num_entries, 0, 0; term: flags, bytes,
  // start, end; xorb header: flags, num_entries, bytes_in_xorb, bytes_on_disk; chunk: start, size, flags, 0).
  RawShard& Entry(const Hash& h, uint32_t a = 0, uint32_t b = 0, uint32_t c = 0, uint32_t d = 0) {
    bytes.insert(bytes.end(), h.bytes.begin(), h.bytes.end());
    for (uint32_t v : {a, b, c, d}) {
      const size_t n = bytes.size();
      bytes.resize(n + 4);
      std::memcpy(bytes.data() + n, &v, 4);
    }
    return *this;
  }
  RawShard& Bookend() {
    bytes.insert(bytes.end(), 32, 0xFF);
    bytes.insert(bytes.end(), 16, 0);
    return *this;
  }
};

ShardWriteOptions WithoutLookupTables() {
  ShardWriteOptions o;
  o.lookup_tables = false;
  return o;
}

void ExpectRejected(const Bytes& b, const std::string& message_part) {
  auto r = ParseShard(b);
  ASSERT_FALSE(r.ok()) << "accepted; expected an error about '" << message_part << "'";
  EXPECT_EQ(r.error().code, ErrorCode::kMalformed);
  EXPECT_TRUE(Contains(r.error().message, message_part)) << r.error().message;
}

// -----------------------------------------------------------------------------------------------------------
// Serialize and parse back

TEST(ShardSerialize, RoundtripsFieldByField) {
  const Shard s = SampleShard();
  const Bytes b = SerializeShard(s);
  auto p = ParseShard(b);
  ASSERT_TRUE(p.ok()) << p.error().message;
  ExpectSameFiles(p->files, s.files);
  ExpectSameXorbs(p->xorbs, s.xorbs);
  ASSERT_TRUE(p->footer.has_value());
  EXPECT_EQ(p->files[0].size(), 4300u);
  EXPECT_EQ(p->files[1].size(), 0u);
}

TEST(ShardSerialize, WritesHeaderAndSections) {
  const Bytes b = SerializeShard(SampleShard());
  ASSERT_EQ(b.size(), kFooterOffset + 200);
  EXPECT_TRUE(std::equal(kTag, kTag + 32, b.begin()));
  EXPECT_EQ(GetU64(b, 32), 2u);
  EXPECT_EQ(GetU64(b, 40), 200u);
  // f0's header: verification and metadata-ext flags, two entries; the empty file is flagged like the others.
  EXPECT_EQ(GetU32(b, 48 + 32), kFileFlagVerification | kFileFlagMetadataExt);
  EXPECT_EQ(GetU32(b, 48 + 36), 2u);
  EXPECT_EQ(GetU32(b, 48 + 48 * 6 + 32), kFileFlagVerification);
  EXPECT_EQ(GetU32(b, 48 + 48 * 6 + 36), 0u);
  // Both bookends where the layout puts them.
  for (size_t bookend : {kXorbInfoOffset - 48, kFileLookupOffset - 48}) {
    EXPECT_TRUE(std::all_of(b.begin() + static_cast<std::ptrdiff_t>(bookend),
                            b.begin() + static_cast<std::ptrdiff_t>(bookend + 32),
                            [](uint8_t x) { return x == 0xFF; }));
    EXPECT_TRUE(std::all_of(b.begin() + static_cast<std::ptrdiff_t>(bookend + 32),
                            b.begin() + static_cast<std::ptrdiff_t>(bookend + 48),
                            [](uint8_t x) { return x == 0; }));
  }
}

TEST(ShardSerialize, FooterFields) {
  const Shard s = SampleShard();
  HmacKey key = H(77);
  const Bytes b =
      SerializeShard(s, {.hmac_key = key, .creation_timestamp = 1700000000, .key_expiry = UINT64_MAX});
  auto p = ParseShard(b);
  ASSERT_TRUE(p.ok()) << p.error().message;
  ASSERT_TRUE(p->footer.has_value());
  const ShardFooter& f = *p->footer;
  EXPECT_EQ(GetU64(b, b.size() - 200), kShardFooterVersion);
  EXPECT_EQ(f.file_info_offset, 48u);
  EXPECT_EQ(f.xorb_info_offset, kXorbInfoOffset);
  EXPECT_EQ(f.file_lookup_offset, kFileLookupOffset);
  EXPECT_EQ(f.file_lookup_num_entry, 3u);
  EXPECT_EQ(f.xorb_lookup_offset, kXorbLookupOffset);
  EXPECT_EQ(f.xorb_lookup_num_entry, 2u);
  EXPECT_EQ(f.chunk_lookup_offset, kChunkLookupOffset);
  EXPECT_EQ(f.chunk_lookup_num_entry, 7u);
  EXPECT_EQ(f.chunk_hash_hmac_key, key);
  EXPECT_EQ(f.creation_timestamp, 1700000000u);
  EXPECT_EQ(f.key_expiry, UINT64_MAX);
  EXPECT_EQ(f.stored_bytes_on_disk, 9000u + 1850u);
  EXPECT_EQ(f.materialized_bytes, 3000u + 1300u + 7000u);
  EXPECT_EQ(f.stored_bytes, 10000u + 1800u);
  EXPECT_EQ(f.footer_offset, b.size() - 200);
  EXPECT_EQ(f.footer_offset, kFooterOffset);
  // The reserved 48 bytes are zero.
  for (size_t i = 120; i < 168; ++i) EXPECT_EQ(b[f.footer_offset + i], 0) << "footer byte " << i;
}

TEST(ShardSerialize, LookupTablesSortedAndPointingAtEntries) {
  const Shard s = SampleShard();
  const Bytes b = SerializeShard(s);
  auto p = ParseShard(b);
  ASSERT_TRUE(p.ok()) << p.error().message;
  const ShardFooter& f = *p->footer;

  // File lookup: truncated file hash → entry index of the file header from file_info_offset.
  std::multiset<uint64_t> file_keys;
  uint64_t prev = 0;
  for (size_t i = 0; i < f.file_lookup_num_entry; ++i) {
    const size_t at = f.file_lookup_offset + 12 * i;
    const uint64_t key = GetU64(b, at);
    const uint32_t index = GetU32(b, at + 8);
    EXPECT_GE(key, prev) << "file lookup entry " << i;
    prev = key;
    const Hash header = Hash::FromBytes(b.data() + f.file_info_offset + 48 * size_t{index});
    EXPECT_EQ(header.truncated(), key) << "file lookup entry " << i;
    file_keys.insert(key);
  }
  EXPECT_EQ(file_keys,
            (std::multiset<uint64_t>{s.files[0].hash.truncated(), 0, s.files[2].hash.truncated()}));
  // The indices themselves: f0 at 0, the empty file at 6, f2 at 7.
  std::set<uint32_t> file_indices;
  for (size_t i = 0; i < 3; ++i) file_indices.insert(GetU32(b, f.file_lookup_offset + 12 * i + 8));
  EXPECT_EQ(file_indices, (std::set<uint32_t>{0, 6, 7}));

  // Xorb lookup: truncated xorb hash → entry index of the xorb header from xorb_info_offset.
  std::set<uint32_t> xorb_indices;
  prev = 0;
  for (size_t i = 0; i < f.xorb_lookup_num_entry; ++i) {
    const size_t at = f.xorb_lookup_offset + 12 * i;
    const uint64_t key = GetU64(b, at);
    const uint32_t index = GetU32(b, at + 8);
    EXPECT_GE(key, prev) << "xorb lookup entry " << i;
    prev = key;
    EXPECT_EQ(Hash::FromBytes(b.data() + f.xorb_info_offset + 48 * size_t{index}).truncated(), key);
    xorb_indices.insert(index);
  }
  EXPECT_EQ(xorb_indices, (std::set<uint32_t>{0, 5}));

  // Chunk lookup: truncated chunk hash → (xorb header index, chunk index within that xorb).
  std::set<std::pair<uint32_t, uint32_t>> chunk_refs;
  prev = 0;
  for (size_t i = 0; i < f.chunk_lookup_num_entry; ++i) {
    const size_t at = f.chunk_lookup_offset + 16 * i;
    const uint64_t key = GetU64(b, at);
    const uint32_t xorb_index = GetU32(b, at + 8);
    const uint32_t chunk_index = GetU32(b, at + 12);
    EXPECT_GE(key, prev) << "chunk lookup entry " << i;
    prev = key;
    const size_t x = xorb_index == 0 ? 0 : 1;
    ASSERT_TRUE(xorb_index == 0 || xorb_index == 5) << "chunk lookup entry " << i;
    ASSERT_LT(chunk_index, s.xorbs[x].chunks.size());
    EXPECT_EQ(s.xorbs[x].chunks[chunk_index].hash.truncated(), key) << "chunk lookup entry " << i;
    const size_t entry = f.xorb_info_offset + 48 * (size_t{xorb_index} + 1 + chunk_index);
    EXPECT_EQ(Hash::FromBytes(b.data() + entry).truncated(), key);
    chunk_refs.insert({xorb_index, chunk_index});
  }
  EXPECT_EQ(chunk_refs.size(), 7u);
}

// A table large enough for the radix path, with repeated chunk hashes (the same chunk in several xorbs):
// rows ordered by key, then by the entry they point at.
TEST(ShardSerialize, LargeLookupTableSortedWithTiesByEntry) {
  Shard s;
  std::mt19937_64 rng(5);
  for (uint32_t x = 0; x < 3; ++x) {
    XorbRecord r;
    for (uint32_t i = 0; i < 1000; ++i) r.hash.bytes[i % 32] ^= static_cast<uint8_t>(rng());
    for (uint32_t c = 0; c < 1000; ++c) {
      ChunkHash h;
      const uint64_t v = c % 7 == 0 ? c : rng();  // every 7th chunk repeats in each xorb
      std::memcpy(h.bytes.data(), &v, 8);
      r.chunks.push_back({h, c * 100, 100, 0});
    }
    r.bytes_in_xorb = 100000;
    r.bytes_on_disk = 100000;
    s.xorbs.push_back(std::move(r));
  }
  const Bytes b = SerializeShard(s);
  auto p = ParseShard(b);
  ASSERT_TRUE(p.ok()) << p.error().message;
  const ShardFooter& f = *p->footer;
  ASSERT_EQ(f.chunk_lookup_num_entry, 3000u);
  std::tuple<uint64_t, uint32_t, uint32_t> prev{0, 0, 0};
  for (size_t i = 0; i < f.chunk_lookup_num_entry; ++i) {
    const size_t at = f.chunk_lookup_offset + 16 * i;
    const std::tuple<uint64_t, uint32_t, uint32_t> row{GetU64(b, at), GetU32(b, at + 8), GetU32(b, at + 12)};
    if (i > 0) {
      ASSERT_LT(prev, row) << "chunk lookup row " << i;
    }
    prev = row;
  }
}

TEST(ShardSerialize, HmacKeyedChunkHashes) {
  const Shard s = SampleShard();
  const HmacKey key = H(99);
  const Bytes b = SerializeShard(s, {.hmac_key = key});
  auto p = ParseShard(b);
  ASSERT_TRUE(p.ok()) << p.error().message;
  ExpectSameXorbs(p->xorbs, s.xorbs, key);
  EXPECT_NE(p->xorbs[0].chunks[0].hash, s.xorbs[0].chunks[0].hash);
  EXPECT_EQ(p->xorbs[0].hash, s.xorbs[0].hash);  // xorb hashes are not keyed
  ExpectSameFiles(p->files, s.files);
  // Chunk lookup keys are the keyed hashes too.
  std::set<uint64_t> expected;
  for (const auto& x : s.xorbs) {
    for (const auto& c : x.chunks) expected.insert(HmacChunkHash(key, c.hash).truncated());
  }
  std::set<uint64_t> keys;
  for (size_t i = 0; i < p->footer->chunk_lookup_num_entry; ++i) {
    keys.insert(GetU64(b, p->footer->chunk_lookup_offset + 16 * i));
  }
  EXPECT_EQ(keys, expected);
}

TEST(ShardSerialize, WithoutVerificationNoFileIsFlagged) {
  Shard s = SampleShard();
  for (auto& f : s.files) {
    f.verification.clear();
    f.sha256.reset();
  }
  const Bytes b = SerializeShard(s);
  EXPECT_EQ(GetU32(b, 48 + 32), 0u);
  EXPECT_EQ(GetU32(b, 48 + 48 * 3 + 32), 0u);  // the empty file
  auto p = ParseShard(b);
  ASSERT_TRUE(p.ok()) << p.error().message;
  ExpectSameFiles(p->files, s.files);
}

TEST(ShardParse, StockClientUploadForm) {
  // No footer (footer_size 0) and nothing after the xorb section's bookend.
  const Shard s = SampleShard();
  Bytes b = SerializeShard(s);
  b.resize(kFileLookupOffset);
  SetU64(b, 40, 0);
  auto p = ParseShard(b);
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_FALSE(p->footer.has_value());
  ExpectSameFiles(p->files, s.files);
  ExpectSameXorbs(p->xorbs, s.xorbs);
}

TEST(ShardParse, IgnoresWhateverFollowsTheSectionsWithoutFooter) {
  const Shard s = SampleShard();
  Bytes b = SerializeShard(s);
  SetU64(b, 40, 0);  // lookup tables and footer still present, but not announced
  auto p = ParseShard(b);
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_FALSE(p->footer.has_value());
  ExpectSameXorbs(p->xorbs, s.xorbs);
}

TEST(ShardParse, JsClientFormFooterWithoutLookupTables) {
  const Shard s = SampleShard();
  const Bytes b = SerializeShard(s, WithoutLookupTables());
  ASSERT_EQ(b.size(), kFileLookupOffset + 200);
  auto p = ParseShard(b);
  ASSERT_TRUE(p.ok()) << p.error().message;
  ASSERT_TRUE(p->footer.has_value());
  EXPECT_EQ(p->footer->file_lookup_offset, kFileLookupOffset);
  EXPECT_EQ(p->footer->file_lookup_num_entry, 0u);
  EXPECT_EQ(p->footer->chunk_lookup_num_entry, 0u);
  EXPECT_EQ(p->footer->footer_offset, kFileLookupOffset);
  ExpectSameFiles(p->files, s.files);
}

TEST(ShardParse, DedupAnswerFormWithEmptyFileSection) {
  Shard s = SampleShard();
  s.files.clear();
  ShardWriteOptions o;
  o.key_expiry = 123;
  const Bytes b = SerializeShard(s, o);
  auto p = ParseShard(b);
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_TRUE(p->files.empty());
  ExpectSameXorbs(p->xorbs, s.xorbs);
  EXPECT_EQ(p->footer->xorb_info_offset, 96u);
  EXPECT_EQ(p->footer->key_expiry, 123u);
  // The size the service budgets a dedup answer with.
  size_t want = kEmptyShardBytes;
  for (const auto& x : s.xorbs) want += XorbListingBytes(x.chunks.size());
  EXPECT_EQ(b.size(), want);
  EXPECT_EQ(SerializeShard(Shard{}, o).size(), kEmptyShardBytes);
}

// -----------------------------------------------------------------------------------------------------------
// Rejections

TEST(ShardParse, RejectsShorterThanHeader) {
  const Bytes b = SerializeShard(SampleShard());
  ExpectRejected(Bytes(b.begin(), b.begin() + 47), "header");
  ExpectRejected({}, "header");
}

TEST(ShardParse, RejectsBadTag) {
  Bytes b = SerializeShard(SampleShard());
  b[20] ^= 1;
  ExpectRejected(b, "tag");
}

TEST(ShardParse, RejectsVersionOtherThanTwo) {
  for (uint64_t version : {uint64_t{1}, uint64_t{3}}) {
    Bytes b = SerializeShard(SampleShard());
    SetU64(b, 32, version);
    ExpectRejected(b, "version");
  }
}

TEST(ShardParse, RejectsFooterSizeOtherThanZeroOr200) {
  Bytes b = SerializeShard(SampleShard());
  SetU64(b, 40, 100);
  ExpectRejected(b, "footer size");
}

TEST(ShardParse, RejectsFileSectionWithoutBookend) {
  ExpectRejected(RawShard().bytes, "file section has no bookend");
  // One file with one term, then the input ends.
  RawShard r;
  r.Entry(H(1), 0, 1).Entry(H(2), 0, 100, 0, 1);
  ExpectRejected(r.bytes, "file section has no bookend");
  // A partial entry where the bookend should be.
  r.Bookend();
  r.bytes.pop_back();
  ExpectRejected(r.bytes, "file section has no bookend");
  // The sample, cut right before its file bookend.
  Bytes b = SerializeShard(SampleShard());
  b.resize(kXorbInfoOffset - 48);
  SetU64(b, 40, 0);
  ExpectRejected(b, "file section has no bookend");
}

TEST(ShardParse, RejectsXorbSectionWithoutBookend) {
  RawShard r;
  r.Bookend().Entry(H(1), 0, 1, 100, 0).Entry(H(2), 0, 100, 0, 0);
  ExpectRejected(r.bytes, "xorb section has no bookend");
  Bytes b = SerializeShard(SampleShard());
  b.resize(kFileLookupOffset - 48);
  SetU64(b, 40, 0);
  ExpectRejected(b, "xorb section has no bookend");
}

TEST(ShardParse, RejectsCorruptBookend) {
  RawShard file_section;
  file_section.Bookend().Bookend();
  file_section.bytes[48 + 47] = 1;  // 32 × FF then a non-zero tail
  ExpectRejected(file_section.bytes, "corrupt bookend in file section");
  RawShard xorb_section;
  xorb_section.Bookend().Bookend();
  xorb_section.bytes[96 + 32] = 0x80;
  ExpectRejected(xorb_section.bytes, "corrupt bookend in xorb section");
}

TEST(ShardParse, RejectsFileDeclaringMoreTermsThanPresent) {
  // Must fail on the count, before reserving room for a million terms.
  RawShard r;
  r.Entry(H(1), 0, 1000000).Bookend().Bookend();
  ExpectRejected(r.bytes, "declares 1000000 terms");
  RawShard max;
  max.Entry(H(1), 0, 0xFFFFFFFF).Bookend().Bookend();
  ExpectRejected(max.bytes, "truncated");
  // Just one too many: 2 terms + 2 verification entries declared, 3 entries (two of them bookends) follow.
  RawShard tight;
  tight.Entry(H(1), kFileFlagVerification, 2).Entry(H(2), 0, 100, 0, 1).Bookend().Bookend();
  ExpectRejected(tight.bytes, "truncated");
}

TEST(ShardParse, RejectsXorbDeclaringMoreChunksThanPresent) {
  RawShard r;
  r.Bookend().Entry(H(1), 0, 1000000, 100, 0).Bookend();
  ExpectRejected(r.bytes, "declares 1000000 chunks");
  RawShard tight;
  tight.Bookend().Entry(H(1), 0, 2, 100, 0).Entry(H(2), 0, 100, 0, 0);
  ExpectRejected(tight.bytes, "truncated");
}

TEST(ShardParse, RejectsMixedVerificationFlags) {
  Shard s = SampleShard();
  s.files[2].verification.clear();
  ExpectRejected(SerializeShard(s), "verification");
  Shard first = SampleShard();
  first.files[0].verification.clear();
  ExpectRejected(SerializeShard(first), "verification");
}

TEST(ShardParse, RejectsEntryCountOverflowingU32) {
  // 0x80000000 terms × 2 (verification) + 1 (metadata ext) does not fit in u32.
  RawShard r;
  r.Entry(H(1), kFileFlagVerification | kFileFlagMetadataExt, 0x80000000).Bookend().Bookend();
  ExpectRejected(r.bytes, "overflows u32");
  // One less fits exactly (0xFFFFFFFF) and is then rejected as truncated instead.
  RawShard fits;
  fits.Entry(H(1), kFileFlagVerification | kFileFlagMetadataExt, 0x7FFFFFFF).Bookend().Bookend();
  auto p = ParseShard(fits.bytes);
  ASSERT_FALSE(p.ok());
  EXPECT_FALSE(Contains(p.error().message, "overflow")) << p.error().message;
}

TEST(ShardParse, RejectsAnnouncedFooterThatIsMissing) {
  Bytes b = SerializeShard(SampleShard(), WithoutLookupTables());
  b.resize(kFileLookupOffset);
  ExpectRejected(b, "announces a footer");
  // Some bytes after the sections, but fewer than a footer.
  Bytes short_footer = SerializeShard(SampleShard(), WithoutLookupTables());
  short_footer.resize(kFileLookupOffset + 199);
  ExpectRejected(short_footer, "announces a footer");
}

TEST(ShardParse, RejectsFooterVersionTwo) {
  Bytes b = SerializeShard(SampleShard());
  SetU64(b, kFooterOffset, 2);
  ExpectRejected(b, "footer version");
}

TEST(ShardParse, RejectsTermWithEmptyOrInvertedRange) {
  for (auto [start, end] : {std::pair<uint32_t, uint32_t>{3, 3}, {4, 3}}) {
    Shard s = SampleShard();
    s.files[2].terms[0].chunk_start = start;
    s.files[2].terms[0].chunk_end = end;
    ExpectRejected(SerializeShard(s), "chunk range");
  }
}

TEST(ShardParse, RejectsShardsOverTheSizeLimit) {
  auto bytes = SerializeShard(Shard{});
  ASSERT_TRUE(ParseShard(bytes).ok());
  bytes.resize(kMaxShardBytes + 1);
  const auto r = ParseShard(bytes);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kLimit);
}

}  // namespace
}  // namespace cairn::xet
