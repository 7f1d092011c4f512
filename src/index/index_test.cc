// SqliteIndex against the Index contract: roundtrips, idempotency, scopes, dedup, persistence and
// migrations, and group commit under concurrency (including a failing request inside a batch).
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <random>
#include <thread>

#include "index/sqlite_index.h"
#include "index/test_support.h"

namespace cairn::index {
namespace {

namespace fs = std::filesystem;
using xet::ErrorCode;

using fixtures::RandomHash;

xet::XorbLayout MakeLayout(std::mt19937_64& rng, size_t chunks) {
  xet::XorbLayout layout;
  uint32_t end = 0;
  for (size_t i = 0; i < chunks; ++i) {
    const auto unpacked = static_cast<uint32_t>(1000 + i);
    end += unpacked / 2 + 8;
    layout.chunks.push_back({RandomHash(rng), unpacked, end});
  }
  return layout;
}

// A file of one term per entry of `ranges` over `xorb`.
FileCommit MakeFile(const Hash& hash, const XorbHash& xorb, const xet::XorbLayout& layout,
                    const std::vector<std::pair<uint32_t, uint32_t>>& ranges, std::optional<Hash> sha = {}) {
  xet::FileRecord rec;
  rec.hash = hash;
  rec.sha256 = sha;
  for (auto [b, e] : ranges) {
    uint32_t bytes = 0;
    for (uint32_t i = b; i < e; ++i) bytes += layout.chunks[i].unpacked_size;
    rec.terms.push_back(
        {.xorb = xorb, .xorb_flags = 0, .unpacked_bytes = bytes, .chunk_start = b, .chunk_end = e});
  }
  return MakeFileCommit(rec);
}

class IndexTest : public testing::Test {
 protected:
  IndexTest() {
    const auto* info = testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / ("cairn-index-" + std::to_string(::getpid()) + "-" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  ~IndexTest() override {
    index_.reset();
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  void Open(SqliteOptions options = {}) {
    index_.reset();
    options.path = (dir_ / "index.db").string();
    auto r = SqliteIndex::Open(std::move(options));
    ASSERT_TRUE(r.ok()) << r.error().message;
    index_ = std::move(r).value();
  }

  // Registers a xorb of `chunks` chunks and returns it.
  std::pair<XorbHash, xet::XorbLayout> AddXorb(size_t chunks = 8) {
    const XorbHash h = RandomHash(rng_);
    auto layout = MakeLayout(rng_, chunks);
    auto put = index_->PutXorb(h, layout);
    EXPECT_TRUE(put.ok() && *put);
    return {h, layout};
  }

  int64_t UserVersion() {
    sqlite3* db = nullptr;
    EXPECT_EQ(sqlite3_open((dir_ / "index.db").c_str(), &db), SQLITE_OK);
    sqlite3_stmt* s = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &s, nullptr), SQLITE_OK);
    EXPECT_EQ(sqlite3_step(s), SQLITE_ROW);
    const int64_t v = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    sqlite3_close(db);
    return v;
  }

  fs::path dir_;
  std::mt19937_64 rng_{42};
  std::unique_ptr<SqliteIndex> index_;
};

TEST_F(IndexTest, XorbRoundtripAndIdempotency) {
  Open();
  const XorbHash h = RandomHash(rng_);
  const auto layout = MakeLayout(rng_, 100);
  auto put = index_->PutXorb(h, layout);
  ASSERT_TRUE(put.ok()) << put.error().message;
  EXPECT_TRUE(*put);
  EXPECT_FALSE(*index_->PutXorb(h, layout));  // idempotent: first write wins
  auto got = index_->GetXorb(h);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ((*got)->chunk_count, 100u);
  EXPECT_EQ((*got)->region_size, layout.chunk_region_size());
  EXPECT_EQ((*got)->unpacked_size, layout.unpacked_size());
  EXPECT_GT((*got)->stored_at, 0);
  const auto back = (*got)->ToLayout();
  ASSERT_EQ(back.chunks.size(), layout.chunks.size());
  for (size_t i = 0; i < back.chunks.size(); ++i) {
    EXPECT_EQ(back.chunks[i].hash, layout.chunks[i].hash);
    EXPECT_EQ(back.chunks[i].unpacked_size, layout.chunks[i].unpacked_size);
    EXPECT_EQ(back.chunks[i].end_offset, layout.chunks[i].end_offset);
  }
  EXPECT_EQ(index_->GetXorb(h)->get(), got->get());  // served from the cache
  EXPECT_TRUE(*index_->HasXorb(h));
  const Hash unknown = RandomHash(rng_);
  EXPECT_FALSE(*index_->HasXorb(unknown));
  EXPECT_EQ(index_->GetXorb(unknown).error().code, ErrorCode::kNotFound);
  auto stats = index_->Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->xorbs, 1u);
  EXPECT_EQ(stats->chunks, 100u);
  EXPECT_EQ(stats->stored_bytes, layout.chunk_region_size());
}

TEST_F(IndexTest, PackedTermsFindByteOffsets) {
  Open();
  auto [xorb, layout] = AddXorb(10);
  const FileCommit f = MakeFile(RandomHash(rng_), xorb, layout, {{0, 3}, {3, 4}, {4, 10}});
  FileEntry e{.hash = f.hash,
              .packed_terms = f.packed_terms,
              .term_count = f.term_count,
              .size = f.size,
              .sha256 = {}};
  const uint64_t end0 = e.term(0).end_offset, end1 = e.term(1).end_offset;
  EXPECT_EQ(end0, 1000u + 1001 + 1002);
  EXPECT_EQ(e.term(1).begin_offset(), end0);
  EXPECT_EQ(e.term(2).end_offset, e.size);
  EXPECT_EQ(e.FindTerm(0), 0u);
  EXPECT_EQ(e.FindTerm(end0 - 1), 0u);
  EXPECT_EQ(e.FindTerm(end0), 1u);
  EXPECT_EQ(e.FindTerm(end1 - 1), 1u);
  EXPECT_EQ(e.FindTerm(end1), 2u);
  EXPECT_EQ(e.FindTerm(e.size - 1), 2u);
  EXPECT_EQ(e.FindTerm(e.size), 3u);
  EXPECT_EQ(e.term(2).chunk_start, 4u);
  EXPECT_EQ(e.term(2).chunk_end, 10u);
  EXPECT_EQ(e.term(2).xorb, xorb);
}

TEST_F(IndexTest, ShardCommitRoundtripScopesAndDedup) {
  Open();
  auto [xorb, layout] = AddXorb(16);
  const Hash sha = RandomHash(rng_);
  ShardCommit c{.shard = RandomHash(rng_),
                .shard_size = 4321,
                .files = {MakeFile(RandomHash(rng_), xorb, layout, {{0, 16}}, sha),
                          MakeFile(RandomHash(rng_), xorb, layout, {{2, 5}, {0, 1}})},
                .dedup = {{layout.chunks[0].hash, xorb}, {layout.chunks[7].hash, xorb}},
                .scope = "org/model",
                .xorbs = {}};
  auto out = index_->CommitShard(c);
  ASSERT_TRUE(out.ok()) << out.error().message;
  EXPECT_FALSE(out->already_existed);

  auto f = index_->GetFile(c.files[1].hash);
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_EQ((*f)->term_count, 2u);
  EXPECT_EQ((*f)->size, c.files[1].size);
  EXPECT_EQ((*f)->packed_terms, c.files[1].packed_terms);
  EXPECT_FALSE((*f)->sha256.has_value());
  EXPECT_EQ(*index_->GetFile(c.files[0].hash).value()->sha256, sha);
  EXPECT_EQ(index_->GetFile(RandomHash(rng_)).error().code, ErrorCode::kNotFound);

  EXPECT_TRUE(*index_->FileVisibleTo(c.files[0].hash, "org/model"));
  EXPECT_FALSE(*index_->FileVisibleTo(c.files[0].hash, "org/other"));
  EXPECT_EQ(*index_->FileBySha256(sha, std::nullopt), c.files[0].hash);
  EXPECT_EQ(*index_->FileBySha256(sha, "org/model"), c.files[0].hash);
  EXPECT_FALSE(index_->FileBySha256(sha, "org/other")->has_value());
  EXPECT_FALSE(index_->FileBySha256(RandomHash(rng_), std::nullopt)->has_value());

  auto hits = index_->LookupDedup(layout.chunks[7].hash, "org/model");
  ASSERT_TRUE(hits.ok());
  ASSERT_EQ(hits->size(), 1u);
  EXPECT_EQ((*hits)[0].xorb, xorb);
  EXPECT_EQ((*hits)[0].shard, c.shard);
  EXPECT_TRUE(index_->LookupDedup(layout.chunks[7].hash, "org/other")->empty());
  EXPECT_EQ(index_->LookupDedup(layout.chunks[7].hash, std::nullopt)->size(), 1u);
  EXPECT_TRUE(index_->LookupDedup(layout.chunks[1].hash, std::nullopt)->empty());

  auto shard = index_->GetShard(c.shard);
  ASSERT_TRUE(shard.ok() && shard->has_value());
  EXPECT_EQ((*shard)->size, 4321u);
  EXPECT_FALSE(index_->GetShard(RandomHash(rng_))->has_value());

  // The same shard from another scope: no new records, but its files and dedup entries become that
  // scope's too.
  c.scope = "org/other";
  out = index_->CommitShard(c);
  ASSERT_TRUE(out.ok());
  EXPECT_TRUE(out->already_existed);
  EXPECT_TRUE(*index_->FileVisibleTo(c.files[0].hash, "org/other"));
  EXPECT_EQ(index_->LookupDedup(layout.chunks[7].hash, "org/other")->size(), 1u);
  EXPECT_EQ(index_->LookupDedup(layout.chunks[7].hash, std::nullopt)->size(), 1u);  // distinct locations

  auto stats = index_->Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->files, 2u);
  EXPECT_EQ(stats->shards, 1u);
  EXPECT_EQ(stats->stored_bytes, layout.chunk_region_size() + 4321u);
  // Each distinct file counts once, however many scopes registered it.
  EXPECT_EQ(stats->file_bytes, c.files[0].size + c.files[1].size);
  EXPECT_EQ(stats->unpacked_bytes, layout.unpacked_size());
  EXPECT_DOUBLE_EQ(stats->dedup_ratio(),
                   static_cast<double>(stats->file_bytes) / static_cast<double>(layout.unpacked_size()));
}

TEST_F(IndexTest, RejectsRequestsItCannotStore) {
  Open();
  auto [xorb, layout] = AddXorb(4);
  ShardCommit c{.shard = RandomHash(rng_),
                .shard_size = 1,
                .files = {MakeFile(RandomHash(rng_), xorb, layout, {{0, 4}})},
                .dedup = {},
                .scope = "s",
                .xorbs = {}};
  c.files[0].size += 1;  // disagrees with the terms
  auto out = index_->CommitShard(c);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.error().code, ErrorCode::kMalformed);
  c.files[0].size -= 1;
  c.dedup.push_back({layout.chunks[0].hash, RandomHash(rng_)});  // a xorb the index does not know
  out = index_->CommitShard(c);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.error().code, ErrorCode::kInconsistent) << out.error().message;
  // All or nothing: neither the shard nor its file was registered.
  EXPECT_FALSE(index_->GetShard(c.shard)->has_value());
  EXPECT_EQ(index_->GetFile(c.files[0].hash).error().code, ErrorCode::kNotFound);
  EXPECT_EQ(index_->Stats()->files, 0u);
}

TEST_F(IndexTest, MigratesFreshDatabaseAndPersistsAcrossReopen) {
  Open();
  EXPECT_EQ(UserVersion(), SqliteIndex::kSchemaVersion);
  auto [xorb, layout] = AddXorb(3);
  const ShardCommit c{.shard = RandomHash(rng_),
                      .shard_size = 10,
                      .files = {MakeFile(RandomHash(rng_), xorb, layout, {{0, 3}})},
                      .dedup = {{layout.chunks[0].hash, xorb}},
                      .scope = "s",
                      .xorbs = {}};
  ASSERT_TRUE(index_->CommitShard(c).ok());
  Open();  // reopen: no migration runs again, everything is still there
  EXPECT_EQ(UserVersion(), SqliteIndex::kSchemaVersion);
  EXPECT_EQ(index_->GetXorb(xorb).value()->chunk_count, 3u);
  EXPECT_EQ(index_->GetFile(c.files[0].hash).value()->size, c.files[0].size);
  EXPECT_TRUE(*index_->FileVisibleTo(c.files[0].hash, "s"));
  EXPECT_EQ(index_->LookupDedup(layout.chunks[0].hash, "s")->size(), 1u);
  EXPECT_EQ(index_->Stats()->files, 1u);
}

// A database of schema 1 (no byte counters) gains them, filled from its records.
TEST_F(IndexTest, MigratesSchemaOneAndFillsTheByteCounters) {
  Open();
  auto [xorb, layout] = AddXorb(5);
  const ShardCommit c{.shard = RandomHash(rng_),
                      .shard_size = 10,
                      .files = {MakeFile(RandomHash(rng_), xorb, layout, {{0, 5}})},
                      .dedup = {},
                      .scope = "s",
                      .xorbs = {}};
  ASSERT_TRUE(index_->CommitShard(c).ok());
  index_.reset();
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((dir_ / "index.db").c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db,
                         "ALTER TABLE counters DROP COLUMN unpacked_bytes; "
                         "ALTER TABLE counters DROP COLUMN file_bytes; DROP TABLE shard_xorbs; "
                         "PRAGMA user_version = 1",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  Open();
  EXPECT_EQ(UserVersion(), SqliteIndex::kSchemaVersion);
  auto stats = index_->Stats();
  ASSERT_TRUE(stats.ok()) << stats.error().message;
  EXPECT_EQ(stats->unpacked_bytes, layout.unpacked_size());
  EXPECT_EQ(stats->file_bytes, c.files[0].size);
  EXPECT_EQ(stats->files, 1u);
}

// The xorbs a shard brought together, in order: listed ones, then those only its files use.
TEST_F(IndexTest, ShardXorbsRoundtrip) {
  Open();
  auto [a, la] = AddXorb(3);
  auto [b, lb] = AddXorb(3);
  auto [old, lo] = AddXorb(3);
  ShardCommit c{.shard = RandomHash(rng_),
                .shard_size = 10,
                .files = {MakeFile(RandomHash(rng_), old, lo, {{0, 3}})},
                .dedup = {{lo.chunks[0].hash, old}},
                .scope = "s",
                .xorbs = {.listed = {b, a}, .referenced = {old}}};
  ASSERT_TRUE(index_->CommitShard(c).ok());
  auto got = index_->GetShardXorbs(c.shard);
  ASSERT_TRUE(got.ok()) << got.error().message;
  EXPECT_EQ((*got)->listed, (std::vector<XorbHash>{b, a}));
  EXPECT_EQ((*got)->referenced, std::vector<XorbHash>{old});
  EXPECT_EQ(index_->GetShardXorbs(RandomHash(rng_)).error().code, ErrorCode::kNotFound);

  // Committed again (another scope): the first registration stands. Reopened: still there.
  c.scope = "t";
  c.xorbs.listed = {a};
  ASSERT_TRUE(index_->CommitShard(c).ok());
  Open();
  got = index_->GetShardXorbs(c.shard);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ((*got)->listed, (std::vector<XorbHash>{b, a}));

  // A shard naming a xorb the index does not know is refused whole.
  ShardCommit bad{.shard = RandomHash(rng_),
                  .shard_size = 1,
                  .files = {},
                  .dedup = {},
                  .scope = "s",
                  .xorbs = {.listed = {a, RandomHash(rng_)}, .referenced = {}}};
  auto out = index_->CommitShard(bad);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.error().code, ErrorCode::kInconsistent) << out.error().message;
  EXPECT_FALSE(index_->GetShard(bad.shard)->has_value());
  EXPECT_EQ(index_->GetShardXorbs(bad.shard).error().code, ErrorCode::kNotFound);
}

// Shards registered before schema 3 recorded their xorbs get those of their dedup entries.
TEST_F(IndexTest, MigratesSchemaTwoAndFillsShardXorbsFromDedupEntries) {
  Open();
  auto [a, la] = AddXorb(4);
  auto [b, lb] = AddXorb(4);
  const ShardCommit c{.shard = RandomHash(rng_),
                      .shard_size = 10,
                      .files = {},
                      .dedup = {{la.chunks[0].hash, a}, {la.chunks[2].hash, a}, {lb.chunks[1].hash, b}},
                      .scope = "s",
                      .xorbs = {.listed = {a, b}, .referenced = {}}};
  ASSERT_TRUE(index_->CommitShard(c).ok());
  const ShardCommit empty{
      .shard = RandomHash(rng_), .shard_size = 1, .files = {}, .dedup = {}, .scope = "s", .xorbs = {}};
  ASSERT_TRUE(index_->CommitShard(empty).ok());
  index_.reset();
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((dir_ / "index.db").c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "DROP TABLE shard_xorbs; PRAGMA user_version = 2", nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  Open();
  EXPECT_EQ(UserVersion(), SqliteIndex::kSchemaVersion);
  auto got = index_->GetShardXorbs(c.shard);
  ASSERT_TRUE(got.ok()) << got.error().message;
  auto listed = (*got)->listed;
  std::sort(listed.begin(), listed.end());
  auto want = std::vector<XorbHash>{a, b};
  std::sort(want.begin(), want.end());
  EXPECT_EQ(listed, want);
  EXPECT_TRUE((*got)->referenced.empty());
  got = index_->GetShardXorbs(empty.shard);
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE((*got)->listed.empty());
}

TEST_F(IndexTest, RefusesADatabaseFromANewerCairn) {
  Open();
  index_.reset();
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((dir_ / "index.db").c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "PRAGMA user_version = 99", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  SqliteOptions options;
  options.path = (dir_ / "index.db").string();
  auto r = SqliteIndex::Open(options);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("newer"), std::string::npos) << r.error().message;
}

// 32 threads commit shards at once: every commit succeeds, commits share transactions, and everything is
// there after a reopen.
TEST_F(IndexTest, GroupCommitUnderConcurrency) {
  Open();
  auto [xorb, layout] = AddXorb(64);
  constexpr int kThreads = 32, kPerThread = 20;
  std::vector<std::vector<ShardCommit>> commits(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    for (int i = 0; i < kPerThread; ++i) {
      ShardCommit c{.shard = RandomHash(rng_),
                    .shard_size = 100,
                    .files = {},
                    .dedup = {},
                    .scope = "scope" + std::to_string(t % 4),
                    .xorbs = {}};
      for (uint32_t f = 0; f < 4; ++f)
        c.files.push_back(MakeFile(RandomHash(rng_), xorb, layout, {{f, f + 2}}));
      c.dedup.push_back({layout.chunks[static_cast<size_t>(i)].hash, xorb});
      commits[static_cast<size_t>(t)].push_back(std::move(c));
    }
  }
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (const auto& c : commits[static_cast<size_t>(t)]) {
        if (!index_->CommitShard(c).ok()) ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  const auto ws = index_->writer_stats();
  EXPECT_EQ(ws.requests, 1u + kThreads * kPerThread);
  EXPECT_LT(ws.transactions, ws.requests);  // some commits shared a transaction
  std::printf("group commit: %llu requests in %llu transactions\n",
              static_cast<unsigned long long>(ws.requests), static_cast<unsigned long long>(ws.transactions));

  Open();
  for (int t = 0; t < kThreads; ++t) {
    for (const auto& c : commits[static_cast<size_t>(t)]) {
      ASSERT_TRUE(index_->GetShard(c.shard)->has_value());
      for (const auto& f : c.files) ASSERT_TRUE(*index_->FileVisibleTo(f.hash, c.scope));
    }
  }
  EXPECT_EQ(index_->Stats()->files, 4u * kThreads * kPerThread);
  EXPECT_EQ(index_->Stats()->shards, 1u * kThreads * kPerThread);
}

// A request that fails inside a batch is rolled back alone; the others in the same transaction commit.
TEST_F(IndexTest, FailingRequestDoesNotFailItsBatch) {
  constexpr size_t kGood = 8;
  std::mutex mu;
  std::condition_variable cv;
  bool release = false, hold = false;
  std::vector<size_t> batches;
  SqliteOptions options;
  options.before_batch = [&](size_t n) {
    std::unique_lock lock(mu);
    if (!hold) return;
    batches.push_back(n);
    if (batches.size() == 1) cv.wait(lock, [&] { return release; });  // hold the first batch
  };
  Open(std::move(options));
  auto [xorb, layout] = AddXorb(4);
  {
    std::lock_guard lock(mu);
    hold = true;
  }
  // The blocker occupies the writer while the real batch queues up behind it.
  std::thread blocker([&, x = RandomHash(rng_), l = layout] { EXPECT_TRUE(index_->PutXorb(x, l).ok()); });
  while (true) {
    std::lock_guard lock(mu);
    if (!batches.empty()) break;
  }
  std::vector<ShardCommit> good;
  for (size_t i = 0; i < kGood; ++i) {
    good.push_back({.shard = RandomHash(rng_),
                    .shard_size = 1,
                    .files = {MakeFile(RandomHash(rng_), xorb, layout, {{0, 2}})},
                    .dedup = {{layout.chunks[1].hash, xorb}},
                    .scope = "s",
                    .xorbs = {}});
  }
  const ShardCommit bad{.shard = RandomHash(rng_),
                        .shard_size = 1,
                        .files = {MakeFile(RandomHash(rng_), xorb, layout, {{0, 2}})},
                        .dedup = {{layout.chunks[1].hash, RandomHash(rng_)}},
                        .scope = "s",
                        .xorbs = {}};
  std::atomic<int> good_ok{0};
  std::optional<xet::Error> bad_error;
  std::vector<std::thread> threads;
  for (size_t i = 0; i < kGood; ++i) {
    threads.emplace_back([&, i] { good_ok += index_->CommitShard(good[i]).ok() ? 1 : 0; });
    if (i == kGood / 2) {
      threads.emplace_back([&] {
        auto r = index_->CommitShard(bad);
        if (!r.ok()) bad_error = r.error();
      });
    }
  }
  while (index_->queued_writes() < kGood + 1) std::this_thread::yield();
  {
    std::lock_guard lock(mu);
    release = true;
  }
  cv.notify_all();
  for (auto& th : threads) th.join();
  blocker.join();
  EXPECT_EQ(good_ok.load(), static_cast<int>(kGood));
  ASSERT_TRUE(bad_error.has_value());
  EXPECT_EQ(bad_error->code, ErrorCode::kInconsistent);
  {
    std::lock_guard lock(mu);
    ASSERT_EQ(batches.size(), 2u);
    EXPECT_EQ(batches[1], kGood + 1);  // one transaction carried them all
  }
  EXPECT_FALSE(index_->GetShard(bad.shard)->has_value());
  EXPECT_EQ(index_->GetFile(bad.files[0].hash).error().code, ErrorCode::kNotFound);
  for (const auto& c : good) EXPECT_TRUE(index_->GetShard(c.shard)->has_value());
}

TEST(LruCacheTest, EvictsLeastRecentlyUsedByBytes) {
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

}  // namespace
}  // namespace cairn::index
