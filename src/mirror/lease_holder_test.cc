// The lease holder's stored string is read by the other nodes sharing the index: its form is pinned here.
#include "mirror/lease_holder.h"

#include <gtest/gtest.h>

namespace cairn::mirror {
namespace {

TEST(LeaseHolder, TheNameThenASpaceAndTheUrl) {
  const LeaseHolder holder{.node = "0123abcd", .url = "https://node-2.example:8443/base"};
  EXPECT_EQ(holder.Encode(), "0123abcd https://node-2.example:8443/base");
  const LeaseHolder parsed = LeaseHolder::Parse(holder.Encode());
  EXPECT_EQ(parsed.node, holder.node);
  EXPECT_EQ(parsed.url, holder.url);
}

TEST(LeaseHolder, ANodeWithoutAUrlIsItsNameAlone) {
  EXPECT_EQ((LeaseHolder{.node = "0123abcd", .url = ""}).Encode(), "0123abcd");
  const LeaseHolder parsed = LeaseHolder::Parse("0123abcd");
  EXPECT_EQ(parsed.node, "0123abcd");
  EXPECT_EQ(parsed.url, "");
  EXPECT_EQ(LeaseHolder::Parse("0123abcd ").url, "");
}

TEST(LeaseHolder, TheUrlIsAllAfterTheFirstSpace) {
  const LeaseHolder parsed = LeaseHolder::Parse("0123abcd http://a b");
  EXPECT_EQ(parsed.node, "0123abcd");
  EXPECT_EQ(parsed.url, "http://a b");
}

}  // namespace
}  // namespace cairn::mirror
