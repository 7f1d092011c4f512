// The BlobStore contract, checked for every implementation through one typed suite, then the local store's
// own promises: layout, temporary files, crash leftovers and injected faults.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <filesystem>
#include <numeric>
#include <random>
#include <set>
#include <span>
#include <thread>
#include <type_traits>

#include "common/posix_io.h"
#include "common/unique_fd.h"
#include "store/local_disk_store.h"
#include "store/memory_store.h"
#include "store/s3_store.h"
#include "store/seaweedfs_cluster.h"
#include "store/store_copy.h"

namespace cairn::store {
namespace {

namespace fs = std::filesystem;
using xet::Hash;

Hash HashOf(uint8_t seed) {
  Hash h;
  std::iota(h.bytes.begin(), h.bytes.end(), seed);
  return h;
}

std::vector<uint8_t> Bytes(size_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  std::mt19937 rng(seed);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

// A fresh directory per test; removed afterwards. Unique per process and test so ctest -j is safe.
class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name =
        "cairn-store-" + std::to_string(::getpid()) + "-" + info->test_suite_name() + "-" + info->name();
    std::replace(name.begin(), name.end(), '/', '_');  // typed and parameterized names hold '/'
    path_ = fs::temp_directory_path() / name;
    fs::remove_all(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

std::vector<std::string> TempFilesUnder(const fs::path& root) {
  std::vector<std::string> out;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(root, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (it->path().filename().string().starts_with(".tmp.")) out.push_back(it->path().string());
  }
  return out;
}

// ---- Implementations under test

struct MemoryFactory {
  std::unique_ptr<MemoryStore> Make() { return std::make_unique<MemoryStore>(); }
  static void Corrupt(BlobStore& s, BlobKind k, const Hash& h, std::vector<uint8_t> b) {
    dynamic_cast<MemoryStore&>(s).OverwriteForTest(k, h, std::move(b));
  }
};

template <bool kTmpFile>
struct DiskFactory {
  TempDir dir;
  std::unique_ptr<LocalDiskStore> Make() {
    auto s = LocalDiskStore::Open(dir.path(), {.use_o_tmpfile = kTmpFile, .fault_injector = {}});
    EXPECT_TRUE(s.ok()) << s.error().message;
    return std::move(s).value();
  }
  static void Corrupt(BlobStore& s, BlobKind k, const Hash& h, const std::vector<uint8_t>& b) {
    // In place, as media corruption would be (not through a rename).
    const fs::path p = dynamic_cast<LocalDiskStore&>(s).PathOf(k, h);
    const int fd = ::open(p.c_str(), O_WRONLY | O_TRUNC);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::write(fd, b.data(), b.size()), static_cast<ssize_t>(b.size()));
    ::close(fd);
  }
};

// One SeaweedFS server and bucket for the whole program (started at the first S3 test), a key prefix per
// test (SeaweedFS gives every bucket volumes of its own: a bucket per test would exhaust a small server).
constexpr char kBucket[] = "cairn-store-test";

testing::SeaweedCluster& Seaweed() {
  static const std::unique_ptr<testing::SeaweedCluster> cluster = [] {
    auto c = testing::SeaweedCluster::Start("store-test");
    if (!c.ok()) {
      ADD_FAILURE() << "SeaweedFS: " << c.error().message;
      return std::unique_ptr<testing::SeaweedCluster>();
    }
    if (auto made = (*c)->CreateBucket(kBucket); !made.ok()) {
      ADD_FAILURE() << made.error().message;
      return std::unique_ptr<testing::SeaweedCluster>();
    }
    return std::move(c).value();
  }();
  if (cluster == nullptr) std::abort();  // reported above; nothing can run without it
  return *cluster;
}

struct S3Factory {
  std::unique_ptr<S3Store> Make() {
    static std::atomic<int> n{0};
    S3StoreOptions o;
    o.s3 = Seaweed().Options(kBucket);
    o.prefix = "test" + std::to_string(n++) + "/";
    o.part_bytes = 5ULL << 20;  // the smallest S3 allows: multipart uploads from 5 MiB on
    auto s = S3Store::Open(o);
    EXPECT_TRUE(s.ok()) << s.error().message;
    return std::move(s).value();
  }
  static void Corrupt(BlobStore& s, BlobKind k, const Hash& h, const std::vector<uint8_t>& b) {
    // Straight into the bucket, unconditionally, as a torn or rotten object would be there.
    auto& store = dynamic_cast<S3Store&>(s);
    S3Request req;
    req.method = "PUT";
    req.key = store.KeyOf(k, h);
    req.body = b;
    auto res = store.client().Send(req);
    ASSERT_TRUE(res.ok()) << res.error().message;
    ASSERT_EQ(res->status, 200);
  }
};

template <typename Factory>
class BlobStoreTest : public ::testing::Test {
 protected:
  BlobStoreTest() : store_(factory_.Make()) {}
  Factory factory_;
  std::unique_ptr<BlobStore> store_;
};

using Implementations = ::testing::Types<MemoryFactory, DiskFactory<false>, DiskFactory<true>, S3Factory>;
TYPED_TEST_SUITE(BlobStoreTest, Implementations);

TYPED_TEST(BlobStoreTest, PutThenStatAndRead) {
  const auto data = Bytes(100'000, 1);
  auto put = this->store_->Put(BlobKind::kXorb, HashOf(1), data);
  ASSERT_TRUE(put.ok()) << put.error().message;
  EXPECT_FALSE(put->already_present);
  auto st = this->store_->Stat(BlobKind::kXorb, HashOf(1));
  ASSERT_TRUE(st.ok());
  EXPECT_TRUE(st->exists);
  EXPECT_EQ(st->size, data.size());
  std::vector<uint8_t> out(data.size());
  ASSERT_TRUE(this->store_->ReadRange(BlobKind::kXorb, HashOf(1), 0, out).ok());
  EXPECT_EQ(out, data);
  // Kinds are separate name spaces.
  EXPECT_FALSE(this->store_->Stat(BlobKind::kShard, HashOf(1))->exists);
}

TYPED_TEST(BlobStoreTest, RangesAtTheEdges) {
  const auto data = Bytes(4096, 2);
  ASSERT_TRUE(this->store_->Put(BlobKind::kShard, HashOf(2), data).ok());
  struct Case {
    uint64_t offset;
    size_t len;
  };
  for (const Case c :
       {Case{0, 1}, Case{4095, 1}, Case{1, 4095}, Case{4096, 0}, Case{0, 0}, Case{2048, 2048}}) {
    std::vector<uint8_t> out(c.len);
    auto st = this->store_->ReadRange(BlobKind::kShard, HashOf(2), c.offset, out);
    ASSERT_TRUE(st.ok()) << c.offset << "+" << c.len << ": " << st.error().message;
    EXPECT_TRUE(std::equal(out.begin(), out.end(), data.begin() + static_cast<ptrdiff_t>(c.offset)));
  }
  for (const Case c : {Case{4096, 1}, Case{4095, 2}, Case{0, 4097}, Case{4097, 0}, Case{UINT64_MAX, 1}}) {
    std::vector<uint8_t> out(c.len);
    auto st = this->store_->ReadRange(BlobKind::kShard, HashOf(2), c.offset, out);
    ASSERT_FALSE(st.ok()) << c.offset << "+" << c.len;
    EXPECT_EQ(st.error().code, ErrorCode::kInconsistent);
  }
  std::vector<uint8_t> out(1);
  auto missing = this->store_->ReadRange(BlobKind::kShard, HashOf(3), 0, out);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
}

// A put's readable descriptor, where the store gives one, reads back exactly what was appended while the put
// is open, and also after Commit through a duplicate; without one (-1) the store keeps the put elsewhere.
TYPED_TEST(BlobStoreTest, AnOpenPutReadsBackWhatWasAppendedWhereTheStoreGivesAFile) {
  const auto data = Bytes(300'000, 9);
  auto w = this->store_->BeginPut(BlobKind::kXorb, HashOf(9));
  ASSERT_TRUE(w.ok()) << w.error().message;
  ASSERT_TRUE((*w)->Append(std::span(data).first(1000)).ok());
  const int fd = (*w)->ReadableFd();
  const bool has_file =
      std::is_same_v<TypeParam, DiskFactory<false>> || std::is_same_v<TypeParam, DiskFactory<true>>;
  ASSERT_EQ(fd >= 0, has_file);
  UniqueFd kept;
  if (fd >= 0) {
    std::vector<uint8_t> head(1000);
    ASSERT_EQ(PreadFull(fd, 0, head), 0);
    EXPECT_TRUE(std::equal(head.begin(), head.end(), data.begin()));
    kept = UniqueFd(::fcntl(fd, F_DUPFD_CLOEXEC, 0));
  }
  ASSERT_TRUE((*w)->Append(std::span(data).subspan(1000)).ok());
  ASSERT_TRUE((*w)->Commit().ok());
  EXPECT_EQ((*w)->ReadableFd(), -1);  // committed: the put is over
  if (kept.valid()) {
    std::vector<uint8_t> all(data.size());
    ASSERT_EQ(PreadFull(kept.get(), 0, all), 0);
    EXPECT_EQ(all, data);
  }
  std::vector<uint8_t> out(data.size());
  ASSERT_TRUE(this->store_->ReadRange(BlobKind::kXorb, HashOf(9), 0, out).ok());
  EXPECT_EQ(out, data);
}

TYPED_TEST(BlobStoreTest, StreamingPutInPieces) {
  const auto data = Bytes(1 << 20, 3);
  auto w = this->store_->BeginPut(BlobKind::kXorb, HashOf(3));
  ASSERT_TRUE(w.ok());
  for (size_t off = 0; off < data.size(); off += 77'777) {
    const size_t n = std::min<size_t>(77'777, data.size() - off);
    ASSERT_TRUE((*w)->Append(std::span(data).subspan(off, n)).ok());
    // Nothing is visible before Commit.
    EXPECT_FALSE(this->store_->Stat(BlobKind::kXorb, HashOf(3))->exists);
  }
  EXPECT_EQ((*w)->bytes_appended(), data.size());
  ASSERT_TRUE((*w)->Commit().ok());
  EXPECT_FALSE((*w)->Append(data).ok());  // the writer is spent
  std::vector<uint8_t> out(data.size());
  ASSERT_TRUE(this->store_->ReadRange(BlobKind::kXorb, HashOf(3), 0, out).ok());
  EXPECT_EQ(out, data);
}

TYPED_TEST(BlobStoreTest, MultiPiecePutAndEmptyBlob) {
  const auto a = Bytes(10, 4), b = Bytes(0, 5), c = Bytes(20, 6);
  const std::span<const uint8_t> pieces[] = {a, b, c};
  ASSERT_TRUE(this->store_->Put(BlobKind::kXorb, HashOf(4), pieces).ok());
  std::vector<uint8_t> out(30);
  ASSERT_TRUE(this->store_->ReadRange(BlobKind::kXorb, HashOf(4), 0, out).ok());
  EXPECT_TRUE(std::equal(a.begin(), a.end(), out.begin()));
  EXPECT_TRUE(std::equal(c.begin(), c.end(), out.begin() + 10));

  ASSERT_TRUE(this->store_->Put(BlobKind::kShard, HashOf(5), std::span<const uint8_t>()).ok());
  auto st = this->store_->Stat(BlobKind::kShard, HashOf(5));
  EXPECT_TRUE(st->exists);
  EXPECT_EQ(st->size, 0u);
  auto again = this->store_->Put(BlobKind::kShard, HashOf(5), std::span<const uint8_t>());
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->already_present);
}

TYPED_TEST(BlobStoreTest, AbandonedPutLeavesNothing) {
  {
    auto w = this->store_->BeginPut(BlobKind::kXorb, HashOf(6));
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->Append(Bytes(5000, 7)).ok());
  }
  EXPECT_FALSE(this->store_->Stat(BlobKind::kXorb, HashOf(6))->exists);
  int n = 0;
  ASSERT_TRUE(this->store_->List(BlobKind::kXorb, [&](const Hash&) { ++n; }).ok());
  EXPECT_EQ(n, 0);
}

TYPED_TEST(BlobStoreTest, ExistingIntactBlobIsKept) {
  const auto data = Bytes(3000, 8);
  ASSERT_TRUE(this->store_->Put(BlobKind::kXorb, HashOf(7), data).ok());
  auto again = this->store_->Put(BlobKind::kXorb, HashOf(7), data);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->already_present);
  EXPECT_FALSE(again->replaced_corrupt);
}

TYPED_TEST(BlobStoreTest, CorruptOrTornBlobIsReplaced) {
  const auto data = Bytes(3000, 9);
  ASSERT_TRUE(this->store_->Put(BlobKind::kXorb, HashOf(8), data).ok());
  auto flipped = data;
  flipped[1234] ^= 1;
  const std::vector<uint8_t> torn(data.begin(), data.begin() + 1000);
  for (const auto& bad : {flipped, torn}) {
    TypeParam::Corrupt(*this->store_, BlobKind::kXorb, HashOf(8), bad);
    auto put = this->store_->Put(BlobKind::kXorb, HashOf(8), data);
    ASSERT_TRUE(put.ok()) << put.error().message;
    EXPECT_FALSE(put->already_present);
    EXPECT_TRUE(put->replaced_corrupt);
    std::vector<uint8_t> out(data.size());
    ASSERT_TRUE(this->store_->ReadRange(BlobKind::kXorb, HashOf(8), 0, out).ok());
    EXPECT_EQ(out, data);
  }
}

TYPED_TEST(BlobStoreTest, CallerVerifierJudgesExistingBlob) {
  const auto data = Bytes(2000, 10);
  ASSERT_TRUE(this->store_->Put(BlobKind::kXorb, HashOf(9), data).ok());
  int calls = 0;
  PutOptions trust{.verify_existing = [&](std::span<const uint8_t> existing) {
    ++calls;
    return std::equal(existing.begin(), existing.end(), data.begin(), data.end());
  }};
  auto put = this->store_->Put(BlobKind::kXorb, HashOf(9), data, trust);
  ASSERT_TRUE(put.ok());
  EXPECT_TRUE(put->already_present);
  EXPECT_EQ(calls, 1);
  PutOptions distrust{.verify_existing = [](std::span<const uint8_t>) { return false; }};
  put = this->store_->Put(BlobKind::kXorb, HashOf(9), data, distrust);
  ASSERT_TRUE(put.ok());
  EXPECT_TRUE(put->replaced_corrupt);
}

TYPED_TEST(BlobStoreTest, OpenForReadGivesTheSizeAndWhereLocalADescriptor) {
  const auto data = Bytes(70'000, 11);
  ASSERT_TRUE(this->store_->Put(BlobKind::kShard, HashOf(10), data).ok());
  auto blob = this->store_->OpenForRead(BlobKind::kShard, HashOf(10));
  ASSERT_TRUE(blob.ok()) << blob.error().message;
  EXPECT_EQ(blob->size, data.size());
  EXPECT_EQ(this->store_->OpenForRead(BlobKind::kShard, HashOf(11)).error().code, ErrorCode::kNotFound);
  if (!blob->fd.valid()) {
    EXPECT_NE(dynamic_cast<S3Store*>(this->store_.get()), nullptr) << "only S3 has no files to give";
    return;
  }
  std::vector<uint8_t> out(data.size());
  ASSERT_EQ(::pread(blob->fd.get(), out.data(), out.size(), 0), static_cast<ssize_t>(out.size()));
  EXPECT_EQ(out, data);
  EXPECT_LT(::write(blob->fd.get(), "x", 1), 0);  // read-only
}

// Blobs larger than an S3 part go up as multipart uploads, part by part as they are appended; the bytes and
// the verdict on an existing blob are the same as for a small one.
TYPED_TEST(BlobStoreTest, LargeBlobInUnevenPieces) {
  const auto data = Bytes((12 << 20) + 12345, 13);
  auto w = this->store_->BeginPut(BlobKind::kXorb, HashOf(13));
  ASSERT_TRUE(w.ok());
  std::mt19937 rng(13);
  for (size_t off = 0; off < data.size();) {
    const size_t n = std::min<size_t>(1 + rng() % (3 << 20), data.size() - off);
    ASSERT_TRUE((*w)->Append(std::span(data).subspan(off, n)).ok());
    EXPECT_FALSE(this->store_->Stat(BlobKind::kXorb, HashOf(13))->exists);
    off += n;
  }
  auto put = (*w)->Commit();
  ASSERT_TRUE(put.ok()) << put.error().message;
  EXPECT_FALSE(put->already_present);
  std::vector<uint8_t> out(data.size());
  ASSERT_TRUE(this->store_->ReadRange(BlobKind::kXorb, HashOf(13), 0, out).ok());
  EXPECT_EQ(out, data);
  std::vector<uint8_t> middle(1 << 20);
  ASSERT_TRUE(this->store_->ReadRange(BlobKind::kXorb, HashOf(13), 7'000'000, middle).ok());
  EXPECT_TRUE(std::equal(middle.begin(), middle.end(), data.begin() + 7'000'000));

  auto again = this->store_->Put(BlobKind::kXorb, HashOf(13), data);
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_TRUE(again->already_present);
  auto changed = data;
  changed.back() ^= 1;
  auto differs = this->store_->Put(BlobKind::kXorb, HashOf(13), changed);
  ASSERT_TRUE(differs.ok()) << differs.error().message;
  EXPECT_TRUE(differs->replaced_corrupt);
}

// A range read in order through OpenRange (one GET on S3) gives the same bytes as ReadRange, whatever the
// pieces; reading past the range, a range past the blob's end and a missing blob are errors.
TYPED_TEST(BlobStoreTest, RangeReadersReadInOrder) {
  const auto data = Bytes((3 << 20) + 321, 14);
  ASSERT_TRUE(this->store_->Put(BlobKind::kXorb, HashOf(14), data).ok());
  const uint64_t offset = 1000, length = (2 << 20) + 77;
  auto reader = this->store_->OpenRange(BlobKind::kXorb, HashOf(14), offset, length);
  std::vector<uint8_t> out(length);
  const size_t pieces[] = {1, 4095, 1 << 20, 70000};
  for (size_t at = 0, i = 0; at < length; ++i) {
    const size_t n = std::min<size_t>(pieces[i % 4], length - at);
    auto st = reader->Read(std::span(out).subspan(at, n));
    ASSERT_TRUE(st.ok()) << st.error().message;
    at += n;
  }
  EXPECT_TRUE(std::equal(out.begin(), out.end(), data.begin() + offset));
  uint8_t more = 0;
  EXPECT_EQ(reader->Read({&more, 1}).error().code, ErrorCode::kInconsistent);

  std::vector<uint8_t> tail(100);
  auto past_end = this->store_->OpenRange(BlobKind::kXorb, HashOf(14), data.size() - 10, tail.size());
  EXPECT_EQ(past_end->Read(tail).error().code, ErrorCode::kInconsistent);
  auto beyond = this->store_->OpenRange(BlobKind::kXorb, HashOf(14), data.size() + 5, tail.size());
  EXPECT_EQ(beyond->Read(tail).error().code, ErrorCode::kInconsistent);
  auto missing = this->store_->OpenRange(BlobKind::kXorb, HashOf(15), 0, tail.size());
  EXPECT_EQ(missing->Read(tail).error().code, ErrorCode::kNotFound);

  // A reader dropped part way leaves the store usable (on S3 its connection is closed, not reused
  // mid-answer).
  {
    auto dropped = this->store_->OpenRange(BlobKind::kXorb, HashOf(14), 0, data.size());
    ASSERT_TRUE(dropped->Read({&more, 1}).ok());
    EXPECT_EQ(more, data[0]);
  }
  std::vector<uint8_t> all(data.size());
  ASSERT_TRUE(this->store_->ReadRange(BlobKind::kXorb, HashOf(14), 0, all).ok());
  EXPECT_EQ(all, data);
}

TYPED_TEST(BlobStoreTest, ListAndDelete) {
  for (uint8_t i = 0; i < 20; ++i)
    ASSERT_TRUE(this->store_->Put(BlobKind::kXorb, HashOf(i), Bytes(10, i)).ok());
  ASSERT_TRUE(this->store_->Put(BlobKind::kShard, HashOf(100), Bytes(10, 0)).ok());
  std::set<Hash> listed;
  ASSERT_TRUE(this->store_->List(BlobKind::kXorb, [&](const Hash& h) { listed.insert(h); }).ok());
  EXPECT_EQ(listed.size(), 20u);
  EXPECT_TRUE(listed.contains(HashOf(19)));
  EXPECT_TRUE(*this->store_->Delete(BlobKind::kXorb, HashOf(3)));
  EXPECT_FALSE(*this->store_->Delete(BlobKind::kXorb, HashOf(3)));
  EXPECT_FALSE(this->store_->Stat(BlobKind::kXorb, HashOf(3))->exists);
  listed.clear();
  ASSERT_TRUE(this->store_->List(BlobKind::kXorb, [&](const Hash& h) { listed.insert(h); }).ok());
  EXPECT_EQ(listed.size(), 19u);
}

// Many at once (S3: one DeleteObjects request per 1,000): unknown ones are no error, other kinds untouched.
TYPED_TEST(BlobStoreTest, DeleteManyRemovesEachGivenBlob) {
  const auto nth = [](unsigned i) {
    Hash h = HashOf(static_cast<uint8_t>(i % 256));
    h.bytes[1] = static_cast<uint8_t>(i / 256);
    return h;
  };
  const Hash kept = nth(2000);
  std::vector<Hash> doomed;
  for (unsigned i = 0; i < 1100; ++i) {
    const Hash h = nth(i);
    if (i % 3 != 0) {
      ASSERT_TRUE(this->store_->Put(BlobKind::kXorb, h, Bytes(8, 1)).ok());
    }
    doomed.push_back(h);  // every third was never stored
  }
  ASSERT_TRUE(this->store_->Put(BlobKind::kXorb, kept, Bytes(8, 2)).ok());
  ASSERT_TRUE(this->store_->Put(BlobKind::kShard, doomed[1], Bytes(8, 3)).ok());  // same hash, other kind
  auto st = this->store_->DeleteMany(BlobKind::kXorb, doomed);
  ASSERT_TRUE(st.ok()) << st.error().message;
  for (const Hash& h : doomed) {
    EXPECT_FALSE(this->store_->Stat(BlobKind::kXorb, h)->exists) << h.hex();
  }
  EXPECT_TRUE(this->store_->Stat(BlobKind::kXorb, kept)->exists);
  EXPECT_TRUE(this->store_->Stat(BlobKind::kShard, doomed[1])->exists);
  std::set<Hash> listed;
  ASSERT_TRUE(this->store_->List(BlobKind::kXorb, [&](const Hash& h) { listed.insert(h); }).ok());
  EXPECT_EQ(listed, std::set<Hash>{kept});
}

TYPED_TEST(BlobStoreTest, ConcurrentPutsOfOneHashAllSucceed) {
  const auto data = Bytes(200'000, 12);
  std::atomic<int> fresh{0}, failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      auto put = this->store_->Put(BlobKind::kXorb, HashOf(12), data);
      if (!put.ok()) {
        ++failures;
      } else if (!put->already_present) {
        ++fresh;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_GE(fresh.load(), 1);
  std::vector<uint8_t> out(data.size());
  ASSERT_TRUE(this->store_->ReadRange(BlobKind::kXorb, HashOf(12), 0, out).ok());
  EXPECT_EQ(out, data);
}

// ---- LocalDiskStore only

class LocalDiskStoreTest : public ::testing::TestWithParam<bool> {
 protected:
  std::unique_ptr<LocalDiskStore> Open(LocalDiskOptions options = {}) {
    options.use_o_tmpfile = GetParam();
    auto s = LocalDiskStore::Open(dir_.path(), std::move(options));
    EXPECT_TRUE(s.ok()) << s.error().message;
    return s.ok() ? std::move(s).value() : nullptr;
  }
  TempDir dir_;
};

INSTANTIATE_TEST_SUITE_P(TmpFile, LocalDiskStoreTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& p) {
                           return p.param ? "OTmpfile" : "NamedTemp";
                         });

TEST_P(LocalDiskStoreTest, HashPrefixLayoutAndNoTempFiles) {
  auto store = Open();
  const Hash h = HashOf(0xab);
  ASSERT_TRUE(store->Put(BlobKind::kXorb, h, Bytes(100, 1)).ok());
  ASSERT_TRUE(store->Put(BlobKind::kShard, h, Bytes(100, 1)).ok());
  const std::string hex = h.hex();
  EXPECT_TRUE(fs::is_regular_file(dir_.path() / "xorbs" / hex.substr(0, 2) / hex.substr(2, 2) / hex));
  EXPECT_TRUE(fs::is_regular_file(dir_.path() / "shards" / hex.substr(0, 2) / hex.substr(2, 2) / hex));
  EXPECT_EQ(store->PathOf(BlobKind::kXorb, h),
            dir_.path() / "xorbs" / hex.substr(0, 2) / hex.substr(2, 2) / hex);
  EXPECT_TRUE(TempFilesUnder(dir_.path()).empty());
  if (GetParam()) {
    EXPECT_TRUE(store->using_o_tmpfile());  // tmpfs, ext4 and xfs support it; tests run on those
  }
}

TEST_P(LocalDiskStoreTest, OpenRemovesCrashLeftovers) {
  auto store = Open();
  ASSERT_TRUE(store->Put(BlobKind::kXorb, HashOf(1), Bytes(100, 1)).ok());
  const fs::path dir = store->PathOf(BlobKind::kXorb, HashOf(1)).parent_path();
  for (const char* name : {".tmp.deadbeef.1.2", ".tmp.x"}) {
    std::FILE* f = std::fopen((dir / name).c_str(), "w");
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(std::fclose(f), 0);
  }
  // A leftover is never listed as a blob.
  int n = 0;
  ASSERT_TRUE(store->List(BlobKind::kXorb, [&](const Hash&) { ++n; }).ok());
  EXPECT_EQ(n, 1);
  store.reset();
  store = Open();
  EXPECT_TRUE(TempFilesUnder(dir_.path()).empty());
  EXPECT_TRUE(store->Stat(BlobKind::kXorb, HashOf(1))->exists);
}

TEST_P(LocalDiskStoreTest, PersistsAcrossReopen) {
  const auto data = Bytes(12345, 2);
  ASSERT_TRUE(Open()->Put(BlobKind::kShard, HashOf(2), data).ok());
  auto store = Open();
  std::vector<uint8_t> out(data.size());
  ASSERT_TRUE(store->ReadRange(BlobKind::kShard, HashOf(2), 0, out).ok());
  EXPECT_EQ(out, data);
}

// A fault at any step fails the put and leaves no blob (and no temporary file) behind; an intact earlier
// blob is untouched.
TEST_P(LocalDiskStoreTest, InjectedFaultAtEveryStepLeavesNoObject) {
  std::optional<PutStep> fail_at;
  auto store = Open({.fault_injector = [&](const PutStepInfo& s) -> Status {
    if (fail_at == s.step) return IoError("injected");
    return Ok{};
  }});
  const auto data = Bytes(50'000, 3);
  const auto other = Bytes(50'000, 4);
  ASSERT_TRUE(store->Put(BlobKind::kXorb, HashOf(50), other).ok());
  for (PutStep step : {PutStep::kCreate, PutStep::kWrite, PutStep::kFsyncFile, PutStep::kLink}) {
    fail_at = step;
    auto put = store->Put(BlobKind::kXorb, HashOf(3), data);
    ASSERT_FALSE(put.ok()) << static_cast<int>(step);
    EXPECT_EQ(put.error().code, ErrorCode::kIo);
    EXPECT_FALSE(store->Stat(BlobKind::kXorb, HashOf(3))->exists) << static_cast<int>(step);
    EXPECT_TRUE(TempFilesUnder(dir_.path()).empty()) << static_cast<int>(step);
    // Replacing a corrupt blob: the failed put leaves the old bytes, never a mix.
    DiskFactory<true>::Corrupt(*store, BlobKind::kXorb, HashOf(50), Bytes(50'000, 5));
    put = store->Put(BlobKind::kXorb, HashOf(50), other);
    ASSERT_FALSE(put.ok());
    std::vector<uint8_t> out(other.size());
    ASSERT_TRUE(store->ReadRange(BlobKind::kXorb, HashOf(50), 0, out).ok());
    EXPECT_EQ(out, Bytes(50'000, 5));
    fail_at.reset();
    ASSERT_TRUE(store->Put(BlobKind::kXorb, HashOf(50), other)->replaced_corrupt);
  }
  // A failed directory sync comes after the blob got its name: the put fails, and what is visible (if
  // anything) is complete.
  fail_at = PutStep::kFsyncDir;
  EXPECT_FALSE(store->Put(BlobKind::kXorb, HashOf(3), data).ok());
  EXPECT_TRUE(TempFilesUnder(dir_.path()).empty());
  fail_at.reset();
  auto st = store->Stat(BlobKind::kXorb, HashOf(3));
  if (st->exists) {
    std::vector<uint8_t> out(data.size());
    ASSERT_TRUE(store->ReadRange(BlobKind::kXorb, HashOf(3), 0, out).ok());
    EXPECT_EQ(out, data);
  }
}

// A flusher flushes what was appended so far, from another thread while appends go on; committing gives the
// whole blob. A failed flush fails the put: nothing becomes visible and no temporary file stays, even though
// the writer's own fsync at Commit would succeed.
TEST_P(LocalDiskStoreTest, FlusherBehindTheWriter) {
  std::atomic<bool> fail_flush = false;
  std::atomic<int> flushes = 0;
  auto store = Open({.fault_injector = [&](const PutStepInfo& s) -> Status {
    if (s.step != PutStep::kFsyncFile) return Ok{};
    ++flushes;
    if (fail_flush) return IoError("injected");
    return Ok{};
  }});
  const auto piece = Bytes(40'000, 6);
  {
    auto w = store->BeginPut(BlobKind::kXorb, HashOf(6));
    ASSERT_TRUE(w.ok());
    auto flusher = (*w)->NewFlusher();
    ASSERT_NE(flusher, nullptr);
    std::atomic<bool> done = false;
    std::thread flushing([&] {
      do {  // at least once, whenever the appends end
        ASSERT_TRUE(flusher->Flush().ok());
      } while (!done);
    });
    for (int i = 0; i < 50; ++i) ASSERT_TRUE((*w)->Append(piece).ok());
    done = true;
    flushing.join();
    ASSERT_TRUE((*w)->Commit().ok());
  }
  EXPECT_GE(flushes.load(), 2);  // the flusher's and Commit's
  std::vector<uint8_t> out(piece.size() * 50);
  ASSERT_TRUE(store->ReadRange(BlobKind::kXorb, HashOf(6), 0, out).ok());
  for (size_t i = 0; i < 50; ++i) {
    ASSERT_TRUE(
        std::equal(piece.begin(), piece.end(), out.begin() + static_cast<ptrdiff_t>(i * piece.size())));
  }

  {
    auto w = store->BeginPut(BlobKind::kXorb, HashOf(8));
    ASSERT_TRUE(w.ok());
    auto flusher = (*w)->NewFlusher();
    ASSERT_TRUE((*w)->Append(piece).ok());
    fail_flush = true;
    EXPECT_EQ(flusher->Flush().error().code, ErrorCode::kIo);
    fail_flush = false;  // the writer's own fsync would succeed now
    ASSERT_TRUE((*w)->Append(piece).ok());
    auto committed = (*w)->Commit();
    ASSERT_FALSE(committed.ok());
    EXPECT_NE(committed.error().message.find("earlier flush"), std::string::npos);
  }
  EXPECT_FALSE(store->Stat(BlobKind::kXorb, HashOf(8))->exists);
  EXPECT_TRUE(TempFilesUnder(dir_.path()).empty());
}

// A real write failure from the kernel: a file size limit makes write(2) fail with EFBIG mid-put.
TEST_P(LocalDiskStoreTest, WriteFailureFromTheKernelLeavesNoObject) {
  auto store = Open();
  rlimit old{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
  auto* old_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit tiny = old;
  tiny.rlim_cur = 64 * 1024;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &tiny), 0);
  auto put = store->Put(BlobKind::kXorb, HashOf(4), Bytes(1 << 20, 4));
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &old), 0);
  (void)std::signal(SIGXFSZ, old_handler);
  ASSERT_FALSE(put.ok());
  EXPECT_EQ(put.error().code, ErrorCode::kIo);
  EXPECT_NE(put.error().message.find("write"), std::string::npos) << put.error().message;
  EXPECT_FALSE(store->Stat(BlobKind::kXorb, HashOf(4))->exists);
  EXPECT_TRUE(TempFilesUnder(dir_.path()).empty());
}

TEST(LocalDiskStoreOpenTest, FailsOnAnUnusableRoot) {
  TempDir dir;
  ASSERT_TRUE(fs::create_directories(dir.path()));
  std::FILE* f = std::fopen((dir.path() / "file").c_str(), "w");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(std::fclose(f), 0);
  auto s = LocalDiskStore::Open(dir.path() / "file");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, ErrorCode::kIo);
}

// Presigned URLs name the store as clients reach it (s3_public_endpoint), and the store honours them.
TEST(S3StoreTest, PresignedUrlsNameThePublicEndpoint) {
  S3StoreOptions o;
  o.s3 = Seaweed().Options(kBucket);
  o.prefix = "presign/";
  o.public_endpoint = "https://s3.example.org";
  auto s = S3Store::Open(o);
  ASSERT_TRUE(s.ok()) << s.error().message;
  const std::string url = (*s)->PresignedUrl(BlobKind::kXorb, HashOf(1), 1700000000, 1700000060, "0-9");
  EXPECT_TRUE(url.starts_with("https://s3.example.org/" + std::string(kBucket) + "/presign/xorbs/" +
                              HashOf(1).hex() + "?X-Amz-Algorithm=AWS4-HMAC-SHA256&"))
      << url;
  o.public_endpoint.clear();
  auto direct = S3Store::Open(o);
  ASSERT_TRUE(direct.ok());
  EXPECT_TRUE(
      (*direct)->PresignedUrl(BlobKind::kXorb, HashOf(1), 1, 2, "").starts_with(Seaweed().endpoint()));
}

// More readers than connections: a reader that finds every stream connection held by another (which holds it
// between its reads, waiting for its own client) reads with a GET per read instead of waiting, so one reader
// never waits on another; both see the right bytes.
TEST(S3StoreTest, MoreRangeReadersThanConnectionsDoNotWaitOnEachOther) {
  S3StoreOptions o;
  o.s3 = Seaweed().Options(kBucket);
  o.s3.max_connections = 1;
  o.prefix = "readers/";
  auto s = S3Store::Open(o);
  ASSERT_TRUE(s.ok()) << s.error().message;
  const auto data = Bytes(6 << 20, 21);
  ASSERT_TRUE((*s)->Put(BlobKind::kXorb, HashOf(21), data).ok());
  auto holder = (*s)->OpenRange(BlobKind::kXorb, HashOf(21), 0, data.size());
  std::vector<uint8_t> first(1 << 20);
  ASSERT_TRUE(holder->Read(first).ok());  // holds the one stream connection, paused mid-answer
  auto other = (*s)->OpenRange(BlobKind::kXorb, HashOf(21), 1000, 3 << 20);
  std::vector<uint8_t> a(1 << 20), b((2 << 20));
  ASSERT_TRUE(other->Read(a).ok());
  ASSERT_TRUE(other->Read(b).ok());
  EXPECT_TRUE(std::equal(a.begin(), a.end(), data.begin() + 1000));
  EXPECT_TRUE(std::equal(b.begin(), b.end(), data.begin() + 1000 + a.size()));
  std::vector<uint8_t> rest(data.size() - first.size());
  ASSERT_TRUE(holder->Read(rest).ok());
  EXPECT_TRUE(std::equal(first.begin(), first.end(), data.begin()));
  EXPECT_TRUE(std::equal(rest.begin(), rest.end(), data.begin() + first.size()));
}

// ---- CopyStore

// Blobs whose bytes follow from their hash, so a verifier can judge them.
std::vector<uint8_t> ContentOf(const Hash& h) {
  return Bytes(1000 + h.bytes[0] * 37, h.bytes[0]);
}
bool Verify(BlobKind, const Hash& h, std::span<const uint8_t> bytes) {
  const auto want = ContentOf(h);
  return std::equal(bytes.begin(), bytes.end(), want.begin(), want.end());
}

class StoreCopyTest : public ::testing::Test {
 protected:
  // Nine xorbs, two shards, a grant, a revocation.
  static BlobKind KindOf(uint8_t i) {
    return i < 9    ? BlobKind::kXorb
           : i < 11 ? BlobKind::kShard
           : i < 12 ? BlobKind::kGrant
                    : BlobKind::kRevocation;
  }
  StoreCopyTest() {
    for (uint8_t i = 0; i < 13; ++i) {
      EXPECT_TRUE(from_.Put(KindOf(i), HashOf(i), ContentOf(HashOf(i))).ok());
    }
  }
  StoreCopyReport Copy(BlobStore& to) {
    auto r = CopyStore(from_, to, {.verify = Verify, .threads = 3, .progress = nullptr});
    EXPECT_TRUE(r.ok()) << r.error().message;
    return std::move(r).value();
  }
  MemoryStore from_;
};

TEST_F(StoreCopyTest, CopiesEveryBlobThenResumesWithNothingToDo) {
  TempDir dir;
  auto to = LocalDiskStore::Open(dir.path());
  ASSERT_TRUE(to.ok());
  auto first = Copy(**to);
  ASSERT_TRUE(first.ok());
  ASSERT_EQ(first.kinds.size(), 4u);
  EXPECT_EQ(first.kinds[0].listed, 9u);
  EXPECT_EQ(first.kinds[0].copied, 9u);
  EXPECT_EQ(first.kinds[1].copied, 2u);
  EXPECT_EQ(first.kinds[2].copied, 1u);
  EXPECT_EQ(first.kinds[3].copied, 1u);
  for (uint8_t i = 0; i < 13; ++i) {
    const BlobKind kind = KindOf(i);
    std::vector<uint8_t> out(ContentOf(HashOf(i)).size());
    ASSERT_TRUE((*to)->ReadRange(kind, HashOf(i), 0, out).ok());
    EXPECT_TRUE(Verify(kind, HashOf(i), out));
  }
  auto again = Copy(**to);
  EXPECT_TRUE(again.ok());
  EXPECT_EQ(again.kinds[0].copied, 0u);
  EXPECT_EQ(again.kinds[0].present, 9u);
  EXPECT_EQ(again.kinds[1].present, 2u);
  EXPECT_EQ(again.kinds[2].present, 1u);
  EXPECT_EQ(again.kinds[3].present, 1u);
}

TEST_F(StoreCopyTest, InterruptedCopyResumesAndACorruptDestinationIsReplaced) {
  MemoryStore to;
  for (uint8_t i = 0; i < 4; ++i) ASSERT_TRUE(to.Put(BlobKind::kXorb, HashOf(i), ContentOf(HashOf(i))).ok());
  to.OverwriteForTest(BlobKind::kXorb, HashOf(2), {1, 2, 3});  // torn at the destination
  auto r = Copy(to);
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.kinds[0].present, 3u);
  EXPECT_EQ(r.kinds[0].copied, 6u);
  std::vector<uint8_t> out(ContentOf(HashOf(2)).size());
  ASSERT_TRUE(to.ReadRange(BlobKind::kXorb, HashOf(2), 0, out).ok());
  EXPECT_TRUE(Verify(BlobKind::kXorb, HashOf(2), out));
}

TEST_F(StoreCopyTest, ACorruptSourceBlobIsReportedNotCopied) {
  from_.OverwriteForTest(BlobKind::kXorb, HashOf(5), ContentOf(HashOf(6)));
  MemoryStore to;
  auto r = Copy(to);
  EXPECT_FALSE(r.ok());
  ASSERT_EQ(r.kinds[0].failed.size(), 1u);
  EXPECT_TRUE(r.kinds[0].failed[0].starts_with(HashOf(5).hex())) << r.kinds[0].failed[0];
  EXPECT_EQ(r.kinds[0].copied, 8u);
  EXPECT_FALSE(to.Stat(BlobKind::kXorb, HashOf(5))->exists);
}

TEST_F(StoreCopyTest, MovesToS3AndBack) {
  S3Factory s3;
  auto remote = s3.Make();
  EXPECT_TRUE(Copy(*remote).ok());
  MemoryStore back;
  auto r = CopyStore(*remote, back, {.verify = Verify, .threads = 2, .progress = nullptr});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(r->ok());
  EXPECT_EQ(r->kinds[0].copied + r->kinds[1].copied + r->kinds[2].copied, 12u);
}

}  // namespace
}  // namespace cairn::store
