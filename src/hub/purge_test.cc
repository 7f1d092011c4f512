// Purge (hub/purge.cc) and the Hub's side of garbage collection (a ref moved onto history a mark found
// unreachable revives it; a swept commit is gone for every reader), over a real SQLite index.
#include <gtest/gtest.h>

#include "hub/history.h"
#include "hub/hub_service.h"
#include "hub/test_repo_fixture.h"

namespace cairn::hub {
namespace {

class PurgeTest : public testing::RepoFixture {
 protected:
  PurgeTest() : RepoFixture("cairn-hub-purge") { options_.clock = &clock_; }

  static std::vector<uint8_t> Bytes(std::string_view s) { return {s.begin(), s.end()}; }

  ObjectId Commit(std::vector<Operation> ops, const std::string& branch = "main") {
    CommitRequest req;
    req.summary = "change";
    req.branch = branch;
    req.operations = std::move(ops);
    auto made = hub_->CreateCommit(alice_, repo_, req);
    EXPECT_TRUE(made.ok()) << made.error().message;
    return made.ok() ? made->oid : ObjectId{};
  }

  std::vector<index::RepoObjectMark> Objects() {
    auto all = index_->ScanRepoObjects(repo_.record.id, std::nullopt, index::Index::kMaxScanned);
    EXPECT_TRUE(all.ok());
    return all.ok() ? *all : std::vector<index::RepoObjectMark>{};
  }

  // Quarantines every object no ref reaches now, as a mark would, since `since`.
  std::vector<index::RepoObjectMark> QuarantineUnreachable(int64_t since) {
    auto reach = ReachFromRefs(*index_, repo_.record.id);
    EXPECT_TRUE(reach.ok());
    const std::set<std::vector<uint8_t>> live(reach->keys.begin(), reach->keys.end());
    std::vector<std::vector<uint8_t>> dead;
    for (const auto& o : Objects()) {
      if (!live.contains(o.key)) dead.push_back(o.key);
    }
    EXPECT_TRUE(index_->QuarantineRepoObjects(repo_.record.id, dead, since).ok());
    std::vector<index::RepoObjectMark> marks;
    for (auto& o : Objects()) {
      if (o.since != 0) marks.push_back(o);
    }
    return marks;
  }

  TestClock clock_;
};

TEST_F(PurgeTest, SuperSquashKeepsTheFilesAndDropsTheHistory) {
  Commit({AddInline{"secret.txt", Bytes("password=hunter2")}});
  const ObjectId before =
      Commit({AddInline{"secret.txt", Bytes("redacted")}, AddInline{"b.txt", Bytes("b")}});
  auto squashed = hub_->SuperSquash(alice_, repo_, "main", "squash");
  ASSERT_TRUE(squashed.ok()) << squashed.error().message;
  EXPECT_TRUE(squashed->commit.parents.empty());
  EXPECT_EQ(Head(), squashed->oid);
  EXPECT_EQ(squashed->commit.tree, hub_->ReadCommit(repo_, before)->tree);
  auto log = hub_->ListCommits(repo_, Head(), 0, 10);
  ASSERT_TRUE(log.ok());
  EXPECT_EQ(log->commits.size(), 1U);
  // The old history is unreachable now: three commits, their trees and the first secret's blob.
  const auto reach = ReachFromRefs(*index_, repo_.record.id);
  ASSERT_TRUE(reach.ok());
  EXPECT_LT(reach->keys.size(), Objects().size());

  ASSERT_TRUE(hub_->CreateRef(alice_, repo_, index::RefKind::kTag, "v1", std::nullopt, false).ok());
  auto tag = hub_->SuperSquash(alice_, repo_, "v1", "squash");
  ASSERT_FALSE(tag.ok());
  EXPECT_EQ(tag.error().code, ErrorCode::kMalformed) << "a tag cannot be squashed";
  auto none = hub_->SuperSquash(alice_, repo_, "nope", "squash");
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().reason, "RevisionNotFound");
  EXPECT_FALSE(hub_->SuperSquash(alice_, repo_, "main", "").ok()) << "a squash needs a message";
}

TEST_F(PurgeTest, DeletingLargeFilesRewritesEveryRefAndDropsTheirLinks) {
  const LfsPointer doomed = Upload(1, 70000);
  const LfsPointer kept = Upload(2, 80000);
  Commit({AddLfs{"weights/doomed.bin", doomed}, AddLfs{"kept.bin", kept}, AddInline{"a.txt", Bytes("a")}});
  ASSERT_TRUE(hub_->CreateRef(alice_, repo_, index::RefKind::kTag, "v1", std::nullopt, false).ok());
  Commit({AddInline{"b.txt", Bytes("b")}});
  const ObjectId old_head = Head();

  auto listed = hub_->ListLfsFiles(repo_, std::nullopt, 1000);
  ASSERT_TRUE(listed.ok()) << listed.error().message;
  ASSERT_EQ(listed->files.size(), 2U);
  EXPECT_FALSE(listed->next);
  for (const auto& f : listed->files) {
    const bool is_doomed = f.sha256 == doomed.sha256;
    EXPECT_EQ(f.filename, is_doomed ? "weights/doomed.bin" : "kept.bin");
    EXPECT_EQ(f.size, is_doomed ? doomed.size : kept.size);
    EXPECT_EQ(f.pushed_at, clock_.UnixSeconds());
  }
  auto paged = hub_->ListLfsFiles(repo_, std::nullopt, 1);
  ASSERT_TRUE(paged.ok());
  ASSERT_EQ(paged->files.size(), 1U);
  EXPECT_EQ(paged->files[0].sha256, std::min(doomed.sha256, kept.sha256));
  ASSERT_TRUE(paged->next.has_value());
  paged = hub_->ListLfsFiles(repo_, paged->next, 1);
  ASSERT_TRUE(paged.ok());
  ASSERT_EQ(paged->files.size(), 1U);
  EXPECT_EQ(paged->files[0].sha256, std::max(doomed.sha256, kept.sha256));

  ASSERT_TRUE(hub_->DeleteLfsFiles(alice_, repo_, {doomed.sha256}, true).ok());
  for (std::string_view ref : {"main", "v1"}) {
    const ObjectId head = Head(ref);
    EXPECT_EQ(hub_->Stat(repo_, head, "weights/doomed.bin").error().reason, "EntryNotFound") << ref;
    EXPECT_EQ(hub_->Stat(repo_, head, "weights").error().reason, "EntryNotFound") << "emptied folders go";
    EXPECT_TRUE(hub_->Stat(repo_, head, "kept.bin")->xet.has_value()) << ref;
    EXPECT_TRUE(hub_->Stat(repo_, head, "a.txt").ok()) << ref;
  }
  EXPECT_NE(Head(), old_head);
  auto log = hub_->ListCommits(repo_, Head(), 0, 10);
  ASSERT_TRUE(log.ok());
  EXPECT_EQ(log->commits.size(), 3U) << "every commit kept, rewritten";
  EXPECT_EQ(log->commits[0].commit.message, "change");
  // No reachable tree names the doomed file, and its link is gone.
  const auto reach = ReachFromRefs(*index_, repo_.record.id);
  ASSERT_TRUE(reach.ok());
  EXPECT_EQ(reach->files.size(), 1U);
  listed = hub_->ListLfsFiles(repo_, std::nullopt, 1000);
  ASSERT_EQ(listed->files.size(), 1U);
  EXPECT_EQ(listed->files[0].sha256, kept.sha256);
  // The audit log: each ref rewritten (main and the tag), then the purge, newest first.
  auto events = index_->ListAudit({}, std::nullopt, 3);
  ASSERT_TRUE(events.ok());
  std::vector<std::string> actions;
  for (const auto& e : *events) actions.push_back(e.action + " " + e.detail.substr(0, e.detail.find(' ')));
  std::sort(actions.begin() + 1, actions.end());
  EXPECT_EQ(actions,
            (std::vector<std::string>{"files.purge 1", "history.rewrite main", "history.rewrite v1"}));

  EXPECT_EQ(hub_->DeleteLfsFiles(alice_, repo_, {"not-a-sha"}, true).error().code, ErrorCode::kMalformed);
}

TEST_F(PurgeTest, WithoutRewritingHistoryThePathHoldsItsPointerText) {
  const LfsPointer big = Upload(3, 70000);
  const ObjectId head = Commit({AddLfs{"big.bin", big}});
  ASSERT_TRUE(hub_->DeleteLfsFiles(alice_, repo_, {big.sha256}, false).ok());
  EXPECT_EQ(Head(), head) << "no history rewritten";
  auto info = hub_->Stat(repo_, head, "big.bin");
  ASSERT_TRUE(info.ok());
  EXPECT_FALSE(info->xet.has_value()) << "the link is gone, also from this service's cache";
  EXPECT_EQ(info->size, EncodeLfsPointer(big).size());
  const auto reach = ReachFromRefs(*index_, repo_.record.id);
  ASSERT_TRUE(reach.ok());
  EXPECT_TRUE(reach->files.empty()) << "its Xet file is not live through this repository any more";
}

// A purge takes the files out of the repository's write and read scopes at once, with or without a history
// rewrite: from then on no token of the repository (minted before or after) reads them through the CAS, and
// the purge run again is a no-op. Issue 45 item 7.
TEST_F(PurgeTest, APurgedFileLeavesTheRepositorysScopesAtOnce) {
  const LfsPointer doomed = Upload(4, 70000);
  const LfsPointer also = Upload(5, 60000);
  const LfsPointer kept = Upload(6, 50000);
  Commit({AddLfs{"doomed.bin", doomed}, AddLfs{"also.bin", also}, AddLfs{"kept.bin", kept}});
  const auto file_of = [&](const LfsPointer& p) { return hub_->OpenLargeBySha256(repo_, p.sha256)->hash; };
  const xet::FileHash doomed_file = file_of(doomed), also_file = file_of(also), kept_file = file_of(kept);
  const auto visible = [&](const xet::FileHash& f, const std::string& scope) {
    return files_->VisibleEntry(f, scope).ok();
  };
  for (const std::string* scope : {&repo_.record.scope, &repo_.record.read_scope}) {
    ASSERT_TRUE(visible(doomed_file, *scope));
    ASSERT_TRUE(visible(also_file, *scope));
  }
  ASSERT_TRUE(hub_->DeleteLfsFiles(alice_, repo_, {doomed.sha256}, true).ok());
  ASSERT_TRUE(hub_->DeleteLfsFiles(alice_, repo_, {also.sha256}, false).ok());
  for (const std::string* scope : {&repo_.record.scope, &repo_.record.read_scope}) {
    EXPECT_FALSE(visible(doomed_file, *scope)) << *scope;
    EXPECT_FALSE(visible(also_file, *scope)) << *scope;
    EXPECT_TRUE(visible(kept_file, *scope)) << *scope;
  }
  EXPECT_TRUE(hub_->DeleteLfsFiles(alice_, repo_, {doomed.sha256, also.sha256}, true).ok())
      << "again: nothing left";
}

TEST_F(PurgeTest, ABranchMovedBackOntoUnreachableHistoryRevivesIt) {
  const LfsPointer big = Upload(4, 70000);
  Commit({AddLfs{"big.bin", big}}, "main");
  ASSERT_TRUE(hub_->CreateRef(alice_, repo_, index::RefKind::kBranch, "old", std::nullopt, false).ok());
  const ObjectId old = Commit({AddInline{"x.txt", Bytes("x")}}, "old");
  ASSERT_TRUE(hub_->DeleteRef(alice_, repo_, index::RefKind::kBranch, "old").ok());
  ASSERT_TRUE(hub_->SuperSquash(alice_, repo_, "main", "squash").ok());
  const auto marks = QuarantineUnreachable(100);
  ASSERT_FALSE(marks.empty());

  // A branch created at the old commit: everything it reaches leaves the quarantine before the ref is made.
  ASSERT_TRUE(hub_->CreateRef(alice_, repo_, index::RefKind::kBranch, "back", old.hex(), false).ok());
  const auto reach = ReachFromRefs(*index_, repo_.record.id);
  ASSERT_TRUE(reach.ok());
  const std::set<std::vector<uint8_t>> live(reach->keys.begin(), reach->keys.end());
  for (const auto& o : Objects()) {
    if (live.contains(o.key)) {
      EXPECT_EQ(o.since, 0) << "reachable again, so released";
    }
  }
  // A sweep of what the mark read leaves the revived history alone.
  auto swept = index_->SweepRepoObjects(repo_.record.id, marks);
  ASSERT_TRUE(swept.ok());
  EXPECT_TRUE(hub_->Stat(repo_, Head("back"), "big.bin")->xet.has_value());
  EXPECT_TRUE(hub_->Stat(repo_, Head("back"), "x.txt").ok());
  EXPECT_EQ(ReachFromRefs(*index_, repo_.record.id)->missing, 0U);
}

// A ref is never made onto history part of which a sweep already took: the commit alone is not enough.
TEST_F(PurgeTest, ABranchOntoPartlySweptHistoryIsRefused) {
  ASSERT_TRUE(hub_->CreateRef(alice_, repo_, index::RefKind::kBranch, "side", std::nullopt, false).ok());
  const ObjectId old = Commit({AddInline{"a/x.txt", Bytes("x")}}, "side");
  ASSERT_TRUE(hub_->DeleteRef(alice_, repo_, index::RefKind::kBranch, "side").ok());
  auto marks = QuarantineUnreachable(100);
  // Sweep everything but the old commit itself.
  const std::vector<uint8_t> commit_key(old.bytes.begin(), old.bytes.end());
  std::erase_if(marks, [&](const index::RepoObjectMark& m) { return m.key == commit_key; });
  ASSERT_FALSE(marks.empty());
  ASSERT_TRUE(index_->SweepRepoObjects(repo_.record.id, marks).ok());
  auto made = hub_->CreateRef(alice_, repo_, index::RefKind::kBranch, "back", old.hex(), false);
  ASSERT_FALSE(made.ok());
  EXPECT_EQ(made.error().reason, "RevisionNotFound");
  auto refs = hub_->ListRefs(repo_);
  ASSERT_TRUE(refs.ok());
  for (const auto& r : *refs) EXPECT_NE(r.name, "back");
}

TEST_F(PurgeTest, SweptHistoryIsGoneForEveryReaderAndNoRefCanNameIt) {
  const ObjectId first = Commit({AddInline{"secret.txt", Bytes("password=hunter2")}});
  ASSERT_TRUE(hub_->Stat(repo_, first, "secret.txt").ok());  // cached by this service now
  ASSERT_TRUE(hub_->SuperSquash(alice_, repo_, "main", "squash").ok());
  const auto marks = QuarantineUnreachable(100);
  auto swept = index_->SweepRepoObjects(repo_.record.id, marks);
  ASSERT_TRUE(swept.ok());
  EXPECT_EQ(swept->objects, marks.size());
  auto resolved = hub_->Resolve(repo_, first.hex());
  ASSERT_FALSE(resolved.ok()) << "served from the cache after the sweep";
  EXPECT_EQ(resolved.error().reason, "RevisionNotFound");
  auto branch = hub_->CreateRef(alice_, repo_, index::RefKind::kBranch, "b", first.hex(), false);
  ASSERT_FALSE(branch.ok());
  EXPECT_EQ(branch.error().reason, "RevisionNotFound");
  // The index refuses a ref to what is not there, whoever asks.
  auto direct =
      index_->UpdateRef(repo_.record.id, {index::RefKind::kBranch, "c", std::nullopt,
                                          std::vector<uint8_t>(first.bytes.begin(), first.bytes.end())});
  ASSERT_FALSE(direct.ok());
  EXPECT_EQ(direct.error().code, ErrorCode::kUnknownReference);
}

TEST_F(PurgeTest, ACopyFromAnOldRevisionRevivesWhatItCopies) {
  const ObjectId first = Commit({AddInline{"keep.txt", Bytes("worth keeping")}});
  Commit({DeletePath{"keep.txt", false}});
  const auto marks = QuarantineUnreachable(100);
  const ObjectId blob = hub_->Stat(repo_, first, "keep.txt")->oid;
  Commit({CopyPath{"keep.txt", "restored.txt", first.hex()}});
  ASSERT_TRUE(index_->SweepRepoObjects(repo_.record.id, marks).ok());
  auto info = hub_->Stat(repo_, Head(), "restored.txt");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->oid, blob);
  HubService fresh(*index_, *files_, options_);  // no cache: what the index holds
  auto bytes = fresh.ReadBlob(repo_, blob);
  ASSERT_TRUE(bytes.ok()) << bytes.error().message;
  EXPECT_EQ(*bytes, Bytes("worth keeping"));
}

// The collector's walk reads commits and trees in pages first (WalkOptions::preload): over more than a page
// of them it reaches exactly what the walk that reads the index object by object reaches.
TEST_F(PurgeTest, APreloadedWalkReachesWhatTheIndexWalkReaches) {
  const LfsPointer big = Upload(5, 70000);
  Commit({AddLfs{"big.bin", big}});
  for (int i = 0; i < 1050; ++i) Commit({AddInline{"n.txt", Bytes(std::to_string(i))}});
  WalkOptions preload;
  preload.preload = true;
  auto fast = ReachFromRefs(*index_, repo_.record.id, preload);
  auto slow = ReachFromRefs(*index_, repo_.record.id);
  ASSERT_TRUE(fast.ok() && slow.ok());
  const std::set<std::vector<uint8_t>> a(fast->keys.begin(), fast->keys.end());
  const std::set<std::vector<uint8_t>> b(slow->keys.begin(), slow->keys.end());
  EXPECT_EQ(a, b);
  EXPECT_GT(a.size(), 3000u);
  EXPECT_EQ(fast->files, slow->files);
  EXPECT_EQ(fast->files.size(), 1u);
  EXPECT_EQ(fast->missing + slow->missing, 0u);
}

}  // namespace
}  // namespace cairn::hub
