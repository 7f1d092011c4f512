// The generic pieces every layer shares: hex, base64, percent-encoding, the LRU cache, the descriptor owner,
// the spool file.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "common/base64.h"
#include "common/hex.h"
#include "common/lru_cache.h"
#include "common/percent_encode.h"
#include "common/posix_io.h"
#include "common/printable.h"
#include "common/spool_file.h"
#include "common/unique_fd.h"

namespace cairn {
namespace {

TEST(Hex, EncodesEveryByteAndDecodesEitherCase) {
  std::vector<uint8_t> all(256);
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<uint8_t>(i);
  const std::string hex = HexEncode(all);
  ASSERT_EQ(hex.size(), 512u);
  EXPECT_EQ(hex.substr(0, 8), "00010203");
  EXPECT_EQ(hex.substr(504), "fcfdfeff");
  std::vector<uint8_t> back(256);
  ASSERT_TRUE(HexDecode(hex, back));
  EXPECT_EQ(back, all);
  uint8_t two[2];
  ASSERT_TRUE(HexDecode("aBCd", two));
  EXPECT_EQ(two[0], 0xab);
  EXPECT_EQ(two[1], 0xcd);
}

TEST(Hex, RefusesWrongLengthsAndNonDigits) {
  uint8_t two[2];
  EXPECT_FALSE(HexDecode("abc", two));
  EXPECT_FALSE(HexDecode("abcdef", two));
  EXPECT_FALSE(HexDecode("abcg", two));
  EXPECT_FALSE(HexDecode("ab c", two));
  EXPECT_FALSE(HexDecode(std::string_view("ab\0c", 4), two));
  EXPECT_EQ(HexValue('/'), -1);
  EXPECT_EQ(HexValue(':'), -1);
  EXPECT_EQ(HexValue('G'), -1);
}

TEST(Hex, NumbersInTheFewestDigits) {
  EXPECT_EQ(HexNumber(0), "0");
  EXPECT_EQ(HexNumber(10), "a");
  EXPECT_EQ(HexNumber(0x10000), "10000");
  EXPECT_EQ(HexNumber(UINT64_MAX), "ffffffffffffffff");
}

TEST(Base64, RoundTripsBothAlphabets) {
  const std::string bytes("\xfb\xff\x00\x01xyz", 7);
  EXPECT_EQ(Base64Encode(bytes), "+/8AAXh5eg==");
  EXPECT_EQ(Base64Encode(bytes, /*url_safe=*/true), "-_8AAXh5eg");
  const std::vector<uint8_t> as_bytes(bytes.begin(), bytes.end());
  EXPECT_EQ(Base64Encode(std::span<const uint8_t>(as_bytes)), "+/8AAXh5eg==");
  EXPECT_EQ(Base64Decode("+/8AAXh5eg=="), as_bytes);
  EXPECT_EQ(Base64Decode("-_8AAXh5eg", true), as_bytes);
  EXPECT_EQ(Base64Decode("-_8A"), std::nullopt);   // URL-safe letters in the standard alphabet
  EXPECT_EQ(Base64Decode("QUJDR"), std::nullopt);  // a lone final character carries no whole byte
}

TEST(PercentDecode, TakesBackWhatPercentEncodeWroteAndRefusesBrokenEscapes) {
  const std::string raw = "a-b_c.d~e/f g%\xc3\xa9+";
  EXPECT_EQ(PercentDecode(PercentEncode(raw)), raw);
  EXPECT_EQ(PercentDecode("plain/path.png"), "plain/path.png");
  EXPECT_EQ(PercentDecode("a%2fb%2F"), "a/b/");
  for (const char* bad : {"%", "a%2", "%zz", "%2g"}) EXPECT_EQ(PercentDecode(bad), std::nullopt) << bad;
}

TEST(PercentEncode, KeepsUnreservedOrTheGivenMarks) {
  EXPECT_EQ(PercentEncode("a-b_c.d~e/f g%\xc3\xa9"), "a-b_c.d~e%2Ff%20g%25%C3%A9");
  EXPECT_EQ(PercentEncode("r\xc3\xa9sum\xc3\xa9 (1)!.txt", kAttrCharMarks),
            "r%C3%A9sum%C3%A9%20%281%29!.txt");
}

TEST(Printable, EscapesControlsQuotesAndBackslashes) {
  EXPECT_EQ(Printable("ok \"q\"\\\x01\x7f"), "ok \\x22q\\x22\\x5c\\x01\\x7f");
  EXPECT_EQ(Printable("abcdef", 3), "abc...");
}

TEST(LruCache, EvictsLeastRecentlyUsedByBytes) {
  LruCache<int, std::string, std::hash<int>> cache(100);
  cache.Put(1, std::make_shared<const std::string>("a"), 40);
  cache.Put(2, std::make_shared<const std::string>("b"), 40);
  ASSERT_NE(cache.Get(1), nullptr);  // 1 is now the most recent
  cache.Put(3, std::make_shared<const std::string>("c"), 40);
  EXPECT_EQ(cache.Get(2), nullptr);
  EXPECT_NE(cache.Get(1), nullptr);
  EXPECT_NE(cache.Get(3), nullptr);
  EXPECT_EQ(cache.used_bytes(), 80u);
  cache.Put(4, std::make_shared<const std::string>("too big"), 101);
  EXPECT_EQ(cache.Get(4), nullptr);
}

TEST(LruCache, AnEvictedValueLivesOnForItsHolder) {
  LruCache<int, std::string, std::hash<int>> cache(10);
  cache.Put(1, std::make_shared<const std::string>("kept"), 10);
  const auto held = cache.Get(1);
  cache.Put(2, std::make_shared<const std::string>("next"), 10);
  EXPECT_EQ(cache.Get(1), nullptr);
  ASSERT_NE(held, nullptr);
  EXPECT_EQ(*held, "kept");
}

TEST(UniqueFd, ClosesOnceWhenOwnershipMoves) {
  int pipe_fds[2];
  ASSERT_EQ(::pipe2(pipe_fds, O_CLOEXEC), 0);
  const UniqueFd write_end(pipe_fds[1]);
  {
    UniqueFd a(pipe_fds[0]);
    UniqueFd b(std::move(a));
    EXPECT_FALSE(a.valid());  // NOLINT(bugprone-use-after-move): the moved-from state is the point
    EXPECT_EQ(b.get(), pipe_fds[0]);
    EXPECT_EQ(::fcntl(pipe_fds[0], F_GETFD), FD_CLOEXEC);
  }
  EXPECT_EQ(::fcntl(pipe_fds[0], F_GETFD), -1);  // closed when b went
  UniqueFd c(::dup(write_end.get()));
  const int raw = c.release();
  EXPECT_FALSE(c.valid());
  EXPECT_EQ(::close(raw), 0);  // release() gave it back unclosed
}

TEST(SpoolFile, MapsWhatWasAppendedAndLeavesNoName) {
  const std::string dir = ::testing::TempDir() + "/spool-test/" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  auto spool = SpoolFile::Create(dir);  // the directory is made
  ASSERT_TRUE(spool) << spool.error().message;
  auto empty = spool->Map();
  ASSERT_TRUE(empty);
  EXPECT_TRUE(empty->empty());
  std::string expected;
  for (int i = 0; i < 3000; ++i) {
    const std::string piece = "piece " + std::to_string(i) + ";";
    ASSERT_TRUE(spool->Append({reinterpret_cast<const uint8_t*>(piece.data()), piece.size()}));
    expected += piece;
  }
  EXPECT_EQ(spool->size(), expected.size());
  SpoolFile moved = std::move(*spool);
  auto mapped = moved.Map();
  ASSERT_TRUE(mapped) << mapped.error().message;
  EXPECT_EQ(*mapped, expected);
  EXPECT_FALSE(moved.Append({reinterpret_cast<const uint8_t*>("x"), 1}));  // mapped: no more appends
  EXPECT_TRUE(std::filesystem::is_empty(dir));  // unnamed: nothing for a crash to leave behind
  std::filesystem::remove_all(dir);
}

TEST(SpoolFile, ADirectoryThatCannotBeMadeIsAnError) {
  const std::string file = ::testing::TempDir() + "/spool-not-a-dir-" + std::to_string(::getpid());
  { UniqueFd fd(::open(file.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600)); }
  auto spool = SpoolFile::Create(file + "/sub");
  ASSERT_FALSE(spool);
  EXPECT_EQ(spool.error().code, ErrorCode::kIo);
  ::unlink(file.c_str());
}

// Writes larger than one slice go out in several calls, each at the right place.
TEST(PosixIo, WritesLargerThanASliceLandWhole) {
  const std::string path = ::testing::TempDir() + "/posix-io-" + std::to_string(::getpid());
  UniqueFd fd(::open(path.c_str(), O_CREAT | O_TRUNC | O_RDWR | O_CLOEXEC, 0600));
  ASSERT_TRUE(fd.valid());
  ::unlink(path.c_str());
  std::vector<uint8_t> bytes(3 * kWriteSlice + 5);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 31 + i / 7);
  ASSERT_EQ(WriteFull(fd.get(), std::span(bytes).first(kWriteSlice + 1)), 0);
  ASSERT_EQ(WriteFull(fd.get(), std::span(bytes).subspan(kWriteSlice + 1, 7)), 0);  // at the file offset
  // PwriteFull at its offset, over the end of what WriteFull wrote.
  ASSERT_EQ(PwriteFull(fd.get(), kWriteSlice + 8, std::span(bytes).subspan(kWriteSlice + 8)), 0);
  std::vector<uint8_t> back(bytes.size());
  ASSERT_EQ(PreadFull(fd.get(), 0, back), 0);
  EXPECT_EQ(back, bytes);
  struct stat st {};
  ASSERT_EQ(::fstat(fd.get(), &st), 0);
  EXPECT_EQ(static_cast<uint64_t>(st.st_size), bytes.size());
  EXPECT_EQ(WriteFull(-1, std::span(bytes).first(1)), EBADF);
  EXPECT_EQ(PwriteFull(-1, 0, std::span(bytes).first(1)), EBADF);
}

}  // namespace
}  // namespace cairn
