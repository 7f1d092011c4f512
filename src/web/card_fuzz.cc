// Fuzzes what a card reads from a repository's files, all of it written by whoever committed: the README
// (web::SplitCard, MetadataEntries, RenderMarkdown) and a safetensors header (CountTensors). The input is
// both. Checks: the split parts are pieces of the input, and the rendered HTML holds no script tag, event
// handler attribute or javascript: URL whatever the text.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/fuzz_check.h"
#include "web/markdown.h"
#include "web/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const cairn::web::Card card = cairn::web::SplitCard(text);
  FUZZ_CHECK(card.body.data() >= text.data() &&
             card.body.data() + card.body.size() <= text.data() + text.size());
  FUZZ_CHECK(card.metadata.size() + card.body.size() <= text.size());
  for (const auto& [key, value] : cairn::web::MetadataEntries(card.metadata)) {
    FUZZ_CHECK(key.size() + value.size() <= text.size());
  }
  // As the card page renders it: relative links resolved into the repository's.
  const cairn::web::LinkBase base{.pages = "/a/m/blob/main/", .files = "/a/m/resolve/main/", .file = {}};
  std::string html = cairn::web::RenderMarkdown(card.body, &base);
  for (char& c : html) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  FUZZ_CHECK(html.find("<script") == std::string::npos);
  FUZZ_CHECK(html.find("href=\"javascript:") == std::string::npos);
  FUZZ_CHECK(html.find("src=\"javascript:") == std::string::npos);
  FUZZ_CHECK(html.find("href=\"/a/m/blob/main/javascript:") == std::string::npos);
  (void)cairn::web::CountTensors(text);
  return 0;
}
