#include "http/range.h"

#include <gtest/gtest.h>

namespace cairn::http {
namespace {

TEST(Range, Parses) {
  auto r = ParseRange("bytes=0-99", 1000);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0].first, 0u);
  EXPECT_EQ((*r)[0].last, 99u);

  r = ParseRange("bytes=900-2000, 10-19,-5,995-", 1000);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->size(), 4u);
  EXPECT_EQ((*r)[0].last, 999u);  // clamped
  EXPECT_EQ((*r)[1].first, 10u);
  EXPECT_EQ((*r)[2].first, 995u);  // suffix
  EXPECT_EQ((*r)[3].length(), 5u);
}

TEST(Range, Errors) {
  EXPECT_EQ(HttpStatusOf(ParseRange("bytes=1000-", 1000).error().code), 416u);
  EXPECT_EQ(HttpStatusOf(ParseRange("bytes=5-1", 1000).error().code), 400u);
  EXPECT_EQ(HttpStatusOf(ParseRange("items=0-1", 1000).error().code), 400u);
  EXPECT_EQ(HttpStatusOf(ParseRange("bytes=a-b", 1000).error().code), 400u);
  EXPECT_EQ(HttpStatusOf(ParseRange("bytes=0-0,1-1,2-2", 1000, 2).error().code), 400u);
}

}  // namespace
}  // namespace cairn::http
