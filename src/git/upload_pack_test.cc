// UploadPack over a repository the Hub wrote into a real SQLite index: the refs it lists, and packs that git
// itself indexes and checks (git index-pack, git fsck), for a clone, a fetch from what the client has, a
// shallow and a partial clone, in protocol v2 and v0.
#include "git/upload_pack.h"

#include <gtest/gtest.h>

#include "git/pkt_line.h"
#include "git/test_git.h"
#include "git/test_repo.h"

namespace cairn::git {
namespace {

struct Answer {
  std::vector<std::string> lines;  // every data line outside the pack, without its newline
  std::string pack;                // band 1, joined
  std::string errors;              // band 3
};

// Splits an answer: v2's sections (or v0's lines) and, after "packfile" (v0: after the ACK/NAK), the pack.
Answer Demux(std::string_view body, bool v0_side_band = false) {
  Answer a;
  PktReader r(body);
  bool in_pack = false;
  for (;;) {
    auto p = r.Next();
    EXPECT_TRUE(p.ok());
    if (!p.ok() || !*p) break;
    if ((*p)->kind != PktKind::kData) continue;
    const std::string_view payload = (*p)->payload;
    if (in_pack) {
      if (payload[0] == 1) a.pack.append(payload.substr(1));
      if (payload[0] == 3) a.errors.append(payload.substr(1));
      continue;
    }
    a.lines.emplace_back(Line(payload));
    if (a.lines.back() == "packfile" ||
        (v0_side_band && (a.lines.back() == "NAK" || a.lines.back().starts_with("ACK ")))) {
      in_pack = true;
    }
  }
  return a;
}

std::string V2(std::string_view command, const std::vector<std::string>& args) {
  std::string out;
  AppendPkt(out, "command=" + std::string(command) + "\n");
  AppendPkt(out, "agent=git/2.39.5\n");
  AppendPkt(out, "object-format=sha1\n");
  AppendDelim(out);
  for (const auto& a : args) AppendPkt(out, a + "\n");
  AppendFlush(out);
  return out;
}

bool Has(const std::vector<std::string>& lines, std::string_view line) {
  return std::find(lines.begin(), lines.end(), line) != lines.end();
}

class UploadPackTest : public testing::HubRepoTest {
 protected:
  UploadPack Server() {
    auto refs = hub_->ListRefs(repo_);
    EXPECT_TRUE(refs.ok());
    return UploadPack(*index_, repo_.record.id, *refs, "main");
  }
  std::string Serve(const std::string& request, bool v2 = true) {
    std::string out;
    UploadPack up = Server();
    const Sink sink = [&](std::string&& piece) {
      out.append(piece);
      return true;
    };
    auto st = v2 ? up.ServeV2(request, sink) : up.ServeV0(request, sink);
    EXPECT_TRUE(st.ok()) << st.error().message;
    return out;
  }
};

TEST_F(UploadPackTest, AdvertisesVersionTwoAndListsRefs) {
  History();
  ASSERT_TRUE(hub_->CreateRef(alice_, repo_, index::RefKind::kTag, "v1", c2_.hex(), false).ok());
  UploadPack up = Server();
  const Answer caps = Demux(up.AdvertiseV2());
  EXPECT_EQ(caps.lines.front(), "version 2");
  EXPECT_TRUE(Has(caps.lines, "fetch=shallow filter"));
  const Answer refs = Demux(Serve(V2(
      "ls-refs", {"symrefs", "peel", "ref-prefix HEAD", "ref-prefix refs/heads/", "ref-prefix refs/tags/"})));
  EXPECT_EQ(refs.lines,
            (std::vector<std::string>{c3_.hex() + " HEAD symref-target:refs/heads/main",
                                      c3_.hex() + " refs/heads/main", c2_.hex() + " refs/tags/v1"}));
  const Answer heads = Demux(Serve(V2("ls-refs", {"ref-prefix refs/tags/"})));
  EXPECT_EQ(heads.lines, (std::vector<std::string>{c2_.hex() + " refs/tags/v1"}));
  const Answer v0 = Demux(up.AdvertiseV0());
  ASSERT_GE(v0.lines.size(), 3U);
  EXPECT_EQ(v0.lines[0], "# service=git-upload-pack");
  EXPECT_TRUE(
      v0.lines[1].starts_with(c3_.hex() + " HEAD" + std::string(1, '\0') + "symref=HEAD:refs/heads/main "));
}

TEST_F(UploadPackTest, AClonePackIsEveryObjectAndGitChecksIt) {
  History();
  const Answer a = Demux(Serve(V2("fetch", {"want " + c3_.hex(), "ofs-delta", "no-progress", "done"})));
  EXPECT_EQ(a.lines, (std::vector<std::string>{"packfile"}));
  testing::TempGitDir git("clone");
  ASSERT_TRUE(git.IndexPack(a.pack));
  git.Run("update-ref refs/heads/main " + c3_.hex());
  EXPECT_EQ(git.Run("rev-list --count main"), "4\n");  // with the initial commit
  EXPECT_TRUE(git.Succeeds("fsck --strict --no-dangling"));
  EXPECT_EQ(git.Run("show main:b.txt"), "b2\n");
  EXPECT_EQ(git.Run("show main:dir/c.txt"), "c\n");
}

TEST_F(UploadPackTest, AFetchSendsOnlyWhatTheClientLacks) {
  History();
  // The client has c2: one round without done finds it common and is ready.
  const Answer a = Demux(Serve(V2("fetch", {"want " + c3_.hex(), "have " + c2_.hex()})));
  ASSERT_GE(a.lines.size(), 4U);
  EXPECT_EQ(a.lines[0], "acknowledgments");
  EXPECT_EQ(a.lines[1], "ACK " + c2_.hex());
  EXPECT_EQ(a.lines[2], "ready");
  EXPECT_EQ(a.lines[3], "packfile");
  testing::TempGitDir git("fetch");
  ASSERT_TRUE(git.IndexPack(a.pack));
  // c3, its root tree, the changed folder and the new file: nothing of what c2 had.
  EXPECT_NE(git.Run("count-objects -v").find("in-pack: 4\n"), std::string::npos)
      << git.Run("count-objects -v");
  // Haves the server does not know: NAK, and no pack until the client says done.
  const Answer nak = Demux(Serve(V2("fetch", {"want " + c3_.hex(), "have " + std::string(40, '1')})));
  EXPECT_EQ(nak.lines, (std::vector<std::string>{"acknowledgments", "NAK"}));
  EXPECT_TRUE(nak.pack.empty());
}

TEST_F(UploadPackTest, ShallowAndPartialClones) {
  History();
  const Answer shallow = Demux(Serve(V2("fetch", {"want " + c3_.hex(), "deepen 1", "done"})));
  EXPECT_EQ(shallow.lines, (std::vector<std::string>{"shallow-info", "shallow " + c3_.hex(), "packfile"}));
  testing::TempGitDir one("shallow");
  ASSERT_TRUE(one.IndexPack(shallow.pack));
  // c3, its two trees and its four files (.gitattributes of the initial commit among them).
  EXPECT_NE(one.Run("count-objects -v").find("in-pack: 7\n"), std::string::npos);
  const Answer partial = Demux(Serve(V2("fetch", {"want " + c3_.hex(), "filter blob:none", "done"})));
  testing::TempGitDir two("partial");
  ASSERT_TRUE(two.IndexPack(partial.pack));
  // 4 commits and their trees, no blob.
  EXPECT_EQ(two.Run("cat-file --batch-all-objects --batch-check='%(objecttype)'").find("blob"),
            std::string::npos);
  // A blob wanted by id (the partial clone's checkout) comes alone.
  auto b = hub_->Stat(repo_, c3_, "b.txt");
  ASSERT_TRUE(b.ok());
  const Answer blob = Demux(Serve(V2("fetch", {"want " + b->oid.hex(), "done"})));
  testing::TempGitDir three("blob");
  ASSERT_TRUE(three.IndexPack(blob.pack));
  EXPECT_EQ(three.Run("cat-file -p " + b->oid.hex()), "b2\n");
  // An id the repository does not hold is refused.
  UploadPack up = Server();
  auto refused =
      up.ServeV2(V2("fetch", {"want " + std::string(40, '2'), "done"}), [](std::string&&) { return true; });
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, ErrorCode::kNotFound);
}

TEST_F(UploadPackTest, VersionZeroCloneWithSideBand) {
  History();
  std::string req;
  AppendPkt(req, "want " + c3_.hex() + " side-band-64k ofs-delta agent=git/2.39.5\n");
  AppendFlush(req);
  AppendPkt(req, "done\n");
  const Answer a = Demux(Serve(req, false), true);
  EXPECT_EQ(a.lines, (std::vector<std::string>{"NAK"}));
  testing::TempGitDir git("v0");
  ASSERT_TRUE(git.IndexPack(a.pack));
  git.Run("update-ref refs/heads/main " + c3_.hex());
  EXPECT_EQ(git.Run("rev-list --count main"), "4\n");
}

TEST_F(UploadPackTest, MalformedRequestsAreRefused) {
  History();
  UploadPack up = Server();
  const auto sink = [](std::string&&) { return true; };
  for (const std::string& bad :
       {std::string("0010command=nope"), V2("nope", {}), V2("fetch", {}),
        V2("fetch", {"want " + c3_.hex(), "filter tree:0"}), V2("fetch", {"want " + c3_.hex(), "deepen 0"}),
        V2("fetch", {"want " + c3_.hex(), "bogus"}), V2("ls-refs", {"bogus"})}) {
    auto st = up.ServeV2(bad, sink);
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.error().code, ErrorCode::kMalformed) << bad;
  }
}

}  // namespace
}  // namespace cairn::git
