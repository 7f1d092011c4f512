// Compaction against every backend pair (SQLite + local disk, PostgreSQL + S3 on SeaweedFS): what it
// rewrites, that every file still reads byte-exact, that the collector frees exactly what it reported, that a
// client holding the old xorb's name keeps reading it, and that a kill at any step leaves the index before or
// after the step, never between.
#include "compact/compactor.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "gc/collector.h"
#include "gc/test_deployment.h"
#include "repair/fsck.h"
#include "xet/shard.h"

namespace cairn::compact {
namespace {

using gc::testing::Backend;
using Bytes = std::vector<uint8_t>;

constexpr const char* kScope = "plain";

class CompactorTest : public gc::testing::DeploymentTest {
 protected:
  // A folder of small files uploaded together (they share xorbs), three of every four then removed and
  // swept by the collector: the xorbs stay, each about a quarter live.
  struct Folder {
    std::vector<Bytes> kept;
    std::vector<xet::FileHash> kept_hashes;
    std::vector<xet::XorbHash> xorbs;
  };
  Folder UploadAndThinOut(const std::string& scope = kScope) {
    std::vector<Bytes> files;
    for (int i = 0; i < 48; ++i) files.push_back(Random(12 << 10));
    auto up = Upload(files, scope);
    Folder f;
    for (const auto& x : up.xorbs) f.xorbs.push_back(x.hash);
    for (size_t i = 0; i < files.size(); ++i) {
      if (i % 4 == 0) {
        f.kept.push_back(files[i]);
        f.kept_hashes.push_back(up.file_hashes[i]);
      } else {
        EXPECT_TRUE(files_->Unregister(up.file_hashes[i], scope).ok());
      }
    }
    Collect();
    clock_.Advance(static_cast<int64_t>(gc::kDefaultGraceSeconds) + 1);
    const auto r = Collect();
    EXPECT_EQ(r.swept_files, files.size() - f.kept.size());
    EXPECT_EQ(r.swept_xorbs, 0u);  // each xorb still has live files
    return f;
  }
  gc::GcReport Collect() {
    gc::GcOptions o;
    o.clock = &clock_;
    gc::Collector c(*index_, *index_, *index_, *store_, o);
    auto r = c.Run();
    EXPECT_TRUE(r.ok()) << r.error().message;
    return r.ok() ? *r : gc::GcReport{};
  }
  Result<CompactReport> Compact(std::function<Status(std::string_view)> hook = nullptr,
                                bool dry_run = false) {
    CompactOptions o;
    o.clock = &clock_;
    o.hook = std::move(hook);
    o.dry_run = dry_run;
    Compactor c(*index_, *index_, *cas_, o);
    return c.Run();
  }
  repair::FsckReport Fsck() {
    repair::FsckOptions fo;
    fo.deep = true;
    auto r = repair::Fsck(*cas_, *index_, *store_, fo);
    EXPECT_TRUE(r.ok()) << r.error().message;
    return r.ok() ? *r : repair::FsckReport{};
  }
  std::set<xet::XorbHash> XorbsOf(const xet::FileHash& file) {
    std::set<xet::XorbHash> out;
    auto e = index_->GetFile(file);
    EXPECT_TRUE(e.ok());
    if (!e.ok()) return out;
    for (size_t i = 0; i < (*e)->term_count; ++i) out.insert((*e)->term(i).xorb);
    return out;
  }
  static std::string FirstTransferUrl(const std::string& answer) {
    const auto at = answer.find("/v1/transfer/");
    if (at == std::string::npos) return {};
    return answer.substr(at + 13, answer.find('"', at) - at - 13);
  }
};

TEST_P(CompactorTest, RewritesMostlyDeadXorbsAndTheCollectorFreesWhatItReported) {
  Folder f = UploadAndThinOut();
  ASSERT_GE(f.xorbs.size(), 2u);
  // A client that planned its download before the compaction (it holds the old xorb's URL).
  auto held = cas_->Reconstruct(f.kept_hashes[0], kScope, std::nullopt, cas::ApiVersion::kV2);
  ASSERT_TRUE(held.ok()) << held.error().message;
  const std::string old_url = FirstTransferUrl(held->Text());
  ASSERT_FALSE(old_url.empty());

  auto dry = Compact(nullptr, true);
  ASSERT_TRUE(dry.ok()) << dry.error().message;
  EXPECT_EQ(dry->compacted_xorbs, f.xorbs.size());
  EXPECT_EQ(XorbsOf(f.kept_hashes[0]), std::set<xet::XorbHash>{f.xorbs[0]});  // nothing moved

  auto r = Compact();
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->candidates, f.xorbs.size());
  EXPECT_EQ(r->compacted_xorbs, f.xorbs.size());
  EXPECT_EQ(r->new_xorbs, 1u);  // the live quarters fit one xorb
  EXPECT_EQ(r->files_moved, f.kept.size());
  EXPECT_EQ(r->shards, 1u);
  EXPECT_EQ(r->replaced_bytes, dry->replaced_bytes);
  EXPECT_EQ(r->written_bytes, dry->written_bytes);
  EXPECT_GT(r->freed_bytes(), r->replaced_bytes / 2);
  const std::set<xet::XorbHash> after = XorbsOf(f.kept_hashes[0]);
  ASSERT_EQ(after.size(), 1u);
  const xet::XorbHash fresh = *after.begin();
  for (size_t i = 0; i < f.kept.size(); ++i) {
    EXPECT_EQ(XorbsOf(f.kept_hashes[i]), after);
    EXPECT_EQ(Download(f.kept_hashes[i], kScope), f.kept[i]);
  }
  // The held plan still reads: the old xorb stays until the collector sweeps it past its grace.
  const auto q = old_url.find('?');
  auto transfer = cas_->Transfer(old_url.substr(0, q), old_url.substr(q + 1), std::nullopt);
  ASSERT_TRUE(transfer.ok()) << transfer.error().message;
  EXPECT_EQ(transfer->xorb, f.xorbs[0]);
  // New plans and dedup answers name the new xorb only; asking about an old one revives nothing.
  auto now = cas_->Reconstruct(f.kept_hashes[0], kScope, std::nullopt, cas::ApiVersion::kV2);
  ASSERT_TRUE(now.ok());
  EXPECT_NE(now->Text().find(fresh.hex()), std::string::npos);
  EXPECT_EQ(now->Text().find(f.xorbs[0].hex()), std::string::npos);
  auto layout = cas_->Layout(fresh);
  ASSERT_TRUE(layout.ok());
  auto answer = cas_->DedupShard((*layout)->chunks[0].hash, kScope);
  ASSERT_TRUE(answer.ok()) << answer.error().message;
  auto shard = xet::ParseShard(*answer);
  ASSERT_TRUE(shard.ok());
  for (const auto& x : shard->xorbs) {
    EXPECT_EQ(std::count(f.xorbs.begin(), f.xorbs.end(), x.hash), 0) << x.hash.hex();
  }
  EXPECT_EQ(index_->ReviveXorbs(f.xorbs)->at(0), index::XorbUse::kSuperseded);
  EXPECT_TRUE(Fsck().clean());

  // Nothing left to do.
  auto again = Compact();
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->candidates, 0u);

  // The collector frees the old xorbs past its grace, exactly the bytes compaction reported.
  const uint64_t stored_before = StoredXorbBytes();
  auto first = Collect();
  EXPECT_EQ(first.newly_quarantined, f.xorbs.size());
  EXPECT_EQ(first.swept_xorbs, 0u);
  ASSERT_TRUE(cas_->DedupShard((*layout)->chunks[0].hash, kScope).ok());  // revives nothing old
  clock_.Advance(static_cast<int64_t>(gc::kDefaultGraceSeconds) + 1);
  auto swept = Collect();
  EXPECT_EQ(swept.swept_xorbs, f.xorbs.size());
  EXPECT_EQ(swept.reclaimed_bytes, r->replaced_bytes);
  for (const auto& x : f.xorbs) EXPECT_FALSE(Stored(x));
  EXPECT_LT(StoredXorbBytes(), stored_before);
  for (size_t i = 0; i < f.kept.size(); ++i) EXPECT_EQ(Download(f.kept_hashes[i], kScope), f.kept[i]);
  EXPECT_TRUE(Fsck().clean());

  // The store alone still says what the files are: a rebuilt index reads them all.
  auto other = OtherDeployment("rebuilt", GetParam());
  index::OpenIndexOptions io;
  io.clock = &clock_;
  auto rebuilt = index::OpenIndex(other.url, io);
  ASSERT_TRUE(rebuilt.ok()) << rebuilt.error().message;
  cas::CasService rcas(**rebuilt, *store_, pool_, {});
  repair::FsckOptions ro;
  auto rb = repair::RebuildIndex(rcas, **rebuilt, *store_, ro);
  ASSERT_TRUE(rb.ok()) << rb.error().message;
  files::FileService rfiles(rcas, **rebuilt, {});
  for (size_t i = 0; i < f.kept.size(); ++i) {
    EXPECT_EQ(Download(f.kept_hashes[i], kScope, &rfiles), f.kept[i]);
  }
}

TEST_P(CompactorTest, KilledAtEachStepLeavesEveryFileWholeAndTheNextRunFinishes) {
  for (const std::string_view kill : {"planned", "xorb stored", "shards stored", "repointed"}) {
    SCOPED_TRACE(std::string(kill));
    TearDown();
    SetUp();
    Folder f = UploadAndThinOut();
    auto killed = Compact([&](std::string_view step) -> Status {
      if (step == kill) return IoError("killed at " + std::string(step));
      return Ok{};
    });
    ASSERT_FALSE(killed.ok());
    ASSERT_NO_FATAL_FAILURE(StartServices());  // the server restarted
    // Before or after, never between: every file names the old xorbs or the new one, and reads whole.
    const bool moved = kill == "repointed";
    for (size_t i = 0; i < f.kept.size(); ++i) {
      const auto xorbs = XorbsOf(f.kept_hashes[i]);
      ASSERT_EQ(xorbs.size(), 1u);
      EXPECT_EQ(std::count(f.xorbs.begin(), f.xorbs.end(), *xorbs.begin()) == 1, !moved);
      EXPECT_EQ(Download(f.kept_hashes[i], kScope), f.kept[i]);
    }
    const auto left = Fsck();
    EXPECT_FALSE(left.damaged()) << (left.findings.empty() ? "" : left.findings[0].detail);

    auto r = Compact();
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r->compacted_xorbs, moved ? 0u : f.xorbs.size());
    for (size_t i = 0; i < f.kept.size(); ++i) EXPECT_EQ(Download(f.kept_hashes[i], kScope), f.kept[i]);
    // What the killed run stored, the finishing one registered (the same bytes from the same files).
    const auto fsck = Fsck();
    EXPECT_TRUE(fsck.clean()) << (fsck.findings.empty() ? "" : fsck.findings[0].detail);

    Collect();
    clock_.Advance(static_cast<int64_t>(gc::kDefaultGraceSeconds) + 1);
    auto swept = Collect();
    EXPECT_EQ(swept.swept_xorbs, f.xorbs.size());
    for (size_t i = 0; i < f.kept.size(); ++i) EXPECT_EQ(Download(f.kept_hashes[i], kScope), f.kept[i]);
    EXPECT_TRUE(Fsck().clean());
  }
}

TEST_P(CompactorTest, AStepWhoseFilesChangedChangesNothing) {
  Folder f = UploadAndThinOut();
  auto entry = index_->GetFile(f.kept_hashes[0]);
  ASSERT_TRUE(entry.ok());
  index::Repointing r;
  r.into = f.xorbs[1];
  r.replaced = {f.xorbs[0]};
  r.files.push_back({f.kept_hashes[0], (*entry)->created_at + 1, (*entry)->packed_terms, {}});
  EXPECT_EQ(index_->Repoint(r).error().code, ErrorCode::kConflict);
  EXPECT_EQ(index_->ReviveXorbs(f.xorbs)->at(0), index::XorbUse::kStored);  // not superseded
  EXPECT_EQ(index_->GetFile(f.kept_hashes[0]).value()->created_at, (*entry)->created_at);
  r.files.clear();
  r.into = xet::XorbHash{};
  EXPECT_EQ(index_->Repoint(r).error().code, ErrorCode::kUnknownReference);
  r.into = f.xorbs[0];
  EXPECT_EQ(index_->Repoint(r).error().code, ErrorCode::kMalformed);  // a xorb cannot replace itself
  r.into = f.xorbs[1];
  r.replaced = {f.xorbs[0], f.xorbs[0]};
  EXPECT_EQ(index_->Repoint(r).error().code, ErrorCode::kMalformed);  // nor be replaced twice
}

TEST_P(CompactorTest, XorbsAboveTheThresholdAreLeftAlone) {
  auto up = Upload({Random(100 << 10), Random(100 << 10)}, kScope);
  CompactOptions o;
  o.clock = &clock_;
  o.threshold = 0.9;
  Compactor c(*index_, *index_, *cas_, o);
  auto r = c.Run();
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->candidates, 0u);
  EXPECT_EQ(r->new_xorbs, 0u);
  o.threshold = 0;
  Compactor bad(*index_, *index_, *cas_, o);
  EXPECT_EQ(bad.Run().error().code, ErrorCode::kMalformed);
  EXPECT_EQ(Download(up.file_hashes[0], kScope).size(), 100u << 10);
}

INSTANTIATE_TEST_SUITE_P(Backends, CompactorTest,
                         ::testing::Values(Backend::kSqliteDisk, Backend::kPostgresS3),
                         gc::testing::BackendName);

}  // namespace
}  // namespace cairn::compact
