// Model and dataset cards: a README's YAML metadata split from its Markdown, and the Markdown rendered to
// HTML by cmark-gfm (CommonMark with GitHub's tables, strikethrough, autolinks and task lists).
//
// Safety: the HTML is what cmark-gfm's safe mode writes: raw HTML in the text is dropped (written as a
// comment), links and images whose URL is javascript:, vbscript:, file: or data: (but for images of
// png/gif/jpeg/webp) are emptied, and the tag filter escapes what GitHub filters. Nothing of the text can
// run on the page; the pages' Content-Security-Policy forbids scripts besides. Pure functions, any thread.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cairn::web {

// A README's metadata and body: the YAML between a first line "---" and the next line "---" (empty when
// there is none: the whole text is the body), as huggingface_hub's repocard reads it.
struct Card {
  std::string_view metadata;
  std::string_view body;
};
Card SplitCard(std::string_view readme);

// The metadata's top-level keys and their values as written (a list or mapping under a key is given as its
// lines, indentation kept), in order: what the card's table shows. Lines that are no "key: value" at the
// top level are kept with the key before them; a comment or blank line is skipped.
std::vector<std::pair<std::string, std::string>> MetadataEntries(std::string_view metadata);

// Where a card's relative links lead: a README's links name files of its repository ("config.json",
// "./docs/usage.md", "images/plot.png"), so a link goes to the file's page (`pages` + its path) and an
// image to its bytes (`files` + its path), as on the Hub. Both end in '/': "/alice/model/blob/main/".
struct LinkBase {
  std::string pages;
  std::string files;
  // Set: an image's URL is file(its path in the repository, percent-decoded) instead (a signed link); a path
  // that does not decode is left as `files` makes it.
  std::function<std::string(std::string_view path)> file;
};

// `url` as a card's link (`image`: an image's source) leads with `base`: a relative URL resolved in the
// repository (its "." and ".." segments taken, never above the root; its query dropped, its fragment kept);
// anything with a scheme, a site path ("/..."), another host ("//...") or a fragment alone stays as it is.
std::string ResolveCardUrl(std::string_view url, const LinkBase& base, bool image);

// The HTML of `markdown` (safe, as above), its relative links resolved with `base` when given.
std::string RenderMarkdown(std::string_view markdown, const LinkBase* base = nullptr);

}  // namespace cairn::web
