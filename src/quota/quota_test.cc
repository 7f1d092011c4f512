// The quota service against both index backends (SQLite in a temporary file, PostgreSQL in a private server):
// what a namespace is charged (distinct chunks of committed files, shared chunks once, uploads not committed
// not at all, other namespaces' files for them too), admission by the quick path and by a measure near the
// limit, stale records, the room check, and nodes admitting at once never passing the limit.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <iostream>
#include <random>
#include <thread>

#include "index/open_index.h"
#include "index/postgres/pg.h"
#include "index/testing/postgres_cluster.h"
#include "index/testing/test_support.h"
#include "quota/quota_service.h"

namespace cairn::quota {
namespace {

namespace fs = std::filesystem;
using index::fixtures::RandomHash;

enum class Backend { kSqlite, kPostgres };

index::testing::PostgresCluster& Cluster() {
  static std::unique_ptr<index::testing::PostgresCluster> cluster = [] {
    auto c = index::testing::PostgresCluster::Start("quota-test");
    if (!c.ok()) {
      std::cerr << "cannot start PostgreSQL: " << c.error().message << "\n";
      std::abort();
    }
    return std::move(*c);
  }();
  return *cluster;
}

void PgExec(const std::string& sql) {
  auto c = index::pg::Conn::Connect(Cluster().uri());
  ASSERT_TRUE(c.ok()) << c.error().message;
  auto r = (*c)->Exec(sql);
  ASSERT_TRUE(r.ok()) << r.error().message;
}

// Chunk i of every test xorb holds 1000 + i bytes.
uint64_t ChunkSize(uint32_t i) {
  return 1000 + i;
}
uint64_t Bytes(uint32_t begin, uint32_t end) {
  uint64_t n = 0;
  for (uint32_t i = begin; i < end; ++i) n += ChunkSize(i);
  return n;
}

class QuotaTest : public ::testing::TestWithParam<Backend> {
 protected:
  QuotaTest() {
    std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::replace(name.begin(), name.end(), '/', '-');
    dir_ = fs::temp_directory_path() / ("cairn-quota-" + std::to_string(::getpid()) + "-" + name);
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    if (GetParam() == Backend::kSqlite) {
      url_ = "sqlite:" + (dir_ / "index.db").string();
    } else {
      static int next = 0;
      schema_ = "q" + std::to_string(++next);
      PgExec("CREATE SCHEMA " + schema_);
      url_ = Cluster().uri() + "?options=-csearch_path%3D" + schema_;
    }
    index_ = OpenOne();
    quota_ = std::make_unique<QuotaService>(*index_, clock_);
  }
  ~QuotaTest() override {
    quota_.reset();
    index_.reset();
    std::error_code ec;
    fs::remove_all(dir_, ec);
    if (!schema_.empty()) PgExec("DROP SCHEMA " + schema_ + " CASCADE");
  }

  std::unique_ptr<index::Index> OpenOne() {
    auto r = index::OpenIndex(url_, {});
    EXPECT_TRUE(r.ok()) << r.error().message;
    return r.ok() ? std::move(*r) : nullptr;
  }

  // A stored xorb of `chunks` chunks.
  xet::XorbHash AddXorb(uint32_t chunks) {
    xet::XorbLayout layout;
    uint32_t end = 0;
    for (uint32_t i = 0; i < chunks; ++i) {
      end += static_cast<uint32_t>(ChunkSize(i) / 2 + 8);
      layout.chunks.push_back({RandomHash(rng_), static_cast<uint32_t>(ChunkSize(i)), end});
    }
    const xet::XorbHash h = RandomHash(rng_);
    EXPECT_TRUE(index_->PutXorb(h, layout).ok());
    layouts_[h] = layout;
    return h;
  }

  // A file of one term per range over `xorb`, registered for `scope`.
  xet::FileHash AddFile(const xet::XorbHash& xorb, const std::vector<std::pair<uint32_t, uint32_t>>& ranges,
                        const std::string& scope) {
    xet::FileRecord rec;
    rec.hash = RandomHash(rng_);
    for (auto [b, e] : ranges) {
      rec.terms.push_back({.xorb = xorb,
                           .xorb_flags = 0,
                           .unpacked_bytes = static_cast<uint32_t>(Bytes(b, e)),
                           .chunk_start = b,
                           .chunk_end = e});
    }
    auto made = index::MakeFileCommit(
        rec, [&](const xet::XorbHash& h) { return layouts_.count(h) ? &layouts_.at(h) : nullptr; });
    EXPECT_TRUE(made.ok());
    auto out = index_->CommitShard({.shard = RandomHash(rng_),
                                    .shard_size = 1,
                                    .files = {*made},
                                    .dedup = {},
                                    .scope = scope,
                                    .xorbs = {}});
    EXPECT_TRUE(out.ok()) << out.error().message;
    return rec.hash;
  }

  // A repository of `ns` holding one object of `object_bytes`.
  index::RepoRecord AddRepo(const std::string& ns, const std::string& name, size_t object_bytes,
                            index::RepoType type = index::RepoType::kModel) {
    index::NewRepo r;
    r.type = type;
    r.ns = ns;
    r.name = name;
    r.created_at = 1700000000;
    r.scope = "hub:" + ns + "-" + name + "-" + std::to_string(static_cast<int>(type));
    r.read_scope = r.scope + "#read";
    r.objects = {{{1, 2, 3}, 3, std::vector<uint8_t>(object_bytes, 'x')}};
    auto made = index_->CreateRepo(r);
    EXPECT_TRUE(made.ok()) << made.error().message;
    return *made;
  }

  void Commit(const index::RepoRecord& repo, const xet::FileHash& f) {
    ASSERT_TRUE(index_->ShareFile(f, repo.read_scope).ok());
  }

  // A commit as the Hub makes one through `node`: admitted, its objects stored (`object_bytes` of small
  // files; charged there, the large files' bytes reserved), its large files published (settled).
  Status CommitVia(QuotaService& quota, index::Index& node, const index::RepoRecord& repo,
                   std::vector<xet::FileHash> files, uint64_t object_bytes) {
    auto admitted = quota.Admit(repo.ns, files, object_bytes);
    if (!admitted.ok()) return admitted.error();
    const std::string key = "object-" + std::to_string(next_key_++);
    const std::vector<index::RepoObject> objects = {
        {{key.begin(), key.end()}, 1, std::vector<uint8_t>(object_bytes, 'o')}};
    if (auto st = node.PutRepoObjects(repo.id, objects, admitted->ObjectsCharge()); !st.ok())
      return admitted->Explain(st.error());
    admitted->ObjectsStored();
    if (!files.empty()) {
      if (auto st = node.ShareFiles(files, repo.read_scope, admitted->FilesCharge()); !st.ok())
        return admitted->Explain(st.error());
    }
    admitted->FilesPublished();
    return Ok{};
  }
  Status CommitFiles(const index::RepoRecord& repo, std::vector<xet::FileHash> files,
                     uint64_t object_bytes = 0) {
    return CommitVia(*quota_, *index_, repo, std::move(files), object_bytes);
  }

  std::mt19937_64 rng_{7};
  fs::path dir_;
  std::string url_;
  std::string schema_;
  TestClock clock_;
  std::unique_ptr<index::Index> index_;
  std::unique_ptr<QuotaService> quota_;
  std::map<xet::XorbHash, xet::XorbLayout> layouts_;
  std::atomic<int> next_key_{0};
};

TEST_P(QuotaTest, ANamespaceIsChargedTheDistinctChunksOfItsCommittedFiles) {
  const auto x = AddXorb(10);
  const auto y = AddXorb(4);
  const auto model = AddRepo("alice", "model", 100);
  const auto data = AddRepo("alice", "data", 50, index::RepoType::kDataset);
  const auto bucket = AddRepo("alice", "box", 0, index::RepoType::kBucket);
  const auto other = AddRepo("bob", "model", 7);
  // f1 and f2 overlap in chunks 4..6 of x; f3 repeats a chunk within itself; f4 is only uploaded.
  const auto f1 = AddFile(x, {{0, 7}}, model.scope);
  const auto f2 = AddFile(x, {{4, 10}}, data.scope);
  const auto f3 = AddFile(y, {{0, 2}, {1, 3}, {0, 1}}, bucket.scope);
  const auto f4 = AddFile(y, {{3, 4}}, model.scope);
  Commit(model, f1);
  Commit(data, f2);
  Commit(data, f1);  // the same file in a second repository counts once
  Commit(bucket, f3);
  Commit(other, f1);  // and bob is charged for it too
  (void)f4;
  auto alice = quota_->Measure("alice");
  ASSERT_TRUE(alice.ok()) << alice.error().message;
  EXPECT_EQ(alice->repos, 3u);
  EXPECT_EQ(alice->files, 3u);
  EXPECT_EQ(alice->chunk_bytes, Bytes(0, 10) + Bytes(0, 3));
  EXPECT_EQ(alice->object_bytes, 150u);
  EXPECT_EQ(alice->used, Bytes(0, 10) + Bytes(0, 3) + 150);
  EXPECT_TRUE(alice->exact);
  EXPECT_FALSE(alice->limit.has_value());
  auto bob = quota_->Measure("bob");
  ASSERT_TRUE(bob.ok());
  EXPECT_EQ(bob->used, Bytes(0, 7) + 7);
  auto nobody = quota_->Measure("carol");
  ASSERT_TRUE(nobody.ok());
  EXPECT_EQ(nobody->used, 0u);
  // Without a record nothing is kept; with one the measure is recorded, exact.
  EXPECT_FALSE(quota_->Recorded("alice")->has_value());
  ASSERT_TRUE(quota_->SetLimit(index::AuditActor{}, "alice", std::nullopt).ok());
  ASSERT_TRUE(quota_->Measure("alice").ok());
  auto recorded = quota_->Recorded("alice");
  ASSERT_TRUE(recorded.ok() && recorded->has_value());
  EXPECT_EQ((*recorded)->used, alice->used);
  EXPECT_TRUE((*recorded)->exact);
}

TEST_P(QuotaTest, ACommitIsAdmittedWhenWhatItAddsFitsAndRefusedWhenNot) {
  const auto x = AddXorb(20);
  const auto repo = AddRepo("alice", "model", 0);
  const auto f1 = AddFile(x, {{0, 10}}, repo.scope);
  Commit(repo, f1);
  ASSERT_TRUE(quota_->SetLimit(index::AuditActor{}, "alice", Bytes(0, 15)).ok());
  ASSERT_TRUE(quota_->RefreshAll().ok());
  EXPECT_TRUE((*quota_->Recorded("alice"))->exact);
  // Quick path: f2 at its full size fits; reserved by the objects' write, settled by the share.
  const auto f2 = AddFile(x, {{10, 12}}, repo.scope);
  {
    auto admitted = quota_->Admit("alice", std::vector{f2}, 0);
    ASSERT_TRUE(admitted.ok());
    const std::vector<index::RepoObject> objects = {{{'k', '1'}, 1, {}}};
    ASSERT_TRUE(index_->PutRepoObjects(repo.id, objects, admitted->ObjectsCharge()).ok());
    admitted->ObjectsStored();
    EXPECT_EQ((*index_->GetQuota("alice"))->reserved, Bytes(10, 12));
    ASSERT_TRUE(index_->ShareFiles(std::vector{f2}, repo.read_scope, admitted->FilesCharge()).ok());
    admitted->FilesPublished();
  }
  auto q = index_->GetQuota("alice");
  EXPECT_EQ((*q)->pending, Bytes(10, 12));
  EXPECT_EQ((*q)->reserved, 0u);
  // A commit that fails after its objects' write releases its reservation.
  {
    auto admitted = quota_->Admit("alice", std::vector{f2}, 10);
    ASSERT_TRUE(admitted.ok());
    const std::vector<index::RepoObject> objects = {{{'k', '2'}, 1, {}}};
    ASSERT_TRUE(index_->PutRepoObjects(repo.id, objects, admitted->ObjectsCharge()).ok());
    admitted->ObjectsStored();
    EXPECT_EQ((*index_->GetQuota("alice"))->reserved, Bytes(10, 12));
  }
  EXPECT_EQ((*index_->GetQuota("alice"))->reserved, 0u);
  EXPECT_EQ((*index_->GetQuota("alice"))->pending, Bytes(10, 12) + 10);
  ASSERT_TRUE(quota_->RefreshAll().ok());
  EXPECT_EQ((*index_->GetQuota("alice"))->used, Bytes(0, 12));
  // f3 is 12 chunks at full size (past the limit) but adds only chunk 12 to what alice holds: measured,
  // admitted.
  const auto f3 = AddFile(x, {{0, 13}}, repo.scope);
  ASSERT_TRUE(CommitFiles(repo, {f3}).ok());
  q = index_->GetQuota("alice");
  EXPECT_EQ((*q)->used, Bytes(0, 12));
  EXPECT_EQ((*q)->pending, Bytes(12, 13));
  // f4 adds chunks 13..17 (past the limit, however measured): refused, nothing charged, usage current.
  const auto f4 = AddFile(x, {{13, 18}}, repo.scope);
  auto refused = CommitFiles(repo, {f4});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, ErrorCode::kQuota);
  EXPECT_NE(refused.error().message.find("Storage quota of namespace 'alice' reached"), std::string::npos)
      << refused.error().message;
  EXPECT_NE(refused.error().message.find("cairn quota set alice"), std::string::npos);
  EXPECT_FALSE(*index_->FileVisibleTo(f4, repo.read_scope));
  q = index_->GetQuota("alice");
  EXPECT_EQ((*q)->charged(), Bytes(0, 13));
  // Small files count too; a commit that adds nothing (a deletion) always goes through.
  EXPECT_EQ(CommitFiles(repo, {}, Bytes(13, 16)).error().code, ErrorCode::kQuota);
  EXPECT_TRUE(CommitFiles(repo, {}, 0).ok());
  EXPECT_TRUE(CommitFiles(repo, {f1, f3}).ok());  // already committed: adds nothing
  EXPECT_EQ((*index_->GetQuota("alice"))->charged(), Bytes(0, 13));
  // A namespace without a quota admits anything.
  const auto other = AddRepo("bob", "model", 0);
  EXPECT_TRUE(CommitFiles(other, {f4}, 1u << 20).ok());
}

TEST_P(QuotaTest, AStaleRecordIsMeasuredBeforeItAdmitsAndTheRoomCheckMeasuresBeforeItRefuses) {
  const auto x = AddXorb(10);
  const auto repo = AddRepo("alice", "model", 0);
  const auto f1 = AddFile(x, {{0, 10}}, repo.scope);
  Commit(repo, f1);
  ASSERT_TRUE(quota_->SetLimit(index::AuditActor{}, "alice", Bytes(0, 10)).ok());
  ASSERT_TRUE(quota_->RefreshAll().ok());
  auto full = quota_->CheckRoom("alice");
  ASSERT_FALSE(full.ok());
  EXPECT_EQ(full.error().code, ErrorCode::kQuota);
  EXPECT_EQ(quota_->CheckRoomForScope(repo.scope).error().code, ErrorCode::kQuota);
  EXPECT_TRUE(quota_->CheckRoomForScope("plain-scope").ok());  // no repository's: no quota
  // The repository goes: the record is marked stale, and the room check measures before it refuses.
  ASSERT_TRUE(index_->DeleteRepo(repo.id, nullptr).ok());
  ASSERT_TRUE(quota_->MarkStale("alice").ok());
  EXPECT_TRUE(quota_->CheckRoom("alice").ok());
  auto q = quota_->Recorded("alice");
  EXPECT_EQ((*q)->used, 0u);
  EXPECT_TRUE((*q)->exact);
  // A stale record does not take the quick path: a repository moved in from elsewhere is measured.
  const auto moved = AddRepo("alice", "moved", 0);
  Commit(moved, f1);
  ASSERT_TRUE(quota_->MarkStale(std::nullopt).ok());
  const auto f2 = AddFile(x, {{0, 1}}, moved.scope);
  EXPECT_EQ(CommitFiles(moved, {f2}, 1).error().code, ErrorCode::kQuota);
  EXPECT_EQ((*quota_->Recorded("alice"))->used, Bytes(0, 10));
}

TEST_P(QuotaTest, NodesAdmittingAtOnceNeverPassTheLimit) {
  const auto x = AddXorb(64);
  const auto repo = AddRepo("alice", "model", 0);
  std::vector<xet::FileHash> files;
  for (uint32_t i = 0; i < 64; ++i) files.push_back(AddFile(x, {{i, i + 1}}, repo.scope));
  const uint64_t limit = Bytes(0, 20);
  ASSERT_TRUE(quota_->SetLimit(index::AuditActor{}, "alice", limit).ok());
  ASSERT_TRUE(quota_->RefreshAll().ok());
  // Two nodes (index instances on one database), two threads each, every file admitted once.
  std::vector<std::unique_ptr<index::Index>> nodes;
  nodes.push_back(OpenOne());
  nodes.push_back(OpenOne());
  std::atomic<size_t> next{0};
  std::atomic<uint64_t> admitted{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      QuotaService node(*nodes[t % 2], clock_);
      for (size_t i; (i = next.fetch_add(1)) < files.size();) {
        auto st = CommitVia(node, *nodes[t % 2], repo, {files[i]}, 0);
        if (st.ok()) {
          admitted += ChunkSize(static_cast<uint32_t>(i));
        } else {
          EXPECT_EQ(st.error().code, ErrorCode::kQuota) << st.error().message;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_LE(admitted.load(), limit);
  EXPECT_GE(admitted.load(), limit - 2 * ChunkSize(63));  // the limit is used, not refused early
  auto measured = quota_->Measure("alice");
  ASSERT_TRUE(measured.ok());
  EXPECT_EQ(measured->used, admitted.load());
}

TEST(FormatBytes, SaysBytesInUnitsPeopleRead) {
  EXPECT_EQ(FormatBytes(0), "0 B");
  EXPECT_EQ(FormatBytes(1023), "1023 B");
  EXPECT_EQ(FormatBytes(1536), "1.5 KiB");
  EXPECT_EQ(FormatBytes(uint64_t{10} << 30), "10.0 GiB");
}

INSTANTIATE_TEST_SUITE_P(Backends, QuotaTest, ::testing::Values(Backend::kSqlite, Backend::kPostgres),
                         [](const ::testing::TestParamInfo<Backend>& p) {
                           return p.param == Backend::kSqlite ? "Sqlite" : "Postgres";
                         });

}  // namespace
}  // namespace cairn::quota
