// ReceivePack over a repository the Hub wrote into SQLite: pushes built as git sends them (commands, then a
// pack), checked by ApplyPush, answered with report-status; what they change read back through the Hub.
#include "git/receive_pack.h"

#include <gtest/gtest.h>

#include "git/pack.h"
#include "git/pkt_line.h"
#include "git/test_repo.h"
#include "hub/test_trees.h"

namespace cairn::git {
namespace {

using hub::ObjectId;
using hub::ObjectKind;

struct Obj {
  ObjectKind kind;
  std::string body;
  ObjectId id() const { return hub::HashObject(kind, body); }
};

std::string Tree(const std::vector<std::tuple<std::string, std::string, ObjectId>>& entries) {
  std::string out;
  for (const auto& [mode, name, id] : entries) {
    out.append(mode).append(" ").append(name).push_back('\0');
    out.append(reinterpret_cast<const char*>(id.bytes.data()), 20);
  }
  return out;
}

std::string CommitText(const ObjectId& tree, const ObjectId& parent, const std::string& message) {
  return "tree " + tree.hex() + "\nparent " + parent.hex() +
         "\nauthor A U Thor <a@example.com> 1700000000 +0100\ncommitter A U Thor <a@example.com> 1700000000 "
         "+0100\n\n" +
         message + "\n";
}

class ReceivePackTest : public testing::HubRepoTest {
 protected:
  // The push of `objects` moving refs/heads/main from `from` to `to`: its report.
  std::string Push(const std::vector<Obj>& objects, const std::optional<ObjectId>& from, const ObjectId& to,
                   const std::string& ref = "refs/heads/main") {
    std::string req;
    AppendPkt(req, (from ? from->hex() : std::string(40, '0')) + " " + to.hex() + " " + ref +
                       std::string(1, '\0') + "report-status agent=git/2.39.5\n");
    AppendFlush(req);
    PackWriter w(static_cast<uint32_t>(objects.size()), [&](std::string&& p) {
      req.append(p);
      return true;
    });
    for (const auto& o : objects) {
      EXPECT_TRUE(w.Add(o.kind, {reinterpret_cast<const uint8_t*>(o.body.data()), o.body.size()}).ok());
    }
    EXPECT_TRUE(w.Finish().ok());
    auto refs = hub_->ListRefs(repo_);
    EXPECT_TRUE(refs.ok());
    ReceivePack rp(*hub_, *index_, repo_, *refs, "main");
    auto out = rp.Serve(alice_, req);
    EXPECT_TRUE(out.ok()) << out.error().message;
    return out.ok() ? *out : std::string();
  }
  ObjectId Main() { return *hub_->Resolve(repo_, "main"); }
};

TEST_F(ReceivePackTest, AFastForwardLandsAndTheHubReadsIt) {
  History();
  const auto head = hub_->ReadCommit(repo_, c3_);
  ASSERT_TRUE(head.ok());
  auto root = hub_->List(repo_, c3_, "", false);
  ASSERT_TRUE(root.ok());
  const Obj blob{ObjectKind::kBlob, "pushed\n"};
  const Obj link{ObjectKind::kBlob, "new.txt"};
  std::vector<std::tuple<std::string, std::string, ObjectId>> entries;
  for (const auto& e : *root) entries.emplace_back(e.is_dir ? "40000" : "100644", e.path, e.oid);
  entries.emplace_back("120000", "link", link.id());
  entries.emplace_back("100644", "new.txt", blob.id());
  std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) {
    return std::get<1>(a) + (std::get<0>(a) == "40000" ? "/" : "") <
           std::get<1>(b) + (std::get<0>(b) == "40000" ? "/" : "");
  });
  const Obj tree{ObjectKind::kTree, Tree(entries)};
  const Obj commit{ObjectKind::kCommit, CommitText(tree.id(), c3_, "from git")};
  const std::string report = Push({commit, tree, blob, link}, c3_, commit.id());
  EXPECT_NE(report.find("unpack ok\n"), std::string::npos) << report;
  EXPECT_NE(report.find("ok refs/heads/main\n"), std::string::npos) << report;
  EXPECT_EQ(Main(), commit.id());
  auto stat = hub_->Stat(repo_, commit.id(), "new.txt");
  ASSERT_TRUE(stat.ok());
  EXPECT_EQ(*hub_->ReadBlob(repo_, stat->oid), Bytes("pushed\n"));
  auto log = hub_->ListCommits(repo_, commit.id(), 0, 1);
  ASSERT_TRUE(log.ok());
  EXPECT_EQ(log->commits[0].commit.title(), "from git");
}

TEST_F(ReceivePackTest, RefusalsChangeNothing) {
  History();
  auto root = hub_->Stat(repo_, c3_, "");
  ASSERT_TRUE(root.ok());
  // Not a fast-forward: a commit on c1 pushed over c3.
  const Obj old_base{ObjectKind::kCommit, CommitText(root->oid, c1_, "sideways")};
  std::string r = Push({old_base}, c3_, old_base.id());
  EXPECT_NE(r.find("ng refs/heads/main non-fast-forward"), std::string::npos) << r;
  // Stale: the client thinks main is c2.
  const Obj on_top{ObjectKind::kCommit, CommitText(root->oid, c3_, "on top")};
  r = Push({on_top}, c2_, on_top.id());
  EXPECT_NE(r.find("ng refs/heads/main fetch first"), std::string::npos) << r;
  // A submodule, a path git refuses, a big blob, a tree naming an object nobody has.
  const Obj sub{ObjectKind::kTree, Tree({{"160000", "sub", c1_}})};
  r = Push({Obj{ObjectKind::kCommit, CommitText(sub.id(), c3_, "sub")}, sub}, c3_,
           hub::HashObject(ObjectKind::kCommit, CommitText(sub.id(), c3_, "sub")));
  EXPECT_NE(r.find("submodules are not supported"), std::string::npos) << r;
  const Obj dotgit{ObjectKind::kTree, Tree({{"100644", "GIT~1", c1_}})};
  r = Push({Obj{ObjectKind::kCommit, CommitText(dotgit.id(), c3_, "x")}, dotgit}, c3_,
           hub::HashObject(ObjectKind::kCommit, CommitText(dotgit.id(), c3_, "x")));
  EXPECT_NE(r.find("is not allowed"), std::string::npos) << r;
  const Obj big{ObjectKind::kBlob, std::string((10 << 20) + 1, 'x')};
  const Obj big_tree{ObjectKind::kTree, Tree({{"100644", "big.txt", big.id()}})};
  const Obj big_commit{ObjectKind::kCommit, CommitText(big_tree.id(), c3_, "big")};
  r = Push({big_commit, big_tree, big}, c3_, big_commit.id());
  EXPECT_NE(r.find("larger than 10 MiB"), std::string::npos) << r;
  const Obj dangling{ObjectKind::kTree,
                     Tree({{"100644", "gone.txt", hub::HashObject(ObjectKind::kBlob, "nobody")}})};
  const Obj dangling_commit{ObjectKind::kCommit, CommitText(dangling.id(), c3_, "dangling")};
  r = Push({dangling_commit, dangling}, c3_, dangling_commit.id());
  EXPECT_NE(r.find("missing object"), std::string::npos) << r;
  // Refs that are neither a branch nor a tag, however short, and names git refuses.
  for (const char* ref : {"refs/x", "HEAD", "r", "refs/pr/1", "refs/heads/a..b", "refs/tags/"}) {
    r = Push({on_top}, c3_, on_top.id(), ref);
    EXPECT_NE(r.find("ng " + std::string(ref) + " "), std::string::npos) << ref << ": " << r;
  }
  // A broken pack: unpack error.
  std::string req;
  AppendPkt(req, c3_.hex() + " " + on_top.id().hex() + " refs/heads/main" + std::string(1, '\0') +
                     "report-status\n");
  AppendFlush(req);
  req += "PACK garbage that is not a pack at all....";
  auto refs = hub_->ListRefs(repo_);
  ReceivePack rp(*hub_, *index_, repo_, *refs, "main");
  auto broken = rp.Serve(alice_, req);
  ASSERT_TRUE(broken.ok());
  EXPECT_NE(broken->find("unpack pack:"), std::string::npos) << *broken;
  EXPECT_NE(broken->find("ng refs/heads/main unpacker error"), std::string::npos) << *broken;
  EXPECT_EQ(Main(), c3_);
  // A read token is refused by the Hub (the routes refuse it before: 403).
  ReceivePack as_reader(*hub_, *index_, repo_, *refs, "main");
  auto reader = as_reader.Serve(hub::Caller{"alice", false}, req.substr(0, req.find("PACK")));
  ASSERT_TRUE(reader.ok());
  EXPECT_NE(reader->find("ng refs/heads/main this token cannot write"), std::string::npos) << *reader;
  EXPECT_EQ(Main(), c3_);
}

// A tree deeper than a 4,096-byte path allows, and one naming "a" as a file and a folder: git is told why,
// per ref, and nothing moves.
TEST_F(ReceivePackTest, TreesTheApiWouldNotServeAreRefusedWithTheirReason) {
  History();
  const Obj blob{ObjectKind::kBlob, "x\n"};
  ObjectId root;
  std::vector<Obj> objects{blob};
  for (auto& t : hub::testing::NestedTrees(2100, "a", {{hub::EntryMode::kFile, "f", blob.id()}}, &root)) {
    objects.push_back({t.kind, std::string(t.body.begin(), t.body.end())});
  }
  const Obj deep{ObjectKind::kCommit, CommitText(root, c3_, "deep")};
  objects.push_back(deep);
  std::string r = Push(objects, c3_, deep.id());
  EXPECT_NE(r.find("ng refs/heads/main the path \"a/a/a"), std::string::npos) << r;
  EXPECT_NE(r.find("more than 4096"), std::string::npos) << r;
  const Obj sub{ObjectKind::kTree, Tree({{"100644", "f", blob.id()}})};
  const Obj twice{ObjectKind::kTree,
                  Tree({{"100644", "a", blob.id()}, {"100644", "a-b", blob.id()}, {"40000", "a", sub.id()}})};
  const Obj dup{ObjectKind::kCommit, CommitText(twice.id(), c3_, "twice")};
  r = Push({dup, twice, sub, blob}, c3_, dup.id());
  EXPECT_NE(r.find("appears twice"), std::string::npos) << r;
  EXPECT_EQ(Main(), c3_);
}

}  // namespace
}  // namespace cairn::git
