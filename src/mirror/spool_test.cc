// The spool's promises: readers get the bytes that came, wait for the ones that have not, never the file's
// last byte before the writer said the whole file was right, and an error once the fetch failed or stalled.
#include "mirror/spool.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace cairn::mirror {
namespace {

using std::chrono::seconds;

class SpoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("cairn-spool-test-" + std::to_string(::getpid()));
    auto made = Spool::Create(dir_);
    ASSERT_TRUE(made.ok()) << made.error().message;
    spool_ = *made;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string ReadAll(uint64_t offset, size_t max) {
    std::vector<uint8_t> out(max);
    auto n = spool_->Read(offset, out, seconds(5));
    EXPECT_TRUE(n.ok()) << n.error().message;
    return n.ok() ? std::string(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(*n)) : std::string();
  }
  static std::vector<uint8_t> Bytes(std::string_view s) { return {s.begin(), s.end()}; }

  std::filesystem::path dir_;
  std::shared_ptr<Spool> spool_;
};

TEST_F(SpoolTest, ReadersGetWhatCameButTheLastByteOnlyOnceTheFileIsChecked) {
  EXPECT_TRUE(std::filesystem::is_empty(dir_));  // nameless from the start
  ASSERT_TRUE(spool_->Write(0, Bytes("hello ")).ok());
  EXPECT_EQ(ReadAll(0, 100), "hello");  // the last byte that came waits
  ASSERT_TRUE(spool_->Write(6, Bytes("world")).ok());
  EXPECT_EQ(ReadAll(5, 100), " worl");
  EXPECT_EQ(ReadAll(2, 3), "llo");
  spool_->Finish(true);
  EXPECT_EQ(ReadAll(6, 100), "world");
  EXPECT_EQ(ReadAll(11, 100), "");  // the end
  spool_->Finish(false);            // the first word stands
  EXPECT_EQ(ReadAll(0, 100), "hello world");
}

TEST_F(SpoolTest, AReaderWaitsForBytesAndFailsWithTheFetch) {
  std::atomic<bool> got{false};
  std::thread reader([&] {
    std::vector<uint8_t> out(4);
    auto n = spool_->Read(0, out, seconds(30));
    got = n.ok() && *n == 3 && std::string(out.begin(), out.begin() + 3) == "abc";
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_TRUE(spool_->Write(0, Bytes("abcd")).ok());
  reader.join();
  EXPECT_TRUE(got.load());
  spool_->Finish(false);
  std::vector<uint8_t> out(4);
  auto failed = spool_->Read(0, out, seconds(1));
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.error().code, ErrorCode::kUnavailable);  // a failed fetch hands nothing more
}

TEST_F(SpoolTest, AStalledFetchTimesTheReaderOut) {
  ASSERT_TRUE(spool_->Write(0, Bytes("x")).ok());
  std::vector<uint8_t> out(4);
  auto n = spool_->Read(0, out, seconds(1));  // one byte came: held back, and nothing follows
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.error().code, ErrorCode::kUnavailable);
}

// Readers follow a source (a relay decoding the file) while one is set, the spool's own bytes otherwise; a
// reader waiting for bytes that never come to the file is woken by the source; a failed fetch fails both.
TEST_F(SpoolTest, ReadersReadThroughASourceWhileOneIsSet) {
  std::atomic<bool> got{false};
  std::thread waiting([&] { got = ReadAll(0, 3) == "sou"; });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  spool_->ReadThrough([](uint64_t offset, std::span<uint8_t> out) -> Result<size_t> {
    const std::string_view file = "source bytes";
    if (offset >= file.size()) return size_t{0};
    const size_t n = std::min(out.size(), file.size() - offset);
    std::copy_n(file.begin() + static_cast<std::ptrdiff_t>(offset), n, out.begin());
    return n;
  });
  waiting.join();
  EXPECT_TRUE(got.load()) << "woken, and read the source's first bytes";
  EXPECT_EQ(ReadAll(7, 100), "bytes");
  spool_->ReadThrough(nullptr);  // given up: the spool's own bytes again
  ASSERT_TRUE(spool_->Write(0, Bytes("own")).ok());
  EXPECT_EQ(ReadAll(0, 100), "ow");
  spool_->Finish(false);
  std::vector<uint8_t> out(4);
  EXPECT_FALSE(spool_->Read(0, out, seconds(1)).ok());
}

}  // namespace
}  // namespace cairn::mirror
