// HubService over a real SQLite index: what the routes rely on, without HTTP. Commits made here have the
// tree ids git computes for the same files (the ids were taken from `git write-tree` on the same content).
#include "hub/hub_service.h"

#include <gtest/gtest.h>

#include "cas/test_backend.h"
#include "common/worker_pool.h"

namespace cairn::hub {
namespace {

class HubServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(cas::testing::OpenTestBackend("cairn-hub-service", &dir_, &store_, &index_));
    cas_ = std::make_unique<cas::CasService>(*index_, *store_, pool_, cas::ServiceOptions{});
    files_ = std::make_unique<files::FileService>(*cas_, *index_, files::FileServiceOptions{});
    HubOptions o;
    o.now = [] { return int64_t{1700000000}; };
    hub_ = std::make_unique<HubService>(*index_, *files_, o);
  }
  void TearDown() override {
    hub_.reset();
    files_.reset();
    cas_.reset();
    index_.reset();
    store_.reset();
    std::filesystem::remove_all(dir_);
  }

  static std::vector<uint8_t> Bytes(std::string_view s) { return {s.begin(), s.end()}; }

  Repo NewRepo() {
    auto repo = hub_->CreateRepo(alice_, {RepoType::kModel, "alice", "m"}, false);
    EXPECT_TRUE(repo.ok());
    return *repo;
  }

  std::filesystem::path dir_;
  WorkerPool pool_{1};
  std::unique_ptr<store::LocalDiskStore> store_;
  std::unique_ptr<index::SqliteIndex> index_;
  std::unique_ptr<cas::CasService> cas_;
  std::unique_ptr<files::FileService> files_;
  std::unique_ptr<HubService> hub_;
  const Caller alice_{"alice", true};
};

TEST_F(HubServiceTest, TreesAreTheOnesGitWrites) {
  const Repo repo = NewRepo();
  CommitRequest add;
  add.summary = "add";
  add.operations = {AddInline{"a/b.txt", Bytes("hello\n")}, AddInline{"c.txt", Bytes("x")}};
  auto first = hub_->CreateCommit(alice_, repo, add);
  ASSERT_TRUE(first.ok()) << first.error().message;
  EXPECT_EQ(first->commit.tree.hex(), "779ef21fb0d0ceaab34d6d6cc32105de7d97210d");
  EXPECT_EQ(first->commit.author.time, 1700000000);
  ASSERT_EQ(first->commit.parents.size(), 1U);
  // Deleting the only file of a folder removes the folder, as git keeps no empty trees.
  CommitRequest del;
  del.summary = "delete";
  del.parent = first->oid;
  del.operations = {DeletePath{"a/b.txt", false}};
  auto second = hub_->CreateCommit(alice_, repo, del);
  ASSERT_TRUE(second.ok()) << second.error().message;
  EXPECT_EQ(second->commit.tree.hex(), "4d5c8044a53f6b33565ac9ec82eaeec84121b44e");
  EXPECT_EQ(hub_->Stat(repo, second->oid, "a").error().code, "EntryNotFound");
  // The first commit still has it.
  auto old = hub_->Stat(repo, first->oid, "a/b.txt");
  ASSERT_TRUE(old.ok());
  EXPECT_EQ(*hub_->ReadBlob(repo, old->oid), Bytes("hello\n"));
  // History, newest first.
  auto head = hub_->Resolve(repo, "main");
  ASSERT_TRUE(head.ok());
  EXPECT_EQ(*head, second->oid);
  auto log = hub_->ListCommits(repo, *head, 0, 10);
  ASSERT_TRUE(log.ok());
  ASSERT_EQ(log->size(), 3U);
  EXPECT_EQ((*log)[2].commit.title(), "initial commit");
}

TEST_F(HubServiceTest, ACommitFromAStaleParentChangesNothing) {
  const Repo repo = NewRepo();
  const ObjectId start = *hub_->Resolve(repo, "main");
  CommitRequest a;
  a.summary = "a";
  a.parent = start;
  a.operations = {AddInline{"a.txt", Bytes("a")}};
  ASSERT_TRUE(hub_->CreateCommit(alice_, repo, a).ok());
  CommitRequest b = a;
  b.summary = "b";
  b.operations = {AddInline{"b.txt", Bytes("b")}};
  auto refused = hub_->CreateCommit(alice_, repo, b);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().kind, ErrorKind::kStale);
  auto listed = hub_->List(repo, *hub_->Resolve(repo, "main"), "", true);
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 2U);  // .gitattributes and a.txt
  EXPECT_EQ((*listed)[1].path, "a.txt");
}

TEST_F(HubServiceTest, NamesAndPaths) {
  for (const char* good : {"a", "model-1", "A.b_c", "x9"}) EXPECT_TRUE(ValidName(good)) << good;
  for (const char* bad : {"", "-a", "a-", "a--b", "a..b", "a/b", "a b", ".a"})
    EXPECT_FALSE(ValidName(bad)) << bad;
  EXPECT_FALSE(ValidName(std::string(97, 'a')));
  for (const char* good : {"a", "a/b.txt", "dir/sub/file", "é.txt"}) EXPECT_TRUE(ValidPath(good)) << good;
  for (const char* bad : {"", "/a", "a/", "a//b", "../a", "a/..", "./a", ".git/x", "a\\b", "a\tb"}) {
    EXPECT_FALSE(ValidPath(bad)) << bad;
  }
  EXPECT_EQ(NamespaceOf("alice"), "alice");
  EXPECT_EQ(NamespaceOf("alice/model"), "alice");
  EXPECT_EQ(NamespaceOf("datasets/alice/data"), "alice");
  const index::RepoRecord dataset{.id = 1,
                                  .type = RepoType::kDataset,
                                  .ns = "alice",
                                  .name = "d",
                                  .is_private = true,
                                  .created_at = 0,
                                  .scope = "hub:x"};
  EXPECT_TRUE(Covers({"alice", false}, dataset));
  EXPECT_TRUE(Covers({"datasets/alice/d", false}, dataset));
  EXPECT_FALSE(Covers({"alice/d", false}, dataset));  // the model of that name
  EXPECT_FALSE(Covers({"bob", true}, dataset));
  EXPECT_FALSE(Covers({"", false}, dataset));
  EXPECT_NE(NewRepoScope(), NewRepoScope());
}

}  // namespace
}  // namespace cairn::hub
