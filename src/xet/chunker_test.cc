#include "xet/chunker.h"

#include <gtest/gtest.h>

#include <random>

#include "xet/test_support.h"

namespace cairn::xet {
namespace {

std::vector<uint64_t> Ends(const std::vector<uint64_t>& lengths) {
  std::vector<uint64_t> ends;
  uint64_t end = 0;
  for (uint64_t l : lengths) ends.push_back(end += l);
  return ends;
}

std::vector<uint64_t> ExpectedEnds(const char* name) {
  std::vector<uint64_t> out;
  for (const auto& e : testing::Vectors().at(name).at("chunk_ends").as_array()) {
    out.push_back(static_cast<uint64_t>(e.to_number<int64_t>()));
  }
  return out;
}

// Feeds `data` in blocks whose sizes come from `next_size`, collecting chunk lengths.
template <typename F>
std::vector<uint64_t> ChunkStreaming(std::span<const uint8_t> data, F next_size) {
  std::vector<uint64_t> out;
  Chunker c;
  while (!data.empty()) {
    auto block = data.first(std::min(data.size(), next_size()));
    data = data.subspan(block.size());
    while (!block.empty()) {
      bool boundary = false;
      const size_t used = c.Consume(block, &boundary);
      block = block.subspan(used);
      if (boundary) out.push_back(c.last_chunk_length());
    }
  }
  if (c.pending()) out.push_back(c.pending());
  return out;
}

TEST(Chunker, SplitMixVectorBoundaries) {
  const auto data = testing::SplitMix64Bytes(0, 1000000);
  const auto& samples = testing::Vectors().at("splitmix64_seed0_1e6").at("sample_bytes").as_object();
  for (const auto& [index, byte] : samples) {
    EXPECT_EQ(data[std::stoul(std::string(index))], byte.to_number<int>());
  }
  EXPECT_EQ(Ends(ChunkLengths(data)), ExpectedEnds("splitmix64_seed0_1e6"));
}

TEST(Chunker, ConstantInputCutsAtTheMaximum) {
  const std::vector<uint8_t> data(1000000, 59);
  EXPECT_EQ(Ends(ChunkLengths(data)), ExpectedEnds("constant_59_1e6"));
}

TEST(Chunker, EmptyInputHasNoChunks) {
  EXPECT_TRUE(ChunkLengths({}).empty());
}

TEST(Chunker, ShortInputIsOneChunk) {
  const auto data = testing::SplitMix64Bytes(7, kMinChunk - 1);
  EXPECT_EQ(ChunkLengths(std::span(data).first(1)), std::vector<uint64_t>{1});
  EXPECT_EQ(ChunkLengths(data), std::vector<uint64_t>{kMinChunk - 1});
}

TEST(Chunker, StreamingInAnyBlockSizesGivesIdenticalBoundaries) {
  const auto data = testing::SplitMix64Bytes(3, 3 * 1024 * 1024 + 17);
  const auto whole = ChunkLengths(data);
  for (size_t block : {size_t{1}, size_t{37}, size_t{255}, size_t{8127}, size_t{8192}, size_t{65536}}) {
    EXPECT_EQ(ChunkStreaming(data, [&] { return block; }), whole) << "block " << block;
  }
  std::mt19937_64 rng(42);
  EXPECT_EQ(ChunkStreaming(data, [&] { return static_cast<size_t>(rng() % 100000 + 1); }), whole);
}

TEST(Chunker, EveryChunkButTheLastRespectsMinAndMax) {
  for (uint64_t seed : {1u, 2u, 3u}) {
    const auto data = testing::TextLikeBytes(seed, 4 * 1024 * 1024);
    const auto lengths = ChunkLengths(data);
    ASSERT_GT(lengths.size(), 10u);
    uint64_t total = 0;
    for (size_t i = 0; i < lengths.size(); ++i) {
      total += lengths[i];
      EXPECT_LE(lengths[i], kMaxChunk);
      if (i + 1 < lengths.size()) {
        EXPECT_GE(lengths[i], kMinChunk);
      }
    }
    EXPECT_EQ(total, data.size());
  }
}

}  // namespace
}  // namespace cairn::xet
