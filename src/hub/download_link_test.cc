#include "hub/download_link.h"

#include <gtest/gtest.h>

#include "common/clock.h"

namespace cairn::hub {
namespace {

xet::Hash Key(uint8_t fill) {
  xet::Hash h;
  h.bytes.fill(fill);
  return h;
}

// The query of a signed path, split and percent-decoded as the router does.
QueryPairs QueryOf(const std::string& link) {
  QueryPairs out;
  std::string_view q = std::string_view(link).substr(link.find('?') + 1);
  while (!q.empty()) {
    const size_t amp = q.find('&');
    const std::string_view pair = q.substr(0, amp);
    const size_t eq = pair.find('=');
    std::string value;
    const std::string_view raw = pair.substr(eq + 1);
    for (size_t i = 0; i < raw.size(); ++i) {
      if (raw[i] == '%' && i + 2 < raw.size()) {
        value += static_cast<char>(std::stoi(std::string(raw.substr(i + 1, 2)), nullptr, 16));
        i += 2;
      } else {
        value += raw[i];
      }
    }
    out.emplace_back(std::string(pair.substr(0, eq)), std::move(value));
    q = amp == std::string_view::npos ? std::string_view() : q.substr(amp + 1);
  }
  return out;
}

TEST(DownloadLink, ReadsOneFileOfOneRepositoryAtOneCommitUntilItExpires) {
  TestClock clock;
  const files::LinkSigner signer(cas::UrlKeys::Single(Key(1)), 3600, clock, "test repository links");
  const RepoId id{RepoType::kDataset, "alice", "data"};
  ObjectId commit;
  commit.bytes.fill(0xab);
  auto link = SignDownload(signer, id, commit, "dir/a b.txt");
  ASSERT_TRUE(link.ok()) << link.error().message;
  EXPECT_TRUE(link->starts_with("/datasets/alice/data/resolve/" + commit.hex() + "/dir/a%20b.txt?")) << *link;
  const QueryPairs query = QueryOf(*link);
  EXPECT_TRUE(CarriesDownloadLink(query));
  EXPECT_FALSE(CarriesDownloadLink({{"x", "1"}}));

  auto caller = VerifyDownload(signer, id, commit.hex(), "dir/a b.txt", query);
  ASSERT_TRUE(caller.ok()) << caller.error().message;
  EXPECT_EQ(caller->scope, "datasets/alice/data");
  EXPECT_FALSE(caller->write);
  EXPECT_EQ(caller->expires, clock.UnixSeconds() + static_cast<int64_t>(kDownloadLinkSeconds));

  // Anything else the link could be taken for: refused.
  ObjectId other;
  other.bytes.fill(0xcd);
  EXPECT_EQ(VerifyDownload(signer, id, other.hex(), "dir/a b.txt", query).error().code, ErrorCode::kDenied);
  EXPECT_EQ(VerifyDownload(signer, id, "main", "dir/a b.txt", query).error().code, ErrorCode::kDenied);
  EXPECT_EQ(VerifyDownload(signer, id, commit.hex(), "dir/a.txt", query).error().code, ErrorCode::kDenied);
  const RepoId model{RepoType::kModel, "alice", "data"};
  EXPECT_EQ(VerifyDownload(signer, model, commit.hex(), "dir/a b.txt", query).error().code,
            ErrorCode::kDenied);
  QueryPairs forged = query;
  for (auto& [k, v] : forged)
    if (k == "x") v = std::to_string(clock.UnixSeconds() + 86400);  // a longer life
  EXPECT_EQ(VerifyDownload(signer, id, commit.hex(), "dir/a b.txt", forged).error().code, ErrorCode::kDenied);
  const files::LinkSigner file_links(cas::UrlKeys::Single(Key(1)), 3600,
                                     clock);  // the same key, another purpose
  EXPECT_EQ(VerifyDownload(file_links, id, commit.hex(), "dir/a b.txt", query).error().code,
            ErrorCode::kDenied);
  const files::LinkSigner rotated(cas::UrlKeys::Single(Key(2)), 3600, clock, "test repository links");
  EXPECT_EQ(VerifyDownload(rotated, id, commit.hex(), "dir/a b.txt", query).error().code, ErrorCode::kDenied);

  clock.Advance(static_cast<int64_t>(kDownloadLinkSeconds));
  EXPECT_EQ(VerifyDownload(signer, id, commit.hex(), "dir/a b.txt", query).error().code, ErrorCode::kDenied);
}

}  // namespace
}  // namespace cairn::hub
