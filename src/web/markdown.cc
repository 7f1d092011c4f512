#include "web/markdown.h"

#include <cmark-gfm-core-extensions.h>
#include <cmark-gfm.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/percent_encode.h"

namespace cairn::web {

namespace {

// The line starting at `pos` (without its end of line) and where the next begins.
std::pair<std::string_view, size_t> LineAt(std::string_view text, size_t pos) {
  const size_t end = text.find('\n', pos);
  const size_t stop = end == std::string_view::npos ? text.size() : end;
  std::string_view line = text.substr(pos, stop - pos);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  return {line, end == std::string_view::npos ? text.size() : end + 1};
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

struct ParserFree {
  void operator()(cmark_parser* p) const { cmark_parser_free(p); }
};
struct NodeFree {
  void operator()(cmark_node* n) const { cmark_node_free(n); }
};

struct IterFree {
  void operator()(cmark_iter* i) const { cmark_iter_free(i); }
};

// Every link and image of `doc` with its URL resolved (ResolveCardUrl). The safe renderer still judges the
// result (a scheme it refuses is never made relative).
void ResolveLinks(cmark_node* doc, const LinkBase& base) {
  std::unique_ptr<cmark_iter, IterFree> it(cmark_iter_new(doc));
  for (cmark_event_type ev = cmark_iter_next(it.get()); ev != CMARK_EVENT_DONE;
       ev = cmark_iter_next(it.get())) {
    cmark_node* node = cmark_iter_get_node(it.get());
    const cmark_node_type type = cmark_node_get_type(node);
    if (ev != CMARK_EVENT_ENTER || (type != CMARK_NODE_LINK && type != CMARK_NODE_IMAGE)) continue;
    const char* url = cmark_node_get_url(node);
    if (url == nullptr) continue;
    const std::string resolved = ResolveCardUrl(url, base, type == CMARK_NODE_IMAGE);
    cmark_node_set_url(node, resolved.c_str());
  }
}

}  // namespace

Card SplitCard(std::string_view readme) {
  if (readme.starts_with("\xEF\xBB\xBF")) readme.remove_prefix(3);  // a byte order mark
  auto [first, pos] = LineAt(readme, 0);
  if (Trim(first) != "---") return {.metadata = {}, .body = readme};
  const size_t start = pos;
  while (pos < readme.size()) {
    auto [line, next] = LineAt(readme, pos);
    if (Trim(line) == "---")
      return {.metadata = readme.substr(start, pos - start), .body = readme.substr(next)};
    pos = next;
  }
  return {.metadata = {}, .body = readme};  // no closing line: no metadata
}

std::vector<std::pair<std::string, std::string>> MetadataEntries(std::string_view metadata) {
  std::vector<std::pair<std::string, std::string>> out;
  for (size_t pos = 0; pos < metadata.size();) {
    auto [line, next] = LineAt(metadata, pos);
    pos = next;
    const std::string_view trimmed = Trim(line);
    if (trimmed.empty() || trimmed.front() == '#') continue;
    const bool top = line.front() != ' ' && line.front() != '\t' && line.front() != '-';
    const size_t colon = line.find(':');
    if (top && colon != std::string_view::npos) {
      out.emplace_back(std::string(Trim(line.substr(0, colon))), std::string(Trim(line.substr(colon + 1))));
    } else if (!out.empty()) {
      std::string& value = out.back().second;
      if (!value.empty()) value += '\n';
      value += line;
    }
  }
  return out;
}

std::string ResolveCardUrl(std::string_view url, const LinkBase& base, bool image) {
  if (url.empty() || url.front() == '/' || url.front() == '#') return std::string(url);
  const size_t scheme_end = url.find_first_of(":/?#");
  if (scheme_end != std::string_view::npos && url[scheme_end] == ':')
    return std::string(url);  // has a scheme
  const size_t hash = url.find('#');
  const std::string_view fragment = hash == std::string_view::npos ? std::string_view() : url.substr(hash);
  const size_t end = url.find_first_of("?#");
  std::vector<std::string_view> segments;
  std::string_view path = url.substr(0, end);
  while (!path.empty()) {
    const size_t slash = path.find('/');
    const std::string_view seg = path.substr(0, slash);
    path = slash == std::string_view::npos ? std::string_view() : path.substr(slash + 1);
    if (seg == "..") {
      if (!segments.empty()) segments.pop_back();
    } else if (!seg.empty() && seg != ".") {
      segments.push_back(seg);
    }
  }
  std::string joined;
  for (size_t i = 0; i < segments.size(); ++i) {
    if (i > 0) joined += '/';
    joined.append(segments[i]);
  }
  if (image && base.file && !joined.empty()) {
    if (auto decoded = PercentDecode(joined)) return base.file(*decoded);
  }
  return (image ? base.files : base.pages) + joined + std::string(fragment);
}

std::string RenderMarkdown(std::string_view markdown, const LinkBase* base) {
  static std::once_flag registered;
  std::call_once(registered, [] { cmark_gfm_core_extensions_ensure_registered(); });
  const int options = CMARK_OPT_DEFAULT | CMARK_OPT_GITHUB_PRE_LANG;  // safe: no raw HTML, no unsafe URLs
  std::unique_ptr<cmark_parser, ParserFree> parser(cmark_parser_new(options));
  for (const char* name : {"table", "strikethrough", "autolink", "tagfilter", "tasklist"}) {
    if (cmark_syntax_extension* ext = cmark_find_syntax_extension(name))
      cmark_parser_attach_syntax_extension(parser.get(), ext);
  }
  cmark_parser_feed(parser.get(), markdown.data(), markdown.size());
  std::unique_ptr<cmark_node, NodeFree> doc(cmark_parser_finish(parser.get()));
  if (base != nullptr) ResolveLinks(doc.get(), *base);
  char* html = cmark_render_html(doc.get(), options, cmark_parser_get_syntax_extensions(parser.get()));
  std::string out(html);
  cmark_get_default_mem_allocator()->free(html);
  return out;
}

}  // namespace cairn::web
