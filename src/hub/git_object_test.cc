#include "hub/git_object.h"

#include <gtest/gtest.h>

namespace cairn::hub {
namespace {

// Expected ids computed with git 2.39 (`git hash-object`, `git write-tree`, `git commit-tree` with fixed
// dates), so these tests pin cairn's bytes to git's.

ObjectId Id(std::string_view hex) {
  return *ObjectId::FromHex(hex);
}

TEST(GitObject, BlobIdsAreGits) {
  EXPECT_EQ(HashObject(ObjectKind::kBlob, "hello\n").hex(), "ce013625030ba8dba906f756967f9e9ca394464a");
  EXPECT_EQ(HashObject(ObjectKind::kBlob, "").hex(), "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391");
  EXPECT_EQ(HashObject(ObjectKind::kTree, "").hex(), "4b825dc642cb6eb9a060e54bf8d69288fbee4904");
}

TEST(GitObject, TreesAreSortedAndHashedAsGitDoes) {
  std::vector<TreeEntry> sub = {{EntryMode::kFile, "b", HashObject(ObjectKind::kBlob, "x")}};
  const ObjectId sub_id = HashObject(ObjectKind::kTree, EncodeTree(sub));
  EXPECT_EQ(sub_id.hex(), "da981995a0f17908b3f6795c1e0c28a7e96b8a11");
  std::vector<TreeEntry> root = {
      {EntryMode::kTree, "d", sub_id},
      {EntryMode::kFile, "a.txt", Id("ce013625030ba8dba906f756967f9e9ca394464a")},
      {EntryMode::kFile, "a-b", HashObject(ObjectKind::kBlob, "y")},
  };
  SortTree(root);
  EXPECT_EQ(root[0].name, "a-b");
  EXPECT_EQ(root[2].name, "d");
  const auto body = EncodeTree(root);
  EXPECT_EQ(HashObject(ObjectKind::kTree, body).hex(), "64051e16f8d4edf4aea5fb1cb02626fc66744a01");
  auto parsed = ParseTree(body);
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  ASSERT_EQ(parsed->size(), 3U);
  EXPECT_TRUE((*parsed)[2].is_tree());
  EXPECT_EQ((*parsed)[2].id, sub_id);
}

TEST(GitObject, ATreeSortsAsIfItsNameEndedInASlash) {
  const ObjectId any = HashObject(ObjectKind::kBlob, "");
  std::vector<TreeEntry> e = {
      {EntryMode::kFile, "d0", any}, {EntryMode::kTree, "d", any}, {EntryMode::kFile, "d.txt", any}};
  SortTree(e);
  EXPECT_EQ(e[0].name, "d.txt");  // '.' < '/'
  EXPECT_EQ(e[1].name, "d");
  EXPECT_EQ(e[2].name, "d0");  // '/' < '0'
}

TEST(GitObject, ParseTreeRefusesWhatGitWouldNotWrite) {
  const ObjectId any = HashObject(ObjectKind::kBlob, "");
  std::vector<TreeEntry> unsorted = {{EntryMode::kFile, "b", any}, {EntryMode::kFile, "a", any}};
  EXPECT_FALSE(ParseTree(EncodeTree(unsorted)).ok());
  std::vector<TreeEntry> twice = {{EntryMode::kFile, "a", any}, {EntryMode::kFile, "a", any}};
  EXPECT_FALSE(ParseTree(EncodeTree(twice)).ok());
  for (const char* bad : {"..", ".", ".git", ""}) {
    std::vector<TreeEntry> one = {{EntryMode::kFile, bad, any}};
    EXPECT_FALSE(ParseTree(EncodeTree(one)).ok()) << bad;
  }
  auto body = EncodeTree(std::vector<TreeEntry>{{EntryMode::kFile, "a", any}});
  for (size_t cut = 1; cut < body.size(); ++cut) {
    EXPECT_FALSE(ParseTree(std::span(body).first(cut)).ok()) << cut;  // every truncation
  }
  // A submodule (gitlink) is refused; a symbolic link is what git writes for one.
  const std::string gitlink = std::string("160000 a") + '\0' + std::string(20, 'x');
  EXPECT_FALSE(ParseTree(std::span(reinterpret_cast<const uint8_t*>(gitlink.data()), gitlink.size())).ok());
  const std::string symlink = std::string("120000 a") + '\0' + std::string(20, 'x');
  auto link = ParseTree(std::span(reinterpret_cast<const uint8_t*>(symlink.data()), symlink.size()));
  ASSERT_TRUE(link.ok());
  EXPECT_EQ(link->at(0).mode, EntryMode::kSymlink);
}

// A name given as a file and as a folder sorts apart ("a", "a-b", "a/"): git fsck's duplicateEntries. The
// tree is in git's order, so only the repeated name refuses it.
TEST(GitObject, ParseTreeRefusesANameGivenAsAFileAndAFolder) {
  const ObjectId blob = HashObject(ObjectKind::kBlob, "");
  const ObjectId tree = HashObject(ObjectKind::kTree, "");
  std::vector<TreeEntry> both = {
      {EntryMode::kFile, "a", blob}, {EntryMode::kFile, "a-b", blob}, {EntryMode::kTree, "a", tree}};
  SortTree(both);
  ASSERT_EQ(both[0].name, "a");
  ASSERT_EQ(both[1].name, "a-b");
  ASSERT_TRUE(both[2].is_tree());
  auto parsed = ParseTree(EncodeTree(both));
  ASSERT_FALSE(parsed.ok());
  EXPECT_NE(parsed.error().message.find("twice"), std::string::npos) << parsed.error().message;
  // Far apart too: every name below '/' between them.
  std::vector<TreeEntry> far = {{EntryMode::kExecutable, "x", blob}, {EntryMode::kTree, "x", tree}};
  for (char c = ' '; c < '/'; ++c) far.push_back({EntryMode::kFile, std::string("x") + c + "y", blob});
  SortTree(far);
  EXPECT_FALSE(ParseTree(EncodeTree(far)).ok());
  // Without the repeat the same neighbours parse.
  both.erase(both.begin());
  EXPECT_TRUE(ParseTree(EncodeTree(both)).ok());
}

// git's verify_path for NTFS and HFS+ (core.protectNTFS, core.protectHFS), and C1 controls as C0 ones.
TEST(GitObject, SegmentsRefuseEverySpellingOfGitsFolder) {
  for (const char* good : {"a", "git", ".gitattributes", ".gitignore", "gitx", "x.git", "a:b", "é", ".gi",
                           "\xe2\x80\x8c" /* U+200C alone */}) {
    EXPECT_TRUE(ValidSegment(good)) << good;
  }
  for (const char* bad : {".git", ".GIT", ".Git", ".git.", ".git ", ".git. . ", "GIT~1", "git~1", "git~2",
                          ".git::$INDEX_ALLOCATION", ".git:$I30:$INDEX_ALLOCATION", ".git:x", "git~1:stream",
                          ".g\xe2\x80\x8cit", ".git\xe2\x80\x8d", "\xef\xbb\xbf.git", ".gi\xe2\x81\xaat",
                          ".\xe2\x80\x8eGIT\xe2\x80\xac", "\xe2\x80\xaa.git\xe2\x80\xae"}) {
    EXPECT_FALSE(ValidSegment(bad)) << bad;
  }
  // C0, DEL and C1 (U+0080-U+009F, e.g. CSI U+009B and NEL U+0085) controls; U+00A0 is not one.
  for (const char* bad : {"a\x01", "a\x7f", "a\xc2\x9b", "\xc2\x85x", "\xc2\x80"})
    EXPECT_FALSE(ValidSegment(bad));
  EXPECT_TRUE(
      ValidSegment("a\xc2\xa0"
                   "b"));
  EXPECT_TRUE(ValidSegment("\xc3\xa9t\xc3\xa9"));
}

// `git check-ref-format`'s rules, and what git branch and git tag refuse beside them.
TEST(GitObject, RefNamesFollowCheckRefFormat) {
  for (const char* good : {"refs/heads/main", "refs/pr/1", "refs/heads/feature/x", "refs/tags/v1.0",
                           "refs/heads/a-b_c", "refs/heads/\xc3\xa9", "refs/heads/a@b", "refs/heads/x.y"}) {
    EXPECT_TRUE(ValidRefName(good)) << good;
  }
  for (const char* bad : {"",
                          "refs/heads/main~1",
                          "refs/heads/main^",
                          "refs/heads/a b",
                          "refs/heads/x:y",
                          "refs/heads/star*",
                          "refs/heads/a..b",
                          "refs/heads/x.lock",
                          "refs/heads/a@{1}",
                          "@",
                          "refs/heads/.hidden",
                          "refs/heads/trail.",
                          "refs/heads/q?",
                          "refs/heads/[x",
                          "refs/heads/a\\b",
                          "refs/heads/a\tb",
                          "refs/heads/a\x7f",
                          "/refs/heads/a",
                          "refs/heads/a/",
                          "refs//heads",
                          "refs/heads/x.lock/y",
                          "refs/heads/a\xc2\x9b",
                          "refs/heads/\xff"}) {
    EXPECT_FALSE(ValidRefName(bad)) << bad;
  }
  EXPECT_FALSE(ValidRefName("refs/heads/" + std::string(250, 'a')));
  for (const char* good : {"main", "v1.0", "feature/x", "release-2026"}) {
    EXPECT_TRUE(ValidBranchOrTagName(good, false)) << good;
    EXPECT_TRUE(ValidBranchOrTagName(good, true)) << good;
  }
  for (const char* bad :
       {"main~1", "main^", "a b", "x:y", "star*", "a..b", "x.lock", "a@{1}", "@", ".hidden", "trail.", "-x",
        "HEAD", "refs/heads/main", "0123456789012345678901234567890123456789", "", "a//b", "a/"}) {
    EXPECT_FALSE(ValidBranchOrTagName(bad, false)) << bad;
  }
}

TEST(GitObject, CommitsAreGits) {
  Commit c;
  c.tree = Id("64051e16f8d4edf4aea5fb1cb02626fc66744a01");
  c.author = {"alice", "alice@example.com", 1700000000};
  c.committer = c.author;
  c.message = "Add files\n\nLonger description";
  const std::string body = EncodeCommit(c);
  EXPECT_EQ(HashObject(ObjectKind::kCommit, body).hex(), "09fd4f39bd61e3a5929d741ffcfbd61c6357e404");
  auto parsed = ParseCommit(std::span(reinterpret_cast<const uint8_t*>(body.data()), body.size()));
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  EXPECT_EQ(parsed->tree, c.tree);
  EXPECT_TRUE(parsed->parents.empty());
  EXPECT_EQ(parsed->author.email, "alice@example.com");
  EXPECT_EQ(parsed->committer.time, 1700000000);
  EXPECT_EQ(parsed->message, c.message);
  EXPECT_EQ(parsed->title(), "Add files");

  c.parents.push_back(HashObject(ObjectKind::kCommit, body));
  const std::string child = EncodeCommit(c);
  auto again = ParseCommit(std::span(reinterpret_cast<const uint8_t*>(child.data()), child.size()));
  ASSERT_TRUE(again.ok());
  ASSERT_EQ(again->parents.size(), 1U);
  EXPECT_EQ(again->parents[0], c.parents[0]);
  for (size_t cut = 0; cut + 1 < child.find("\n\n"); ++cut) {
    EXPECT_FALSE(ParseCommit(std::span(reinterpret_cast<const uint8_t*>(child.data()), cut)).ok()) << cut;
  }
}

TEST(GitObject, LfsPointersRoundTripAndNothingElseParses) {
  const LfsPointer p{std::string(64, 'a'), 1234};
  const std::string text = EncodeLfsPointer(p);
  EXPECT_EQ(text, "version https://git-lfs.github.com/spec/v1\noid sha256:" + std::string(64, 'a') +
                      "\nsize 1234\n");
  auto bytes = [](const std::string& s) {
    return std::span(reinterpret_cast<const uint8_t*>(s.data()), s.size());
  };
  auto back = ParseLfsPointer(bytes(text));
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->sha256, p.sha256);
  EXPECT_EQ(back->size, 1234U);
  EXPECT_FALSE(ParseLfsPointer(bytes("hello\n")).has_value());
  std::string upper = text;
  upper[60] = 'A';
  EXPECT_FALSE(ParseLfsPointer(bytes(upper)).has_value());
  EXPECT_FALSE(ParseLfsPointer(bytes(text.substr(0, text.size() - 1))).has_value());
  EXPECT_FALSE(ParseLfsPointer(bytes(text.substr(0, text.size() - 5) + "01\n")).has_value());
}

TEST(GitObject, ObjectIdsParseOnlyFortyHexDigits) {
  EXPECT_TRUE(ObjectId::FromHex("CE013625030BA8DBA906F756967F9E9CA394464A").has_value());
  EXPECT_FALSE(ObjectId::FromHex("ce013625030ba8dba906f756967f9e9ca394464").has_value());
  EXPECT_FALSE(ObjectId::FromHex("ce013625030ba8dba906f756967f9e9ca394464g").has_value());
  EXPECT_FALSE(ObjectId::FromHex("main").has_value());
}

}  // namespace
}  // namespace cairn::hub
