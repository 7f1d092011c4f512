// Pages as HTML: a template of assets/ filled with a view (kainjow's Mustache: {{name}} is escaped for HTML,
// {{{name}}} is not and is only ever given HTML cairn wrote), and the layout every page shares.
//
// Everything a client or a stored file wrote reaches a page through {{name}} (escaped: & < > " ') or as
// RenderMarkdown's safe HTML; URLs in attributes are built from percent-encoded segments (UrlPath), so no
// value can leave its attribute or start a scheme. Thread safety: pure functions of their arguments.
#pragma once

#include <kainjow/mustache.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "http/handler.h"

namespace cairn::web {

using View = kainjow::mustache::data;

// The template `name` of assets/ filled with `view`; the text of the error when the template is broken (a
// bug: every template is rendered by the tests).
std::string Render(std::string_view name, const View& view);

// Who is looking, as the layout shows it: nobody, or a signed-in person and the form token of their session.
struct Visitor {
  std::string user;          // empty: not signed in
  std::string csrf;          // the session's form token (every form carries it)
  bool is_operator = false;  // the layout links to the operator's page
  bool signed_in() const { return !user.empty(); }
};

// The whole page: the layout around `main` (HTML cairn rendered), titled `title`.
http::Response PageAnswer(unsigned status, std::string_view title, const std::string& main,
                          const Visitor& who);

// An error as a page: its status and a sentence.
http::Response ErrorPage(unsigned status, std::string_view message, const Visitor& who);

// The stylesheet's path (its name carries a hash of its text, so it is cached for good) and its answer.
const std::string& StylesheetPath();
http::Response StylesheetAnswer();

// The headers every page carries: its Content-Security-Policy (no script at all, styles and images from
// cairn's origin only, forms posting only to it, never framed), nosniff, no referrer to other hosts, and
// no caching by shared caches (a signed-in person's page is theirs).
void SecureHeaders(http::Response& r);
// The same with images from `image_origin` too (the user-content origin).
void SecureHeaders(http::Response& r, std::string_view image_origin);

// `path` with each segment percent-encoded and '/' kept: for a URL's path in an href.
std::string UrlPath(std::string_view path);

// "1.2 KB", "3.4 GB": sizes as people read them (decimal units, as the Hub shows them).
std::string HumanSize(uint64_t bytes);

}  // namespace cairn::web
