// ReadPack against packs git itself wrote (Debian's git): a repacked history with ofs-deltas, a thin pack of
// ref-deltas on objects it does not carry, and the ways a pack can be broken or hostile.
#include "git/pack_reader.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "git/pack.h"
#include "git/test_git.h"

namespace cairn::git {
namespace {

using hub::ObjectId;
using hub::ObjectKind;

std::vector<uint8_t> ReadFile(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A text of `lines` numbered lines, with line `changed` edited: successive versions delta well.
std::string Text(int lines, int changed, int version) {
  std::string out;
  for (int i = 0; i < lines; ++i) {
    out += "line " + std::to_string(i) +
           (i == changed ? " changed in version " + std::to_string(version) : "") + "\n";
  }
  return out;
}

class PackReaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(repo_.CommitFile("big.txt", Text(4000, -1, 0), "v0"));
    for (int v = 1; v <= 5; ++v)
      ASSERT_TRUE(repo_.CommitFile("big.txt", Text(4000, v * 100, v), "v" + std::to_string(v)));
    ASSERT_TRUE(repo_.CommitFile("small.txt", "small\n", "small"));
  }
  // Every object id git holds.
  std::set<std::string> GitObjects() const {
    std::istringstream all(repo_.Run("cat-file --batch-all-objects --batch-check='%(objectname)'"));
    std::set<std::string> out;
    for (std::string line; std::getline(all, line);) out.insert(line);
    return out;
  }
  testing::TempGitDir repo_{"pack-reader", false};
};

TEST_F(PackReaderTest, ReadsARepackedHistoryWithOfsDeltas) {
  ASSERT_TRUE(repo_.Succeeds("repack -a -d -f -q --depth=10 --window=10"));
  std::filesystem::path pack;
  for (const auto& f : std::filesystem::directory_iterator(repo_.path() / ".git/objects/pack")) {
    if (f.path().extension() == ".pack") pack = f.path();
  }
  const std::string verify = repo_.Run("verify-pack -v '" + pack.string() + "'");
  ASSERT_NE(verify.find("chain length = "), std::string::npos) << "git made no deltas:\n" << verify;
  auto objects = ReadPack(ReadFile(pack), PackLimits{});
  ASSERT_TRUE(objects.ok()) << objects.error().message;
  std::set<std::string> ids;
  for (const auto& o : *objects) ids.insert(o.id.hex());
  EXPECT_EQ(ids, GitObjects());
  // The newest version of the file, rebuilt through its deltas, is git's.
  const std::string blob = repo_.Run("rev-parse HEAD:big.txt");
  const auto it = std::find_if(objects->begin(), objects->end(),
                               [&](const PackedObject& o) { return o.id.hex() + "\n" == blob; });
  ASSERT_NE(it, objects->end());
  EXPECT_EQ(std::string(it->body.begin(), it->body.end()), Text(4000, 500, 5));
}

TEST_F(PackReaderTest, AThinPackResolvesAgainstWhatTheReceiverHas) {
  // The last two commits as a thin pack (ref-deltas, on objects of older commits the pack leaves out).
  const auto file = repo_.path() / "thin.pack";
  std::ofstream(repo_.path() / "revs") << "HEAD\n^HEAD~2\n";
  const std::string cmd = "cd '" + repo_.path().string() +
                          "' && git pack-objects --stdout --revs --thin -q < revs > thin.pack 2>/dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0);  // NOLINT(concurrency-mt-unsafe,cert-env33-c): a test's own tool
  const auto pack = ReadFile(file);
  // Without the receiver's objects the pack cannot be read...
  auto alone = ReadPack(pack, PackLimits{});
  ASSERT_FALSE(alone.ok());
  EXPECT_EQ(alone.error().code, ErrorCode::kUnknownReference);
  // ...with them it can; the bases themselves are not part of the answer.
  size_t lookups = 0;
  const BaseLookup lookup = [&](const ObjectId& id) -> std::optional<PackedObject> {
    ++lookups;
    const std::string type = repo_.Run("cat-file -t " + id.hex());
    if (type.empty()) return std::nullopt;
    const std::string body = repo_.Run("cat-file " + type.substr(0, type.size() - 1) + " " + id.hex());
    const ObjectKind kind = type == "commit\n" ? ObjectKind::kCommit
                            : type == "tree\n" ? ObjectKind::kTree
                                               : ObjectKind::kBlob;
    return PackedObject{kind, id, {body.begin(), body.end()}};
  };
  auto objects = ReadPack(pack, PackLimits{}, lookup);
  ASSERT_TRUE(objects.ok()) << objects.error().message;
  EXPECT_GT(lookups, 0U);
  const std::string head_blob = repo_.Run("rev-parse HEAD~1:big.txt");
  const auto it = std::find_if(objects->begin(), objects->end(),
                               [&](const PackedObject& o) { return o.id.hex() + "\n" == head_blob; });
  ASSERT_NE(it, objects->end());
  EXPECT_EQ(std::string(it->body.begin(), it->body.end()), Text(4000, 500, 5));
}

std::vector<uint8_t> PackOf(const std::vector<std::pair<ObjectKind, std::string>>& objects) {
  std::string out;
  PackWriter w(static_cast<uint32_t>(objects.size()), [&](std::string&& p) {
    out.append(p);
    return true;
  });
  for (const auto& [kind, body] : objects) {
    EXPECT_TRUE(w.Add(kind, {reinterpret_cast<const uint8_t*>(body.data()), body.size()}).ok());
  }
  EXPECT_TRUE(w.Finish().ok());
  return {out.begin(), out.end()};
}

TEST(PackReader, BrokenPacksAreRefused) {
  const auto good = PackOf({{ObjectKind::kBlob, "hello\n"}, {ObjectKind::kBlob, std::string(1000, 'x')}});
  auto ok = ReadPack(good, PackLimits{});
  ASSERT_TRUE(ok.ok()) << ok.error().message;
  EXPECT_EQ(ok->at(0).id.hex(), "ce013625030ba8dba906f756967f9e9ca394464a");
  auto flipped = good;
  flipped[20] ^= 1;
  EXPECT_EQ(ReadPack(flipped, PackLimits{}).error().code, ErrorCode::kMalformed);
  EXPECT_EQ(ReadPack(std::span(good).first(good.size() - 1), PackLimits{}).error().code,
            ErrorCode::kMalformed);
  EXPECT_EQ(ReadPack(std::vector<uint8_t>(40, 0), PackLimits{}).error().code, ErrorCode::kMalformed);
  PackLimits few;
  few.max_objects = 1;
  EXPECT_EQ(ReadPack(good, few).error().code, ErrorCode::kLimit);
  PackLimits small;
  small.max_object_bytes = 999;
  EXPECT_EQ(ReadPack(good, small).error().code, ErrorCode::kLimit);
  PackLimits total;
  total.max_total_bytes = 1000;
  EXPECT_EQ(ReadPack(good, total).error().code, ErrorCode::kLimit);
}

TEST(PackReader, DeltasAreCheckedAgainstTheirBase) {
  const std::string base_text = "0123456789";
  const std::span<const uint8_t> base(reinterpret_cast<const uint8_t*>(base_text.data()), base_text.size());
  // src 10, dst 7: copy 4 bytes from offset 2, insert "abc".
  const std::vector<uint8_t> delta{10, 7, 0x80 | 0x01 | 0x10, 2, 4, 3, 'a', 'b', 'c'};
  auto out = ApplyDelta(base, delta, 100);
  ASSERT_TRUE(out.ok()) << out.error().message;
  EXPECT_EQ(std::string(out->begin(), out->end()), "2345abc");
  EXPECT_EQ(ApplyDelta(base, std::vector<uint8_t>{9, 7, 0x91, 2, 4, 3, 'a', 'b', 'c'}, 100).error().code,
            ErrorCode::kMalformed);
  EXPECT_EQ(ApplyDelta(base, std::vector<uint8_t>{10, 7, 0x91, 8, 4, 3, 'a', 'b', 'c'}, 100).error().code,
            ErrorCode::kMalformed);
  EXPECT_EQ(ApplyDelta(base, std::vector<uint8_t>{10, 7, 0x91, 2, 4, 4, 'a', 'b', 'c'}, 100).error().code,
            ErrorCode::kMalformed);
  EXPECT_EQ(ApplyDelta(base, std::vector<uint8_t>{10, 7, 0x91, 2, 4, 0}, 100).error().code,
            ErrorCode::kMalformed);
  EXPECT_EQ(ApplyDelta(base, std::vector<uint8_t>{10, 7, 0x91, 2, 4}, 100).error().code,
            ErrorCode::kMalformed);
  EXPECT_EQ(ApplyDelta(base, delta, 6).error().code, ErrorCode::kLimit);
  EXPECT_EQ(ApplyDelta(base, std::vector<uint8_t>{10, 0xff}, 100).error().code, ErrorCode::kMalformed);
}

}  // namespace
}  // namespace cairn::git
