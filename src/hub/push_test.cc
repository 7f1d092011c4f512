// What a push may hold (HubService::ApplyPush, and StorableObjects for what a mirror or a bundle brings): no
// path longer than the API takes, however the trees nest; a name once per tree; an LFS pointer's size its
// file's. Then a history as deep as paths may go, pushed, listed, purged, marked and checked on a thread with
// a small stack: every walk of it iterative. Over a real SQLite index.
#include <gtest/gtest.h>

#include "hub/history.h"
#include "hub/hub_check.h"
#include "hub/hub_service.h"
#include "hub/test_repo_fixture.h"
#include "hub/test_trees.h"
#include "hub/tree_paths.h"

namespace cairn::hub {
namespace {

using testing::BlobObject;
using testing::CommitObject;
using testing::NestedTrees;
using testing::OnSmallStack;

class PushTest : public testing::RepoFixture {
 protected:
  PushTest() : RepoFixture("cairn-hub-push") {}

  // Pushes `objects` and a commit of `tree` on main's head; the refusal, or "" when main moved to it.
  std::string Push(std::vector<RawObject> objects, const ObjectId& tree, ObjectId* commit = nullptr) {
    const ObjectId head = Head();
    RawObject c = CommitObject(tree, head, "pushed");
    if (commit != nullptr) *commit = c.id;
    const ObjectId id = c.id;
    objects.push_back(std::move(c));
    auto refused = hub_->ApplyPush(alice_, repo_, std::move(objects), {{"refs/heads/main", head, id}});
    EXPECT_TRUE(refused.ok()) << refused.error().message;
    if (!refused.ok()) return "error";
    if ((*refused)[0]) return *(*refused)[0];
    EXPECT_EQ(Head(), id);
    return "";
  }

  bool Stored(const ObjectId& id) {
    auto got = index_->GetRepoObjects(repo_.record.id, {id.key()});
    EXPECT_TRUE(got.ok());
    return got.ok() && (*got)[0].has_value();
  }
};

// The attack: 60,000 nested single-folder trees (~2 MB) took the server down at the first purge.
TEST_F(PushTest, SixtyThousandNestedFoldersAreRefusedAndNothingIsStored) {
  const RawObject blob = BlobObject("x\n");
  ObjectId root;
  auto trees = NestedTrees(60000, "a", {{EntryMode::kFile, "f", blob.id}}, &root);
  trees.push_back(blob);
  const ObjectId before = Head();
  ObjectId commit;
  const std::string refused = Push(std::move(trees), root, &commit);
  EXPECT_NE(refused.find("more than 4096"), std::string::npos) << refused;
  EXPECT_EQ(Head(), before);
  EXPECT_FALSE(Stored(root));
  EXPECT_FALSE(Stored(commit));
  EXPECT_FALSE(Stored(blob.id));
}

// 4,096 bytes is the API's bound (ValidPath): a push reaching it lands, one byte more is refused, whether the
// long path is a file's or a folder's.
TEST_F(PushTest, APathOfTheApisBoundLandsAndOneByteMoreIsRefused) {
  const RawObject blob = BlobObject("x\n");
  ObjectId root;
  // 2,044 folders "a/" (4,088 bytes) and a name of 8: 4,096.
  auto objects = NestedTrees(2044, "a", {{EntryMode::kFile, "weights1", blob.id}}, &root);
  objects.push_back(blob);
  EXPECT_EQ(Push(std::move(objects), root), "");
  std::string longest;
  for (int i = 0; i < 2044; ++i) longest += "a/";
  longest += "weights1";
  ASSERT_EQ(longest.size(), kMaxPathBytes);
  EXPECT_TRUE(ValidPath(longest));
  EXPECT_FALSE(ValidPath(longest + "2"));
  std::string refused = Push(NestedTrees(2044, "a", {{EntryMode::kFile, "weights12", blob.id}}, &root), root);
  EXPECT_NE(refused.find("4097 bytes long"), std::string::npos) << refused;
  EXPECT_FALSE(Stored(root));
  // An empty folder's path counts as well.
  const RawObject empty{ObjectKind::kTree, HashObject(ObjectKind::kTree, ""), {}};
  auto deep = NestedTrees(2044, "a", {{EntryMode::kTree, "folder123", empty.id}}, &root);
  deep.push_back(empty);
  refused = Push(std::move(deep), root);
  EXPECT_NE(refused.find("4097 bytes long"), std::string::npos) << refused;
  // Long names rather than many folders: 17 of 255 bytes.
  auto wide =
      NestedTrees(16, std::string(255, 'n'), {{EntryMode::kFile, std::string(255, 'f'), blob.id}}, &root);
  refused = Push(std::move(wide), root);
  EXPECT_NE(refused.find(std::to_string(17 * 256 - 1) + " bytes long"), std::string::npos) << refused;
}

// A stored folder a push puts deeper: its paths are measured through the stored trees.
TEST_F(PushTest, AStoredFolderPutDeeperIsMeasuredThroughWhatIsStored) {
  const RawObject blob = BlobObject("x\n");
  ObjectId stored_root;
  auto stored = NestedTrees(2000, "a", {{EntryMode::kFile, "f", blob.id}}, &stored_root);
  stored.push_back(blob);
  ASSERT_EQ(Push(std::move(stored), stored_root), "");
  ObjectId root;
  // The stored 4,001-byte paths under 48 more folders: 4,097.
  const std::string refused = Push(NestedTrees(47, "b", {{EntryMode::kTree, "b", stored_root}}, &root), root);
  EXPECT_NE(refused.find("4097 bytes long"), std::string::npos) << refused;
  EXPECT_EQ(Push(NestedTrees(46, "b", {{EntryMode::kTree, "b", stored_root}}, &root), root), "");
}

// What a mirror fetches or a bundle imports is checked the same way.
TEST_F(PushTest, StorableObjectsRefusesWhatAPushRefuses) {
  const RawObject blob = BlobObject("x\n");
  ObjectId root;
  auto deep = NestedTrees(2048, "a", {{EntryMode::kFile, "f", blob.id}}, &root);  // 4,097 bytes
  deep.push_back(blob);
  auto got = StorableObjects(deep);
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.error().message.find("bytes long"), std::string::npos) << got.error().message;
  deep = NestedTrees(2044, "a", {{EntryMode::kFile, "f", blob.id}}, &root);
  EXPECT_TRUE(StorableObjects(deep).ok());
  const std::string twice = std::string("100644 a") + '\0' + std::string(20, 'x') + "100644 a-b" + '\0' +
                            std::string(20, 'x') + "40000 a" + '\0' + std::string(20, 'y');
  std::vector<uint8_t> body(twice.begin(), twice.end());
  got = StorableObjects({{ObjectKind::kTree, HashObject(ObjectKind::kTree, body), body}});
  EXPECT_FALSE(got.ok());
}

// "a" as a file and as a folder in one tree (git's order puts "a-b" between them): listed twice, resolved as
// neither; refused.
TEST_F(PushTest, ATreeNamingAFileAndAFolderAlikeIsRefused) {
  const RawObject blob = BlobObject("x\n");
  const RawObject inner = {ObjectKind::kTree, ObjectId{},
                           EncodeTree(std::vector<TreeEntry>{{EntryMode::kFile, "f", blob.id}})};
  const ObjectId inner_id = HashObject(ObjectKind::kTree, inner.body);
  std::vector<TreeEntry> both = {{EntryMode::kFile, "a", blob.id},
                                 {EntryMode::kFile, "a-b", blob.id},
                                 {EntryMode::kTree, "a", inner_id}};
  SortTree(both);
  auto body = EncodeTree(both);
  const ObjectId root = HashObject(ObjectKind::kTree, body);
  const ObjectId before = Head();
  const std::string refused =
      Push({{ObjectKind::kTree, root, body}, {ObjectKind::kTree, inner_id, inner.body}, blob}, root);
  EXPECT_NE(refused.find("appears twice"), std::string::npos) << refused;
  EXPECT_EQ(Head(), before);
  EXPECT_FALSE(Stored(root));
}

// A second pointer to a linked large file must give its size: the tree would list one size and resolve serve
// another. Two pointers of one push to a new file likewise.
TEST_F(PushTest, APointerGivingAnotherSizeThanItsFilesIsRefused) {
  const LfsPointer big = Upload(1, 120000);
  CommitRequest add;
  add.summary = "large";
  add.operations = {AddLfs{"big.bin", big}};
  ASSERT_TRUE(hub_->CreateCommit(alice_, repo_, add).ok());
  const RawObject lying = BlobObject(EncodeLfsPointer({big.sha256, big.size + 4096}));
  const RawObject honest = BlobObject(EncodeLfsPointer(big));
  const auto tree = [](std::vector<TreeEntry> e, ObjectId* id) {
    SortTree(e);
    auto body = EncodeTree(e);
    *id = HashObject(ObjectKind::kTree, body);
    return RawObject{ObjectKind::kTree, *id, std::move(body)};
  };
  ObjectId root;
  auto t = tree({{EntryMode::kFile, "other.bin", lying.id}}, &root);
  const ObjectId before = Head();
  std::string refused = Push({t, lying}, root);
  EXPECT_NE(refused.find("gives another size"), std::string::npos) << refused;
  EXPECT_EQ(Head(), before);
  EXPECT_FALSE(Stored(lying.id));

  // A new file named twice in one push, with two sizes.
  const LfsPointer fresh = Upload(2, 90000);
  const RawObject right = BlobObject(EncodeLfsPointer(fresh));
  const RawObject wrong = BlobObject(EncodeLfsPointer({fresh.sha256, fresh.size + 1}));
  t = tree({{EntryMode::kFile, "a.bin", right.id}, {EntryMode::kFile, "b.bin", wrong.id}}, &root);
  refused = Push({t, right, wrong}, root);
  EXPECT_NE(refused.find("gives another size"), std::string::npos) << refused;

  // With the file's size both land, and the listing gives it.
  t = tree({{EntryMode::kFile, "other.bin", honest.id}, {EntryMode::kFile, "a.bin", right.id}}, &root);
  ASSERT_EQ(Push({t, honest, right}, root), "");
  auto info = hub_->Stat(repo_, Head(), "other.bin");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->size, big.size);
}

// A history as deep as paths may go, on a thread whose stack a walk recursing per folder would overflow:
// pushed, listed, resolved, committed to, its large files listed and purged, marked as the collector marks,
// and checked as fsck checks.
TEST_F(PushTest, AHistoryAsDeepAsPathsGoIsWalkedWithoutRecursion) {
  const LfsPointer big = Upload(3, 70000);
  const RawObject pointer = BlobObject(EncodeLfsPointer(big));
  const RawObject small = BlobObject("kept\n");
  OnSmallStack([&] {
    ObjectId root;
    // 2,044 folders (4,088 bytes) and names of up to 8 bytes: paths of 4,096 at most.
    auto objects = NestedTrees(
        2044, "a", {{EntryMode::kFile, "big.bin", pointer.id}, {EntryMode::kFile, "weights1", small.id}},
        &root);
    objects.push_back(pointer);
    objects.push_back(small);
    ASSERT_EQ(Push(std::move(objects), root), "");
    std::string deepest;
    for (int i = 0; i < 2044; ++i) deepest += "a/";
    auto listed = hub_->List(repo_, Head(), "", true);
    ASSERT_TRUE(listed.ok()) << listed.error().message;
    EXPECT_EQ(listed->size(), 2044U + 2U);
    auto stat = hub_->Stat(repo_, Head(), deepest + "big.bin");
    ASSERT_TRUE(stat.ok()) << stat.error().message;
    EXPECT_EQ(stat->size, big.size);
    ASSERT_TRUE(stat->lfs.has_value());

    CommitRequest edit;
    edit.summary = "deep edit";
    edit.operations = {AddInline{deepest + "new", {'n'}}};
    auto edited = hub_->CreateCommit(alice_, repo_, edit);
    ASSERT_TRUE(edited.ok()) << edited.error().message;

    auto lfs = hub_->ListLfsFiles(repo_, std::nullopt, 100);
    ASSERT_TRUE(lfs.ok()) << lfs.error().message;
    ASSERT_EQ(lfs->files.size(), 1U);
    EXPECT_EQ(lfs->files[0].filename, deepest + "big.bin");

    auto purged = hub_->DeleteLfsFiles(alice_, repo_, {big.sha256}, true);
    ASSERT_TRUE(purged.ok()) << purged.error().message;
    EXPECT_FALSE(hub_->Stat(repo_, Head(), deepest + "big.bin").ok());
    EXPECT_TRUE(hub_->Stat(repo_, Head(), deepest + "weights1").ok());

    WalkOptions preload;
    preload.preload = true;
    auto reach = ReachFromRefs(*index_, repo_.record.id, preload);
    ASSERT_TRUE(reach.ok()) << reach.error().message;
    EXPECT_EQ(reach->missing, 0U);
    EXPECT_GT(reach->keys.size(), 2U * 2044U);  // the rewritten trees of the pushed and the edited commit

    auto checked = CheckHub(*index_);
    ASSERT_TRUE(checked.ok()) << checked.error().message;
    EXPECT_TRUE(checked->findings.empty()) << checked->findings[0].detail;
    EXPECT_GT(checked->trees, 2U * 2044U);
  });
}

// A history stored before the bound (written into the index as an older cairn accepted it) is walked by
// purge and fsck without recursion as well, and fsck reports the paths past the bound.
TEST_F(PushTest, ADeeperHistoryStoredBeforeTheBoundIsPurgedAndReported) {
  const LfsPointer big = Upload(4, 70000);
  const RawObject pointer = BlobObject(EncodeLfsPointer(big));
  ObjectId root;
  const RawObject small = BlobObject("kept\n");
  auto objects = NestedTrees(
      30000, "a", {{EntryMode::kFile, "big.bin", pointer.id}, {EntryMode::kFile, "kept", small.id}}, &root);
  objects.push_back(pointer);
  objects.push_back(small);
  RawObject commit = CommitObject(root, Head(), "old");
  const ObjectId commit_id = commit.id;
  objects.push_back(std::move(commit));
  std::vector<index::RepoObject> stored;
  for (auto& o : objects) stored.push_back({o.id.key(), static_cast<uint8_t>(o.kind), std::move(o.body)});
  ASSERT_TRUE(index_->PutRepoObjects(repo_.record.id, stored).ok());
  ASSERT_TRUE(
      index_->UpdateRef(repo_.record.id, {index::RefKind::kBranch, "main", Head().key(), commit_id.key()})
          .ok());
  OnSmallStack([&] {
    auto purged = hub_->DeleteLfsFiles(alice_, repo_, {big.sha256}, true);
    ASSERT_TRUE(purged.ok()) << purged.error().message;
    EXPECT_NE(Head(), commit_id);
    auto checked = CheckHub(*index_);
    ASSERT_TRUE(checked.ok()) << checked.error().message;
    size_t long_paths = 0;
    for (const auto& f : checked->findings) long_paths += f.what == "path" ? 1 : 0;
    EXPECT_EQ(long_paths, 1U);  // the history's one tree past the bound, reported once and not followed
  });
}

}  // namespace
}  // namespace cairn::hub
