// The ingest layer against the protocol's vectors (tests/vectors/xet-vectors.json, checked against the stock
// implementations): a stream chunked in blocks of any size cuts what the whole file cuts, and an upload built
// from the vector file names its file, xorb and SHA-256 as the stock client does.
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <cstdint>
#include <span>
#include <vector>

#include "ingest/chunk_stream.h"
#include "ingest/shard_records.h"
#include "ingest/upload_builder.h"
#include "xet/chunker.h"
#include "xet/shard.h"
#include "xet/test_support.h"

namespace cairn::ingest {
namespace {

namespace json = boost::json;
using xet::testing::SplitMix64Bytes;
using xet::testing::Vectors;

const json::object& SplitMixVector() {
  return Vectors().at("splitmix64_seed0_1e6").as_object();
}

std::vector<uint64_t> VectorChunkEnds() {
  std::vector<uint64_t> ends;
  for (const auto& e : SplitMixVector().at("chunk_ends").as_array()) ends.push_back(e.to_number<uint64_t>());
  return ends;
}

// The chunk ends a stream reports when fed `data` in blocks of `block` bytes; checks each chunk's bytes too.
std::vector<uint64_t> StreamedEnds(std::span<const uint8_t> data, size_t block) {
  ChunkStream stream;
  std::vector<uint64_t> ends;
  uint64_t at = 0;
  const ChunkStream::OnChunk record = [&](std::span<const uint8_t> chunk) -> Status {
    EXPECT_TRUE(std::equal(chunk.begin(), chunk.end(), data.begin() + static_cast<ptrdiff_t>(at)));
    at += chunk.size();
    ends.push_back(at);
    return Ok{};
  };
  for (size_t off = 0; off < data.size(); off += block) {
    const auto st = stream.Feed(data.subspan(off, std::min(block, data.size() - off)), record);
    EXPECT_TRUE(st);
  }
  EXPECT_TRUE(stream.Finish(record));
  EXPECT_EQ(stream.bytes(), data.size());
  return ends;
}

TEST(ChunkStream, BlocksOfAnySizeCutTheVectorsChunks) {
  const auto data = SplitMix64Bytes(0, SplitMixVector().at("n").to_number<size_t>());
  const auto want = VectorChunkEnds();
  ASSERT_EQ(xet::ChunkLengths(data).size(), want.size());
  for (const size_t block : {size_t{1} << 30, size_t{8} << 20, size_t{65536}, size_t{4099}, size_t{1}}) {
    SCOPED_TRACE(block);
    if (block == 1) {  // byte by byte is slow at -O0: the first 200 KB of the file are enough
      const auto part = std::span<const uint8_t>(data).first(200000);
      const auto got = StreamedEnds(part, block);
      std::vector<uint64_t> expected;
      for (const auto e : want)
        if (e < part.size()) expected.push_back(e);
      expected.push_back(part.size());
      EXPECT_EQ(got, expected);
      continue;
    }
    EXPECT_EQ(StreamedEnds(data, block), want);
  }
}

TEST(ChunkStream, EmptyInputHasNoChunksAndAFailureStopsTheStream) {
  ChunkStream empty;
  int calls = 0;
  const ChunkStream::OnChunk count = [&](std::span<const uint8_t>) -> Status {
    ++calls;
    return Ok{};
  };
  EXPECT_TRUE(empty.Feed({}, count));
  EXPECT_TRUE(empty.Finish(count));
  EXPECT_EQ(calls, 0);

  const auto data = SplitMix64Bytes(0, 1000000);
  ChunkStream failing;
  const ChunkStream::OnChunk refuse = [&](std::span<const uint8_t>) -> Status {
    ++calls;
    return IoError("disk full");
  };
  const auto st = failing.Feed(data, refuse);
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().message, "disk full");
  EXPECT_EQ(calls, 1);
}

TEST(ShardRecords, Sha256InPiecesIsTheVectorsInShardOrder) {
  const auto data = SplitMix64Bytes(0, 1000000);
  Sha256 pieces;
  for (size_t off = 0; off < data.size(); off += 77777)
    pieces.Update(std::span<const uint8_t>(data).subspan(off, std::min<size_t>(77777, data.size() - off)));
  const xet::Hash h = pieces.Final();
  EXPECT_EQ(h, ShardSha256Of(data));
  EXPECT_EQ(h.hex(), SplitMixVector().at("sha256").as_string());
}

TEST(ShardRecords, FileRecordMergesConsecutiveChunksOfAXorbIntoOneTerm) {
  xet::XorbHash a, b;
  a.bytes[0] = 1;
  b.bytes[0] = 2;
  const auto h = [](uint8_t n) {
    xet::ChunkHash c;
    c.bytes[0] = n;
    return c;
  };
  const std::vector<PlacedChunk> chunks = {
      {h(1), 10, a, 0}, {h(2), 20, a, 1}, {h(3), 30, b, 5}, {h(4), 40, a, 2}, {h(5), 50, a, 7}};
  const auto record = FileRecordOf(chunks);
  ASSERT_EQ(record.terms.size(), 4u);
  EXPECT_EQ(record.terms[0].xorb, a);
  EXPECT_EQ(record.terms[0].chunk_start, 0u);
  EXPECT_EQ(record.terms[0].chunk_end, 2u);
  EXPECT_EQ(record.terms[0].unpacked_bytes, 30u);
  EXPECT_EQ(record.terms[1].xorb, b);
  EXPECT_EQ(record.terms[2].chunk_start, 2u);  // a again, but not after b's chunk: a new term
  EXPECT_EQ(record.terms[3].chunk_start, 7u);  // a gap in a: a new term
  EXPECT_EQ(record.verification.size(), 4u);
}

TEST(ShardRecords, XorbListingMarksGlobalDedupChunksWhenAsked) {
  std::vector<xet::HashedChunk> chunks;
  for (uint8_t i = 0; i < 8; ++i) {
    xet::ChunkHash c;
    c.bytes[0] = i;
    c.bytes[8] = static_cast<uint8_t>(i * 37);
    chunks.push_back({c, 100u + i});
  }
  xet::XorbHash x;
  const auto plain = XorbRecordOf(x, chunks, false);
  const auto marked = XorbRecordOf(x, chunks, true);
  EXPECT_EQ(plain.bytes_in_xorb, 8 * 100u + 28u);
  uint32_t offset = 0;
  for (size_t i = 0; i < chunks.size(); ++i) {
    EXPECT_EQ(plain.chunks[i].byte_start, offset);
    offset += plain.chunks[i].size;
    EXPECT_EQ(plain.chunks[i].flags, 0u);
    const bool global = chunks[i].hash.mod(xet::kGlobalDedupModulus) == 0;
    EXPECT_EQ(marked.chunks[i].flags, global ? xet::kChunkFlagGlobalDedup : 0u);
  }
}

TEST(UploadBuilder, TheVectorFileHasTheStockClientsHashes) {
  const auto data = SplitMix64Bytes(0, 1000000);
  const std::span<const uint8_t> file(data);
  const auto up = BuildUpload(std::span(&file, 1));
  ASSERT_EQ(up.xorbs.size(), 1u);
  EXPECT_EQ(up.xorbs[0].hash.hex(), SplitMixVector().at("xorb_hash_all").as_string());
  ASSERT_EQ(up.file_hashes.size(), 1u);
  EXPECT_EQ(up.file_hashes[0].hex(), SplitMixVector().at("file_hash_zero_salt").as_string());
  ASSERT_TRUE(up.shard.files[0].sha256.has_value());
  EXPECT_EQ(up.shard.files[0].sha256->hex(), SplitMixVector().at("sha256").as_string());
  // The upload form parses back to the same records.
  auto parsed = xet::ParseShard(up.shard_bytes);
  ASSERT_TRUE(parsed) << parsed.error().message;
  ASSERT_EQ(parsed->files.size(), 1u);
  EXPECT_EQ(parsed->files[0].hash, up.file_hashes[0]);
  ASSERT_EQ(parsed->xorbs.size(), 1u);
  EXPECT_EQ(parsed->xorbs[0].chunks.size(), VectorChunkEnds().size());
}

}  // namespace
}  // namespace cairn::ingest
