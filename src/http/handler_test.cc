#include "http/handler.h"

#include <gtest/gtest.h>

#include <string>

namespace cairn::http {
namespace {

using namespace std::string_literals;

TEST(ResponseHeader, ReplacesAHeaderOfTheSameName) {
  Response r;
  r.Header("Content-Type", "text/plain").Header("content-type", "application/json").Header("ETag", "\"1\"");
  ASSERT_EQ(r.headers.size(), 2u);
  EXPECT_EQ(r.headers[0], (std::pair<std::string, std::string>{"Content-Type", "application/json"}));
  // Duplicates pushed onto the public list by hand go when the name is set again.
  r.headers.emplace_back("CONTENT-TYPE", "text/html");
  r.Header("Content-Type", "text/csv");
  ASSERT_EQ(r.headers.size(), 2u);
  EXPECT_EQ(r.headers[0].second, "text/csv");
  EXPECT_TRUE(r.refused_headers.empty());
}

TEST(ResponseHeader, RefusesAValueThatCouldSplitTheHeader) {
  for (const std::string& bad : {"text/plain\r\nX-Injected: x"s, "text/plain\nX-Injected: x"s, "a\rb"s,
                                 "a\0b"s, "\x01"s, "a\x1f"s, "a\x7f"s, "\x0b"s}) {
    SCOPED_TRACE(::testing::PrintToString(bad));
    Response r;
    r.Header("Content-Type", "text/plain");
    r.Header("Content-Type", bad);
    ASSERT_EQ(r.headers.size(), 1u);
    EXPECT_EQ(r.headers[0].second, "text/plain");                            // left as it was
    ASSERT_EQ(r.refused_headers, std::vector<std::string>{"Content-Type"});  // the name, never the value
  }
  Response r;
  r.Header("X-Tab", "a\tb").Header("X-Utf8", "caf\xc3\xa9").Header("X-Empty", "");
  EXPECT_EQ(r.headers.size(), 3u);
  EXPECT_TRUE(r.refused_headers.empty());
}

TEST(ResponseHeader, RefusesANameThatIsNotAToken) {
  for (const std::string& bad :
       {""s, "Bad Name"s, "X-A:"s, "X-A\r\nX-Injected"s, "X\0"s, "caf\xc3\xa9"s, "(x)"s}) {
    SCOPED_TRACE(::testing::PrintToString(bad));
    Response r;
    r.Header(bad, "v");
    EXPECT_TRUE(r.headers.empty());
    EXPECT_EQ(r.refused_headers, std::vector<std::string>{bad});
  }
  Response r;
  r.Header("x!#$%&'*+-.^_`|~09AZaz", "v");
  EXPECT_EQ(r.headers.size(), 1u);
}

TEST(SendableHeaders, DropsTheInvalidAndKeepsTheLastValueOfAName) {
  std::vector<std::string> refused;
  const HeaderList out = SendableHeaders({{"Content-Type", "text/plain"},
                                          {"X-Injected", "a\r\nSet-Cookie: s=1"},
                                          {"ETag", "\"1\""},
                                          {"content-type", "text/html"},
                                          {"Bad Name", "v"}},
                                         refused);
  EXPECT_EQ(out, (HeaderList{{"Content-Type", "text/html"}, {"ETag", "\"1\""}}));
  EXPECT_EQ(refused, (std::vector<std::string>{"X-Injected", "Bad Name"}));
}

TEST(SendableHeaders, KeepsEachCookieAddedBesideTheOthers) {
  Response r;
  r.AddHeader("Set-Cookie", "a=1").AddHeader("Set-Cookie", "b=2").AddHeader("Set-Cookie", "c\n=3");
  EXPECT_EQ(r.refused_headers, (std::vector<std::string>{"Set-Cookie"}));
  std::vector<std::string> refused;
  EXPECT_EQ(SendableHeaders(r.headers, refused), (HeaderList{{"Set-Cookie", "a=1"}, {"Set-Cookie", "b=2"}}));
}

}  // namespace
}  // namespace cairn::http
