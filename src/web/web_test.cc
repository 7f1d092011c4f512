// The pages' pure parts: cards (metadata, Markdown that runs nothing), safetensors headers, diffs, the
// templates' escaping and the helpers that build URLs and sizes.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "web/assets.h"
#include "web/markdown.h"
#include "web/safetensors.h"
#include "web/text_diff.h"
#include "web/view.h"

namespace cairn::web {
namespace {

TEST(Card, SplitsYamlFrontMatter) {
  const Card c = SplitCard("---\nlicense: mit\ntags:\n- a\n- b\n---\n# Title\n");
  EXPECT_EQ(c.metadata, "license: mit\ntags:\n- a\n- b\n");
  EXPECT_EQ(c.body, "# Title\n");
  const auto entries = MetadataEntries(c.metadata);
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0], (std::pair<std::string, std::string>{"license", "mit"}));
  EXPECT_EQ(entries[1], (std::pair<std::string, std::string>{"tags", "- a\n- b"}));
}

TEST(Card, WithoutFrontMatterOrClosingLineIsAllBody) {
  EXPECT_EQ(SplitCard("# Just text").metadata, "");
  EXPECT_EQ(SplitCard("# Just text").body, "# Just text");
  const Card open = SplitCard("---\nlicense: mit\nno end");
  EXPECT_EQ(open.metadata, "");
  EXPECT_EQ(open.body, "---\nlicense: mit\nno end");
  EXPECT_EQ(SplitCard("\xEF\xBB\xBF---\r\na: 1\r\n---\r\nbody").metadata, "a: 1\r\n");
}

TEST(Markdown, RendersTablesAndText) {
  const std::string html =
      RenderMarkdown("# Model\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n~~old~~ https://x.org\n");
  EXPECT_NE(html.find("<h1>Model</h1>"), std::string::npos);
  EXPECT_NE(html.find("<table>"), std::string::npos);
  EXPECT_NE(html.find("<td>2</td>"), std::string::npos);
  EXPECT_NE(html.find("<del>old</del>"), std::string::npos);
  EXPECT_NE(html.find("<a href=\"https://x.org\">"), std::string::npos);
}

TEST(Markdown, RunsNothing) {
  const std::string html = RenderMarkdown(
      "<script>alert(1)</script>\n\n<img src=x onerror=alert(2)>\n\n[x](javascript:alert(3)) "
      "![y](javascript:alert(4)) <a href=\"javascript:alert(5)\">z</a>\n\n<iframe "
      "src=\"https://e\"></iframe>\n");
  EXPECT_EQ(html.find("<script"), std::string::npos) << html;
  EXPECT_EQ(html.find("onerror"), std::string::npos) << html;
  EXPECT_EQ(html.find("javascript:"), std::string::npos) << html;
  EXPECT_EQ(html.find("<iframe"), std::string::npos) << html;
  EXPECT_EQ(html.find("<img src=\"x\""), std::string::npos) << html;
}

std::string Header(const std::string& json) {
  std::string out(8, '\0');
  uint64_t n = json.size();
  for (size_t i = 0; i < 8; ++i, n >>= 8) out[i] = static_cast<char>(n & 0xff);
  return out + json;
}

TEST(Markdown, RelativeLinksLeadToTheRepositorysFilesAndNothingElseMoves) {
  const LinkBase base{.pages = "/a/m/blob/main/", .files = "/a/m/resolve/main/", .file = {}};
  const std::map<std::string, std::string> links = {
      {"config.json", "/a/m/blob/main/config.json"},
      {"./docs/usage.md#install", "/a/m/blob/main/docs/usage.md#install"},
      {"docs/../../../etc/passwd", "/a/m/blob/main/etc/passwd"},
      {"a//b/./c?x=1", "/a/m/blob/main/a/b/c"},
      {"https://example.org/x", "https://example.org/x"},
      {"mailto:me@example.org", "mailto:me@example.org"},
      {"javascript:alert(1)", "javascript:alert(1)"},
      {"/other/model", "/other/model"},
      {"//evil.example/x", "//evil.example/x"},
      {"#usage", "#usage"},
  };
  for (const auto& [url, want] : links) EXPECT_EQ(ResolveCardUrl(url, base, false), want) << url;
  EXPECT_EQ(ResolveCardUrl("img/plot.png", base, true), "/a/m/resolve/main/img/plot.png");
  const std::string html = RenderMarkdown(
      "[cfg](config.json) ![plot](img/plot.png) [x](javascript:alert(1)) [ext](https://x.org)", &base);
  EXPECT_NE(html.find("<a href=\"/a/m/blob/main/config.json\">cfg</a>"), std::string::npos) << html;
  EXPECT_NE(html.find("<img src=\"/a/m/resolve/main/img/plot.png\" alt=\"plot\" />"), std::string::npos)
      << html;
  EXPECT_NE(html.find("<a href=\"\">x</a>"), std::string::npos) << "still emptied: " << html;
  EXPECT_NE(html.find("href=\"https://x.org\""), std::string::npos);
}

// With a signer of links, an image's source is the link made for its decoded path; links are not touched.
TEST(Markdown, ImagesTakeTheLinkMadeForTheirPath) {
  const LinkBase base{
      .pages = "/a/m/blob/main/", .files = "/a/m/resolve/main/", .file = [](std::string_view path) {
        return "https://files.example/signed/" + std::string(path);
      }};
  EXPECT_EQ(ResolveCardUrl("img/my%20plot.png", base, true), "https://files.example/signed/img/my plot.png");
  EXPECT_EQ(ResolveCardUrl("img/bad%zz.png", base, true), "/a/m/resolve/main/img/bad%zz.png");
  EXPECT_EQ(ResolveCardUrl("https://x.org/a.png", base, true), "https://x.org/a.png");
  EXPECT_EQ(ResolveCardUrl("img/plot.png", base, false), "/a/m/blob/main/img/plot.png");
  const std::string html = RenderMarkdown("![p](./img/p.png)", &base);
  EXPECT_NE(html.find("src=\"https://files.example/signed/img/p.png\""), std::string::npos) << html;
}

TEST(Safetensors, CountsParametersByDtype) {
  const std::string file = Header(
      R"({"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},)"
      R"("b":{"dtype":"BF16","shape":[4],"data_offsets":[24,32]},"c":{"dtype":"F32","shape":[],"data_offsets":[32,36]}})");
  auto length = SafetensorsHeaderLength(file);
  ASSERT_TRUE(length);
  EXPECT_EQ(*length, file.size() - 8);
  auto counts = CountTensors(std::string_view(file).substr(8));
  ASSERT_TRUE(counts) << counts.error().message;
  EXPECT_EQ(counts->by_dtype.at("F32"), 7u);
  EXPECT_EQ(counts->by_dtype.at("BF16"), 4u);
  EXPECT_EQ(counts->total(), 11u);
  EXPECT_EQ(ParameterText(1'234'567'890), "1.2B");
  EXPECT_EQ(ParameterText(350'000'000), "350.0M");
  EXPECT_EQ(ParameterText(999), "999");
}

TEST(Safetensors, RefusesWhatIsNoHeader) {
  EXPECT_FALSE(SafetensorsHeaderLength("short"));
  EXPECT_FALSE(SafetensorsHeaderLength(std::string(8, '\0')));
  EXPECT_FALSE(SafetensorsHeaderLength(std::string(8, '\xff')));  // past the bound
  EXPECT_FALSE(CountTensors("not json"));
  EXPECT_FALSE(CountTensors(R"({"a":{"dtype":"F32"}})"));
  EXPECT_FALSE(CountTensors(R"({"a":{"dtype":"F32","shape":[-1]}})"));
  EXPECT_FALSE(CountTensors(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296]}})"));
}

TEST(TextDiff, ShowsChangedLinesWithContext) {
  auto d = DiffLines("a\nb\nc\nd\ne\nf\ng\nh\ni\n", "a\nb\nc\nd\nE\nf\ng\nh\ni\nj\n", 1);
  ASSERT_TRUE(d);
  std::string out;
  for (const DiffLine& l : *d) {
    out += (l.kind == DiffLine::Kind::kAdd   ? "+"
            : l.kind == DiffLine::Kind::kDel ? "-"
                                             : " ") +
           std::string(l.text) + "\n";
  }
  EXPECT_EQ(out, " …\n d\n-e\n+E\n f\n …\n i\n+j\n");
  std::string many_a;
  std::string many_b;
  for (int i = 0; i < 100; ++i)
    many_a += "a" + std::to_string(i) + "\n", many_b += "b" + std::to_string(i) + "\n";
  EXPECT_FALSE(DiffLines(many_a, many_b, 3, 1000));  // 100 x 100 lines differ: past the table's bound
  EXPECT_TRUE(DiffLines(many_a, many_b, 3, 20'000));
}

TEST(View, EscapesEverythingAClientWrote) {
  View v;
  v.set("title", "<script>alert(1)</script>");
  v.set("main", "<p>cairn's own</p>");
  v.set("stylesheet", "/s.css");
  const std::string html = Render("layout.html", v);
  EXPECT_EQ(html.find("<script>"), std::string::npos);
  EXPECT_NE(html.find("&lt;script&gt;alert(1)&lt;/script&gt;"), std::string::npos);
  EXPECT_NE(html.find("<p>cairn's own</p>"), std::string::npos);
  View e;
  e.set("status", "404");
  e.set("message", "\"'><b>");
  EXPECT_NE(Render("error.html", e).find("&quot;&apos;&gt;&lt;b&gt;"), std::string::npos);
}

TEST(View, EveryTemplateParses) {
  for (const Asset& a : Assets()) {
    if (!a.name.ends_with(".html")) continue;
    EXPECT_NE(Render(a.name, View{}).rfind("template ", 0), 0u) << a.name;
  }
}

TEST(View, PagesCarryAStrictPolicy) {
  const http::Response r = PageAnswer(200, "t", "<p>x</p>", Visitor{});
  std::string csp;
  for (const auto& [k, v] : r.headers) {
    if (k == "Content-Security-Policy") csp = v;
  }
  EXPECT_NE(csp.find("default-src 'none'"), std::string::npos);
  EXPECT_EQ(csp.find("script-src"), std::string::npos);  // none: default-src forbids every script
  EXPECT_NE(csp.find("frame-ancestors 'none'"), std::string::npos);
}

TEST(View, Helpers) {
  EXPECT_EQ(UrlPath("a b/c?d#e/<x>"), "a%20b/c%3Fd%23e/%3Cx%3E");
  EXPECT_EQ(HumanSize(999), "999 Bytes");
  EXPECT_EQ(HumanSize(1500), "1.50 kB");
  EXPECT_EQ(HumanSize(12'300'000), "12.3 MB");
  EXPECT_EQ(StylesheetPath().rfind("/static/cairn-", 0), 0u);
  EXPECT_EQ(StylesheetAnswer().status, 200u);
}

}  // namespace
}  // namespace cairn::web
