// HubService over a real SQLite index: what the routes rely on, without HTTP. Commits made here have the
// tree ids git computes for the same files (the ids were taken from `git write-tree` on the same content).
#include "hub/hub_service.h"

#include <gtest/gtest.h>
#include <openssl/sha.h>

#include "cas/test_backend.h"
#include "common/hex.h"
#include "common/worker_pool.h"
#include "hub/hub_check.h"
#include "index/testing/faulty_index.h"
#include "ingest/upload_builder.h"
#include "xet/test_support.h"

namespace cairn::hub {
namespace {

class HubServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(cas::testing::OpenTestBackend("cairn-hub-service", &dir_, &store_, &index_));
    faulty_ = std::make_unique<index::testing::FaultyIndex>(*index_);
    cas_ = std::make_unique<cas::CasService>(*index_, *store_, pool_, cas::ServiceOptions{});
    files_ = std::make_unique<files::FileService>(*cas_, *faulty_, files::FileServiceOptions{});
    options_.clock = &clock_;
    hub_ = std::make_unique<HubService>(*faulty_, *files_, options_);
  }
  void TearDown() override {
    hub_.reset();
    files_.reset();
    cas_.reset();
    faulty_.reset();
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

  TestClock clock_;  // the services' (declared first: it outlives them)
  std::filesystem::path dir_;
  WorkerPool pool_{1};
  std::unique_ptr<store::LocalDiskStore> store_;
  std::unique_ptr<index::SqliteIndex> index_;
  std::unique_ptr<index::testing::FaultyIndex> faulty_;  // what the file and Hub services read through
  HubOptions options_;
  std::unique_ptr<cas::CasService> cas_;
  std::unique_ptr<files::FileService> files_;
  std::unique_ptr<HubService> hub_;
  const Caller alice_{"alice", true};
};

// A page of a folder: its entries in tree order from an offset, described as List describes them, and how
// many the folder holds; past the end, none.
TEST_F(HubServiceTest, AFolderIsReadAPageAtATime) {
  const Repo repo = NewRepo();
  CommitRequest add;
  add.summary = "add";
  for (const char* name : {"d/a", "d/b", "d/c", "d/e/x", "d/f"})
    add.operations.push_back(AddInline{name, Bytes(name)});
  auto made = hub_->CreateCommit(alice_, repo, add);
  ASSERT_TRUE(made.ok()) << made.error().message;
  auto whole = hub_->List(repo, made->oid, "d", false);
  ASSERT_TRUE(whole.ok());
  auto page = hub_->ListPage(repo, made->oid, "d", 2, 2);
  ASSERT_TRUE(page.ok()) << page.error().message;
  EXPECT_EQ(page->total, 5u);
  ASSERT_EQ(page->entries.size(), 2u);
  EXPECT_EQ(page->entries[0].path, "d/c");
  EXPECT_EQ(page->entries[1].path, "d/e");
  EXPECT_TRUE(page->entries[1].is_dir);
  EXPECT_EQ(page->entries[0].oid, (*whole)[2].oid);
  EXPECT_EQ(page->entries[0].size, (*whole)[2].size);
  EXPECT_TRUE(hub_->ListPage(repo, made->oid, "d", 9, 2)->entries.empty());
  EXPECT_EQ(hub_->ListPage(repo, made->oid, "d/a", 0, 2).error().reason, "EntryNotFound");
}

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
  EXPECT_EQ(hub_->Stat(repo, second->oid, "a").error().reason, "EntryNotFound");
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
  ASSERT_EQ(log->commits.size(), 3U);
  EXPECT_FALSE(log->more);
  EXPECT_EQ(log->commits[2].commit.title(), "initial commit");
  auto two = hub_->ListCommits(repo, *head, 0, 2);
  ASSERT_EQ(two->commits.size(), 2U);
  EXPECT_TRUE(two->more);
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
  EXPECT_EQ(refused.error().code, ErrorCode::kStale);
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
                                  .scope = "hub:x",
                                  .read_scope = "hub:y"};
  EXPECT_EQ(AccessTo({"alice", false}, dataset), Access::kRead);
  EXPECT_EQ(AccessTo({"alice", true}, dataset), Access::kAdmin);  // a scope token's write is its all
  EXPECT_EQ(AccessTo({"datasets/alice/d", false}, dataset), Access::kRead);
  EXPECT_EQ(AccessTo({"alice/d", true}, dataset), Access::kNone);  // the model of that name
  EXPECT_EQ(AccessTo({"bob", true}, dataset), Access::kNone);
  EXPECT_EQ(AccessTo({"", false}, dataset), Access::kNone);
  EXPECT_NE(NewRepoScope(), NewRepoScope());
}

// A person reaches what their reach lists, the most of any entry that covers the repository, and nothing
// by their scope alone.
TEST(HubNames, APersonReachesByTheirReach) {
  const index::RepoRecord model{.id = 1,
                                .type = RepoType::kModel,
                                .ns = "acme",
                                .name = "m",
                                .is_private = true,
                                .created_at = 0,
                                .scope = "hub:x",
                                .read_scope = "hub:y"};
  Caller bob{.scope = "bob", .write = true, .expires = 0, .user = "bob", .reach = {}, .token_id = "t"};
  EXPECT_EQ(AccessTo(bob, model), Access::kNone);
  bob.reach = {{"bob", Access::kAdmin}, {"acme", Access::kRead}};
  EXPECT_EQ(AccessTo(bob, model), Access::kRead);
  bob.reach.push_back({"acme/m", Access::kWrite});
  EXPECT_EQ(AccessTo(bob, model), Access::kWrite);
  bob.reach = {{"datasets/acme/m", Access::kAdmin}};  // the dataset of that name
  EXPECT_EQ(AccessTo(bob, model), Access::kNone);
  Caller own{.scope = "acme", .write = true, .expires = 0, .user = "acme", .reach = {}, .token_id = "t"};
  EXPECT_EQ(AccessTo(own, model), Access::kNone);  // a person with an empty reach: not even their scope
  EXPECT_EQ(own.Who(), "acme");
  // A namespace itself: a person by its own entry (a repository's entry is not the namespace's).
  EXPECT_EQ(AccessToNamespace(bob, "acme"), Access::kNone);
  bob.reach = {{"acme", Access::kWrite}, {"bob/m", Access::kAdmin}};
  EXPECT_EQ(AccessToNamespace(bob, "acme"), Access::kWrite);
  EXPECT_EQ(AccessToNamespace(bob, "bob"), Access::kNone);
  EXPECT_EQ(AccessToNamespace({"alice/m", true}, "alice"), Access::kAdmin);
  EXPECT_EQ(AccessToNamespace({"alice", false}, "alice"), Access::kRead);
  EXPECT_EQ(AccessToNamespace({"", false}, ""), Access::kNone);
}

// An index failure keeps its code, except where the Hub reads it otherwise: the index disagreeing with itself
// is the server's fault, and a range outside what it holds a malformed request.
TEST(HubErrors, AnIndexFailureAsTheHubReportsIt) {
  EXPECT_EQ(FromIndex(HashMismatch("h")).code, ErrorCode::kDamaged);
  EXPECT_EQ(FromIndex(Inconsistent("i")).code, ErrorCode::kDamaged);
  EXPECT_EQ(FromIndex(Unsatisfiable("u")).code, ErrorCode::kMalformed);
  for (const Error& kept : {NotFound("n"), Conflict("c"), Unavailable("a"), IoError("o"), QuotaExceeded("q"),
                            Malformed("m"), Denied("d"), Unauthorized("u")}) {
    EXPECT_EQ(FromIndex(kept).code, kept.code) << kept.message;
    EXPECT_EQ(FromIndex(kept).message, kept.message);
  }
  EXPECT_EQ(FromIndex(Damaged("x")).message, "x");
}

// Stored text is bounded: summary and description by size and content; a commit listing's page by the
// bytes of its messages.
TEST_F(HubServiceTest, CommitTextIsBounded) {
  const Repo repo = NewRepo();
  CommitRequest c;
  c.summary = "ok";
  c.description = std::string(kMaxDescriptionBytes, 'd');
  ASSERT_TRUE(hub_->CreateCommit(alice_, repo, c).ok());
  for (const auto& [summary, description] :
       std::vector<std::pair<std::string, std::string>>{{"ok", std::string(kMaxDescriptionBytes + 1, 'd')},
                                                        {std::string(kMaxSummaryBytes + 1, 's'), ""},
                                                        {"two\nlines", ""},
                                                        {"csi \xc2\x9b", ""},
                                                        {"ok", "bell \x07"},
                                                        {"ok", "bad utf-8 \xff"},
                                                        {"", ""}}) {
    CommitRequest bad;
    bad.summary = summary;
    bad.description = description;
    auto refused = hub_->CreateCommit(alice_, repo, bad);
    ASSERT_FALSE(refused.ok()) << summary.substr(0, 20) << description.substr(0, 20);
    EXPECT_EQ(refused.error().code, ErrorCode::kMalformed);
  }
  CommitRequest lines;
  lines.summary = "ok";
  lines.description = "line one\r\n\tline two\n";
  ASSERT_TRUE(hub_->CreateCommit(alice_, repo, lines).ok());
  // 64 KiB, a few bytes, 64 KiB, then the initial commit; a budget of 100 KiB ends the page after the third.
  CommitRequest big = c;
  ASSERT_TRUE(hub_->CreateCommit(alice_, repo, big).ok());
  auto page = hub_->ListCommits(repo, *hub_->Resolve(repo, "main"), 0, 100, 100 << 10);
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(page->commits.size(), 3U);
  EXPECT_TRUE(page->more);
  EXPECT_EQ(hub_->ListCommits(repo, *hub_->Resolve(repo, "main"), 0, 100)->commits.size(), 4U);
  // One commit at least, whatever the budget.
  EXPECT_EQ(hub_->ListCommits(repo, *hub_->Resolve(repo, "main"), 0, 100, 1)->commits.size(), 1U);
}

// A commit an older cairn stored with a message of any size is read no further than the bound, and served
// cut there as valid UTF-8.
TEST_F(HubServiceTest, AnOversizedStoredCommitIsReadWithinTheBound) {
  const Repo repo = NewRepo();
  const ObjectId head = *hub_->Resolve(repo, "main");
  Commit huge = *hub_->ReadCommit(repo, head);
  huge.parents = {head};
  huge.message = "title\n\n";
  while (huge.message.size() < 3 * kMaxCommitObjectBytes) huge.message += "\xc3\xa9";  // é, two bytes each
  const std::string body = EncodeCommit(huge);
  const ObjectId oid = HashObject(ObjectKind::kCommit, body);
  ASSERT_TRUE(index_
                  ->PutRepoObjects(repo.record.id, {{{oid.bytes.begin(), oid.bytes.end()},
                                                     static_cast<uint8_t>(ObjectKind::kCommit),
                                                     {body.begin(), body.end()}}})
                  .ok());
  auto read = hub_->ReadCommit(repo, oid);
  ASSERT_TRUE(read.ok()) << read.error().message;
  EXPECT_EQ(read->title(), "title");
  EXPECT_LE(read->message.size(), kMaxSummaryBytes + 2 + kMaxDescriptionBytes);
  EXPECT_GT(read->message.size(), kMaxDescriptionBytes / 2);
  EXPECT_TRUE(ValidUtf8(read->message));
  auto listed = hub_->ListCommits(repo, oid, 0, 10);
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(listed->commits.size(), 2U);
}

// Ref names follow git's rules; commits may not name a branch git would refuse.
TEST_F(HubServiceTest, RefsGitWouldRefuseAreRefused) {
  const Repo repo = NewRepo();
  for (const char* bad : {"main~1", "main^", "a b", "x:y", "star*", "a..b", "x.lock", "a@{1}", "@", ".hidden",
                          "trail.", "HEAD", "-x"}) {
    auto st = hub_->CreateRef(alice_, repo, index::RefKind::kBranch, bad, std::nullopt, false);
    ASSERT_FALSE(st.ok()) << bad;
    EXPECT_EQ(st.error().code, ErrorCode::kMalformed) << bad;
    EXPECT_FALSE(hub_->CreateRef(alice_, repo, index::RefKind::kTag, bad, std::nullopt, false).ok()) << bad;
  }
  EXPECT_TRUE(hub_->CreateRef(alice_, repo, index::RefKind::kBranch, "feature/x", std::nullopt, false).ok());
  EXPECT_TRUE(hub_->CreateRef(alice_, repo, index::RefKind::kTag, "v1.0", std::nullopt, false).ok());
  EXPECT_EQ(hub_->ListRefs(repo)->size(), 3U);
}

// Going private gives the repository a new read scope (every earlier read token reads nothing); a repository
// has two scopes of its own.
TEST_F(HubServiceTest, GoingPrivateReplacesTheReadScope) {
  const Repo repo = NewRepo();
  EXPECT_FALSE(repo.record.read_scope.empty());
  EXPECT_NE(repo.record.read_scope, repo.record.scope);
  ASSERT_TRUE(hub_->UpdateSettings(alice_, repo.id(), false).ok());  // public again: nothing to retire
  EXPECT_EQ(hub_->Open(alice_, repo.id(), false)->record.read_scope, repo.record.read_scope);
  ASSERT_TRUE(hub_->UpdateSettings(alice_, repo.id(), true).ok());
  auto priv = hub_->Open(alice_, repo.id(), false);
  ASSERT_TRUE(priv.ok());
  EXPECT_NE(priv->record.read_scope, repo.record.read_scope);
  EXPECT_EQ(priv->record.scope, repo.record.scope);
  ASSERT_TRUE(hub_->UpdateSettings(alice_, repo.id(), true).ok());  // private already: kept
  EXPECT_EQ(hub_->Open(alice_, repo.id(), false)->record.read_scope, priv->record.read_scope);
}

// Data an older cairn stored under looser rules (written here straight into the index) is served safely and
// reported by the check: a ref git refuses, a path NTFS reads as .git, an oversized commit, a bucket file's
// malformed media type.
TEST_F(HubServiceTest, DataStoredUnderOlderRulesIsServedSafelyAndReported) {
  const Repo repo = NewRepo();
  const ObjectId head = *hub_->Resolve(repo, "main");
  Commit c = *hub_->ReadCommit(repo, head);
  const ObjectId blob = HashObject(ObjectKind::kBlob, "x");
  std::vector<TreeEntry> entries = {{EntryMode::kFile, ".git::$INDEX_ALLOCATION", blob},
                                    {EntryMode::kFile, "fine.txt", blob},
                                    {EntryMode::kFile, "csi\xc2\x9b", blob}};
  SortTree(entries);
  const auto tree = EncodeTree(entries);
  c.tree = HashObject(ObjectKind::kTree, tree);
  c.parents = {head};
  c.message = "t\n\n" + std::string(kMaxDescriptionBytes * 2, 'd');
  const std::string body = EncodeCommit(c);
  const ObjectId oid = HashObject(ObjectKind::kCommit, body);
  const auto key = [](const ObjectId& id) { return std::vector<uint8_t>(id.bytes.begin(), id.bytes.end()); };
  ASSERT_TRUE(index_
                  ->PutRepoObjects(repo.record.id,
                                   {{key(blob), static_cast<uint8_t>(ObjectKind::kBlob), Bytes("x")},
                                    {key(c.tree), static_cast<uint8_t>(ObjectKind::kTree), tree},
                                    {key(oid), static_cast<uint8_t>(ObjectKind::kCommit), Bytes(body)}})
                  .ok());
  ASSERT_TRUE(
      index_->UpdateRef(repo.record.id, {index::RefKind::kBranch, "bad~1", std::nullopt, key(oid)}).ok());
  auto bucket = hub_->CreateRepo(alice_, {RepoType::kBucket, "alice", "b"}, false);
  ASSERT_TRUE(bucket.ok());
  ASSERT_TRUE(index_
                  ->ChangeBucket(bucket->record.id,
                                 {{"f", index::BucketFile{"f", xet::FileHash{}, 0, 0,
                                                          std::string("text/html\r\nX-Injected: 1"), 0}}},
                                 nullptr)
                  .ok());

  // Served safely: the listing leaves the bad names out; the commit is cut to the bounds.
  auto listed = hub_->List(repo, oid, "", true);
  ASSERT_TRUE(listed.ok()) << listed.error().message;
  ASSERT_EQ(listed->size(), 1U);
  EXPECT_EQ((*listed)[0].path, "fine.txt");
  EXPECT_LE(hub_->ReadCommit(repo, oid)->message.size(), kMaxSummaryBytes + 2 + kMaxDescriptionBytes);

  auto report = CheckHub(*index_);
  ASSERT_TRUE(report.ok()) << report.error().message;
  std::map<std::string, int> kinds;
  for (const auto& f : report->findings) {
    ++kinds[f.what];
    for (char ch : f.detail) EXPECT_TRUE(ch >= 0x20 && ch < 0x7f) << f.detail;  // printable
  }
  EXPECT_EQ(kinds["ref"], 1);
  EXPECT_EQ(kinds["path"], 2);
  EXPECT_EQ(kinds["commit"], 1);
  EXPECT_EQ(kinds["content-type"], 1);
  EXPECT_EQ(report->findings.size(), 5U);
  EXPECT_EQ(report->repos, 2U);
  EXPECT_EQ(report->commits, 2U);
  EXPECT_EQ(Printable("a\r\n\\\xff"), "a\\x0d\\x0a\\x5c\\xff");
}

// An index failure while committing or reading is reported as one (503 for an unreachable database, 500
// otherwise), never taken for "not found": a large file whose lookup failed is not committed, and one whose
// link could not be read is not described as the small file its pointer text would be.
TEST_F(HubServiceTest, IndexFailuresAreReportedNotTakenForNotFound) {
  const Repo repo = NewRepo();
  const auto data = xet::testing::SplitMix64Bytes(5, 70000);
  auto built = ingest::BuildUpload(std::vector<std::span<const uint8_t>>{data});
  for (const auto& x : built.xorbs) ASSERT_TRUE(cas_->PutXorb(x.hash, x.body).ok());
  ASSERT_TRUE(cas_->PutShard(built.shard_bytes, repo.record.scope).ok());
  uint8_t digest[SHA256_DIGEST_LENGTH];
  SHA256(data.data(), data.size(), digest);
  CommitRequest add;
  add.summary = "large";
  add.operations = {AddLfs{"big.bin", LfsPointer{HexEncode(digest), data.size()}}};
  const auto head = hub_->Resolve(repo, "main");
  ASSERT_TRUE(head.ok());
  const auto failing = [](std::string_view which, const Error& error) {
    return [which, error](std::string_view call, std::span<const std::vector<uint8_t>> keys) -> Status {
      if (call != which) return Ok{};
      if (call == "GetRepoObjects" && (keys.empty() || keys[0].size() != 32)) return Ok{};  // links only
      return error;
    };
  };

  faulty_->fault = failing("FileBySha256", IoError("injected: disk I/O error"));
  auto failed = hub_->CreateCommit(alice_, repo, add);
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.error().code, ErrorCode::kIo) << failed.error().message;
  faulty_->fault = failing("GetRepoObjects", Unavailable("injected: the database is unreachable"));
  failed = hub_->CreateCommit(alice_, repo, add);
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.error().code, ErrorCode::kUnavailable) << failed.error().message;
  EXPECT_EQ(*hub_->Resolve(repo, "main"), *head) << "nothing committed";

  faulty_->fault = nullptr;
  auto done = hub_->CreateCommit(alice_, repo, add);
  ASSERT_TRUE(done.ok()) << done.error().message;
  HubService fresh(*faulty_, *files_, options_);  // nothing of the commit in its caches
  faulty_->fault = failing("GetRepoObjects", Unavailable("injected: the database is unreachable"));
  auto described = fresh.Stat(repo, done->oid, "big.bin");
  ASSERT_FALSE(described.ok()) << "described without its link";
  EXPECT_EQ(described.error().code, ErrorCode::kUnavailable);
  faulty_->fault = nullptr;
  described = fresh.Stat(repo, done->oid, "big.bin");
  ASSERT_TRUE(described.ok()) << described.error().message;
  EXPECT_EQ(described->size, data.size());
  EXPECT_TRUE(described->xet.has_value());
}

}  // namespace
}  // namespace cairn::hub
