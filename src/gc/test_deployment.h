// A deployment for the lifecycle's tests (the collector's, the backup's): an index and a store of one
// backend pair (SQLite + local disk, or PostgreSQL + S3 on SeaweedFS, each started once per test binary),
// the CAS, file and Hub services over them on a test clock, and the helpers that upload, commit and
// download through them. Tests only.
#pragma once

#include <gtest/gtest.h>
#include <openssl/sha.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "cas/service.h"
#include "common/clock.h"
#include "common/hex.h"
#include "common/worker_pool.h"
#include "files/file_service.h"
#include "hub/hub_service.h"
#include "index/open_index.h"
#include "index/postgres/pg.h"
#include "index/testing/postgres_cluster.h"
#include "ingest/upload_builder.h"
#include "store/local_disk_store.h"
#include "store/s3_store.h"
#include "store/seaweedfs_cluster.h"

namespace cairn::gc::testing {

namespace fs = std::filesystem;
using Bytes = std::vector<uint8_t>;

enum class Backend { kSqliteDisk, kPostgresS3 };

inline std::string BackendName(const ::testing::TestParamInfo<Backend>& p) {
  return p.param == Backend::kSqliteDisk ? "SqliteDisk" : "PostgresS3";
}

// A server every test of the binary shares, started at its first use (a test binary cannot go on without it).
template <typename Cluster>
Cluster& Shared(const char* what) {
  static std::unique_ptr<Cluster> cluster = [what] {
    auto c = Cluster::Start("lifecycle-test");
    if (!c.ok()) {
      std::cerr << "cannot start " << what << ": " << c.error().message << "\n";
      std::abort();
    }
    return std::move(*c);
  }();
  return *cluster;
}
inline index::testing::PostgresCluster& Postgres() {
  return Shared<index::testing::PostgresCluster>("PostgreSQL");
}
inline store::testing::SeaweedCluster& Seaweed() {
  return Shared<store::testing::SeaweedCluster>("SeaweedFS");
}

class DeploymentTest : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    clock_.Set(1'800'000'000);
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = info->name();
    std::replace(name.begin(), name.end(), '/', '-');
    dir_ = fs::temp_directory_path() / ("cairn-" + std::to_string(::getpid()) + "-" + name);
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    static int next = 0;
    ++next;
    if (GetParam() == Backend::kSqliteDisk) {
      url_ = "sqlite:" + (dir_ / "index.db").string();
      auto s = store::LocalDiskStore::Open(dir_ / "blobs");
      ASSERT_TRUE(s.ok()) << s.error().message;
      store_ = std::move(*s);
    } else {
      schema_ = "gc" + std::to_string(next);
      ASSERT_NO_FATAL_FAILURE(PgExec("CREATE SCHEMA " + schema_));
      url_ = Postgres().uri() + "?options=-csearch_path%3D" + schema_;
      // One bucket, a prefix per test: SeaweedFS gives each bucket volumes of its own and runs out of them
      // after a few dozen ("No writable volumes and no free volumes left"; the CI machine's disk fits fewer).
      ASSERT_TRUE(Seaweed().CreateBucket(kBucket).ok());
      store::S3StoreOptions so;
      so.s3 = Seaweed().Options(kBucket);
      prefix_ = "t" + std::to_string(next) + "/";
      so.prefix = prefix_;
      auto s = store::S3Store::Open(so);
      ASSERT_TRUE(s.ok()) << s.error().message;
      store_ = std::move(*s);
    }
    ASSERT_NO_FATAL_FAILURE(StartServices());
  }
  // The index opened anew and the services over it and the store: a server (re)started.
  void StartServices() {
    hub_.reset();
    files_.reset();
    cas_.reset();
    index_ = OpenIndexAt();
    ASSERT_NE(index_, nullptr);
    cas::ServiceOptions so;
    so.clock = &clock_;
    cas_ = std::make_unique<cas::CasService>(*index_, *store_, pool_, so);
    files::FileServiceOptions fo;
    fo.clock = &clock_;
    files_ = std::make_unique<files::FileService>(*cas_, *index_, fo);
    hub::HubOptions ho;
    ho.clock = &clock_;
    hub_ = std::make_unique<hub::HubService>(*index_, *files_, ho);
  }
  void TearDown() override {
    hub_.reset();
    files_.reset();
    cas_.reset();
    index_.reset();
    store_.reset();
    std::error_code ec;
    fs::remove_all(dir_, ec);
    if (!schema_.empty()) PgExec("DROP SCHEMA " + schema_ + " CASCADE");
    for (const auto& other : others_) PgExec("DROP SCHEMA " + other + " CASCADE");
  }

  static void PgExec(const std::string& sql) {
    auto c = index::pg::Conn::Connect(Postgres().uri());
    ASSERT_TRUE(c.ok()) << c.error().message;
    auto r = (*c)->Exec(sql);
    ASSERT_TRUE(r.ok()) << r.error().message;
  }

  // Another handle on the same index (another node, or a `cairn gc` process beside the server).
  std::unique_ptr<index::Index> OpenIndexAt() {
    index::OpenIndexOptions o;
    o.clock = &clock_;
    auto ix = index::OpenIndex(url_, o);
    EXPECT_TRUE(ix.ok()) << ix.error().message;
    return ix.ok() ? std::move(*ix) : nullptr;
  }

  Bytes Random(size_t n) {
    Bytes b(n);
    for (auto& c : b) c = static_cast<uint8_t>(rng_());
    return b;
  }
  // Uploads `files` together (chunks they share land in the same xorbs) to `scope`.
  ingest::BuiltUpload Upload(const std::vector<Bytes>& files, const std::string& scope) {
    std::vector<std::span<const uint8_t>> spans(files.begin(), files.end());
    ingest::BuildOptions o;
    o.max_xorb_bytes = 256 << 10;  // several xorbs per file
    auto up = ingest::BuildUpload(spans, o);
    for (const auto& x : up.xorbs) {
      auto put = cas_->PutXorb(x.hash, x.body);
      EXPECT_TRUE(put.ok()) << put.error().message;
    }
    auto r = cas_->PutShard(up.shard_bytes, scope);
    EXPECT_TRUE(r.ok()) << r.error().message;
    return up;
  }
  // The whole file through `files` (another node's, a rebuilt index's), by default this node's.
  Bytes Download(const xet::FileHash& hash, const std::string& scope, files::FileService* through = nullptr) {
    files::FileService& files = through != nullptr ? *through : *files_;
    auto found = files.Find(hash, scope);
    EXPECT_TRUE(found.ok()) << found.error().message;
    if (!found.ok()) return {};
    Bytes out(found->size);
    if (out.empty()) return out;
    auto reader = files.Open(*found, 0, out.size());
    EXPECT_TRUE(reader.ok()) << reader.error().message;
    if (!reader.ok()) return {};
    auto st = (*reader)->Read(out);
    EXPECT_TRUE(st.ok()) << st.error().message;
    return out;
  }
  bool Stored(const xet::XorbHash& x) {
    auto s = store_->Stat(store::BlobKind::kXorb, x);
    EXPECT_TRUE(s.ok());
    return s.ok() && s->exists;
  }
  uint64_t StoredXorbBytes() {
    uint64_t total = 0;
    std::vector<xet::Hash> all;
    EXPECT_TRUE(store_->List(store::BlobKind::kXorb, [&](const xet::Hash& h) { all.push_back(h); }).ok());
    for (const auto& h : all) {
      auto s = store_->Stat(store::BlobKind::kXorb, h);
      if (s.ok() && s->exists) total += s->size;
    }
    return total;
  }

  // Another index and store, empty, of `backend` (`name` tells it from others of the test): a second
  // deployment, say, to restore into. Dropped with the test.
  struct Other {
    std::string url;
    std::unique_ptr<store::BlobStore> store;
  };
  Other OtherDeployment(const std::string& name, Backend backend) {
    Other o;
    if (backend == Backend::kSqliteDisk) {
      o.url = "sqlite:" + (dir_ / (name + ".db")).string();
      auto s = store::LocalDiskStore::Open(dir_ / (name + "-blobs"));
      EXPECT_TRUE(s.ok()) << s.error().message;
      if (s.ok()) o.store = std::move(*s);
      return o;
    }
    static int next = 0;
    const std::string schema = "other" + std::to_string(++next);
    PgExec("CREATE SCHEMA " + schema);
    others_.push_back(schema);
    o.url = Postgres().uri() + "?options=-csearch_path%3D" + schema;
    EXPECT_TRUE(Seaweed().CreateBucket(kBucket).ok());
    store::S3StoreOptions so;
    so.s3 = Seaweed().Options(kBucket);
    so.prefix = schema + "/";
    auto s = store::S3Store::Open(so);
    EXPECT_TRUE(s.ok()) << s.error().message;
    if (s.ok()) o.store = std::move(*s);
    return o;
  }

  // A repository (alice/model, write scope "repo-w", read scope "repo-r") with its initial commit.
  int64_t MakeRepo() {
    index::NewRepo nr;
    nr.ns = "alice";
    nr.name = "model";
    nr.scope = "repo-w";
    nr.read_scope = "repo-r";
    hub::ObjectId tree, commit;
    nr.objects.push_back(GitObject(hub::ObjectKind::kTree, {}, &tree));
    hub::Commit first;
    first.tree = tree;
    first.author = first.committer = {"alice", "alice@example.com", clock_.UnixSeconds()};
    first.message = "initial commit";
    const std::string body = hub::EncodeCommit(first);
    nr.objects.push_back(GitObject(hub::ObjectKind::kCommit, {body.begin(), body.end()}, &commit));
    nr.refs.push_back({index::RefKind::kBranch, "main", {commit.bytes.begin(), commit.bytes.end()}});
    auto repo = index_->CreateRepo(nr);
    EXPECT_TRUE(repo.ok()) << repo.error().message;
    return repo.ok() ? repo->id : 0;
  }
  static index::RepoObject GitObject(hub::ObjectKind kind, std::vector<uint8_t> body, hub::ObjectId* id) {
    *id = hub::HashObject(kind, body);
    return {{id->bytes.begin(), id->bytes.end()}, static_cast<uint8_t>(kind), std::move(body)};
  }
  static hub::LfsPointer Pointer(const Bytes& data) {
    uint8_t digest[SHA256_DIGEST_LENGTH];
    SHA256(data.data(), data.size(), digest);
    return {HexEncode(digest), data.size()};
  }
  // A commit to alice/model's `branch` through the Hub, as huggingface_hub makes one.
  hub::ObjectId Commit(std::vector<hub::Operation> ops, const std::string& branch = "main") {
    auto repo = hub_->Open(kAlice, {index::RepoType::kModel, "alice", "model"}, true);
    EXPECT_TRUE(repo.ok());
    hub::CommitRequest req;
    req.summary = "change";
    req.branch = branch;
    req.operations = std::move(ops);
    auto made = repo.ok() ? hub_->CreateCommit(kAlice, *repo, req) : Result<hub::CommitInfo>(repo.error());
    EXPECT_TRUE(made.ok()) << made.error().message;
    return made.ok() ? made->oid : hub::ObjectId{};
  }
  hub::Repo AliceModel() { return *hub_->Open(kAlice, {index::RepoType::kModel, "alice", "model"}, true); }

  fs::path dir_;
  std::string url_;
  std::string schema_;
  TestClock clock_;
  std::mt19937_64 rng_{42};
  WorkerPool pool_{2};
  std::unique_ptr<store::BlobStore> store_;
  std::unique_ptr<index::Index> index_;
  std::unique_ptr<cas::CasService> cas_;
  std::unique_ptr<files::FileService> files_;
  std::unique_ptr<hub::HubService> hub_;
  const hub::Caller kAlice{"alice", true};
  std::vector<std::string> others_;  // PostgreSQL schemas of OtherDeployment
  std::string prefix_;               // this test's in the bucket
  static constexpr const char* kBucket = "lifecycle-test";
};

}  // namespace cairn::gc::testing
