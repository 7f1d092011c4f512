// Backup and restore against every backend pair (the source SQLite + local disk or PostgreSQL + S3 on
// SeaweedFS; each backup restored into both) and both kinds of backup space (a directory; a bucket on
// SeaweedFS): consistent while uploads and a collector run (made deterministic with the backup's and the
// collector's step hooks), incremental, verified, refused where it would change something it should not.
#include "backup/backup.h"

#include <gtest/gtest.h>

#include <map>
#include <optional>

#include "common/test_fifo.h"
#include "gc/collector.h"
#include "gc/test_deployment.h"
#include "repair/fsck.h"
#include "store/s3_objects.h"
#include "xet/test_support.h"

namespace cairn::backup {
namespace {

using gc::testing::Backend;
using gc::testing::Bytes;
namespace fs = std::filesystem;

// Instantiated twice: "InDirectory" keeps the backups in a directory, "InBucket" in a bucket.
class BackupTest : public gc::testing::DeploymentTest {
 protected:
  void SetUp() override {
    DeploymentTest::SetUp();
    const std::string_view suite = ::testing::UnitTest::GetInstance()->current_test_info()->test_suite_name();
    in_bucket_ = suite.starts_with("InBucket/");
    if (in_bucket_) {
      static int next = 0;
      ASSERT_TRUE(gc::testing::Seaweed().CreateBucket(kBucket).ok());
      dest_prefix_ = "backup-" + std::to_string(::getpid()) + "-" + std::to_string(++next) + "/";
      dest_ = "s3://" + std::string(kBucket) + "/" + dest_prefix_;
      auto client = store::S3Client::Create(gc::testing::Seaweed().Options(kBucket));
      ASSERT_TRUE(client.ok()) << client.error().message;
      s3_ = std::move(*client);
    } else {
      dest_ = (dir_ / "backup").string();
    }
    space_ = OpenSpace();
    ASSERT_NE(space_, nullptr);
  }

  std::unique_ptr<BackupSpace> OpenSpace() {
    SpaceOptions o;
    o.create = true;
    o.s3.s3 = gc::testing::Seaweed().Options(kBucket);
    o.index_part_bytes = 64 << 10;  // an index file of several parts
    auto s = OpenBackupSpace(dest_, o);
    EXPECT_TRUE(s.ok()) << s.error().message;
    return s.ok() ? std::move(*s) : nullptr;
  }

  Result<VerifyReport> Verify() { return VerifyBackup(*space_, 2); }

  // Flips one byte of what the backup keeps at `path` (relative to it), at `at` (from the end when negative).
  void Flip(const std::string& path, int64_t at) {
    if (!in_bucket_) {
      const fs::path file = fs::path(dest_) / path;
      const auto size = static_cast<int64_t>(fs::file_size(file));
      ASSERT_TRUE(xet::testing::FlipByte(file, static_cast<uint64_t>(at < 0 ? size + at : at)));
      return;
    }
    auto body = store::S3GetObject(*s3_, dest_prefix_ + path, 1 << 30);
    ASSERT_TRUE(body.ok() && body->has_value()) << path;
    std::string bytes = **body;
    const auto size = static_cast<int64_t>(bytes.size());
    bytes[static_cast<size_t>(at < 0 ? size + at : at)] ^= 1;
    auto put = store::S3PutObject(*s3_, dest_prefix_ + path,
                                  {reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()});
    ASSERT_TRUE(put.ok() && *put);
  }
  // The path (relative to the backup) of one xorb it keeps.
  std::string SomeXorb() {
    std::string out;
    if (in_bucket_) {
      EXPECT_TRUE(
          store::S3ListKeys(*s3_, dest_prefix_ + "objects/xorbs/", [&](std::string_view key, uint64_t) {
            out = key.substr(dest_prefix_.size());
          }).ok());
      return out;
    }
    for (const auto& e : fs::recursive_directory_iterator(fs::path(dest_) / "objects" / "xorbs")) {
      if (e.is_regular_file()) out = fs::relative(e.path(), fs::path(dest_)).string();
    }
    return out;
  }
  // The path of (the first part of) a snapshot's index file.
  std::string IndexPath(const std::string& name) const {
    return "snapshots/" + name + (in_bucket_ ? "/index.sqlite.000000" : "/index.sqlite");
  }
  // How many snapshots the backup holds unfinished (a killed run's).
  size_t Unfinished() {
    size_t n = 0;
    if (!in_bucket_) {
      for (const auto& e : fs::directory_iterator(fs::path(dest_) / "snapshots"))
        n += e.path().string().ends_with(".partial") ? 1 : 0;
      return n;
    }
    std::map<std::string, bool> complete;
    EXPECT_TRUE(store::S3ListKeys(*s3_, dest_prefix_ + "snapshots/", [&](std::string_view key, uint64_t) {
                  key.remove_prefix(dest_prefix_.size() + 10);
                  const std::string name(key.substr(0, key.find('/')));
                  complete[name] = complete[name] || key.ends_with("/manifest");
                }).ok());
    for (const auto& [name, done] : complete) n += done ? 0 : 1;
    return n;
  }

  BackupReport Backup(std::function<Status(std::string_view)> hook = nullptr, size_t keep = 2,
                      std::function<void(std::string_view, uint64_t, uint64_t)> progress = nullptr) {
    BackupOptions o;
    o.clock = &clock_;
    o.hook = std::move(hook);
    o.progress = std::move(progress);
    o.keep = keep;
    o.threads = 2;
    auto r = TakeBackup(url_, *store_, *space_, o);
    EXPECT_TRUE(r.ok()) << r.error().message;
    return r.ok() ? *r : BackupReport{};
  }

  // A collector run; `pause` replaces its waits (for pacing and for backups) when given.
  Result<gc::GcReport> RunCollector(std::function<Status(std::chrono::nanoseconds)> pause = nullptr) {
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
    auto r = Restore(*space_, target.url, *target.store, ro);
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

  bool in_bucket_ = false;
  std::string dest_;         // a directory or s3://…
  std::string dest_prefix_;  // in the bucket
  std::unique_ptr<store::S3Client> s3_;
  std::unique_ptr<BackupSpace> space_;
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
      [&](std::string_view step) -> Status {
        if (step == "held") {
          during = Put(300 << 10, "plain");  // acknowledged before the snapshot: in it
        } else if (step == "snapshot") {
          after = Put(300 << 10, "plain");  // after it: not in it
          // A collector past the grace wants to delete the doomed file's xorbs: it waits for the backup (here
          // it gives up at its first wait), having deleted nothing.
          auto blocked = RunCollector([&](std::chrono::nanoseconds) -> Status {
            collector_waited = true;
            return Unavailable("stopped");
          });
          EXPECT_FALSE(blocked.ok());
        }
        return Ok{};
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
  if (!in_bucket_) {
    EXPECT_EQ(fs::status(dest_).permissions() & fs::perms::all, fs::perms::owner_all);
  }

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
  auto v = Verify();
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
  auto v = Verify();
  ASSERT_TRUE(v.ok()) << v.error().message;
  EXPECT_TRUE(v->ok());
  EXPECT_EQ(v->objects, r.xorbs.named + r.shards.named + r.grants.named);

  if (in_bucket_) {  // the index file went up in parts
    size_t parts = 0;
    ASSERT_TRUE(store::S3ListKeys(*s3_, dest_prefix_ + "snapshots/" + r.manifest.name + "/index.sqlite.",
                                  [&](std::string_view, uint64_t) { ++parts; })
                    .ok());
    EXPECT_EQ(parts, (r.manifest.index_bytes + (64 << 10) - 1) / (64 << 10));
    EXPECT_GT(parts, 1u);
  }
  const std::string xorb = SomeXorb();
  ASSERT_FALSE(xorb.empty());
  Flip(xorb, 100);
  v = Verify();
  ASSERT_TRUE(v.ok());
  ASSERT_EQ(v->failed.size(), 1u);
  EXPECT_NE(v->failed[0].find(fs::path(xorb).filename().string().substr(0, 16)), std::string::npos)
      << v->failed[0];

  Other target = OtherDeployment("refused", GetParam());
  auto restored = Restore(*space_, target.url, *target.store, {});
  ASSERT_FALSE(restored.ok());
  EXPECT_NE(restored.error().message.find("could not be copied"), std::string::npos);
  auto ix = index::OpenIndex(target.url);
  ASSERT_TRUE(ix.ok());
  EXPECT_EQ((*ix)->Stats()->files, 0u);  // nothing written to the index
  Flip(xorb, 100);                       // mended

  Flip(IndexPath(r.manifest.name), -100);
  v = Verify();
  ASSERT_TRUE(v.ok());
  ASSERT_FALSE(v->ok());
  EXPECT_NE(v->failed[0].find("not the file its manifest describes"), std::string::npos) << v->failed[0];
  restored = Restore(*space_, target.url, *target.store, {});
  ASSERT_FALSE(restored.ok());
  EXPECT_EQ(restored.error().code, ErrorCode::kHashMismatch);
}

// A restore refuses a destination that holds anything (a server started on it made its keys).
TEST_P(BackupTest, RestoreRefusesADeploymentInUse) {
  Put(100 << 10, "plain");
  Backup();
  auto restored = Restore(*space_, url_, *store_, {});  // the source itself
  ASSERT_FALSE(restored.ok());
  EXPECT_EQ(restored.error().code, ErrorCode::kConflict);
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
    o.hook = [&](std::string_view step) -> Status {
      return step == kill_at ? Status(Unavailable("killed")) : Status(Ok{});
    };
    ASSERT_FALSE(TakeBackup(url_, *store_, *space_, o).ok());
    auto latest = space_->Latest();
    ASSERT_TRUE(latest.ok());
    EXPECT_EQ(*latest, first.manifest.name);
    auto v = Verify();
    ASSERT_TRUE(v.ok());
    EXPECT_TRUE(v->ok());
  }
  clock_.Advance(1);
  const BackupReport next = Backup();
  EXPECT_EQ(next.xorbs.named, next.xorbs.copied + next.xorbs.already);
  EXPECT_EQ(Unfinished(), 0u);
  Restored("restored", GetParam(), [&](index::Index&, store::BlobStore&, files::FileService& files) {
    EXPECT_EQ(Download(a.first, "plain", &files), a.second);
  });
}

// One backup at a time per space: a second is refused while the first holds it; a bucket's lease that its
// holder stopped renewing (a killed backup) is taken over.
TEST_P(BackupTest, OneBackupAtATime) {
  auto held = space_->Hold();
  ASSERT_TRUE(held.ok()) << held.error().message;
  auto second = OpenSpace();
  auto refused = second->Hold();
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(refused.error().message.find("another backup"), std::string::npos);
  BackupOptions o;
  o.clock = &clock_;
  EXPECT_FALSE(TakeBackup(url_, *store_, *second, o).ok());
  held->reset();
  EXPECT_TRUE(second->Hold().ok());  // released
  if (in_bucket_) {
    const std::string lapsed = "cairn-backup-lease " +
                               std::to_string(Clock::System().UnixSeconds() - kLeaseSeconds - 1) +
                               " elsewhere 1\n";
    ASSERT_TRUE(store::S3PutObject(*s3_, dest_prefix_ + "lock",
                                   {reinterpret_cast<const uint8_t*>(lapsed.data()), lapsed.size()})
                    .ok());
    EXPECT_TRUE(second->Hold().ok());
  }
}

INSTANTIATE_TEST_SUITE_P(InDirectory, BackupTest,
                         ::testing::Values(Backend::kSqliteDisk, Backend::kPostgresS3),
                         gc::testing::BackendName);
INSTANTIATE_TEST_SUITE_P(InBucket, BackupTest, ::testing::Values(Backend::kSqliteDisk, Backend::kPostgresS3),
                         gc::testing::BackendName);

// A backup directory's files, each replaced by a FIFO (no writer ever comes) and by a symbolic link to the
// same bytes elsewhere: verify reports it and a restore refuses it, neither waiting on the FIFO.
class BackupFilesTest : public BackupTest {};

TEST_P(BackupFilesTest, AFifoOrASymbolicLinkInPlaceOfABackupsFileIsRefusedWithoutWaiting) {
  Put(100 << 10, "plain");
  const BackupReport r = Backup();
  const fs::path root(dest_);
  const fs::path outside = dir_ / "outside";
  fs::create_directories(outside);
  int n = 0;
  for (const std::string& name : {std::string("LATEST"), "snapshots/" + r.manifest.name + "/manifest",
                                  IndexPath(r.manifest.name), SomeXorb()}) {
    for (const bool fifo : {true, false}) {
      SCOPED_TRACE(name + (fifo ? " as a FIFO" : " as a symbolic link"));
      const fs::path kept = outside / std::to_string(++n);
      fs::copy_file(root / name, kept);
      std::optional<cairn::testing::FifoInPlace> waiting;
      if (fifo) {
        waiting.emplace(root / name);
        ASSERT_TRUE(waiting->made());
      } else {
        fs::remove(root / name);
        fs::create_symlink(kept, root / name);
      }
      auto v = Verify();
      std::string said = v.ok() ? "" : v.error().message;
      if (v.ok()) {
        for (const auto& f : v->failed) said += f + "\n";
      }
      EXPECT_NE(said.find(fifo ? "not a regular file" : "a symbolic link"), std::string::npos) << said;
      Other target = OtherDeployment("refused" + std::to_string(n), GetParam());
      auto restored = Restore(*space_, target.url, *target.store, {});
      EXPECT_FALSE(restored.ok());
      if (waiting) {
        EXPECT_EQ(waiting->released(), 0) << "a reader waited on the FIFO";
      }
      waiting.reset();
      fs::remove(root / name);
      fs::copy_file(kept, root / name);  // mended
    }
  }
  auto v = Verify();
  ASSERT_TRUE(v.ok()) << v.error().message;
  EXPECT_TRUE(v->ok());
}

INSTANTIATE_TEST_SUITE_P(InDirectory, BackupFilesTest,
                         ::testing::Values(Backend::kSqliteDisk, Backend::kPostgresS3),
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
