// The collector against every backend pair (SQLite + local disk, PostgreSQL + S3 on SeaweedFS): what it
// frees and what it keeps, and each race with the writes that revive what it is about to delete, made
// deterministic with a test clock and the collector's step hook.
#include "gc/collector.h"

#include <gtest/gtest.h>
#include <openssl/sha.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cas/grant.h"
#include "cas/service.h"
#include "common/clock.h"
#include "common/hex.h"
#include "common/worker_pool.h"
#include "files/file_service.h"
#include "gc/scheduler.h"
#include "gc/test_deployment.h"
#include "hub/hub_service.h"
#include "index/open_index.h"
#include "index/postgres/pg.h"
#include "index/testing/postgres_cluster.h"
#include "ingest/upload_builder.h"
#include "repair/fsck.h"
#include "store/forwarding_store.h"
#include "store/local_disk_store.h"
#include "store/s3_store.h"
#include "store/seaweedfs_cluster.h"
#include "xet/shard.h"

namespace cairn::gc {
namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<uint8_t>;

using testing::Backend;
using testing::Postgres;

// A store whose listings lag its writes, as an S3 listing may: blobs put after Freeze() are missing from List
// (they read, stat and delete as usual).
class LaggingListStore final : public store::ForwardingStore {
 public:
  using ForwardingStore::ForwardingStore;
  void Freeze() { frozen_ = true; }
  size_t hidden() const {
    std::lock_guard lock(mu_);
    return hidden_.size();
  }
  Result<std::unique_ptr<store::BlobWriter>> BeginPut(store::BlobKind k, const xet::Hash& h) override {
    if (frozen_) {
      std::lock_guard lock(mu_);
      hidden_.insert(h);
    }
    return ForwardingStore::BeginPut(k, h);
  }
  Status List(store::BlobKind k, const std::function<void(const xet::Hash&)>& fn) override {
    return ForwardingStore::List(k, [&](const xet::Hash& h) {
      std::lock_guard lock(mu_);
      if (!hidden_.contains(h)) fn(h);
    });
  }

 private:
  std::atomic<bool> frozen_{false};
  mutable std::mutex mu_;
  std::set<xet::Hash> hidden_;
};

class CollectorTest : public testing::DeploymentTest {
 protected:
  GcReport Collect(std::function<Status(std::string_view)> hook = nullptr, bool dry_run = false) {
    GcOptions o;
    o.clock = &clock_;
    o.hook = std::move(hook);
    o.dry_run = dry_run;
    o.batch = 2;  // several transactions per sweep step
    o.audit = index_.get();
    o.actor = index::AuditActor{.actor = "cli:test", .token_id = "", .client = ""};
    Collector c(*index_, *index_, *index_, *store_, o);
    auto r = c.Run();
    EXPECT_TRUE(r.ok()) << r.error().message;
    return r.ok() ? *r : GcReport{};
  }

  // A repository whose write scope got files `doomed` and `shared` in one upload (so they share xorbs),
  // both committed; `shared` is also copied to a plain scope. Deleting the repository leaves `doomed`
  // unreferenced, and its xorbs that `shared` does not use.
  struct Scene {
    Bytes doomed, shared;
    xet::FileHash doomed_hash, shared_hash;
    std::vector<xet::XorbHash> doomed_only, both;
    int64_t repo = 0;
  };
  Scene MakeScene() {
    Scene s;
    s.shared = Random(600 << 10);
    s.doomed = Bytes(s.shared.begin(), s.shared.begin() + (300 << 10));  // its first half is shared's
    const Bytes tail = Random(900 << 10);
    s.doomed.insert(s.doomed.end(), tail.begin(), tail.end());
    s.repo = MakeRepo();
    auto up = Upload({s.doomed, s.shared}, "repo-w");
    s.doomed_hash = up.file_hashes[0];
    s.shared_hash = up.file_hashes[1];
    Commit({hub::AddLfs{"doomed.bin", Pointer(s.doomed)}, hub::AddLfs{"shared.bin", Pointer(s.shared)}});
    auto shared = index_->ShareFile(s.shared_hash, "plain");
    EXPECT_TRUE(shared.ok()) << shared.error().message;
    auto terms = [&](const xet::FileHash& f) {
      auto e = index_->GetFile(f);
      EXPECT_TRUE(e.ok());
      std::vector<xet::XorbHash> out;
      for (size_t i = 0; e.ok() && i < (*e)->term_count; ++i) out.push_back((*e)->term(i).xorb);
      std::sort(out.begin(), out.end());
      out.erase(std::unique(out.begin(), out.end()), out.end());
      return out;
    };
    const auto d = terms(s.doomed_hash);
    const auto k = terms(s.shared_hash);
    for (const auto& x : d) (std::binary_search(k.begin(), k.end(), x) ? s.both : s.doomed_only).push_back(x);
    EXPECT_FALSE(s.doomed_only.empty());
    EXPECT_FALSE(s.both.empty());
    return s;
  }

  // A new index rebuilt from this store (`name` tells it from others of the test), given to `check`.
  void Rebuilt(
      const std::string& name,
      const std::function<void(index::Index&, files::FileService&, const repair::FsckReport&)>& check) {
    std::string url = "sqlite:" + (dir_ / ("rebuilt-" + name + ".db")).string();
    if (!schema_.empty()) {
      ASSERT_NO_FATAL_FAILURE(PgExec("CREATE SCHEMA " + schema_ + name));
      url = Postgres().uri() + "?options=-csearch_path%3D" + schema_ + name;
    }
    auto fresh = index::OpenIndex(url);
    ASSERT_TRUE(fresh.ok()) << fresh.error().message;
    {
      cas::CasService cas(**fresh, *store_, pool_, {});
      auto report = repair::RebuildIndex(cas, **fresh, *store_, {});
      ASSERT_TRUE(report.ok()) << report.error().message;
      files::FileService files(cas, **fresh, {});
      check(**fresh, files, *report);
    }
    fresh->reset();
    if (!schema_.empty()) PgExec("DROP SCHEMA " + schema_ + name + " CASCADE");
  }
};

TEST_P(CollectorTest, ADeletedRepositorysUniqueBytesAreFreedAfterTheGraceOnly) {
  Scene s = MakeScene();
  const uint64_t before = StoredXorbBytes();

  // Everything is live: nothing is quarantined.
  GcReport r = Collect();
  EXPECT_EQ(r.newly_quarantined, 0u);
  EXPECT_EQ(r.live_files, 2u);

  ASSERT_TRUE(index_->DeleteRepo(s.repo, nullptr).ok());
  r = Collect();
  EXPECT_EQ(r.newly_quarantined, 1u + s.doomed_only.size());  // the file and its own xorbs
  EXPECT_EQ(r.swept_xorbs, 0u);
  EXPECT_GT(r.quarantined_bytes, 0u);

  // A dry run past the grace says what a run would free, and frees nothing.
  clock_.Advance(static_cast<int64_t>(kDefaultGraceSeconds) + 1);
  GcReport dry = Collect(nullptr, /*dry_run=*/true);
  EXPECT_EQ(dry.reclaimable_xorbs, s.doomed_only.size());
  EXPECT_EQ(dry.swept_xorbs, 0u);
  for (const auto& x : s.doomed_only) EXPECT_TRUE(Stored(x));

  // One second short of the grace: nothing goes.
  clock_.Advance(-2);
  r = Collect();
  EXPECT_EQ(r.swept_xorbs, 0u);
  EXPECT_EQ(r.swept_files, 0u);

  clock_.Advance(2);
  r = Collect();
  EXPECT_EQ(r.swept_files, 1u);
  EXPECT_EQ(r.swept_xorbs, s.doomed_only.size());
  EXPECT_EQ(r.reclaimed_bytes, dry.reclaimable_bytes);
  for (const auto& x : s.doomed_only) EXPECT_FALSE(Stored(x)) << x.hex();
  for (const auto& x : s.both) EXPECT_TRUE(Stored(x)) << x.hex();
  // What the store holds went down by what the collector reported (the store keeps a footer per xorb too).
  const uint64_t after = StoredXorbBytes();
  EXPECT_LT(after, before);
  EXPECT_GE(before - after, r.reclaimed_bytes);
  EXPECT_EQ(index_->GetFile(s.doomed_hash).error().code, ErrorCode::kNotFound);
  EXPECT_EQ(Download(s.shared_hash, "plain"), s.shared);
  auto stats = index_->Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->files, 1u);

  // Nothing left to do.
  r = Collect();
  EXPECT_EQ(r.swept_xorbs + r.swept_files + r.newly_quarantined, 0u);

  // Each run but the dry one is in the audit log, with what it freed.
  auto log = index_->ListAudit(
      {.since = std::nullopt, .actor = "cli:test", .ns = std::nullopt, .target = std::nullopt}, std::nullopt,
      100);
  ASSERT_TRUE(log.ok());
  ASSERT_EQ(log->size(), 5u);
  for (const auto& e : *log) EXPECT_EQ(e.action, "gc.run");
  EXPECT_EQ((*log)[1].detail.rfind("swept 1 files, " + std::to_string(s.doomed_only.size()) + " xorbs", 0),
            0u)
      << (*log)[1].detail;
}

// Repositories are live by reachability: every revision of every ref keeps its files; a file only an old
// revision names goes once the history that names it is squashed away and the grace has passed, with the
// history itself.
TEST_P(CollectorTest, AnOldRevisionKeepsItsFilesUntilASquashFreesThem) {
  Scene s = MakeScene();
  const hub::ObjectId first = *hub_->Resolve(AliceModel(), "main");
  Commit({hub::DeletePath{"doomed.bin", false}});
  GcReport r = Collect();
  EXPECT_EQ(r.repos, 1u);
  EXPECT_EQ(r.reached_files, 2u) << "the first revision still names doomed.bin";
  EXPECT_EQ(r.newly_quarantined, 0u);
  EXPECT_EQ(r.quarantined_repo_objects, 0u);

  ASSERT_TRUE(hub_->SuperSquash(kAlice, AliceModel(), "main", "squash").ok());
  r = Collect();
  EXPECT_EQ(r.reached_files, 1u);
  EXPECT_EQ(r.newly_quarantined, 1u + s.doomed_only.size());
  EXPECT_GT(r.quarantined_repo_objects, 0u);
  EXPECT_EQ(r.swept_repo_objects, 0u);
  // Inside the grace the old revision still downloads.
  auto old = hub_->Stat(AliceModel(), first, "doomed.bin");
  ASSERT_TRUE(old.ok()) << old.error().message;
  EXPECT_EQ(Download(s.doomed_hash, "repo-w"), s.doomed);

  clock_.Advance(static_cast<int64_t>(kDefaultGraceSeconds) + 1);
  r = Collect();
  EXPECT_EQ(r.swept_files, 1u);
  EXPECT_EQ(r.swept_xorbs, s.doomed_only.size());
  EXPECT_EQ(r.swept_repo_objects, r.quarantined_repo_objects);
  EXPECT_GT(r.reclaimed_repo_bytes, 0u);
  EXPECT_FALSE(r.scrub.empty());
  for (const auto& x : s.doomed_only) EXPECT_FALSE(Stored(x)) << x.hex();
  EXPECT_EQ(hub_->Resolve(AliceModel(), first.hex()).error().reason, "RevisionNotFound");
  // What the squashed head names is whole.
  const hub::ObjectId head = *hub_->Resolve(AliceModel(), "main");
  auto info = hub_->Stat(AliceModel(), head, "shared.bin");
  ASSERT_TRUE(info.ok()) << info.error().message;
  EXPECT_EQ(Download(*info->xet, "repo-r"), s.shared);
  repair::FsckOptions fo;
  auto fsck = repair::Fsck(*cas_, *index_, *store_, fo);
  ASSERT_TRUE(fsck.ok()) << fsck.error().message;
  EXPECT_TRUE(fsck->clean()) << (fsck->findings.empty() ? "" : fsck->findings[0].detail);
  r = Collect();
  EXPECT_EQ(r.newly_quarantined + r.quarantined_repo_objects + r.swept_repo_objects, 0u);
}

// A repository whose history is partly missing (damage) cannot be walked whole: nothing of it is collected,
// and every large file it links stays live.
TEST_P(CollectorTest, ARepositoryWithMissingHistoryKeepsEverything) {
  Scene s = MakeScene();
  Commit({hub::DeletePath{"doomed.bin", false}});
  const hub::ObjectId head = *hub_->Resolve(AliceModel(), "main");
  auto commit = hub_->ReadCommit(AliceModel(), head);
  ASSERT_TRUE(commit.ok());
  ASSERT_TRUE(
      index_->DeleteRepoObjects(s.repo, {{commit->tree.bytes.begin(), commit->tree.bytes.end()}}).ok());
  GcReport r = Collect();
  EXPECT_EQ(r.unwalkable_repos, 1u);
  EXPECT_EQ(r.quarantined_repo_objects, 0u);
  EXPECT_EQ(r.newly_quarantined, 0u) << "its files, even doomed.bin only an old revision names, stay live";
  clock_.Advance(static_cast<int64_t>(kDefaultGraceSeconds) + 1);
  r = Collect();
  EXPECT_EQ(r.swept_files + r.swept_xorbs + r.swept_repo_objects, 0u);
  EXPECT_EQ(Download(s.doomed_hash, "repo-w"), s.doomed);
}

// A secret committed in a small file (kept inside the index) and in a large one (in xorbs): after a squash
// and a collection past the grace, neither is in any file of the index's database (its write-ahead log
// included; PostgreSQL's tables after the vacuum) nor in any blob of the store.
TEST_P(CollectorTest, APurgedSecretLeavesTheDatabaseAndTheStore) {
  MakeRepo();
  const std::string marker = "cairn-marker-" + HexEncode(Random(16));
  const Bytes marker_bytes(marker.begin(), marker.end());
  Bytes large = Random(700 << 10);
  std::copy(marker_bytes.begin(), marker_bytes.end(), large.begin() + (300 << 10));
  const std::string small_text = "token=" + marker + "\n";
  Upload({large}, "repo-w");
  Commit({hub::AddLfs{"model.bin", Pointer(large)},
          hub::AddInline{"secrets.env", Bytes(small_text.begin(), small_text.end())}});
  Commit({hub::DeletePath{"model.bin", false}, hub::DeletePath{"secrets.env", false},
          hub::AddInline{"README.md", Bytes{'o', 'k'}}});
  ASSERT_TRUE(hub_->SuperSquash(kAlice, AliceModel(), "main", "squash").ok());
  const auto contains = [&](const Bytes& hay) {
    return std::search(hay.begin(), hay.end(), marker_bytes.begin(), marker_bytes.end()) != hay.end();
  };
  const auto files_holding_marker = [&](const fs::path& root, std::string_view skip) {
    std::vector<std::string> found;
    for (const auto& e :
         fs::recursive_directory_iterator(root, fs::directory_options::skip_permission_denied)) {
      if (!e.is_regular_file() || (!skip.empty() && e.path().string().find(skip) != std::string::npos))
        continue;
      std::ifstream in(e.path(), std::ios::binary);
      const Bytes all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      if (contains(all)) found.push_back(e.path().string());
    }
    return found;
  };
  const auto blobs_holding_marker = [&] {
    size_t found = 0;
    for (auto kind : {store::BlobKind::kXorb, store::BlobKind::kShard}) {
      std::vector<xet::Hash> all;
      EXPECT_TRUE(store_->List(kind, [&](const xet::Hash& h) { all.push_back(h); }).ok());
      for (const auto& h : all) {
        auto bytes = store_->ReadWhole(kind, h);
        if (bytes.ok() && contains(*bytes)) ++found;
      }
    }
    return found;
  };
  const bool sqlite = GetParam() == Backend::kSqliteDisk;
  const fs::path db_root = sqlite ? dir_ : Postgres().directory();
  const std::string_view skip = sqlite ? "" : "pg_wal";  // PostgreSQL's log: docs/operations.md
  ASSERT_EQ(blobs_holding_marker(), 1u) << "the test plants what it looks for";
  if (sqlite) {
    ASSERT_FALSE(files_holding_marker(db_root, skip).empty());
  }

  Collect();
  clock_.Advance(static_cast<int64_t>(kDefaultGraceSeconds) + 1);
  GcOptions o;
  o.clock = &clock_;
  o.vacuum = !sqlite;  // PostgreSQL keeps deleted rows' bytes in its files until VACUUM FULL
  Collector c(*index_, *index_, *index_, *store_, o);
  auto run = c.Run();
  ASSERT_TRUE(run.ok()) << run.error().message;
  EXPECT_GT(run->swept_repo_objects, 0u);
  EXPECT_GT(run->swept_xorbs, 0u);
  EXPECT_EQ(blobs_holding_marker(), 0u);
  const auto left = files_holding_marker(db_root, skip);
  EXPECT_TRUE(left.empty()) << left.front();
  // What the repository still holds reads back.
  auto info = hub_->Stat(AliceModel(), *hub_->Resolve(AliceModel(), "main"), "README.md");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(*hub_->ReadBlob(AliceModel(), info->oid), (Bytes{'o', 'k'}));
}

// The collector decides from the index, never from a store listing: one that lags (blobs written lately
// missing from it) changes nothing of what it frees or keeps.
TEST_P(CollectorTest, AListingThatLagsTheWritesChangesNothing) {
  LaggingListStore lag(*store_);
  cas::ServiceOptions so;
  so.clock = &clock_;
  cas::CasService cas(*index_, lag, pool_, so);
  Scene s = MakeScene();
  lag.Freeze();
  // Written after the listing froze: a live upload, and one removed at once (a whole shard that goes).
  const Bytes kept = Random(300 << 10);
  const auto put = [&](const Bytes& data, const std::string& scope) {
    auto up = ingest::BuildUpload(std::vector<std::span<const uint8_t>>{data});
    for (const auto& x : up.xorbs) EXPECT_TRUE(cas.PutXorb(x.hash, x.body).ok());
    EXPECT_TRUE(cas.PutShard(up.shard_bytes, scope).ok());
    return up;
  };
  const auto live = put(kept, "lagged");
  const auto gone = put(Random(200 << 10), "lagged");
  ASSERT_TRUE(files_->Unregister(gone.file_hashes[0], "lagged").ok());
  ASSERT_TRUE(index_->DeleteRepo(s.repo, nullptr).ok());
  EXPECT_GT(lag.hidden(), 0u);

  const auto collect = [&] {
    GcOptions o;
    o.clock = &clock_;
    Collector c(*index_, *index_, *index_, lag, o);
    auto r = c.Run();
    EXPECT_TRUE(r.ok()) << r.error().message;
    return r.ok() ? *r : GcReport{};
  };
  collect();
  clock_.Advance(static_cast<int64_t>(kDefaultGraceSeconds) + 1);
  const GcReport r = collect();
  EXPECT_EQ(r.swept_files, 2u);
  EXPECT_EQ(r.swept_xorbs, s.doomed_only.size() + gone.xorbs.size());
  EXPECT_EQ(r.swept_shards, 1u);
  for (const auto& x : gone.xorbs) EXPECT_FALSE(Stored(x.hash)) << "freed, though no listing showed it";
  EXPECT_FALSE(store_->Stat(store::BlobKind::kShard, xet::ChunkHashOf(gone.shard_bytes))->exists);
  for (const auto& x : live.xorbs) EXPECT_TRUE(Stored(x.hash));
  EXPECT_EQ(Download(live.file_hashes[0], "lagged"), kept);
  EXPECT_EQ(Download(s.shared_hash, "plain"), s.shared);
  repair::FsckOptions fo;
  auto fsck = repair::Fsck(*cas_, *index_, *store_, fo);
  ASSERT_TRUE(fsck.ok()) << fsck.error().message;
  EXPECT_TRUE(fsck->clean()) << (fsck->findings.empty() ? "" : fsck->findings[0].detail);
}

TEST_P(CollectorTest, AnUploadNeverCommittedToItsRepositoryIsGarbage) {
  index::NewRepo nr;
  nr.ns = "alice";
  nr.name = "model";
  nr.scope = "repo-w";
  nr.read_scope = "repo-r";
  ASSERT_TRUE(index_->CreateRepo(nr).ok());
  const Bytes data = Random(400 << 10);
  auto up = Upload({data}, "repo-w");
  const xet::Hash shard = xet::ChunkHashOf(up.shard_bytes);
  GcReport r = Collect();
  EXPECT_EQ(r.newly_quarantined, 1u + up.xorbs.size());
  clock_.Advance(static_cast<int64_t>(kDefaultGraceSeconds) + 1);
  r = Collect();
  EXPECT_EQ(r.swept_files, 1u);
  EXPECT_EQ(r.swept_xorbs, up.xorbs.size());
  // Its shard named nothing else: it goes too, with its grant, so a rebuild finds nothing of the upload.
  EXPECT_EQ(r.swept_shards, 1u);
  EXPECT_EQ(r.reclaimed_shard_bytes, up.shard_bytes.size());
  size_t shards = 0, grants = 0;
  ASSERT_TRUE(store_->List(store::BlobKind::kShard, [&](const xet::Hash&) { ++shards; }).ok());
  ASSERT_TRUE(store_->List(store::BlobKind::kGrant, [&](const xet::Hash&) { ++grants; }).ok());
  EXPECT_EQ(shards + grants, 0u);
  EXPECT_FALSE(index_->GetShard(shard)->has_value());
  auto stats = index_->Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->shards, 0u);
  EXPECT_EQ(stats->stored_bytes, 0u);
  repair::FsckOptions fo;
  auto fsck = repair::Fsck(*cas_, *index_, *store_, fo);
  ASSERT_TRUE(fsck.ok()) << fsck.error().message;
  EXPECT_TRUE(fsck->clean()) << (fsck->findings.empty() ? "" : fsck->findings[0].detail);

  // The same upload again, byte for byte (the same shard): registered anew, blob and grant with it.
  Upload({data}, "repo-w");
  ASSERT_TRUE(index_->GetShard(shard)->has_value());
  EXPECT_TRUE(store_->Stat(store::BlobKind::kShard, shard)->exists);
  fsck = repair::Fsck(*cas_, *index_, *store_, fo);
  ASSERT_TRUE(fsck.ok()) << fsck.error().message;
  EXPECT_TRUE(fsck->clean()) << (fsck->findings.empty() ? "" : fsck->findings[0].detail);
  EXPECT_EQ(fsck->stored_grants, 1u);
}

// A dedup answer names a shard's whole neighbourhood: asked about the first chunk of the doomed file (in a
// xorb both files use), it offers the doomed file's own xorbs too. Offering them revives them, so a client
// that dedups against the answer later still finds them; a xorb a sweep has claimed is never offered.
TEST_P(CollectorTest, ADedupAnswerRevivesWhatItNamesAndNeverNamesAClaimedXorb) {
  Scene s = MakeScene();
  ASSERT_TRUE(index_->DeleteRepo(s.repo, nullptr).ok());
  Collect();
  clock_.Advance(static_cast<int64_t>(kDefaultGraceSeconds) + 1);
  auto first = index_->GetFile(s.doomed_hash);
  ASSERT_TRUE(first.ok());
  auto layout = index_->GetXorb((*first)->term(0).xorb);
  ASSERT_TRUE(layout.ok());
  const xet::ChunkHash chunk = (*layout)->chunk((*first)->term(0).chunk_start).hash;
  const auto offered = [&]() -> std::set<xet::XorbHash> {
    auto answer = cas_->DedupShard(chunk, "repo-w");  // the scope that registered it (entries outlive it)
    EXPECT_TRUE(answer.ok()) << answer.error().message;
    if (!answer.ok()) return {};
    auto shard = xet::ParseShard(*answer);
    EXPECT_TRUE(shard.ok());
    std::set<xet::XorbHash> out;
    for (const auto& x : shard->xorbs) out.insert(x.hash);
    return out;
  };
  // Claimed during a sweep: the answer leaves that xorb out (the cached answer is checked again too).
  bool asked = false;
  Collect([&](std::string_view step) -> Status {
    if (step == "claimed" && !asked) {
      asked = true;
      const auto names = offered();
      size_t claimed = 0;
      for (const auto& x : s.doomed_only) claimed += names.contains(x) ? 0 : 1;
      EXPECT_GT(claimed, 0u);
      for (const auto& x : s.both) EXPECT_TRUE(names.contains(x)) << x.hex();
    }
    return Ok{};
  });
  EXPECT_TRUE(asked);
  for (const auto& x : offered()) EXPECT_TRUE(Stored(x)) << x.hex();

  // Another doomed set, asked about inside the grace: the answer revives it, so the next run past the grace
  // (measured from the mark before the answer) frees nothing it named.
  Scene t = MakeScene();
  ASSERT_TRUE(index_->DeleteRepo(t.repo, nullptr).ok());
  Collect();
  clock_.Advance(static_cast<int64_t>(kDefaultGraceSeconds) - 86400);
  auto f = index_->GetFile(t.doomed_hash);
  ASSERT_TRUE(f.ok());
  auto l = index_->GetXorb((*f)->term(0).xorb);
  ASSERT_TRUE(l.ok());
  auto answer = cas_->DedupShard((*l)->chunk((*f)->term(0).chunk_start).hash, "repo-w");
  ASSERT_TRUE(answer.ok()) << answer.error().message;
  clock_.Advance(2 * 86400);
  Collect();  // (frees what the first answer revived in s's neighbourhood, quarantined a grace ago)
  for (const auto& x : t.doomed_only) EXPECT_TRUE(Stored(x)) << x.hex();
  // Quarantined again from that run on: a full grace later they go.
  clock_.Advance(static_cast<int64_t>(kDefaultGraceSeconds) + 1);
  Collect();
  for (const auto& x : t.doomed_only) EXPECT_FALSE(Stored(x)) << x.hex();
}

TEST_P(CollectorTest, AnUploadDuringTheSweepWaitsThenStoresTheBytesAgain) {
  Scene s = MakeScene();
  auto xorb_bytes = store_->ReadWhole(store::BlobKind::kXorb, s.doomed_only[0]);
  ASSERT_TRUE(xorb_bytes.ok());
  ASSERT_TRUE(index_->DeleteRepo(s.repo, nullptr).ok());
  Collect();
  clock_.Advance(static_cast<int64_t>(kDefaultGraceSeconds) + 1);
  // The body a client sends: the chunk region (without the footer the server writes).
  auto entry = index_->GetXorb(s.doomed_only[0]);
  ASSERT_TRUE(entry.ok());
  const Bytes body(xorb_bytes->begin(), xorb_bytes->begin() + (*entry)->region_size);
  bool tried = false;
  GcReport r = Collect([&](std::string_view step) -> Status {
    if (step == "claimed" && !tried) {
      tried = true;
      // Claimed: the upload is refused for a retry (503), the bytes are not touched.
      auto put = cas_->PutXorb(s.doomed_only[0], body);
      EXPECT_FALSE(put.ok());
      if (!put.ok()) {
        EXPECT_EQ(put.error().code, ErrorCode::kUnavailable);
      }
    }
    return Ok{};
  });
  EXPECT_TRUE(tried);
  EXPECT_EQ(r.swept_xorbs, s.doomed_only.size());
  EXPECT_FALSE(Stored(s.doomed_only[0]));
  // The retry after the sweep stores it anew.
  auto put = cas_->PutXorb(s.doomed_only[0], body);
  ASSERT_TRUE(put.ok()) << put.error().message;
  EXPECT_TRUE(*put);
  EXPECT_TRUE(Stored(s.doomed_only[0]));
}

TEST_P(CollectorTest, AShardNamingAClaimedXorbIsRefusedForARetryAndAfterTheSweepAsUnknown) {
  Scene s = MakeScene();
  ASSERT_TRUE(index_->DeleteRepo(s.repo, nullptr).ok());
  Collect();
  clock_.Advance(static_cast<int64_t>(kDefaultGraceSeconds) + 1);
  // The same files' shard again, as a client whose cache still names the xorbs would send it.
  auto up = [&] {
    std::vector<std::span<const uint8_t>> spans{s.doomed, s.shared};
    ingest::BuildOptions o;
    o.max_xorb_bytes = 256 << 10;
    return ingest::BuildUpload(spans, o);
  }();
  bool tried = false;
  Collect([&](std::string_view step) -> Status {
    if (step == "claimed" && !tried) {
      tried = true;
      auto r = cas_->PutShard(up.shard_bytes, "plain");
      EXPECT_FALSE(r.ok());
      if (!r.ok()) {
        EXPECT_EQ(r.error().code, ErrorCode::kUnavailable) << r.error().message;
      }
    }
    return Ok{};
  });
  EXPECT_TRUE(tried);
  auto r = cas_->PutShard(up.shard_bytes, "plain");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kUnknownReference) << r.error().message;
  // The client sends the xorbs again (its cache expired with the grace), then the shard: accepted.
  for (const auto& x : up.xorbs) ASSERT_TRUE(cas_->PutXorb(x.hash, x.body).ok());
  ASSERT_TRUE(cas_->PutShard(up.shard_bytes, "plain").ok());
  EXPECT_EQ(Download(s.doomed_hash, "plain"), s.doomed);
}

TEST_P(CollectorTest, AFileCommittedBetweenTheMarkAndTheSweepKeepsItsXorbs) {
  Scene s = MakeScene();
  ASSERT_TRUE(index_->DeleteRepo(s.repo, nullptr).ok());
  Collect();
  clock_.Advance(static_cast<int64_t>(kDefaultGraceSeconds) + 1);
  GcReport r = Collect([&](std::string_view step) -> Status {
    if (step == "marked") {
      EXPECT_TRUE(index_->ShareFile(s.doomed_hash, "plain").ok());
    }
    return Ok{};
  });
  EXPECT_EQ(r.swept_files, 0u);
  EXPECT_EQ(r.swept_xorbs, 0u);
  EXPECT_EQ(Download(s.doomed_hash, "plain"), s.doomed);
  // And later runs see it live.
  clock_.Advance(static_cast<int64_t>(kDefaultGraceSeconds) + 1);
  r = Collect();
  EXPECT_EQ(r.swept_xorbs, 0u);
  EXPECT_EQ(Download(s.doomed_hash, "plain"), s.doomed);
}

TEST_P(CollectorTest, KilledAtAnyStepTheNextRunFinishesTheSameWay) {
  for (const std::string_view kill : {"resumed", "repositories", "marked", "files swept", "claimed",
                                      "deleted", "dropped", "shards deleted"}) {
    SCOPED_TRACE(std::string(kill));
    TearDown();
    SetUp();
    Scene s = MakeScene();
    ASSERT_TRUE(index_->DeleteRepo(s.repo, nullptr).ok());
    // And an upload of its own (a shard that goes whole), removed.
    auto alone = Upload({Random(300 << 10)}, "plain2");
    ASSERT_TRUE(files_->Unregister(alone.file_hashes[0], "plain2").ok());
    Collect();
    clock_.Advance(static_cast<int64_t>(kDefaultGraceSeconds) + 1);
    {
      GcOptions o;
      o.clock = &clock_;
      o.batch = 2;
      o.hook = [&](std::string_view step) -> Status {
        if (step == kill) return IoError("killed at " + std::string(step));
        return Ok{};
      };
      Collector c(*index_, *index_, *index_, *store_, o);
      auto r = c.Run();
      ASSERT_FALSE(r.ok());
    }
    {
      // What a killed sweep leaves is its unfinished work, which fsck tells from damage.
      repair::FsckOptions fo;
      auto swept = BeingSwept(*index_);
      ASSERT_TRUE(swept.ok());
      fo.being_swept = *swept;
      auto fsck = repair::Fsck(*cas_, *index_, *store_, fo);
      ASSERT_TRUE(fsck.ok()) << fsck.error().message;
      EXPECT_FALSE(fsck->damaged()) << (fsck->findings.empty() ? "" : fsck->findings[0].detail);
    }
    // Whatever the first run left, this one finishes it.
    Collect();
    for (const auto& x : s.doomed_only) EXPECT_FALSE(Stored(x)) << x.hex();
    for (const auto& x : s.both) EXPECT_TRUE(Stored(x)) << x.hex();
    EXPECT_EQ(index_->GetFile(s.doomed_hash).error().code, ErrorCode::kNotFound);
    EXPECT_EQ(Download(s.shared_hash, "plain"), s.shared);
    for (auto kind : {index::GcKind::kXorb, index::GcKind::kShard}) {
      auto left = index_->ScanQuarantine(kind, std::nullopt, 100);
      ASSERT_TRUE(left.ok());
      EXPECT_TRUE(left->empty());
    }
    EXPECT_FALSE(store_->Stat(store::BlobKind::kShard, xet::ChunkHashOf(alone.shard_bytes))->exists);
    repair::FsckOptions fo;
    auto fsck = repair::Fsck(*cas_, *index_, *store_, fo);
    ASSERT_TRUE(fsck.ok()) << fsck.error().message;
    EXPECT_TRUE(fsck->clean()) << (fsck->findings.empty() ? "" : fsck->findings[0].detail);
  }
}

// A node that cached a file's terms and its whole-file answer, while another node's collector swept the file
// and an upload registered it again with other xorbs, serves the new record (found by the 1,000-round soak:
// the stale terms named swept xorbs).
TEST_P(CollectorTest, ANodesCachedTermsFollowAFileSweptAndRegisteredAgain) {
  const Bytes data = Random(700 << 10);
  const auto first = Upload({Random(300 << 10), data}, "plain");  // packed with another file
  const xet::FileHash file = first.file_hashes[1];
  auto other = OpenIndexAt();
  ASSERT_NE(other, nullptr);
  cas::ServiceOptions so;
  so.clock = &clock_;
  cas::CasService cas(*other, *store_, pool_, so);
  files::FileService files(cas, *other, {});
  const auto answer = [&] {
    auto a = cas.Reconstruct(file, "plain", std::nullopt, cas::ApiVersion::kV2);
    EXPECT_TRUE(a.ok()) << a.error().message;
    return a.ok() ? a->Text() : std::string();
  };
  EXPECT_EQ(Download(file, "plain", &files), data);  // cached there: terms and whole-file plan
  const std::string before = answer();

  ASSERT_TRUE(files_->Unregister(first.file_hashes[0], "plain").ok());
  ASSERT_TRUE(files_->Unregister(file, "plain").ok());
  Collect();
  clock_.Advance(static_cast<int64_t>(kDefaultGraceSeconds) + 1);
  ASSERT_GT(Collect().swept_xorbs, 0u);
  const auto again = Upload({data}, "plain");  // alone: other xorbs
  ASSERT_EQ(again.file_hashes[0], file);
  bool new_xorbs = false;
  for (const auto& x : again.xorbs) new_xorbs = new_xorbs || before.find(x.hash.hex()) == std::string::npos;
  ASSERT_TRUE(new_xorbs);

  EXPECT_EQ(Download(file, "plain", &files), data);
  const std::string after = answer();
  for (const auto& x : again.xorbs) EXPECT_NE(after.find(x.hash.hex()), std::string::npos) << x.hash.hex();
  for (const auto& x : first.xorbs) {
    if (!Stored(x.hash)) {
      EXPECT_EQ(after.find(x.hash.hex()), std::string::npos) << "names swept " << x.hash.hex();
    }
  }
}

TEST_P(CollectorTest, TwoCollectorsAtOnceDeleteEachObjectOnce) {
  Scene s = MakeScene();
  ASSERT_TRUE(index_->DeleteRepo(s.repo, nullptr).ok());
  Collect();
  clock_.Advance(static_cast<int64_t>(kDefaultGraceSeconds) + 1);
  auto other = OpenIndexAt();  // a second node
  ASSERT_NE(other, nullptr);
  GcReport a, b;
  std::thread t([&] {
    GcOptions o;
    o.clock = &clock_;
    o.batch = 1;
    Collector c(*other, *other, *other, *store_, o);
    auto r = c.Run();
    EXPECT_TRUE(r.ok()) << r.error().message;
    if (r.ok()) b = *r;
  });
  a = Collect();
  t.join();
  EXPECT_EQ(a.swept_xorbs + b.swept_xorbs, s.doomed_only.size());
  EXPECT_EQ(a.swept_files + b.swept_files, 1u);
  EXPECT_EQ(a.reclaimed_bytes + b.reclaimed_bytes, a.reclaimable_bytes + b.reclaimable_bytes -
                                                       (a.swept_xorbs == 0 ? a.reclaimable_bytes : 0) -
                                                       (b.swept_xorbs == 0 ? b.reclaimable_bytes : 0));
  EXPECT_EQ(Download(s.shared_hash, "plain"), s.shared);
}

TEST_P(CollectorTest, TheScheduleRunsTheCollectorAndKeepsItsReport) {
  Scene s = MakeScene();
  ASSERT_TRUE(index_->DeleteRepo(s.repo, nullptr).ok());
  GcOptions o;
  o.clock = &clock_;
  Scheduler scheduler(*index_, *index_, *index_, *store_, o, std::chrono::seconds(1));
  EXPECT_FALSE(scheduler.last().has_value());
  // Waits for the first run (one interval), without a bound on how fast it must be.
  while (scheduler.runs() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  auto last = scheduler.last();
  ASSERT_TRUE(last.has_value());
  EXPECT_EQ(scheduler.failures(), 0u);
  EXPECT_EQ(last->newly_quarantined, 1u + s.doomed_only.size());
}

TEST_P(CollectorTest, TheMarkPausesAfterEachPageItReadsAndStopsWhenThePauseSaysSo) {
  Scene s = MakeScene();
  ASSERT_TRUE(index_->DeleteRepo(s.repo, nullptr).ok());
  std::vector<std::chrono::nanoseconds> waits;
  GcOptions o;
  o.clock = &clock_;
  o.pause = [&](std::chrono::nanoseconds wait) -> Status {
    waits.push_back(wait);
    return Ok{};
  };
  // No pauses at 100 %.
  o.mark_share_percent = 100;
  o.dry_run = true;
  ASSERT_TRUE(Collector(*index_, *index_, *index_, *store_, o).Run().ok());
  EXPECT_TRUE(waits.empty());
  // At 50 %, one pause after the page of files and one after the page of xorbs, each as long as the reads
  // before it (not timed here: only that there is one).
  o.mark_share_percent = 50;
  ASSERT_TRUE(Collector(*index_, *index_, *index_, *store_, o).Run().ok());
  ASSERT_EQ(waits.size(), 2u);
  for (auto w : waits) EXPECT_GT(w.count(), 0);
  // A pause that fails (the scheduler stopping) ends the run there: the mark quarantines nothing.
  o.dry_run = false;
  o.pause = [](std::chrono::nanoseconds) -> Status { return Unavailable("stopping"); };
  auto cut = Collector(*index_, *index_, *index_, *store_, o).Run();
  ASSERT_FALSE(cut.ok());
  EXPECT_EQ(cut.error().message, "stopping");
  EXPECT_EQ(Collect().newly_quarantined, 1u + s.doomed_only.size());
}

// A bounded soak (CAIRN_GC_SOAK_ROUNDS rounds; by default 1,000 on SQLite + disk, ~15 s, which is where a
// node's stale cached terms first showed, and 100 on PostgreSQL + S3, whose rounds cost ~15 times as much):
// two nodes upload, delete, re-upload,
// download and collect, interleaved, while the clock moves by up to 20 days a round. Every download along the
// way is byte-exact; at the end, past two graces, every live file still is, fsck finds nothing, and the store
// holds exactly the xorbs the live files use.
TEST_P(CollectorTest, SoakTwoNodesUploadDeleteAndCollectInterleaved) {
  const char* env = std::getenv("CAIRN_GC_SOAK_ROUNDS");  // NOLINT(concurrency-mt-unsafe): no threads yet
  const int rounds = env != nullptr ? std::atoi(env) : (GetParam() == Backend::kSqliteDisk ? 1000 : 100);
  struct Node {
    std::unique_ptr<index::Index> index;
    std::unique_ptr<cas::CasService> cas;
    std::unique_ptr<files::FileService> files;
  };
  std::vector<Node> nodes(2);
  for (auto& n : nodes) {
    n.index = OpenIndexAt();
    ASSERT_NE(n.index, nullptr);
    cas::ServiceOptions so;
    so.clock = &clock_;
    n.cas = std::make_unique<cas::CasService>(*n.index, *store_, pool_, so);
    files::FileServiceOptions fo;
    fo.clock = &clock_;
    n.files = std::make_unique<files::FileService>(*n.cas, *n.index, fo);
  }
  // Contents drawn from a few segments, so that files of one upload share chunks (and xorbs).
  std::vector<Bytes> segments;
  for (int i = 0; i < 6; ++i) segments.push_back(Random(96 << 10));
  const auto make = [&] {
    Bytes b;
    for (int k = 0; k < 3; ++k) {
      const Bytes& seg = segments[rng_() % segments.size()];
      b.insert(b.end(), seg.begin(), seg.end());
    }
    const Bytes tail = Random(1 + rng_() % (64 << 10));
    b.insert(b.end(), tail.begin(), tail.end());
    return b;
  };
  std::map<xet::FileHash, Bytes> live, deleted;
  const auto upload = [&](Node& n, const std::vector<Bytes>& contents) {
    std::vector<std::span<const uint8_t>> spans(contents.begin(), contents.end());
    ingest::BuildOptions o;
    o.max_xorb_bytes = 128 << 10;
    auto up = ingest::BuildUpload(spans, o);
    for (const auto& x : up.xorbs) {
      auto put = n.cas->PutXorb(x.hash, x.body);
      ASSERT_TRUE(put.ok()) << put.error().message;
    }
    auto r = n.cas->PutShard(up.shard_bytes, "soak");
    ASSERT_TRUE(r.ok()) << r.error().message;
    for (size_t i = 0; i < contents.size(); ++i) {
      deleted.erase(up.file_hashes[i]);
      live[up.file_hashes[i]] = contents[i];
    }
  };
  uint64_t swept = 0;
  uint64_t reclaimed = 0, shards = 0;
  for (int round = 0; round < rounds; ++round) {
    Node& n = nodes[rng_() % nodes.size()];
    switch (rng_() % 6) {
      case 0:
      case 1:
        ASSERT_NO_FATAL_FAILURE(upload(n, {make(), make()}));
        break;
      case 2:
        if (!live.empty()) {
          auto it = std::next(live.begin(), static_cast<std::ptrdiff_t>(rng_() % live.size()));
          ASSERT_TRUE(n.files->Unregister(it->first, "soak").ok());
          deleted.insert(*it);
          live.erase(it);
        }
        break;
      case 3:
        if (!deleted.empty()) {  // the same bytes again: revives, or re-stores what was freed
          auto it = std::next(deleted.begin(), static_cast<std::ptrdiff_t>(rng_() % deleted.size()));
          ASSERT_NO_FATAL_FAILURE(upload(n, {it->second}));
        }
        break;
      case 4:
        if (!live.empty()) {
          auto it = std::next(live.begin(), static_cast<std::ptrdiff_t>(rng_() % live.size()));
          EXPECT_EQ(Download(it->first, "soak", n.files.get()), it->second) << "round " << round;
        }
        break;
      default: {
        GcOptions o;
        o.clock = &clock_;
        o.batch = 3;
        Collector c(*n.index, *n.index, *n.index, *store_, o);
        auto r = c.Run();
        ASSERT_TRUE(r.ok()) << r.error().message;
        swept += r->swept_xorbs;
        reclaimed += r->reclaimed_bytes;
        shards += r->swept_shards;
        break;
      }
    }
    clock_.Advance(static_cast<int64_t>(rng_() % (20 * 86400)));
  }
  // Past two graces: the first run quarantines what is left, the next frees it.
  for (int i = 0; i < 2; ++i) {
    clock_.Advance(static_cast<int64_t>(kDefaultGraceSeconds) + 1);
    const GcReport r = Collect();
    swept += r.swept_xorbs;
    reclaimed += r.reclaimed_bytes;
    shards += r.swept_shards;
  }
  EXPECT_GT(swept, 0u);
  // For the closing note and the log: what the soak freed.
  std::cout << "soak: " << rounds << " rounds on two nodes; " << live.size() << " files live, "
            << deleted.size() << " deleted; the collector freed " << swept << " xorbs (" << reclaimed
            << " bytes) and " << shards << " shards\n";
  RecordProperty("reclaimed_bytes", std::to_string(reclaimed));
  for (const auto& [h, content] : live) EXPECT_EQ(Download(h, "soak", nodes[0].files.get()), content);
  for (const auto& [h, content] : deleted) {
    EXPECT_FALSE(files_->Find(h, "soak").ok());
  }
  repair::FsckOptions fo;
  fo.deep = true;
  auto report = repair::Fsck(*cas_, *index_, *store_, fo);
  ASSERT_TRUE(report.ok()) << report.error().message;
  EXPECT_TRUE(report->clean()) << report->findings.size() << " finding(s), the first: "
                               << (report->findings.empty() ? "" : report->findings[0].detail);
  // The store holds exactly the xorbs live files use: no slack once the grace has passed.
  std::set<xet::XorbHash> used, stored;
  for (const auto& [h, content] : live) {
    auto e = index_->GetFile(h);
    ASSERT_TRUE(e.ok());
    for (size_t i = 0; i < (*e)->term_count; ++i) used.insert((*e)->term(i).xorb);
  }
  ASSERT_TRUE(store_->List(store::BlobKind::kXorb, [&](const xet::Hash& h) { stored.insert(h); }).ok());
  EXPECT_EQ(stored, used);
  // Last, as it writes to the store (a partly swept shard's survivors, registered as a shard of their own):
  // an index rebuilt from the store sees what this one does: the live files whole, the deleted ones not at
  // all.
  Rebuilt("soak", [&](index::Index&, files::FileService& files, const repair::FsckReport& rebuilt) {
    EXPECT_FALSE(rebuilt.damaged());
    for (const auto& [h, content] : live) EXPECT_EQ(Download(h, "soak", &files), content);
    for (const auto& [h, content] : deleted) EXPECT_FALSE(files.Find(h, "soak").ok());
  });
}

// A lost index rebuilt from the store after a sweep: the shard that registered both files names xorbs that
// are gone, so it cannot register whole; its surviving file comes back, the freed one does not.
TEST_P(CollectorTest, ARebuildAfterASweepKeepsTheLiveFilesOfAPartlySweptShard) {
  Scene s = MakeScene();
  ASSERT_TRUE(index_->DeleteRepo(s.repo, nullptr).ok());
  Collect();
  clock_.Advance(static_cast<int64_t>(kDefaultGraceSeconds) + 1);
  ASSERT_EQ(Collect().swept_xorbs, s.doomed_only.size());
  Rebuilt("r", [&](index::Index& fresh, files::FileService& files, const repair::FsckReport& report) {
    EXPECT_FALSE(report.damaged());
    EXPECT_EQ(Download(s.shared_hash, "repo-w", &files), s.shared);  // the scope its shard was granted to
    EXPECT_EQ(fresh.GetFile(s.doomed_hash).error().code, ErrorCode::kNotFound);
  });
}

// A file one plain scope removed and another still uses keeps its xorbs and its shard, whose grant names
// both scopes: the revocation stored beside it keeps a rebuild from giving it back to the first; a later
// upload to that scope deletes the revocation, and the next rebuild gives it back.
TEST_P(CollectorTest, ARebuildDoesNotGiveBackAFileItsScopeRemoved) {
  const Bytes data = Random(500 << 10);
  const auto f = Upload({data}, "p1").file_hashes[0];
  Upload({data}, "p2");
  const auto revocations = [&] {
    size_t n = 0;
    EXPECT_TRUE(store_->List(store::BlobKind::kRevocation, [&](const xet::Hash&) { ++n; }).ok());
    return n;
  };
  auto removed = files_->Unregister(f, "p1");
  ASSERT_TRUE(removed.ok() && *removed);
  EXPECT_EQ(revocations(), 1u);
  // Again: not seen, and nothing more is stored.
  EXPECT_FALSE(*files_->Unregister(f, "p1"));
  EXPECT_EQ(revocations(), 1u);
  Collect();
  clock_.Advance(static_cast<int64_t>(kDefaultGraceSeconds) + 1);
  EXPECT_EQ(Collect().swept_xorbs, 0u);  // p2 uses them

  Rebuilt("a", [&](index::Index& fresh, files::FileService& files, const repair::FsckReport& report) {
    EXPECT_FALSE(report.damaged());
    EXPECT_FALSE(*fresh.FileVisibleTo(f, "p1"));
    EXPECT_EQ(Download(f, "p2", &files), data);
    // The rebuilt index records the revocation too: fsck finds the two in agreement.
    cas::CasService cas(fresh, *store_, pool_, {});
    auto check = repair::Fsck(cas, fresh, *store_, {});
    ASSERT_TRUE(check.ok());
    EXPECT_TRUE(check->clean()) << check->findings[0].detail;
    EXPECT_EQ(check->indexed_revocations, 1u);
  });

  // p1 uploads the file again: its revocation is cleared and its blob deleted before the answer.
  Upload({data}, "p1");
  EXPECT_EQ(revocations(), 0u);
  EXPECT_TRUE(index_->ListRevocations(std::nullopt, 10)->empty());
  Rebuilt("b", [&](index::Index&, files::FileService& files, const repair::FsckReport& report) {
    EXPECT_FALSE(report.damaged());
    EXPECT_EQ(Download(f, "p1", &files), data);
  });
}

// A shard the collector dropped with its grants, uploaded again by both scopes that had registered it through
// the same node: each scope's grant is stored again, though the node remembers having written it.
TEST_P(CollectorTest, AShardMadeAgainAfterItsDropGetsBackEveryScopesGrant) {
  const Bytes data = Random(300 << 10);
  const auto up = Upload({data}, "p1");
  Upload({data}, "p2");
  const xet::Hash shard = xet::ChunkHashOf(up.shard_bytes);
  for (const char* scope : {"p1", "p2"}) ASSERT_TRUE(*files_->Unregister(up.file_hashes[0], scope));
  Collect();
  clock_.Advance(static_cast<int64_t>(kDefaultGraceSeconds) + 1);
  ASSERT_EQ(Collect().swept_shards, 1u);
  const auto granted = [&](const std::string& scope) {
    return store_->Stat(store::BlobKind::kGrant, cas::GrantName({shard, scope}))->exists;
  };
  EXPECT_FALSE(granted("p1"));
  EXPECT_FALSE(granted("p2"));
  Upload({data}, "p1");
  Upload({data}, "p2");
  EXPECT_TRUE(granted("p1"));
  EXPECT_TRUE(granted("p2"));
  Rebuilt("g", [&](index::Index&, files::FileService& files, const repair::FsckReport& report) {
    EXPECT_FALSE(report.damaged());
    for (const char* scope : {"p1", "p2"}) EXPECT_EQ(Download(up.file_hashes[0], scope, &files), data);
  });
}

// fsck finds a revocation the index records and the store lacks (a DELETE that died between the two), and
// one the store holds for a file the scope sees again; repair stores the first, deletes the second.
TEST_P(CollectorTest, FsckReportsAndRepairsRevocationsOutOfStep) {
  const Bytes data = Random(300 << 10);
  const auto f = Upload({data}, "p1").file_hashes[0];
  ASSERT_TRUE(*files_->Unregister(f, "p1"));
  const cas::Revocation r{f, "p1"};
  ASSERT_TRUE(*store_->Delete(store::BlobKind::kRevocation, cas::RevocationName(r)));
  auto report = repair::Fsck(*cas_, *index_, *store_, {});
  ASSERT_TRUE(report.ok());
  ASSERT_EQ(report->findings.size(), 1u);
  EXPECT_EQ(report->findings[0].kind, repair::FindingKind::kMissingObject);
  EXPECT_EQ(report->findings[0].what, "revocation");
  // The DELETE again stores it (the client's retry after a failure).
  EXPECT_FALSE(*files_->Unregister(f, "p1"));
  EXPECT_TRUE(repair::Fsck(*cas_, *index_, *store_, {})->clean());
  ASSERT_TRUE(*store_->Delete(store::BlobKind::kRevocation, cas::RevocationName(r)));
  repair::FsckOptions fix;
  fix.repair = true;
  report = repair::Fsck(*cas_, *index_, *store_, fix);
  ASSERT_TRUE(report.ok());
  EXPECT_FALSE(report->damaged());
  EXPECT_TRUE(store_->Stat(store::BlobKind::kRevocation, cas::RevocationName(r))->exists);

  // A registration cleared it and left its blob (sharing clears without deleting; so does a crash after a
  // shard's commit): reported, not damage; the collector deletes it.
  ASSERT_TRUE(index_->ShareFile(f, "p1").ok());
  report = repair::Fsck(*cas_, *index_, *store_, {});
  ASSERT_TRUE(report.ok());
  ASSERT_EQ(report->findings.size(), 1u);
  EXPECT_EQ(report->findings[0].kind, repair::FindingKind::kUnindexed);
  EXPECT_FALSE(report->damaged());
  EXPECT_EQ(Collect().finished_revocations, 1u);
  EXPECT_FALSE(store_->Stat(store::BlobKind::kRevocation, cas::RevocationName(r))->exists);
  EXPECT_TRUE(index_->ListRevocations(std::nullopt, 10)->empty());
  EXPECT_TRUE(repair::Fsck(*cas_, *index_, *store_, {})->clean());
}

TEST(GcGrace, TheDefaultCoversTheClientsCaches) {
  // 21 days of own-upload shard cache + 7 days of dedup answers + 1 hour of transfer URLs = 28 d 1 h.
  EXPECT_EQ(MinimumGraceSeconds(7 * 86400, 3600), 28u * 86400 + 3600);
  EXPECT_GE(kDefaultGraceSeconds, MinimumGraceSeconds(7 * 86400, 3600));
}

INSTANTIATE_TEST_SUITE_P(Backends, CollectorTest,
                         ::testing::Values(Backend::kSqliteDisk, Backend::kPostgresS3), testing::BackendName);

}  // namespace
}  // namespace cairn::gc
