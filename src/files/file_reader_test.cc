// Verified readers with read-ahead, against a real SQLite index and local-disk store: byte-exact ranges at
// chunk, term and xorb boundaries for every depth and unit size, shared chunk runs read once, corrupt stored
// bytes refused, and memory held within the stream's and the server's budgets.
#include "files/file_reader.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <random>
#include <thread>

#include "cas/test_backend.h"
#include "files/file_service.h"
#include "ingest/upload_builder.h"
#include "xet/test_support.h"

namespace cairn::files {
namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<uint8_t>;

class FileReaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(cas::testing::OpenTestBackend("cairn-files", &dir_, &store_, &index_));
    cas::ServiceOptions so;
    so.url_keys = cas::UrlKeys::Single([] {
      xet::Hash h;
      h.bytes.fill(7);
      return h;
    }());
    cas_ = std::make_unique<cas::CasService>(*index_, *store_, pool_, so);
  }
  void TearDown() override {
    files_.reset();
    cas_.reset();
    index_.reset();
    store_.reset();
    fs::remove_all(dir_);
  }
  FileService& Files(const ReadAheadOptions& ra, uint64_t total = 1ULL << 30) {
    FileServiceOptions o;
    o.read_ahead = ra;
    o.total_read_ahead_bytes = total;
    o.fetch_threads = 4;
    o.url_keys = cas::UrlKeys::Single([] {
      xet::Hash h;
      h.bytes.fill(7);
      return h;
    }());
    o.clock = &clock_;
    o.log = [this](const std::string& m) { logged_.push_back(m); };
    files_.reset();
    files_ = std::make_unique<FileService>(*cas_, *index_, o);
    return *files_;
  }
  // Uploads `files` (xorbs of at most 1 MiB, so that a file spans several) and returns their hashes.
  std::vector<xet::FileHash> Upload(const std::vector<Bytes>& files, xet::CompressionPolicy policy,
                                    uint64_t max_xorb_bytes = 1 << 20) {
    std::vector<std::span<const uint8_t>> spans(files.begin(), files.end());
    ingest::BuildOptions o;
    o.policy = policy;
    o.max_xorb_bytes = max_xorb_bytes;
    auto up = ingest::BuildUpload(spans, o);
    for (const auto& x : up.xorbs) EXPECT_TRUE(cas_->PutXorb(x.hash, x.body).ok());
    auto r = cas_->PutShard(up.shard_bytes, "repo");
    EXPECT_TRUE(r.ok()) << r.error().message;
    built_ = std::move(up);
    return built_.file_hashes;
  }
  Bytes ReadAll(FileService& files, const StoredFile& f, uint64_t offset, uint64_t length, size_t block,
                FileReader** keep = nullptr) {
    auto reader = files.Open(f, offset, length);
    EXPECT_TRUE(reader.ok()) << reader.error().message;
    if (!reader.ok()) return {};
    Bytes out(length);
    for (uint64_t at = 0; at < length;) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(block, length - at));
      auto st = (*reader)->Read({out.data() + at, n});
      EXPECT_TRUE(st.ok()) << st.error().message;
      if (!st.ok()) return {};
      at += n;
    }
    EXPECT_EQ((*reader)->remaining(), 0U);
    last_units_ = (*reader)->units();
    last_fetches_ = (*reader)->fetches();
    (void)keep;
    return out;
  }

  TestClock clock_{1'800'000'000};  // the services' (declared first: it outlives them)
  fs::path dir_;
  std::unique_ptr<store::LocalDiskStore> store_;
  std::unique_ptr<index::SqliteIndex> index_;
  WorkerPool pool_{2};
  std::unique_ptr<cas::CasService> cas_;
  std::unique_ptr<FileService> files_;
  ingest::BuiltUpload built_;
  std::vector<std::string> logged_;
  size_t last_units_ = 0;
  size_t last_fetches_ = 0;
};

TEST_F(FileReaderTest, RangesAtEveryBoundaryForEveryDepthAndUnitSize) {
  const Bytes data = xet::testing::TextLikeBytes(1, 3 << 20);               // compressible: LZ4 chunks
  const Bytes noise = xet::testing::SplitMix64Bytes(2, (2 << 20) + 12345);  // stored as None
  Bytes mixed = data;
  mixed.insert(mixed.end(), noise.begin(), noise.end());
  const auto hashes = Upload({mixed}, xet::CompressionPolicy::kAuto);
  // Boundaries: every chunk's start in the file, and a byte either side.
  std::vector<uint64_t> cuts = {0, mixed.size()};
  uint64_t at = 0;
  for (const auto& term : built_.shard.files[0].terms) {
    const auto& layout = std::find_if(built_.xorbs.begin(), built_.xorbs.end(), [&](const auto& x) {
                           return x.hash == term.xorb;
                         })->layout;
    for (uint32_t c = term.chunk_start; c < term.chunk_end; ++c) {
      cuts.push_back(at);
      at += layout.chunks[c].unpacked_size;
    }
  }
  ASSERT_EQ(at, mixed.size());
  std::mt19937_64 rng(3);
  for (const ReadAheadOptions ra :
       {ReadAheadOptions{0, 1, 1 << 20}, ReadAheadOptions{1, 256 << 10, 8 << 20},
        ReadAheadOptions{2, 4 << 20, 64 << 20}, ReadAheadOptions{8, 1 << 20, 2 << 20},
        ReadAheadOptions{16, 64 << 10, 64 << 20}}) {
    FileService& files = Files(ra);
    auto f = files.Find(hashes[0], "repo");
    ASSERT_TRUE(f.ok()) << f.error().message;
    ASSERT_EQ(f->size, mixed.size());
    EXPECT_EQ(ReadAll(files, *f, 0, f->size, 1 << 20), mixed) << "depth " << ra.depth;
    for (int i = 0; i < 40; ++i) {
      uint64_t a = cuts[rng() % cuts.size()] + (rng() % 3) - 1;
      uint64_t b = cuts[rng() % cuts.size()] + (rng() % 3) - 1;
      a = std::min<uint64_t>(a, mixed.size() - 1);
      b = std::min<uint64_t>(std::max<uint64_t>(b, 1), mixed.size());
      if (a >= b) std::swap(a, b);
      if (a == b) continue;
      const Bytes got = ReadAll(files, *f, a, b - a, 1 + rng() % (300 << 10));
      ASSERT_EQ(got,
                Bytes(mixed.begin() + static_cast<ptrdiff_t>(a), mixed.begin() + static_cast<ptrdiff_t>(b)))
          << "bytes " << a << "-" << b << " at depth " << ra.depth << ", unit " << ra.unit_bytes;
    }
  }
  EXPECT_EQ(files_->budget().in_use(), 0U);
}

TEST_F(FileReaderTest, UnitsAreCutAtTheirDecodedSizeToo) {
  // 12 MiB of text in one xorb stores in about half of that: units of 1 MiB stored would each decode to
  // nearly 2 MiB (more for more compressible data), which lent bytes would then keep in memory.
  const Bytes text = xet::testing::TextLikeBytes(9, 12 << 20);
  const auto hashes = Upload({text}, xet::CompressionPolicy::kLz4, 64 << 20);
  ASSERT_EQ(built_.xorbs.size(), 1U);
  ASSERT_LT(built_.xorbs[0].body.size(), text.size() * 3 / 4);
  FileService& files = Files({2, 1 << 20, 64 << 20});
  auto f = files.Find(hashes[0], "repo");
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(ReadAll(files, *f, 0, f->size, 1 << 20), text);
  EXPECT_GE(last_units_, text.size() >> 20);
}

TEST_F(FileReaderTest, SharedChunkRunsAreReadOnce) {
  // The same 600 KiB four times: within-upload dedup makes the later copies terms naming the first one's
  // chunks, so the reader must read those bytes once and send them four times.
  const Bytes block = xet::testing::SplitMix64Bytes(4, 600 << 10);
  Bytes repeated;
  for (int i = 0; i < 4; ++i) repeated.insert(repeated.end(), block.begin(), block.end());
  const auto hashes = Upload({repeated}, xet::CompressionPolicy::kNone);
  ASSERT_GT(built_.shard.files[0].terms.size(), 1U);
  FileService& files = Files({4, 4 << 20, 64 << 20});
  auto f = files.Find(hashes[0], "repo");
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(ReadAll(files, *f, 0, f->size, 64 << 10), repeated);
  EXPECT_EQ(last_fetches_, last_units_) << "a unit was read more than once";
  uint64_t stored = 0;
  for (const auto& x : built_.xorbs) stored += x.body.size();
  EXPECT_LT(stored, repeated.size() / 3);  // dedup happened: the test means something
  // With room for less than the repeated run, bytes are still exact (units dropped and read again).
  FileService& tight = Files({1, 64 << 10, 128 << 10});
  auto g = tight.Find(hashes[0], "repo");
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(ReadAll(tight, *g, 0, g->size, 100 << 10), repeated);
  EXPECT_EQ(tight.budget().in_use(), 0U);
}

TEST_F(FileReaderTest, CorruptStoredChunkIsNeverHandedOut) {
  const Bytes data = xet::testing::SplitMix64Bytes(5, 3 << 20);
  const auto hashes = Upload({data}, xet::CompressionPolicy::kNone);
  // Flip one byte in the middle of the second xorb's chunk region.
  const auto& victim = built_.xorbs[1];
  const fs::path path = store_->PathOf(store::BlobKind::kXorb, victim.hash);
  const uint32_t c = static_cast<uint32_t>(victim.layout.chunks.size() / 2);
  const uint64_t pos = victim.layout.begin_offset(c) + xet::kChunkHeaderSize + 10;
  ASSERT_TRUE(xet::testing::FlipByte(path, pos, 0x40)) << path;
  // Where the bad chunk starts in the file.
  uint64_t bad_at = 0;
  for (const auto& term : built_.shard.files[0].terms) {
    const auto& layout = std::find_if(built_.xorbs.begin(), built_.xorbs.end(), [&](const auto& x) {
                           return x.hash == term.xorb;
                         })->layout;
    for (uint32_t k = term.chunk_start; k < term.chunk_end; ++k) {
      if (term.xorb == victim.hash && k == c) goto found;
      bad_at += layout.chunks[k].unpacked_size;
    }
  }
  FAIL() << "the corrupted chunk is not in the file";
found:
  for (const size_t depth : {size_t{0}, size_t{8}}) {
    FileService& files = Files({depth, 256 << 10, 64 << 20});
    auto f = files.Find(hashes[0], "repo");
    ASSERT_TRUE(f.ok());
    auto reader = files.Open(*f, 0, f->size);
    ASSERT_TRUE(reader.ok());
    Bytes good(bad_at);
    ASSERT_TRUE((*reader)->Read(good).ok());  // everything before the bad chunk is served
    EXPECT_EQ(good, Bytes(data.begin(), data.begin() + static_cast<ptrdiff_t>(bad_at)));
    Bytes one(1);
    auto st = (*reader)->Read(one);
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.error().code, ErrorCode::kDamaged);
    EXPECT_NE(st.error().message.find(victim.hash.hex()), std::string::npos) << st.error().message;
    EXPECT_FALSE((*reader)->Read(one).ok());  // and stays failed
    EXPECT_GE(files.corrupt_chunks(), 1U);
    EXPECT_FALSE(logged_.empty());
    // A range that does not touch the bad chunk is fine.
    EXPECT_EQ(ReadAll(files, *f, 0, bad_at, 1 << 20), good);
  }
}

TEST_F(FileReaderTest, SlowReaderHoldsNoMoreThanItsBudgets) {
  const Bytes data = xet::testing::SplitMix64Bytes(6, 12 << 20);
  const auto hashes = Upload({data}, xet::CompressionPolicy::kNone);
  constexpr uint64_t kUnit = 512 << 10;
  constexpr uint64_t kStream = 2 << 20;
  FileService& files = Files({16, kUnit, kStream}, /*total=*/3 << 20);
  auto f = files.Find(hashes[0], "repo");
  ASSERT_TRUE(f.ok());
  std::vector<std::unique_ptr<FileReader>> readers;
  for (int i = 0; i < 4; ++i) {
    auto r = files.Open(*f, 0, f->size);
    ASSERT_TRUE(r.ok());
    Bytes first(1000);
    ASSERT_TRUE((*r)->Read(first).ok());
    readers.push_back(std::move(*r));
  }
  // The readers stopped there; whatever was in flight lands, and nothing more is fetched.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  // A unit charges its stored and decoded bytes until decoded (None chunks give the decoded part back).
  EXPECT_LE(files.budget().in_use(), (3 << 20) + 4 * 2 * kUnit);
  const size_t fetched = readers[0]->fetches();
  EXPECT_LE(fetched * kUnit, kStream + kUnit) << "read-ahead passed the stream's budget";
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(readers[0]->fetches(), fetched) << "a reader that is not read fetched on";
  readers.clear();
  for (int i = 0; i < 100 && files.budget().in_use() != 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(files.budget().in_use(), 0U) << "readers destroyed mid-fetch gave back what they held";
}

TEST_F(FileReaderTest, LentBytesAreExactAndOutliveTheReader) {
  const Bytes text = xet::testing::TextLikeBytes(7, 3 << 20);  // LZ4 chunks: lent from the decoded buffer
  Bytes data = xet::testing::SplitMix64Bytes(8, 2 << 20);      // None chunks: lent from the stored bytes
  data.insert(data.end(), text.begin(), text.end());
  const auto hashes = Upload({data}, xet::CompressionPolicy::kAuto);
  FileService& files = Files({2, 256 << 10, 64 << 20});
  auto f = files.Find(hashes[0], "repo");
  ASSERT_TRUE(f.ok());
  for (const uint64_t offset : {uint64_t{0}, uint64_t{777}}) {
    auto reader = files.Open(*f, offset, f->size - offset);
    ASSERT_TRUE(reader.ok());
    struct Loan {
      std::shared_ptr<const void> owner;
      std::vector<std::span<const uint8_t>> pieces;
    };
    std::vector<Loan> owners;  // the last few loans, checked when they go (the reader has moved on by then)
    Bytes got;
    const auto check = [&](const Loan& l) {
      for (const auto& p : l.pieces) got.insert(got.end(), p.begin(), p.end());
    };
    std::mt19937_64 rng(offset);
    while ((*reader)->remaining() > 0) {
      const uint64_t n = std::min<uint64_t>(1 + rng() % (1 << 20), (*reader)->remaining());
      Loan l;
      ASSERT_TRUE((*reader)->Lend(n, l.owner, l.pieces).ok());
      uint64_t lent = 0;
      for (const auto& p : l.pieces) lent += p.size();
      ASSERT_EQ(lent, n);
      owners.push_back(std::move(l));
      if (owners.size() > 3) {
        check(owners.front());
        owners.erase(owners.begin());
      }
    }
    // The reader goes first: its budgets are free, and what it lent is still there until its owners go.
    reader->reset();
    for (int i = 0; i < 100 && files.budget().in_use() != 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    EXPECT_EQ(files.budget().in_use(), 0U);
    for (const auto& l : owners) check(l);
    owners.clear();
    EXPECT_EQ(got, Bytes(data.begin() + static_cast<ptrdiff_t>(offset), data.end()));
  }
}

TEST_F(FileReaderTest, LinksGrantOneFileUntilTheyExpire) {
  const auto hashes = Upload({xet::testing::SplitMix64Bytes(7, 1000), xet::testing::SplitMix64Bytes(8, 1000)},
                             xet::CompressionPolicy::kNone);
  FileService& files = Files({});
  auto query = files.links()->Sign(hashes[0], "team/models", 600, "weights v1.bin");
  ASSERT_TRUE(query.ok());
  // Percent-decoded as the server decodes a query.
  const auto decode = [](const std::string& q) {
    std::vector<std::pair<std::string, std::string>> out;
    size_t at = 0;
    while (at <= q.size()) {
      const size_t amp = std::min(q.find('&', at), q.size());
      const std::string item = q.substr(at, amp - at);
      const size_t eq = item.find('=');
      std::string v;
      for (size_t i = eq + 1; i < item.size(); ++i) {
        if (item[i] == '%') {
          v.push_back(static_cast<char>(std::stoi(item.substr(i + 1, 2), nullptr, 16)));
          i += 2;
        } else {
          v.push_back(item[i]);
        }
      }
      out.emplace_back(item.substr(0, eq), v);
      at = amp + 1;
    }
    return out;
  };
  auto params = decode(query->query);
  auto grant = files.links()->Verify(hashes[0], params);
  ASSERT_TRUE(grant.ok()) << grant.error().message;
  EXPECT_EQ(grant->scope, "team/models");
  EXPECT_EQ(grant->name, "weights v1.bin");
  EXPECT_EQ(files.links()->Verify(hashes[1], params).error().code,
            ErrorCode::kDenied);  // another file
  for (auto& [k, v] : params) {
    auto tampered = params;
    for (auto& [k2, v2] : tampered)
      if (k2 == k) v2 += k == "x" ? "1" : "x";
    EXPECT_FALSE(files.links()->Verify(hashes[0], tampered).ok()) << "changed " << k;
  }
  clock_.Advance(600);
  EXPECT_EQ(files.links()->Verify(hashes[0], params).error().code, ErrorCode::kDenied);  // expired
  EXPECT_EQ(files.links()->Sign(hashes[0], "s", 0, "").error().code, ErrorCode::kLimit);
  EXPECT_EQ(files.links()->Sign(hashes[0], "s", 60, "a/b").error().code, ErrorCode::kMalformed);
  EXPECT_EQ(files.links()->Verify(hashes[0], {{"x", "1"}}).error().code, ErrorCode::kMalformed);
}

// Links name the URL key that signed them; a rotation keeps old links working until their key is retired.
TEST_F(FileReaderTest, LinksFollowUrlKeyRotation) {
  const auto hashes = Upload({xet::testing::SplitMix64Bytes(9, 1000)}, xet::CompressionPolicy::kNone);
  FileService& files = Files({});
  const auto params = [](const std::string& q) {
    std::vector<std::pair<std::string, std::string>> out;
    for (size_t at = 0; at <= q.size();) {
      const size_t amp = std::min(q.find('&', at), q.size());
      const std::string item = q.substr(at, amp - at);
      out.emplace_back(item.substr(0, item.find('=')), item.substr(item.find('=') + 1));
      at = amp + 1;
    }
    return out;
  };
  const std::string before = files.links()->Sign(hashes[0], "s", 600, "")->query;
  EXPECT_EQ(before.find("k="), std::string::npos);  // the legacy key names none
  xet::Hash legacy;
  legacy.bytes.fill(7);  // the fixture's key
  xet::Hash next;
  next.bytes.fill(8);
  files.SetUrlKeys(*cas::UrlKeys::Make({{"legacy", legacy}, {"k2", next}}, "k2"));
  const std::string after = files.links()->Sign(hashes[0], "s", 600, "")->query;
  EXPECT_NE(after.find("&k=k2&s="), std::string::npos) << after;
  EXPECT_TRUE(files.links()->Verify(hashes[0], params(before)).ok());
  EXPECT_TRUE(files.links()->Verify(hashes[0], params(after)).ok());
  files.SetUrlKeys(*cas::UrlKeys::Make({{"k2", next}}, "k2"));
  EXPECT_EQ(files.links()->Verify(hashes[0], params(before)).error().code, ErrorCode::kDenied);
  EXPECT_TRUE(files.links()->Verify(hashes[0], params(after)).ok());
  auto renamed = params(after);
  for (auto& [k, v] : renamed)
    if (k == "k") v = "k3";
  EXPECT_EQ(files.links()->Verify(hashes[0], renamed).error().code, ErrorCode::kDenied);
}

}  // namespace
}  // namespace cairn::files
