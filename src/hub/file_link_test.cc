#include "hub/file_link.h"

#include <gtest/gtest.h>

#include "hub/git_object.h"

namespace cairn::hub {
namespace {

// The SHA-256 of "hello\n", linked to a file hash of distinct bytes.
constexpr std::string_view kSha = "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03";

FileLink Link() {
  xet::FileHash file;
  for (size_t i = 0; i < file.bytes.size(); ++i) file.bytes[i] = static_cast<uint8_t>(i + 1);
  return FileLink{.sha256 = std::string(kSha), .file = file};
}

TEST(FileLink, TheRecordIsTheShaBytesTheKindAndTheFileBytes) {
  const FileLink link = Link();
  const index::RepoObject o = link.ToObject();
  ASSERT_EQ(o.key.size(), 32U);
  EXPECT_EQ(o.key[0], 0x58);  // bytewise, as the SHA-256 prints
  EXPECT_EQ(o.key[31], 0x03);
  EXPECT_EQ(o.key, FileLink::Key(kSha));
  EXPECT_EQ(o.kind, index::kFileLinkKind);
  EXPECT_EQ(o.data, std::vector<uint8_t>(link.file.bytes.begin(), link.file.bytes.end()));
  EXPECT_TRUE(FileLink::IsLink(o));
}

TEST(FileLink, ParseGivesBackWhatWasWritten) {
  const FileLink link = Link();
  auto parsed = FileLink::Parse(link.ToObject());
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(*parsed, link);
  EXPECT_EQ(parsed->sha256, kSha);
}

TEST(FileLink, ParseRefusesWhatIsNotAWholeLink) {
  index::RepoObject blob = Link().ToObject();
  blob.kind = static_cast<uint8_t>(ObjectKind::kBlob);  // another object under a link's key
  EXPECT_FALSE(FileLink::Parse(blob).has_value());
  EXPECT_FALSE(FileLink::IsLink(blob));

  index::RepoObject short_data = Link().ToObject();
  short_data.data.pop_back();
  EXPECT_FALSE(FileLink::Parse(short_data).has_value());
  EXPECT_TRUE(FileLink::IsLink(short_data));  // damaged, not another object
  index::RepoObject long_data = Link().ToObject();
  long_data.data.push_back(0);
  EXPECT_FALSE(FileLink::Parse(long_data).has_value());

  index::RepoObject short_key = Link().ToObject();
  short_key.key.resize(20);
  EXPECT_FALSE(FileLink::Parse(short_key).has_value());
}

// The collector keeps what a link names even when its key is damaged; data that is no hash names nothing.
TEST(FileLink, TheFileNamedSurvivesADamagedKey) {
  index::RepoObject short_key = Link().ToObject();
  short_key.key.resize(20);
  ASSERT_TRUE(FileLink::FileNamed(short_key).has_value());
  EXPECT_EQ(*FileLink::FileNamed(short_key), Link().file);
  index::RepoObject short_data = Link().ToObject();
  short_data.data.pop_back();
  EXPECT_FALSE(FileLink::FileNamed(short_data).has_value());
  index::RepoObject blob = Link().ToObject();
  blob.kind = static_cast<uint8_t>(ObjectKind::kBlob);
  EXPECT_FALSE(FileLink::FileNamed(blob).has_value());
}

}  // namespace
}  // namespace cairn::hub
