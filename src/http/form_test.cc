// Forms as browsers post them: fields decoded ('+' a space, %XX a byte), a field given twice refused by
// ParseForm and kept in order by FormValues, and what is no form refused by both.
#include "http/form.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace cairn::http {
namespace {

TEST(Form, FieldsAreDecodedAndAFieldTwiceIsNoForm) {
  auto f = ParseForm("user=alice+b&next=%2Fa%2Fb&empty=&flag");
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(FormField(*f, "user"), "alice b");
  EXPECT_EQ(FormField(*f, "next"), "/a/b");
  EXPECT_EQ(FormField(*f, "empty"), "");
  EXPECT_TRUE(f->contains("flag"));
  EXPECT_EQ(FormField(*f, "missing"), "");
  EXPECT_TRUE(ParseForm("")->empty());
  EXPECT_FALSE(ParseForm("a=1&a=2").has_value()) << "which would the server believe?";
  EXPECT_FALSE(ParseForm("a=%zz").has_value());
}

TEST(Form, ARepeatedFieldsValuesInOrder) {
  EXPECT_EQ(FormValues("paths=a.txt&expand=1&paths=dir%2Fb+c", "paths"),
            (std::vector<std::string>{"a.txt", "dir/b c"}));
  EXPECT_EQ(FormValues("", "paths"), std::vector<std::string>{});
  EXPECT_FALSE(FormValues("paths=%2", "paths").has_value());
}

}  // namespace
}  // namespace cairn::http
