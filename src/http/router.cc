#include "http/router.h"

#include <stdexcept>

namespace cairn::http {
namespace {

std::vector<std::string> SplitPattern(std::string_view pattern) {
  if (pattern.empty() || pattern.front() != '/')
    throw std::invalid_argument("route pattern must start with /");
  std::vector<std::string> out;
  pattern.remove_prefix(1);
  if (pattern.empty()) return out;  // "/"
  for (;;) {
    const size_t slash = pattern.find('/');
    out.emplace_back(pattern.substr(0, slash));
    if (slash == std::string_view::npos) break;
    pattern.remove_prefix(slash + 1);
  }
  return out;
}

bool IsCapture(const std::string& s) {
  return s.size() > 2 && s.front() == '{' && s.back() == '}';
}

// "{name...}": a last capture that takes every remaining segment (one at least), joined by '/'.
bool IsTail(const std::string& s) {
  return s.size() > 5 && s.front() == '{' && s.ends_with("...}");
}

bool PathMatches(const Route& r, const std::vector<std::string>& segments,
                 std::map<std::string, std::string, std::less<>>* params) {
  const bool tail = !r.segments.empty() && IsTail(r.segments.back());
  if (tail ? segments.size() < r.segments.size() : r.segments.size() != segments.size()) return false;
  if (tail) {
    const size_t first = r.segments.size() - 1;
    std::string joined;
    for (size_t i = first; i < segments.size(); ++i) {
      if (segments[i].empty()) return false;
      joined += (i > first ? "/" : "") + segments[i];
    }
    if (params != nullptr) (*params)[r.segments.back().substr(1, r.segments.back().size() - 5)] = joined;
  }
  for (size_t i = 0; i < (tail ? r.segments.size() - 1 : segments.size()); ++i) {
    if (IsCapture(r.segments[i])) {
      if (segments[i].empty()) return false;
      if (params != nullptr) (*params)[r.segments[i].substr(1, r.segments[i].size() - 2)] = segments[i];
    } else if (r.segments[i] != segments[i]) {
      return false;
    }
  }
  return true;
}

}  // namespace

Route& Router::Add(Verb method, std::string_view pattern, RouteOptions options) {
  Route r;
  r.method = method;
  r.pattern = std::string(pattern);
  r.segments = SplitPattern(r.pattern);  // throws on a bad pattern, before anything is added
  r.options = std::move(options);
  if (r.options.name.empty()) r.options.name = r.pattern;
  return routes_.emplace_back(std::move(r));
}

void Router::Handle(Verb method, std::string_view pattern, RouteOptions options, Handler handler) {
  Add(method, pattern, std::move(options)).handler = std::move(handler);
}

void Router::HandleStream(Verb method, std::string_view pattern, RouteOptions options,
                          StreamHandler handler) {
  Add(method, pattern, std::move(options)).stream_handler = std::move(handler);
}

Router::Match Router::Find(Verb method, const std::vector<std::string>& segments) const {
  Match m;
  const auto allow = [&m](Verb v) {
    const std::string name(boost::beast::http::to_string(v));
    if (m.allow.find(name) == std::string::npos) m.allow += (m.allow.empty() ? "" : ", ") + name;
  };
  // The route for `method`; for HEAD without a HEAD route, the GET route (the server sends its header alone).
  const Route* found = nullptr;
  for (const Route& r : routes_) {
    if (!PathMatches(r, segments, nullptr)) continue;
    if (r.method == method) {
      found = &r;
      break;
    }
    if (method == Verb::head && r.method == Verb::get) {
      if (found == nullptr) found = &r;
      continue;
    }
    m.status = 405;
    allow(r.method);
    if (r.method == Verb::get) allow(Verb::head);
  }
  if (found != nullptr) {
    m.route = found;
    m.status = 200;
    m.allow.clear();
    PathMatches(*found, segments, &m.params);
  }
  return m;
}

}  // namespace cairn::http
