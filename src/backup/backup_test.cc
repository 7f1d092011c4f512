// Backup and restore against every backend pair (the source SQLite + local disk or PostgreSQL + S3 on
// SeaweedFS; each backup restored into both): consistent while uploads and a collector run (made
// deterministic with the backup's and the collector's step hooks), incremental, verified, refused where it
// would change something it should not.
#include "backup/backup.h"

#include <gtest/gtest.h>

#include <fstream>

#include "gc/collector.h"
#include "gc/test_deployment.h"
#include "repair/fsck.h"
#include "xet/test_support.h"

namespace cairn::backup {
namespace {

using gc::testing::Backend;
using gc::testing::Bytes;
namespace fs = std::filesystem;

class BackupTest : public gc::testing::DeploymentTest {
 protected:
  void SetUp() override {
    DeploymentTest::SetUp();
    dest_ = (dir_ / "backup").string();
  }

  BackupReport Backup(std::function<xet::Status(std::string_view)> hook = nullptr, size_t keep = 2,
                      std::function<void(std::string_view, uint64_t, uint64_t)> progress = nullptr) {
    BackupOptions o;
    o.clock = &clock_;
    o.hook = std::move(hook);
    o.progress = std::move(progress);
    o.keep = keep;
    o.threads = 2;
    auto r = TakeBackup(url_, *store_, dest_, o);
    EXPECT_TRUE(r.ok()) << r.error().message;
    return r.ok() ? *r : BackupReport{};
  }

  // A collector run; `pause` replaces its waits (for pacing and for backups) when given.
  xet::Result<gc::GcReport> RunCollector(
      std::function<xet::Status(std::chrono::nanoseconds)> pause = nullptr) {
    gc::GcOptions o;
    o.clock = &clock_;
    o.pause = std::move(pause);
    o.mark_share_percent = 100;
    gc::Collector c(*index_, *index_, *index_, *store_, o);
    return c.Run();
  }
  gc::GcReport Collect() {
    auto r = RunCollector();
    EXPECT_TRUE(r.ok()) << r.error().message;
    return r.ok() ? *r : gc::GcReport{};
  }

  // A file of `n` random bytes uploaded alone to `scope`.
  std::pair<xet::FileHash, Bytes> Put(size_t n, const std::string& scope) {
    Bytes data = Random(n);
    auto up = Upload({data}, scope);
    return {up.file_hashes[0], std::move(data)};
  }

  // Restores the latest snapshot into a fresh deployment of `backend` and hands it to `check`.
  void Restored(const std::string& name, Backend backend,
                const std::function<void(index::Index&, store::BlobStore&, files::FileService&)>& check) {
    Other target = OtherDeployment(name, backend);
    ASSERT_NE(target.store, nullptr);
    RestoreOptions ro;
    ro.threads = 2;
    auto r = Restore(dest_, target.url, *target.store, ro);
    ASSERT_TRUE(r.ok()) << r.error().message;
    auto ix = index::OpenIndex(target.url);
    ASSERT_TRUE(ix.ok()) << ix.error().message;
    cas::CasService cas(**ix, *target.store, pool_, {});
    files::FileService files(cas, **ix, {});
    check(**ix, *target.store, files);
    repair::FsckOptions fo;
    fo.deep = true;
    auto fsck = repair::Fsck(cas, **ix, *target.store, fo);
    ASSERT_TRUE(fsck.ok()) << fsck.error().message;
    EXPECT_TRUE(fsck->clean()) << (fsck->findings.empty() ? "" : fsck->findings[0].detail);
  }

  std::string dest_;
};

// Everything acknowledged before the backup's snapshot comes back whole on either backend pair; what came
// after it does not; a collector that wants to delete while the backup copies waits for it.
TEST_P(BackupTest, TakenDuringUploadsAndACollectionItRestoresOnEitherBackend) {
  const int64_t repo = MakeRepo();
  const Bytes small = Random(300);
  const Bytes large = Random(700 << 10);
  auto up = Upload({large}, "repo-w");
  Commit({hub::AddInline{"config.json", small}, hub::AddLfs{"model.bin", Pointer(large)}});
  ASSERT_NE(repo, 0);
  const auto plain = Put(500 << 10, "plain");
  auto [doomed, doomed_bytes] = Put(400 << 10, "plain");
  ASSERT_TRUE(files_->Unregister(doomed, "plain").ok());
  const auto revoked = Put(200 << 10, "plain");
  ASSERT_TRUE(files_->Unregister(revoked.first, "plain").ok());
  ASSERT_TRUE(index_->ShareFile(revoked.first, "other").ok());  // still live, no longer in "plain"
  Collect();                                                    // quarantines the doomed file's xorbs
  const xet::XorbHash doomed_xorb = (*index_->GetFile(doomed))->term(0).xorb;
  clock_.Advance(static_cast<int64_t>(gc::kDefaultGraceSeconds) + 1);

  std::pair<xet::FileHash, Bytes> during, after, mid;
  bool collector_waited = false;
  // Uploaded while the index is being copied (after its first table's first page): not in the snapshot.
  const auto while_copying = [&](std::string_view what, uint64_t, uint64_t) {
    if (what == "xorbs" && mid.second.empty()) mid = Put(200 << 10, "plain");
  };
  const BackupReport r = Backup(
      [&](std::string_view step) -> xet::Status {
        if (step == "held") {
          during = Put(300 << 10, "plain");  // acknowledged before the snapshot: in it
        } else if (step == "snapshot") {
          after = Put(300 << 10, "plain");  // after it: not in it
          // A collector past the grace wants to delete the doomed file's xorbs: it waits for the backup (here
          // it gives up at its first wait), having deleted nothing.
          auto blocked = RunCollector([&](std::chrono::nanoseconds) -> xet::Status {
            collector_waited = true;
            return xet::Unavailable("stopped");
          });
          EXPECT_FALSE(blocked.ok());
        }
        return xet::Ok{};
      },
      2, while_copying);
  ASSERT_FALSE(mid.second.empty());
  EXPECT_TRUE(collector_waited);
  EXPECT_TRUE(Stored(doomed_xorb));
  EXPECT_GT(r.xorbs.copied, 0u);
  EXPECT_EQ(r.xorbs.named, r.xorbs.copied);
  EXPECT_EQ(r.manifest.xorbs, r.xorbs.named);
  // Once it is done, the collector frees what it wanted to.
  EXPECT_GT(Collect().swept_xorbs, 0u);
  EXPECT_FALSE(Stored(doomed_xorb));

  for (const auto& [name, backend] :
       {std::pair{"to-sqlite", Backend::kSqliteDisk}, std::pair{"to-postgres", Backend::kPostgresS3}}) {
    SCOPED_TRACE(name);
    Restored(name, backend, [&](index::Index& ix, store::BlobStore&, files::FileService& files) {
      EXPECT_EQ(Download(plain.first, "plain", &files), plain.second);
      EXPECT_EQ(Download(during.first, "plain", &files), during.second);
      EXPECT_EQ(Download(up.file_hashes[0], "repo-r", &files), large);
      EXPECT_EQ(Download(revoked.first, "other", &files), revoked.second);
      EXPECT_FALSE(files.Find(after.first, "plain").ok());    // uploaded after the snapshot
      EXPECT_FALSE(files.Find(mid.first, "plain").ok());      // uploaded while it was copied
      EXPECT_FALSE(files.Find(revoked.first, "plain").ok());  // removed from that scope before it
      auto found = ix.FindRepo(index::RepoType::kModel, "alice", "model");
      ASSERT_TRUE(found.ok());
      // The small file is in the index: the repository's history came back with it.
      hub::HubService hub(ix, files, {});
      auto repo_there = hub.Open(kAlice, {index::RepoType::kModel, "alice", "model"}, false);
      ASSERT_TRUE(repo_there.ok());
      const auto head = hub.Resolve(*repo_there, "main");
      ASSERT_TRUE(head.ok());
      auto info = hub.Stat(*repo_there, *head, "config.json");
      ASSERT_TRUE(info.ok());
      auto blob = hub.ReadBlob(*repo_there, info->oid);
      ASSERT_TRUE(blob.ok());
      EXPECT_EQ(*blob, small);
    });
  }
}

// A second backup copies only what is new; past `keep`, old snapshots go, and the objects only they named.
TEST_P(BackupTest, ASecondBackupCopiesOnlyWhatIsNewAndOldSnapshotsGo) {
  const auto a = Put(600 << 10, "plain");
  const BackupReport first = Backup();
  ASSERT_GT(first.xorbs.copied, 0u);
  // It holds the signing keys: the directory it made is its owner's alone.
  EXPECT_EQ(fs::status(dest_).permissions() & fs::perms::all, fs::perms::owner_all);

  const auto b = Put(600 << 10, "plain");
  clock_.Advance(60);
  const BackupReport second = Backup();
  EXPECT_EQ(second.xorbs.already, first.xorbs.named);
  EXPECT_EQ(second.xorbs.copied, second.xorbs.named - first.xorbs.named);
  EXPECT_GT(second.xorbs.copied, 0u);
  // What this run put (the new xorbs' blobs, footers included), not what the backup held already.
  EXPECT_GE(second.xorbs.bytes_copied, second.manifest.xorb_bytes - first.manifest.xorb_bytes);
  EXPECT_LT(second.xorbs.bytes_copied, second.manifest.xorb_bytes);
  EXPECT_EQ(second.shards.copied, 1u);
  EXPECT_EQ(second.dropped_snapshots, 0u);
  EXPECT_NE(second.manifest.name, first.manifest.name);

  // a is deleted and collected; a third backup that keeps one snapshot drops the two before it and a's xorbs.
  ASSERT_TRUE(files_->Unregister(a.first, "plain").ok());
  Collect();
  clock_.Advance(static_cast<int64_t>(gc::kDefaultGraceSeconds) + 1);
  EXPECT_GT(Collect().swept_xorbs, 0u);
  const BackupReport third = Backup(nullptr, /*keep=*/1);
  EXPECT_EQ(third.xorbs.copied, 0u);
  EXPECT_EQ(third.xorbs.bytes_copied, 0u);
  EXPECT_EQ(third.dropped_snapshots, 2u);
  EXPECT_EQ(third.pruned_objects, first.xorbs.named + first.shards.named + first.grants.named);
  auto v = VerifyBackup(dest_, 2);
  ASSERT_TRUE(v.ok()) << v.error().message;
  EXPECT_TRUE(v->ok());
  EXPECT_EQ(v->snapshots.size(), 1u);
  Restored("restored", GetParam(), [&](index::Index&, store::BlobStore&, files::FileService& files) {
    EXPECT_EQ(Download(b.first, "plain", &files), b.second);
    EXPECT_FALSE(files.Find(a.first, "plain").ok());
  });
}

// --verify re-hashes everything: a flipped byte in an object or in a snapshot's index is found, and a restore
// from the damaged backup writes nothing to the index.
TEST_P(BackupTest, VerifyFindsAFlippedByteAndARestoreRefusesTheDamage) {
  Put(300 << 10, "plain");
  const BackupReport r = Backup();
  auto v = VerifyBackup(dest_, 2);
  ASSERT_TRUE(v.ok()) << v.error().message;
  EXPECT_TRUE(v->ok());
  EXPECT_EQ(v->objects, r.xorbs.named + r.shards.named + r.grants.named);

  const auto flip = [](const fs::path& p, uint64_t at) { ASSERT_TRUE(xet::testing::FlipByte(p, at)); };
  fs::path xorb;
  for (const auto& e : fs::recursive_directory_iterator(fs::path(dest_) / "objects" / "xorbs")) {
    if (e.is_regular_file()) xorb = e.path();
  }
  ASSERT_FALSE(xorb.empty());
  flip(xorb, 100);
  v = VerifyBackup(dest_, 2);
  ASSERT_TRUE(v.ok());
  ASSERT_EQ(v->failed.size(), 1u);
  EXPECT_NE(v->failed[0].find(xorb.filename().string().substr(0, 16)), std::string::npos) << v->failed[0];

  Other target = OtherDeployment("refused", GetParam());
  auto restored = Restore(dest_, target.url, *target.store, {});
  ASSERT_FALSE(restored.ok());
  EXPECT_NE(restored.error().message.find("could not be copied"), std::string::npos);
  auto ix = index::OpenIndex(target.url);
  ASSERT_TRUE(ix.ok());
  EXPECT_EQ((*ix)->Stats()->files, 0u);  // nothing written to the index
  flip(xorb, 100);                       // mended

  const fs::path snapshot = fs::path(dest_) / "snapshots" / r.manifest.name / "index.sqlite";
  flip(snapshot, fs::file_size(snapshot) / 2);
  v = VerifyBackup(dest_, 2);
  ASSERT_TRUE(v.ok());
  ASSERT_FALSE(v->ok());
  EXPECT_NE(v->failed[0].find("not the file its manifest describes"), std::string::npos) << v->failed[0];
  restored = Restore(dest_, target.url, *target.store, {});
  ASSERT_FALSE(restored.ok());
  EXPECT_EQ(restored.error().code, xet::ErrorCode::kHashMismatch);
}

// A restore refuses a destination that holds anything (a server started on it made its keys).
TEST_P(BackupTest, RestoreRefusesADeploymentInUse) {
  Put(100 << 10, "plain");
  Backup();
  auto restored = Restore(dest_, url_, *store_, {});  // the source itself
  ASSERT_FALSE(restored.ok());
  EXPECT_EQ(restored.error().code, xet::ErrorCode::kConflict);
  EXPECT_NE(restored.error().message.find("not empty"), std::string::npos);
}

// Killed at each step, a backup leaves the last complete one as it was, and the next run completes.
TEST_P(BackupTest, AKilledBackupLeavesTheLastOneWhole) {
  const auto a = Put(300 << 10, "plain");
  const BackupReport first = Backup();
  for (const char* kill_at : {"held", "snapshot", "copied"}) {
    SCOPED_TRACE(kill_at);
    Put(100 << 10, "plain");
    clock_.Advance(1);
    BackupOptions o;
    o.clock = &clock_;
    o.hook = [&](std::string_view step) -> xet::Status {
      return step == kill_at ? xet::Status(xet::Unavailable("killed")) : xet::Status(xet::Ok{});
    };
    ASSERT_FALSE(TakeBackup(url_, *store_, dest_, o).ok());
    std::ifstream latest(fs::path(dest_) / "LATEST");
    std::string name;
    latest >> name;
    EXPECT_EQ(name, first.manifest.name);
    auto v = VerifyBackup(dest_, 2);
    ASSERT_TRUE(v.ok());
    EXPECT_TRUE(v->ok());
  }
  clock_.Advance(1);
  const BackupReport next = Backup();
  EXPECT_EQ(next.xorbs.named, next.xorbs.copied + next.xorbs.already);
  for (const auto& e : fs::directory_iterator(fs::path(dest_) / "snapshots"))
    EXPECT_FALSE(e.path().string().ends_with(".partial")) << e.path();
  Restored("restored", GetParam(), [&](index::Index&, store::BlobStore&, files::FileService& files) {
    EXPECT_EQ(Download(a.first, "plain", &files), a.second);
  });
}

INSTANTIATE_TEST_SUITE_P(Backends, BackupTest, ::testing::Values(Backend::kSqliteDisk, Backend::kPostgresS3),
                         gc::testing::BackendName);

TEST(ManifestTest, RoundTripsAndRefusesWhatItDidNotWrite) {
  Manifest m;
  m.name = "20261203T152637Z";
  m.taken_at = 1'764'775'597;
  m.schema = 14;
  m.index_bytes = 4096;
  m.index_blake3 = std::string(64, 'a');
  m.xorbs = 3;
  m.xorb_bytes = 300;
  m.shards = 1;
  m.shard_bytes = 50;
  m.grants = 1;
  m.tables.push_back({"xorbs", 3, 0, std::string(64, 'b')});
  auto back = ParseManifest(m.Encode());
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(back->Encode(), m.Encode());
  const std::string good = m.Encode();
  for (const std::string& bad :
       {std::string(), std::string("cairn-backup 2\n"), good.substr(0, good.size() - 1), good + "name x\n",
        good + "surprise 1\n", std::string("cairn-backup 1\nname ../../etc\n")}) {
    EXPECT_FALSE(ParseManifest(bad).ok()) << bad;
  }
  std::string no_index = good;
  no_index.erase(no_index.find("index "),
                 no_index.find('\n', no_index.find("index ")) - no_index.find("index ") + 1);
  EXPECT_FALSE(ParseManifest(no_index).ok());
}

}  // namespace
}  // namespace cairn::backup
