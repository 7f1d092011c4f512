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

bool PathMatches(const Route& r, const std::vector<std::string>& segments,
                 std::map<std::string, std::string, std::less<>>* params) {
  if (r.segments.size() != segments.size()) return false;
  for (size_t i = 0; i < segments.size(); ++i) {
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

void Router::Add(Route r) {
  r.segments = SplitPattern(r.pattern);
  if (r.options.name.empty()) r.options.name = r.pattern;
  routes_.push_back(std::move(r));
}

void Router::Handle(Verb method, std::string_view pattern, RouteOptions options, Handler handler) {
  Route r;
  r.method = method;
  r.pattern = std::string(pattern);
  r.options = std::move(options);
  r.handler = std::move(handler);
  Add(std::move(r));
}

void Router::HandleStream(Verb method, std::string_view pattern, RouteOptions options,
                          StreamHandler handler) {
  Route r;
  r.method = method;
  r.pattern = std::string(pattern);
  r.options = std::move(options);
  r.stream_handler = std::move(handler);
  Add(std::move(r));
}

Router::Match Router::Find(Verb method, const std::vector<std::string>& segments) const {
  Match m;
  for (const Route& r : routes_) {
    if (!PathMatches(r, segments, nullptr)) continue;
    if (r.method == method) {
      m.route = &r;
      m.status = 200;
      m.allow.clear();
      PathMatches(r, segments, &m.params);
      return m;
    }
    m.status = 405;
    const std::string name(boost::beast::http::to_string(r.method));
    if (m.allow.find(name) == std::string::npos) m.allow += (m.allow.empty() ? "" : ", ") + name;
  }
  return m;
}

}  // namespace cairn::http
