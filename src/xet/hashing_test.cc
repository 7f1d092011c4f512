#include "xet/hashing.h"

#include <gtest/gtest.h>

#include "xet/chunker.h"
#include "xet/test_support.h"

namespace cairn::xet {
namespace {

using boost::json::value;

Hash H(const value& v) {
  auto h = Hash::FromHex(std::string(v.as_string()));
  EXPECT_TRUE(h.has_value());
  return h.value_or(Hash{});
}

std::vector<HashedChunk> Leaves(const value& list) {
  std::vector<HashedChunk> out;
  for (const auto& l : list.as_array()) {
    out.push_back({H(l.at("hash")), static_cast<uint64_t>(l.at("size").to_number<int64_t>())});
  }
  return out;
}

std::span<const uint8_t> BytesOf(std::string_view s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

TEST(ChunkHash, EmptyAndHelloWorld) {
  const auto& v = testing::Vectors().at("chunk_hash");
  EXPECT_EQ(ChunkHashOf({}), H(v.at("empty")));
  EXPECT_EQ(ChunkHashOf(BytesOf("hello world")), H(v.at("hello world")));
}

TEST(InternalNode, PublicDocExample) {
  const auto& v = testing::Vectors().at("internal_node");
  const auto children = Leaves(v.at("children"));
  EXPECT_EQ(InternalNodeHash(children), H(v.at("hash")));
  uint64_t size = 0;
  for (const auto& c : children) size += c.size;
  EXPECT_EQ(size, static_cast<uint64_t>(v.at("size").to_number<int64_t>()));
}

TEST(Aggregate, AllVectors) {
  const auto& cases = testing::Vectors().at("aggregate").as_array();
  ASSERT_GE(cases.size(), 6u);
  for (const auto& c : cases) {
    const auto leaves = Leaves(c.at("leaves"));
    SCOPED_TRACE(leaves.size());
    EXPECT_EQ(AggregateHash(leaves), H(c.at("aggregate")));
    EXPECT_EQ(FileHashOf(leaves), H(c.at("file_hash_zero_salt")));
    if (const auto* salted = c.as_object().if_contains("file_hash_salted")) {
      EXPECT_EQ(FileHashOf(leaves, H(salted->at("salt"))), H(salted->at("hash")));
    }
  }
}

TEST(Aggregate, SingleLeafPassesThroughButEmptyIsZero) {
  const Hash h = ChunkHashOf(BytesOf("x"));
  const HashedChunk one[] = {{h, 1}};
  EXPECT_EQ(AggregateHash(one), h);
  EXPECT_TRUE(AggregateHash({}).is_zero());
  EXPECT_TRUE(FileHashOf({}).is_zero());
}

// The 1,000,000-byte SplitMix64 stream: chunks, their hashes, the xorb, file and range hashes end to end.
class SplitMixVector : public ::testing::Test {
 protected:
  void SetUp() override {
    data_ = testing::SplitMix64Bytes(0, 1000000);
    uint64_t start = 0;
    for (uint64_t len : ChunkLengths(data_)) {
      chunks_.push_back({ChunkHashOf(std::span(data_).subspan(start, len)), len});
      start += len;
    }
  }
  const value& v() const { return testing::Vectors().at("splitmix64_seed0_1e6"); }
  std::vector<uint8_t> data_;
  std::vector<HashedChunk> chunks_;
};

TEST_F(SplitMixVector, ChunkHashes) {
  const auto& expected = v().at("chunk_hashes").as_array();
  ASSERT_EQ(chunks_.size(), expected.size());
  for (size_t i = 0; i < chunks_.size(); ++i) EXPECT_EQ(chunks_[i].hash, H(expected[i])) << "chunk " << i;
}

TEST_F(SplitMixVector, XorbFileAndRangeHashes) {
  EXPECT_EQ(XorbHashOf(chunks_), H(v().at("xorb_hash_all")));
  EXPECT_EQ(FileHashOf(chunks_), H(v().at("file_hash_zero_salt")));
  EXPECT_EQ(RangeHashOf(chunks_), H(v().at("range_hash_all")));
  EXPECT_EQ(RangeHashOf(std::span(chunks_).first(3)), H(v().at("range_hash_0_3")));
  std::vector<ChunkHash> raw;
  for (const auto& c : chunks_) raw.push_back(c.hash);
  EXPECT_EQ(RangeHashOf(std::span<const ChunkHash>(raw)), H(v().at("range_hash_all")));
}

TEST(HmacChunkHash, ZeroKeyMeansNoKeying) {
  const Hash chunk = ChunkHashOf(BytesOf("hello world"));
  EXPECT_EQ(HmacChunkHash(Hash{}, chunk), chunk);
  Hash key;
  key.bytes[0] = 1;
  const Hash keyed = HmacChunkHash(key, chunk);
  EXPECT_NE(keyed, chunk);
  EXPECT_EQ(keyed, KeyedHash(key, chunk.bytes));
}

// The single-compression keyer agrees with BLAKE3's public keyed hash for any key and chunk.
TEST(HmacChunkHash, KeyerMatchesTheKeyedHasher) {
  uint64_t state = 12345;
  const auto next = [&state] {
    state += 0x9E3779B97F4A7C15ULL;
    uint64_t z = state;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return static_cast<uint8_t>(z ^ (z >> 31));
  };
  for (int round = 0; round < 200; ++round) {
    Hash key;
    Hash chunk;
    for (auto& b : key.bytes) b = next();
    for (auto& b : chunk.bytes) b = next();
    const ChunkHashKeyer keyer(key);
    ASSERT_EQ(keyer(chunk), KeyedHash(key, chunk.bytes)) << "round " << round;
    ASSERT_EQ(HmacChunkHash(key, chunk), KeyedHash(key, chunk.bytes)) << "round " << round;
  }
  EXPECT_EQ(ChunkHashKeyer(Hash{})(ChunkHashOf(BytesOf("x"))), ChunkHashOf(BytesOf("x")));
}

}  // namespace
}  // namespace cairn::xet
