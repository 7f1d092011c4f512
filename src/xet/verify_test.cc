#include "xet/verify.h"

#include <gtest/gtest.h>

#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "xet/hashing.h"
#include "xet/test_support.h"

namespace cairn::xet {
namespace {

using Bytes = std::vector<uint8_t>;
using testing::Contains;

// A xorb built from random chunks, with the raw chunks kept so expectations are computed independently of the
// layout the encoder reports.
struct TestXorb {
  std::vector<Bytes> raw;
  EncodedXorb encoded;

  TestXorb(uint64_t seed, size_t count) {
    for (size_t i = 0; i < count; ++i)
      raw.push_back(testing::SplitMix64Bytes(seed * 1000 + i, 2000 + 313 * i));
    std::vector<std::span<const uint8_t>> views(raw.begin(), raw.end());
    encoded = EncodeXorb(views, CompressionPolicy::kLz4);
  }
  const XorbHash& hash() const { return encoded.hash; }
  HashedChunk chunk(size_t i) const { return {ChunkHashOf(raw[i]), raw[i].size()}; }
};

// Two stored xorbs and a file whose terms span both.
struct FileCase {
  TestXorb a{1, 5};
  TestXorb b{2, 4};
  std::map<XorbHash, XorbLayout> stored;
  LayoutLookup lookup;
  FileRecord file;
  std::vector<HashedChunk> file_chunks;  // the file's chunks in order
  uint64_t expected_size = 0;

  FileCase() {
    stored[a.hash()] = a.encoded.layout;
    stored[b.hash()] = b.encoded.layout;
    lookup = [this](const XorbHash& h) -> const XorbLayout* {
      auto it = stored.find(h);
      return it == stored.end() ? nullptr : &it->second;
    };
    AddTerm(a, 1, 4);
    AddTerm(b, 0, 2);
    AddTerm(a, 0, 1);
    AddTerm(b, 2, 4);
    file.hash = FileHashOf(file_chunks);
  }
  FileCase(const FileCase&) = delete;  // `lookup` points into this object
  FileCase& operator=(const FileCase&) = delete;

  void AddTerm(const TestXorb& x, uint32_t start, uint32_t end) {
    FileTerm t{x.hash(), 0, 0, start, end};
    std::vector<ChunkHash> hashes;
    for (uint32_t i = start; i < end; ++i) {
      const HashedChunk c = x.chunk(i);
      t.unpacked_bytes += static_cast<uint32_t>(c.size);
      hashes.push_back(c.hash);
      file_chunks.push_back(c);
      expected_size += c.size;
    }
    file.terms.push_back(t);
    file.verification.push_back(RangeHashOf(std::span<const ChunkHash>(hashes)));
  }

  void ExpectRejected(ErrorCode code, const std::string& message_part,
                      const FileCheckOptions& options = {}) const {
    auto r = VerifyFile(file, lookup, options);
    ASSERT_FALSE(r.ok()) << "accepted; expected an error about '" << message_part << "'";
    EXPECT_EQ(r.error().code, code) << r.error().message;
    EXPECT_TRUE(Contains(r.error().message, message_part)) << r.error().message;
  }
};

TEST(VerifyFile, AcceptsCorrectFileAndReturnsItsSize) {
  FileCase c;
  auto r = VerifyFile(c.file, c.lookup);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(*r, c.expected_size);
  EXPECT_EQ(*r, c.file.size());
  EXPECT_EQ(c.file_chunks.size(), 3u + 2 + 1 + 2);
}

TEST(VerifyFile, RejectsUnknownXorb) {
  FileCase c;
  c.file.terms[1].xorb = ChunkHashOf(Bytes{1, 2, 3});
  c.ExpectRejected(ErrorCode::kUnknownReference, "term 1");
  auto r = VerifyFile(c.file, c.lookup);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(Contains(r.error().message, c.file.hash.hex())) << r.error().message;
  EXPECT_TRUE(Contains(r.error().message, c.file.terms[1].xorb.hex())) << r.error().message;
}

TEST(VerifyFile, RejectsChunkEndPastTheXorb) {
  FileCase c;
  c.file.terms[3].chunk_end = 5;  // xorb b has 4 chunks
  c.ExpectRejected(ErrorCode::kInconsistent, "term 3");
  c.file.terms[3].chunk_end = 0xFFFFFFFF;
  c.ExpectRejected(ErrorCode::kInconsistent, "term 3");
}

TEST(VerifyFile, RejectsEmptyOrInvertedRange) {
  FileCase c;
  c.file.terms[0].chunk_start = 4;  // [4, 4)
  c.ExpectRejected(ErrorCode::kInconsistent, "term 0");
  c.file.terms[0].chunk_start = 5;  // [5, 4)
  c.ExpectRejected(ErrorCode::kInconsistent, "term 0");
}

TEST(VerifyFile, RejectsWrongUnpackedBytes) {
  FileCase c;
  c.file.terms[2].unpacked_bytes += 1;
  c.ExpectRejected(ErrorCode::kInconsistent, "term 2");
  c.file.terms[2].unpacked_bytes -= 2;
  c.ExpectRejected(ErrorCode::kInconsistent, "term 2");
}

TEST(VerifyFile, RejectsWrongRangeHash) {
  FileCase c;
  c.file.verification[1].bytes[7] ^= 1;
  c.ExpectRejected(ErrorCode::kHashMismatch, "term 1");
}

TEST(VerifyFile, RejectsRangeHashOfAnotherTerm) {
  FileCase c;
  std::swap(c.file.verification[0], c.file.verification[1]);
  c.ExpectRejected(ErrorCode::kHashMismatch, "term 0");
}

TEST(VerifyFile, RejectsWrongFileHash) {
  FileCase c;
  c.file.hash.bytes[0] ^= 1;
  c.ExpectRejected(ErrorCode::kHashMismatch, c.file.hash.hex());
  // The hash of only the first few of its chunks is not the file's hash either.
  c.file.hash = FileHashOf(std::span(c.file_chunks).first(3));
  c.ExpectRejected(ErrorCode::kHashMismatch, "hash");
}

TEST(VerifyFile, RequiresVerificationUnlessTold) {
  FileCase c;
  c.file.verification.clear();
  c.ExpectRejected(ErrorCode::kMalformed, "verification");
  auto r = VerifyFile(c.file, c.lookup, {.require_verification = false});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(*r, c.expected_size);
}

TEST(VerifyFile, RejectsVerificationCountMismatch) {
  FileCase c;
  c.file.verification.pop_back();
  c.ExpectRejected(ErrorCode::kMalformed, "verification");
  c.ExpectRejected(ErrorCode::kMalformed, "verification", {.require_verification = false});
  c.file.verification.push_back(c.file.verification[0]);
  c.file.verification.push_back(c.file.verification[0]);
  c.ExpectRejected(ErrorCode::kMalformed, "verification");
}

TEST(VerifyFile, AcceptsEmptyFile) {
  FileCase c;
  FileRecord empty;  // no terms, zero hash, no verification
  auto r = VerifyFile(empty, c.lookup);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(*r, 0u);
  empty.hash = c.file.hash;  // an empty file must hash to zero
  auto wrong = VerifyFile(empty, c.lookup);
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.error().code, ErrorCode::kHashMismatch);
}

// -----------------------------------------------------------------------------------------------------------
// Xorb listings

XorbRecord ListingOf(const TestXorb& x) {
  XorbRecord r;
  r.hash = x.hash();
  for (size_t i = 0; i < x.raw.size(); ++i) {
    const auto size = static_cast<uint32_t>(x.raw[i].size());
    r.chunks.push_back({ChunkHashOf(x.raw[i]), r.bytes_in_xorb, size, i == 0 ? kChunkFlagGlobalDedup : 0});
    r.bytes_in_xorb += size;
  }
  return r;
}

void ExpectListingRejected(const XorbRecord& listing, const XorbLayout& stored, const std::string& part) {
  auto s = VerifyXorbListing(listing, stored);
  ASSERT_FALSE(s.ok()) << "accepted; expected an error about '" << part << "'";
  EXPECT_EQ(s.error().code, ErrorCode::kInconsistent);
  EXPECT_TRUE(Contains(s.error().message, part)) << s.error().message;
}

TEST(VerifyXorbListing, AcceptsCorrectListing) {
  const TestXorb x(3, 6);
  const auto s = VerifyXorbListing(ListingOf(x), x.encoded.layout);
  EXPECT_TRUE(s.ok()) << s.error().message;
}

TEST(VerifyXorbListing, RejectsWrongChunkCount) {
  const TestXorb x(3, 6);
  XorbRecord fewer = ListingOf(x);
  fewer.bytes_in_xorb -= fewer.chunks.back().size;
  fewer.chunks.pop_back();
  ExpectListingRejected(fewer, x.encoded.layout, "5 chunks");
  XorbRecord more = ListingOf(x);
  more.chunks.push_back({ChunkHashOf(Bytes{1}), more.bytes_in_xorb, 1, 0});
  more.bytes_in_xorb += 1;
  ExpectListingRejected(more, x.encoded.layout, "7 chunks");
}

TEST(VerifyXorbListing, RejectsWrongChunkHash) {
  const TestXorb x(3, 6);
  XorbRecord l = ListingOf(x);
  l.chunks[4].hash.bytes[31] ^= 0x10;
  ExpectListingRejected(l, x.encoded.layout, "chunk 4");
}

TEST(VerifyXorbListing, RejectsWrongChunkSize) {
  const TestXorb x(3, 6);
  XorbRecord l = ListingOf(x);
  l.chunks[5].size += 1;
  l.bytes_in_xorb += 1;
  ExpectListingRejected(l, x.encoded.layout, "chunk 5");
}

TEST(VerifyXorbListing, RejectsWrongByteStart) {
  const TestXorb x(3, 6);
  XorbRecord l = ListingOf(x);
  l.chunks[2].byte_start -= 1;
  ExpectListingRejected(l, x.encoded.layout, "chunk 2");
  XorbRecord first = ListingOf(x);
  first.chunks[0].byte_start = 1;
  ExpectListingRejected(first, x.encoded.layout, "chunk 0");
}

TEST(VerifyXorbListing, RejectsWrongBytesInXorb) {
  const TestXorb x(3, 6);
  XorbRecord l = ListingOf(x);
  l.bytes_in_xorb += 1;
  ExpectListingRejected(l, x.encoded.layout, "byte count");
  l.bytes_in_xorb = 0;  // what a careless client might write
  ExpectListingRejected(l, x.encoded.layout, "byte count");
}

}  // namespace
}  // namespace cairn::xet
