#include "cas/reconstruction.h"

#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <map>
#include <random>
#include <set>

namespace cairn::cas {
namespace {

namespace json = boost::json;

xet::Hash HashOf(uint64_t n) {
  xet::Hash h;
  for (size_t i = 0; i < 32; ++i) h.bytes[i] = static_cast<uint8_t>(n * 31 + i * 7 + (n >> 8));
  return h;
}

// Xorbs of chunks with known sizes (hashes are arbitrary: answers never look at them), each chunk stored with
// a 8-byte header and `size / 2` payload bytes, so compressed offsets differ from unpacked ones.
class Fixture : public ::testing::Test {
 protected:
  const xet::XorbHash& AddXorb(uint64_t id, const std::vector<uint32_t>& sizes) {
    xet::XorbLayout layout;
    uint32_t end = 0;
    for (size_t i = 0; i < sizes.size(); ++i) {
      end += 8 + sizes[i] / 2;
      layout.chunks.push_back({HashOf(id * 1000 + i), sizes[i], end});
    }
    xorbs_[HashOf(id)] = layout;
    return xorbs_.find(HashOf(id))->first;
  }
  void AddTerm(const xet::XorbHash& xorb, uint32_t start, uint32_t end) {
    uint32_t bytes = 0;
    for (uint32_t c = start; c < end; ++c) bytes += xorbs_[xorb].chunks[c].unpacked_size;
    const uint64_t before = terms_.empty() ? 0 : terms_.back().end_offset;
    terms_.push_back({xorb, start, end, bytes, before + bytes});
  }
  ReconstructionAnswer Ask(std::optional<ByteRange> range, ApiVersion v = ApiVersion::kV2) {
    return AnswerReconstruction(terms_, lookup_, {range, v, 5000}, signer_);
  }
  static json::object Parse(const ReconstructionAnswer& a) {
    EXPECT_EQ(a.status, ReconstructionStatus::kOk) << a.detail;
    return json::parse(a.Text()).as_object();
  }

  std::map<xet::XorbHash, xet::XorbLayout> xorbs_;
  std::vector<FileTermRef> terms_;
  xet::LayoutLookup lookup_ = [this](const xet::XorbHash& h) -> const xet::XorbLayout* {
    auto it = xorbs_.find(h);
    return it == xorbs_.end() ? nullptr : &it->second;
  };
  TransferUrlSigner signer_{"http://cas.test", HashOf(99)};
};

int64_t I(const json::value& v) {
  return v.to_number<int64_t>();
}

TEST_F(Fixture, FullFileV2) {
  const auto& a = AddXorb(1, {100, 200, 300, 400});
  const auto& b = AddXorb(2, {50, 60});
  AddTerm(a, 0, 2);
  AddTerm(b, 0, 2);
  AddTerm(a, 2, 4);
  const auto o = Parse(Ask(std::nullopt));
  EXPECT_EQ(I(o.at("offset_into_first_range")), 0);
  const auto& terms = o.at("terms").as_array();
  ASSERT_EQ(terms.size(), 3u);
  EXPECT_EQ(terms[0].at("hash").as_string(), a.hex());
  EXPECT_EQ(I(terms[0].at("unpacked_length")), 300);
  EXPECT_EQ(I(terms[2].at("range").at("start")), 2);
  EXPECT_EQ(I(terms[2].at("range").at("end")), 4);
  // Xorb a's two terms touch ([0,2) and [2,4)) and merge into one range under one URL.
  const auto& fa = o.at("xorbs").at(a.hex()).as_array();
  ASSERT_EQ(fa.size(), 1u);
  const auto& ranges = fa[0].at("ranges").as_array();
  ASSERT_EQ(ranges.size(), 1u);
  EXPECT_EQ(I(ranges[0].at("chunks").at("end")), 4);
  EXPECT_EQ(I(ranges[0].at("bytes").at("start")), 0);
  EXPECT_EQ(I(ranges[0].at("bytes").at("end")), (8 + 50) + (8 + 100) + (8 + 150) + (8 + 200) - 1);
  EXPECT_FALSE(o.contains("fetch_info"));
}

TEST_F(Fixture, V1HasOneSignedUrlPerMergedRange) {
  const auto& a = AddXorb(1, {100, 200, 300, 400, 500});
  AddTerm(a, 0, 1);
  AddTerm(a, 3, 5);
  const auto o = Parse(Ask(std::nullopt, ApiVersion::kV1));
  const auto& f = o.at("fetch_info").at(a.hex()).as_array();
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(I(f[1].at("range").at("start")), 3);
  EXPECT_EQ(I(f[1].at("url_range").at("start")), (8 + 50) + (8 + 100) + (8 + 150));
  const std::string url(f[1].at("url").as_string());
  EXPECT_NE(url.find("r=" + std::to_string(I(f[1].at("url_range").at("start"))) + "-"), std::string::npos);
  EXPECT_FALSE(o.contains("xorbs"));
}

// Presigned mode: every URL is the store's, one per range (object stores answer a multi-range request with
// the whole object), and URLs of different ranges differ (@huggingface/hub plans its downloads by URL).
TEST_F(Fixture, PresignedUrlsCarryOneRangeEach) {
  const auto& a = AddXorb(1, {100, 200, 300, 400, 500});
  AddTerm(a, 0, 1);
  AddTerm(a, 3, 5);
  Presigner presigner;
  presigner.url = [](std::string_view hex, const ByteRange& r, uint64_t expiry) {
    return "https://store.test/" + std::string(hex) + "?tag=" + std::to_string(r.start) + "-" +
           std::to_string(r.end) + "&exp=" + std::to_string(expiry);
  };
  presigner.max_size = 200;
  signer_ = TransferUrlSigner("http://cas.test", HashOf(99), presigner);
  ASSERT_TRUE(signer_.presigned());
  const auto v2 = Parse(Ask(std::nullopt));
  const auto& fa = v2.at("xorbs").at(a.hex()).as_array();
  ASSERT_EQ(fa.size(), 2u);
  for (const auto& e : fa) {
    const auto& ranges = e.at("ranges").as_array();
    ASSERT_EQ(ranges.size(), 1u);
    const std::string want = "https://store.test/" + a.hex() +
                             "?tag=" + std::to_string(I(ranges[0].at("bytes").at("start"))) + "-" +
                             std::to_string(I(ranges[0].at("bytes").at("end"))) + "&exp=5000";
    EXPECT_EQ(e.at("url").as_string(), want);
  }
  EXPECT_NE(fa[0].at("url").as_string(), fa[1].at("url").as_string());
  const auto v1 = Parse(Ask(std::nullopt, ApiVersion::kV1));
  const auto& f = v1.at("fetch_info").at(a.hex()).as_array();
  ASSERT_EQ(f.size(), 2u);
  EXPECT_TRUE(std::string(f[1].at("url").as_string())
                  .starts_with("https://store.test/" + a.hex() +
                               "?tag=" + std::to_string(I(f[1].at("url_range").at("start")))));
}

TEST_F(Fixture, RangeTrimsBoundaryTermsToWholeChunks) {
  const auto& a = AddXorb(1, {100, 100, 100, 100});
  const auto& b = AddXorb(2, {100, 100, 100});
  AddTerm(a, 0, 4);  // file bytes [0, 400)
  AddTerm(b, 0, 3);  // file bytes [400, 700)
  const auto o = Parse(Ask(ByteRange{150, 449}));
  EXPECT_EQ(I(o.at("offset_into_first_range")), 50);
  const auto& terms = o.at("terms").as_array();
  ASSERT_EQ(terms.size(), 2u);
  EXPECT_EQ(I(terms[0].at("range").at("start")), 1);
  EXPECT_EQ(I(terms[0].at("range").at("end")), 4);
  EXPECT_EQ(I(terms[0].at("unpacked_length")), 300);
  EXPECT_EQ(I(terms[1].at("range").at("start")), 0);
  EXPECT_EQ(I(terms[1].at("range").at("end")), 1);
  EXPECT_EQ(I(terms[1].at("unpacked_length")), 100);
}

// With each term's byte range recorded (as the index does from schema 5), answers are the same, byte for
// byte, and read a layout only for the terms a range cuts: none for a whole file, at most two xorbs for a
// range.
TEST_F(Fixture, RecordedRangesGiveTheSameAnswersWithoutLayouts) {
  std::mt19937_64 rng(5);
  for (uint64_t x = 1; x <= 6; ++x) {
    std::vector<uint32_t> sizes;
    for (int c = 0; c < 12; ++c) sizes.push_back(static_cast<uint32_t>(50 + rng() % 200));
    AddXorb(x, sizes);
  }
  for (int t = 0; t < 40; ++t) {
    const uint32_t a = static_cast<uint32_t>(rng() % 11);
    AddTerm(HashOf(1 + rng() % 6), a, a + 1 + static_cast<uint32_t>(rng() % (12 - a - 1 + 1)));
  }
  std::vector<FileTermRef> ranged = terms_;
  for (auto& t : ranged) {
    const auto& l = xorbs_.at(t.xorb);
    t.range_start = l.begin_offset(t.chunk_start);
    t.range_end = l.chunks[t.chunk_end - 1].end_offset;
  }
  std::set<xet::XorbHash> asked;
  const xet::LayoutLookup counting = [&](const xet::XorbHash& h) {
    asked.insert(h);
    return lookup_(h);
  };
  const auto same = [&](std::optional<ByteRange> range, ApiVersion v) {
    asked.clear();
    const auto want = AnswerReconstruction(terms_, lookup_, {range, v, 5000}, signer_);
    const auto got = AnswerReconstruction(ranged, counting, {range, v, 5000}, signer_);
    ASSERT_EQ(got.status, ReconstructionStatus::kOk) << got.detail;
    EXPECT_EQ(got.Text(), want.Text());
  };
  for (ApiVersion v : {ApiVersion::kV1, ApiVersion::kV2}) {
    same(std::nullopt, v);
    EXPECT_TRUE(asked.empty());
  }
  const uint64_t size = terms_.back().end_offset;
  for (int i = 0; i < 300; ++i) {
    const uint64_t a = rng() % size;
    same(ByteRange{a, a + rng() % (size - a)}, i % 2 ? ApiVersion::kV1 : ApiVersion::kV2);
    EXPECT_LE(asked.size(), 2u);
  }
  // Without any layout, a recorded whole file is still answered; a cut term is not.
  const xet::LayoutLookup none = [](const xet::XorbHash&) -> const xet::XorbLayout* { return nullptr; };
  EXPECT_EQ(AnswerReconstruction(ranged, none, {std::nullopt, ApiVersion::kV2, 5000}, signer_).status,
            ReconstructionStatus::kOk);
  EXPECT_EQ(AnswerReconstruction(ranged, none, {ByteRange{1, 2}, ApiVersion::kV2, 5000}, signer_).status,
            ReconstructionStatus::kMissingXorb);
}

TEST_F(Fixture, RangePastTheEndIsClampedAndAtTheEndIs416) {
  const auto& a = AddXorb(1, {100, 100});
  AddTerm(a, 0, 2);
  const auto o = Parse(Ask(ByteRange{150, UINT64_MAX}));
  EXPECT_EQ(I(o.at("offset_into_first_range")), 50);
  EXPECT_EQ(o.at("terms").as_array().size(), 1u);
  EXPECT_EQ(Ask(ByteRange{200, 300}).status, ReconstructionStatus::kRangeNotSatisfiable);
  EXPECT_EQ(Ask(ByteRange{1000, 2000}).status, ReconstructionStatus::kRangeNotSatisfiable);
}

TEST_F(Fixture, EmptyFile) {
  const auto o = Parse(Ask(std::nullopt));
  EXPECT_EQ(json::serialize(o), R"({"offset_into_first_range":0,"terms":[],"xorbs":{}})");
  EXPECT_EQ(json::serialize(Parse(Ask(std::nullopt, ApiVersion::kV1))),
            R"({"offset_into_first_range":0,"terms":[],"fetch_info":{}})");
  EXPECT_EQ(Ask(ByteRange{0, 100}).status, ReconstructionStatus::kOk);
  EXPECT_EQ(Ask(ByteRange{1, 100}).status, ReconstructionStatus::kRangeNotSatisfiable);
}

TEST_F(Fixture, MissingLayoutIsReported) {
  const auto& a = AddXorb(1, {100});
  AddTerm(a, 0, 1);
  xorbs_.clear();
  EXPECT_EQ(Ask(std::nullopt).status, ReconstructionStatus::kMissingXorb);
}

// Every answer must tile the requested range with whole chunks, each term inside one fetch range of its xorb.
TEST_F(Fixture, RandomRangesAreTiledExactly) {
  std::mt19937_64 rng(7);
  for (uint64_t x = 0; x < 4; ++x) {
    std::vector<uint32_t> sizes;
    for (int c = 0; c < 20; ++c) sizes.push_back(static_cast<uint32_t>(1 + rng() % 5000));
    AddXorb(x, sizes);
  }
  for (int t = 0; t < 60; ++t) {
    const auto& xorb = HashOf(rng() % 4);
    const auto s = static_cast<uint32_t>(rng() % 19);
    AddTerm(xorb, s, s + 1 + static_cast<uint32_t>(rng() % (19 - s)));
  }
  const uint64_t size = terms_.back().end_offset;
  for (int q = 0; q < 300; ++q) {
    const uint64_t start = rng() % size;
    const uint64_t end = start + rng() % (size - start + 100);
    const auto o = Parse(Ask(ByteRange{start, end}));
    const uint64_t want = std::min(end + 1, size) - start;
    uint64_t covered = 0;
    uint64_t last_chunk = 0;
    for (const auto& t : o.at("terms").as_array()) {
      const auto& layout = xorbs_[*xet::Hash::FromHex(t.at("hash").as_string())];
      uint64_t bytes = 0;
      for (auto c = I(t.at("range").at("start")); c < I(t.at("range").at("end")); ++c) {
        bytes += layout.chunks[static_cast<size_t>(c)].unpacked_size;
        last_chunk = layout.chunks[static_cast<size_t>(c)].unpacked_size;
      }
      ASSERT_EQ(I(t.at("unpacked_length")), static_cast<int64_t>(bytes));
      covered += bytes;
      bool inside = false;
      for (const auto& f : o.at("xorbs").at(t.at("hash").as_string()).as_array()) {
        for (const auto& r : f.at("ranges").as_array()) {
          inside |= I(r.at("chunks").at("start")) <= I(t.at("range").at("start")) &&
                    I(t.at("range").at("end")) <= I(r.at("chunks").at("end"));
        }
      }
      ASSERT_TRUE(inside);
    }
    const auto offset = static_cast<uint64_t>(I(o.at("offset_into_first_range")));
    ASSERT_GE(covered - offset, want) << start << "-" << end;
    ASSERT_LT(covered - last_chunk, offset + want) << "a trailing chunk was not needed";
  }
}

TEST_F(Fixture, BatchAnswersSeveralFilesWithSharedFetchInfo) {
  const auto& a = AddXorb(1, {100, 200});
  AddTerm(a, 0, 2);
  std::vector<FileTermRef> second{{a, 1, 2, 200, 200}};
  const BatchFile files[] = {{HashOf(500), terms_}, {HashOf(501), second}};
  const auto answer = AnswerBatchReconstruction(files, lookup_, 5000, signer_);
  ASSERT_EQ(answer.status, ReconstructionStatus::kOk);
  const auto o = json::parse(answer.Text()).as_object();
  EXPECT_EQ(o.at("files").as_object().size(), 2u);
  EXPECT_EQ(o.at("files").at(HashOf(501).hex()).as_array().size(), 1u);
  EXPECT_EQ(o.at("fetch_info").at(a.hex()).as_array().size(), 1u);  // [0,2) and [1,2) merge
}

// A large answer is cut into parts that workers write concurrently; the parts, joined, are the same bytes
// whoever writes them, and every term and range is there.
TEST_F(Fixture, LargeAnswersAreWrittenInPartsIdenticallyWithWorkers) {
  constexpr uint32_t kXorbs = 250;  // HashOf is distinct below 256
  constexpr uint32_t kTerms = 25000;
  std::vector<xet::XorbHash> hashes;
  for (uint32_t x = 0; x < kXorbs; ++x) hashes.push_back(AddXorb(x, std::vector<uint32_t>(256, 1000 + x)));
  for (uint32_t t = 0; t < kTerms; ++t) {
    const uint32_t start = (t / kXorbs) * 2;  // every xorb gets 100 separate ranges
    AddTerm(hashes[t % kXorbs], start, start + 1);
  }
  WorkerPool pool(2);
  for (const ApiVersion v : {ApiVersion::kV2, ApiVersion::kV1}) {
    const auto serial = AnswerReconstruction(terms_, lookup_, {std::nullopt, v, 5000}, signer_);
    const auto parallel = AnswerReconstruction(terms_, lookup_, {std::nullopt, v, 5000}, signer_, &pool);
    EXPECT_GT(parallel.body.size(), 4u);
    EXPECT_EQ(serial.Text(), parallel.Text());
    const auto o = Parse(parallel);
    const auto& terms = o.at("terms").as_array();
    ASSERT_EQ(terms.size(), kTerms);
    for (uint32_t t = 0; t < kTerms; t += 997) {
      EXPECT_EQ(terms[t].at("hash").as_string(), hashes[t % kXorbs].hex());
      EXPECT_EQ(I(terms[t].at("range").at("start")), (t / kXorbs) * 2);
    }
    const auto& fetch = o.at(v == ApiVersion::kV1 ? "fetch_info" : "xorbs").as_object();
    ASSERT_EQ(fetch.size(), kXorbs);
    size_t ranges = 0;
    for (const auto& [key, entries] : fetch) {
      for (const auto& e : entries.as_array())
        ranges += v == ApiVersion::kV1 ? 1 : e.at("ranges").as_array().size();
    }
    EXPECT_EQ(ranges, kTerms);
  }
  const std::vector<BatchFile> files = {{HashOf(5000), terms_}, {HashOf(5001), terms_}};
  const auto serial = AnswerBatchReconstruction(files, lookup_, 5000, signer_);
  const auto parallel = AnswerBatchReconstruction(files, lookup_, 5000, signer_, &pool);
  EXPECT_EQ(serial.Text(), parallel.Text());
  const auto o = Parse(parallel);
  EXPECT_EQ(o.at("files").at(HashOf(5001).hex()).as_array().size(), kTerms);
}

}  // namespace
}  // namespace cairn::cas
