// pkt-lines, gzip bodies and packs: the framing parsed within the bytes given, inflation bounded, and packs
// that git itself reads (git index-pack, from the Debian package the bootstrap installs).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "git/pack.h"
#include "git/pkt_line.h"
#include "git/test_git.h"
#include "git/zlib.h"

namespace cairn::git {
namespace {

TEST(PktLine, RoundTripsDataFlushAndDelimiter) {
  std::string out;
  AppendPkt(out, "command=ls-refs\n");
  AppendDelim(out);
  AppendPkt(out, "");
  AppendFlush(out);
  EXPECT_EQ(out, "0014command=ls-refs\n000100040000");
  PktReader r(out);
  auto a = r.Next();
  ASSERT_TRUE(a.ok() && *a);
  EXPECT_EQ((*a)->kind, PktKind::kData);
  EXPECT_EQ(Line((*a)->payload), "command=ls-refs");
  EXPECT_EQ((*r.Next())->kind, PktKind::kDelim);
  auto empty = r.Next();
  EXPECT_EQ((*empty)->kind, PktKind::kData);
  EXPECT_TRUE((*empty)->payload.empty());
  EXPECT_EQ((*r.Next())->kind, PktKind::kFlush);
  EXPECT_FALSE(*r.Next());
  EXPECT_TRUE(r.done());
}

TEST(PktLine, RefusesWhatRunsPastTheInput) {
  for (std::string_view bad : {"0", "00", "zzzz", "0003", "0009abc", "fff0", "-001"}) {
    PktReader r(bad);
    auto got = r.Next();
    ASSERT_FALSE(got.ok()) << bad;
    EXPECT_EQ(got.error().code, ErrorCode::kMalformed) << bad;
  }
}

TEST(PktLine, SideBandSplitsLongData) {
  const std::string data(kMaxSideBandData + 10, 'x');
  std::string out;
  AppendSideBand(out, 1, data);
  PktReader r(out);
  std::string back;
  size_t packets = 0;
  while (auto p = r.Next()) {
    ASSERT_TRUE(p.ok());
    if (!*p) break;
    ++packets;
    ASSERT_EQ((*p)->payload[0], '\1');
    back.append((*p)->payload.substr(1));
  }
  EXPECT_EQ(packets, 2U);
  EXPECT_EQ(back, data);
}

TEST(Gunzip, InflatesWithinItsBound) {
  const std::string body = "0032have " + std::string(40, 'a') + "\n";
  auto got = Gunzip(testing::Gzip(body), 1 << 20);
  ASSERT_TRUE(got.ok()) << got.error().message;
  EXPECT_EQ(*got, body);
}

TEST(Gunzip, RefusesABombCutAndTrailingBytes) {
  // 64 MiB of zeros deflate to ~64 KiB: refused at the bound, having inflated no more than it.
  const std::string bomb = testing::Gzip(std::string(64 << 20, '\0'));
  ASSERT_LT(bomb.size(), 1U << 20);
  auto big = Gunzip(bomb, 1 << 20);
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.error().code, ErrorCode::kLimit);
  const std::string ok = testing::Gzip("hello");
  EXPECT_EQ(Gunzip(ok.substr(0, ok.size() - 3), 1 << 20).error().code, ErrorCode::kMalformed);
  EXPECT_EQ(Gunzip(ok + "x", 1 << 20).error().code, ErrorCode::kMalformed);
  EXPECT_EQ(Gunzip("not gzip at all", 1 << 20).error().code, ErrorCode::kMalformed);
}

TEST(Pack, GitReadsWhatPackWriterWrites) {
  testing::TempGitDir dir("pack");
  std::string pack;
  PackWriter writer(
      3,
      [&](std::string&& piece) {
        pack.append(piece);
        return true;
      },
      16);
  const std::string blob = "hello\n";
  const std::string big(100000, 'z');  // a size needing three bytes of header
  const std::string tree =
      std::string("100644 a.txt") + '\0' +
      std::string(reinterpret_cast<const char*>(hub::HashObject(hub::ObjectKind::kBlob, blob).bytes.data()),
                  20);
  ASSERT_TRUE(
      writer.Add(ObjectKind::kBlob, {reinterpret_cast<const uint8_t*>(blob.data()), blob.size()}).ok());
  ASSERT_TRUE(writer.Add(ObjectKind::kBlob, {reinterpret_cast<const uint8_t*>(big.data()), big.size()}).ok());
  ASSERT_TRUE(
      writer.Add(ObjectKind::kTree, {reinterpret_cast<const uint8_t*>(tree.data()), tree.size()}).ok());
  EXPECT_EQ(writer.Add(ObjectKind::kBlob, {}).error().code, ErrorCode::kInconsistent);
  ASSERT_TRUE(writer.Finish().ok());
  ASSERT_TRUE(dir.IndexPack(pack));
  EXPECT_EQ(dir.Run("cat-file -p " + hub::HashObject(hub::ObjectKind::kBlob, blob).hex()), blob);
  EXPECT_EQ(dir.Run("cat-file -s " + hub::HashObject(hub::ObjectKind::kBlob, big).hex()), "100000\n");
  EXPECT_EQ(dir.Run("ls-tree " + hub::HashObject(hub::ObjectKind::kTree, tree).hex()),
            "100644 blob ce013625030ba8dba906f756967f9e9ca394464a\ta.txt\n");
}

TEST(Pack, AFailingSinkStopsTheWriter) {
  PackWriter writer(
      1, [](std::string&&) { return false; }, 1);
  const uint8_t b = 'x';
  EXPECT_EQ(writer.Add(ObjectKind::kBlob, {&b, 1}).error().code, ErrorCode::kUnavailable);
}

}  // namespace
}  // namespace cairn::git
