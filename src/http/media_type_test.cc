#include "http/media_type.h"

#include <gtest/gtest.h>

#include <boost/beast/core/string.hpp>
#include <string>

namespace cairn::http {
namespace {

using namespace std::string_literals;

// The value of `name` in `r`, and how many headers have that name.
std::pair<std::string, int> HeaderOf(const Response& r, std::string_view name) {
  std::pair<std::string, int> out;
  for (const auto& [n, v] : r.headers) {
    if (!boost::beast::iequals(n, name)) continue;
    out.first = v;
    ++out.second;
  }
  return out;
}

TEST(MediaType, Valid) {
  for (const std::string& good :
       {"text/plain"s, "application/octet-stream"s, "text/plain; charset=\"utf-8\""s, "a/b;c=d"s,
        "text/html"s, "image/svg+xml; charset=utf-8"s, "application/vnd.api+json"s,
        "x/y ;a=b\t;  c=\"d\\\"e\""s, "multipart/form-data; boundary=\"a b\""s, "A/B;C=\"\""s,
        "!#$%&'*+-.^_`|~/x"s, std::string(254, 'a') + "/b"s}) {
    EXPECT_TRUE(ValidMediaType(good)) << good;
  }
}

TEST(MediaType, Invalid) {
  for (const std::string& bad : {
           ""s,
           "text/plain\r\nX-Injected: x"s,
           "text/plain\n"s,
           "text/pl\0ain"s,
           "text/"s,
           "/x"s,
           "text"s,
           "text/plain;"s,
           "text/plain; "s,
           "text/plain;charset"s,
           "text/plain;charset="s,
           "text/plain;=utf-8"s,
           "text/plain; charset=\"utf-8"s,
           "text/plain; charset=\"a\\\""s,
           "text/plain; charset=\"\x01\""s,
           "text/plain; charset=\"caf\xc3\xa9\""s,
           "text/plain; charset=utf-8 x"s,
           "te xt/plain"s,
           "text/plain/x"s,
           "text//plain"s,
           " text/plain"s,
           "text/plain "s,
           "text/plain\t"s,
           "text/pl\xc3\xa1in"s,
           "t\xe9xt/plain"s,
           "text/plain,text/html"s,
           "text/plain; a=b;"s,
           std::string(255, 'a') + "/b"s,  // 257 bytes
       }) {
    EXPECT_FALSE(ValidMediaType(bad)) << ::testing::PrintToString(bad);
  }
}

TEST(MediaType, Active) {
  for (const std::string& active : {"text/html"s,
                                    "TEXT/HTML; charset=utf-8"s,
                                    "application/xhtml+xml"s,
                                    "image/svg+xml; charset=utf-8"s,
                                    "text/xml"s,
                                    "application/xml"s,
                                    "application/rss+xml"s,
                                    "application/vnd.x+XML"s,
                                    "text/xsl"s,
                                    "application/xslt+xml"s,
                                    "text/javascript"s,
                                    "application/javascript"s,
                                    "application/ecmascript"s,
                                    "text/ecmascript"s,
                                    "application/x-javascript"s,
                                    "text/jscript"s,
                                    "text/vbscript"s,
                                    "application/x-shockwave-flash"s,
                                    "application/pdf"s,
                                    "multipart/x-mixed-replace; boundary=x"s,
                                    "text/cache-manifest"s,
                                    "text/plain\r\nX-Injected: x"s,
                                    ""s,
                                    "text/"s}) {
    EXPECT_TRUE(IsActiveMediaType(active)) << ::testing::PrintToString(active);
  }
  for (const std::string& passive :
       {"text/plain"s, "text/plain; charset=utf-8"s, "application/octet-stream"s, "application/json"s,
        "image/png"s, "text/csv"s, "application/xml-patch"s}) {
    EXPECT_FALSE(IsActiveMediaType(passive)) << passive;
  }
}

TEST(StoredBytesHeaders, AValidPassiveTypeIsKeptAndSandboxed) {
  Response r = Response::Binary(200, "x");  // Content-Type: application/octet-stream already
  r.Header("Content-Disposition", "inline; filename=\"a.txt\"");
  SetStoredBytesHeaders(r, "text/plain; charset=\"utf-8\"");
  EXPECT_EQ(HeaderOf(r, "Content-Type"), (std::pair<std::string, int>{"text/plain; charset=\"utf-8\"", 1}));
  EXPECT_EQ(HeaderOf(r, "X-Content-Type-Options").first, "nosniff");
  EXPECT_EQ(HeaderOf(r, "Content-Security-Policy").first, "sandbox; default-src 'none'");
  EXPECT_EQ(HeaderOf(r, "Content-Disposition").first, "inline; filename=\"a.txt\"");
  EXPECT_TRUE(r.refused_headers.empty());
}

TEST(StoredBytesHeaders, AnInvalidOrMissingTypeIsOctetStream) {
  for (const std::optional<std::string_view> type :
       {std::optional<std::string_view>(), std::optional<std::string_view>("text/plain\r\nX-Injected: x"),
        std::optional<std::string_view>("text/"), std::optional<std::string_view>("")}) {
    Response r = Response::Text(200, "x");
    SetStoredBytesHeaders(r, type);
    EXPECT_EQ(HeaderOf(r, "Content-Type"), (std::pair<std::string, int>{"application/octet-stream", 1}));
    EXPECT_EQ(HeaderOf(r, "Content-Disposition").second, 0);
    for (const auto& [name, value] : r.headers) EXPECT_EQ(value.find("X-Injected"), std::string::npos);
  }
}

TEST(StoredBytesHeaders, AnActiveTypeIsADownload) {
  Response r;
  SetStoredBytesHeaders(r, "image/svg+xml; charset=utf-8");
  EXPECT_EQ(HeaderOf(r, "Content-Type").first, "image/svg+xml; charset=utf-8");
  EXPECT_EQ(HeaderOf(r, "Content-Disposition"), (std::pair<std::string, int>{"attachment", 1}));
  EXPECT_EQ(HeaderOf(r, "X-Content-Type-Options").first, "nosniff");

  Response inline_html;
  inline_html.Header("Content-Disposition", "inline");
  SetStoredBytesHeaders(inline_html, "text/html");
  EXPECT_EQ(HeaderOf(inline_html, "Content-Disposition"), (std::pair<std::string, int>{"attachment", 1}));

  Response named;  // an attachment with its file name stays as it is
  named.Header("Content-Disposition", "Attachment; filename=\"page.html\"");
  SetStoredBytesHeaders(named, "text/html");
  EXPECT_EQ(HeaderOf(named, "Content-Disposition"),
            (std::pair<std::string, int>{"Attachment; filename=\"page.html\"", 1}));

  Response lookalike;
  lookalike.Header("Content-Disposition", "attachments-are-fine");
  SetStoredBytesHeaders(lookalike, "application/pdf");
  EXPECT_EQ(HeaderOf(lookalike, "Content-Disposition").first, "attachment");
}

// Several ranges: the multipart/byteranges answer keeps its type (each part names the stored one); anything
// else set before is replaced.
TEST(StoredBytesHeaders, AMultipartByterangesTypeStays) {
  Response ranges;
  ranges.Header("Content-Type", "multipart/byteranges; boundary=3d6b6a416f9b5");
  SetStoredBytesHeaders(ranges, "text/html");
  EXPECT_EQ(HeaderOf(ranges, "Content-Type"),
            (std::pair<std::string, int>{"multipart/byteranges; boundary=3d6b6a416f9b5", 1}));
  EXPECT_EQ(HeaderOf(ranges, "Content-Disposition").first, "attachment");  // the parts are HTML
  EXPECT_EQ(HeaderOf(ranges, "X-Content-Type-Options").first, "nosniff");

  for (const std::string& other :
       {"multipart/byteranges; boundary=a b"s, "multipart/byterangesx"s, "text/csv"s}) {
    Response r;
    r.Header("Content-Type", other);
    SetStoredBytesHeaders(r, "text/plain");
    EXPECT_EQ(HeaderOf(r, "Content-Type"), (std::pair<std::string, int>{"text/plain", 1})) << other;
  }
}

}  // namespace
}  // namespace cairn::http
