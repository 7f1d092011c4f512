#include "web/view.h"

#include <fmt/format.h>
#include <openssl/sha.h>

#include <array>
#include <functional>
#include <memory>
#include <unordered_map>

#include "common/hex.h"
#include "common/percent_encode.h"
#include "web/assets.h"

namespace cairn::web {

namespace {

std::string_view AssetText(std::string_view name) {
  auto text = FindAsset(name);
  return text ? *text : std::string_view("template missing");
}

struct NameHash {
  using is_transparent = void;
  size_t operator()(std::string_view name) const { return std::hash<std::string_view>{}(name); }
};

}  // namespace

std::optional<std::string_view> FindAsset(std::string_view name) {
  for (const Asset& a : Assets()) {
    if (a.name == name) return a.text;
  }
  return std::nullopt;
}

std::string Render(std::string_view name, const View& view) {
  // Each template parsed once per thread: parsing it again for every page cost more than filling it in.
  // Threads do not share one, since kainjow's render is not const.
  thread_local std::unordered_map<std::string, std::unique_ptr<kainjow::mustache::mustache>, NameHash,
                                  std::equal_to<>>
      parsed;
  auto it = parsed.find(name);
  if (it == parsed.end())
    it = parsed.emplace(name, std::make_unique<kainjow::mustache::mustache>(std::string(AssetText(name))))
             .first;
  kainjow::mustache::mustache& tmpl = *it->second;
  if (!tmpl.is_valid()) return "template " + std::string(name) + ": " + tmpl.error_message();
  // The data pushed on a context made empty: the constructor taking it calls a virtual method while
  // constructing, which the static analyzer reports.
  kainjow::mustache::context<std::string> ctx;
  ctx.push(&view);
  return tmpl.render(ctx);
}

void SecureHeaders(http::Response& r) {
  SecureHeaders(r, "");
}

void SecureHeaders(http::Response& r, std::string_view image_origin) {
  std::string images = "'self' data:";
  if (!image_origin.empty()) images += " " + std::string(image_origin);
  r.Header("Content-Security-Policy", "default-src 'none'; style-src 'self'; img-src " + images +
                                          "; form-action 'self'; frame-ancestors 'none'; base-uri 'none'");
  r.Header("X-Content-Type-Options", "nosniff");
  r.Header("X-Frame-Options", "DENY");
  r.Header("Referrer-Policy", "same-origin");
  r.Header("Cache-Control", "private, no-cache");
}

http::Response PageAnswer(unsigned status, std::string_view title, const std::string& main,
                          const Visitor& who) {
  View view;
  view.set("title", std::string(title));
  view.set("main", main);
  view.set("stylesheet", StylesheetPath());
  if (who.signed_in()) {
    View v;
    v.set("name", who.user);
    v.set("csrf", who.csrf);
    v.set("operator", who.is_operator);
    view.set("visitor", v);
  }
  http::Response r = http::Response::Text(status, Render("layout.html", view), "text/html; charset=utf-8");
  SecureHeaders(r);
  return r;
}

http::Response ErrorPage(unsigned status, std::string_view message, const Visitor& who) {
  View view;
  view.set("status", std::to_string(status));
  view.set("message", std::string(message));
  http::Response r = PageAnswer(status, std::to_string(status), Render("error.html", view), who);
  r.error = std::string(message);
  return r;
}

const std::string& StylesheetPath() {
  static const std::string path = [] {
    const std::string_view css = AssetText("cairn.css");
    std::array<uint8_t, SHA256_DIGEST_LENGTH> digest{};
    SHA256(reinterpret_cast<const uint8_t*>(css.data()), css.size(), digest.data());
    return "/static/cairn-" + HexEncode(std::span<const uint8_t>(digest.data(), 6)) + ".css";
  }();
  return path;
}

http::Response StylesheetAnswer() {
  http::Response r =
      http::Response::Text(200, std::string(AssetText("cairn.css")), "text/css; charset=utf-8");
  r.Header("X-Content-Type-Options", "nosniff");
  r.Header("Cache-Control", "public, max-age=31536000, immutable");
  return r;
}

std::string UrlPath(std::string_view path) {
  return PercentEncode(path, "-._~/");
}

std::string HumanSize(uint64_t bytes) {
  static constexpr std::array<const char*, 6> kUnits = {"Bytes", "kB", "MB", "GB", "TB", "PB"};
  if (bytes < 1000) return std::to_string(bytes) + " Bytes";
  double v = static_cast<double>(bytes);
  size_t unit = 0;
  while (v >= 1000 && unit + 1 < kUnits.size()) {
    v /= 1000;
    ++unit;
  }
  const int digits = v < 10 ? 2 : (v < 100 ? 1 : 0);
  return fmt::format("{:.{}f} {}", v, digits, kUnits[unit]);
}

}  // namespace cairn::web
