#include "http/media_type.h"

#include <algorithm>
#include <array>
#include <boost/beast/core/string.hpp>
#include <string>

namespace cairn::http {
namespace {

// "type/subtype" of a media type (what precedes its parameters), lower-cased.
std::string Essence(std::string_view v) {
  std::string out(v.substr(0, std::min(v.find(';'), v.size())));
  while (!out.empty() && (out.back() == ' ' || out.back() == '\t')) out.pop_back();
  std::transform(out.begin(), out.end(), out.begin(),
                 [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; });
  return out;
}

bool IsAttachment(std::string_view disposition) {
  constexpr std::string_view kAttachment = "attachment";
  if (disposition.size() < kAttachment.size() ||
      !boost::beast::iequals(disposition.substr(0, kAttachment.size()), kAttachment))
    return false;
  if (disposition.size() == kAttachment.size()) return true;
  const char next = disposition[kAttachment.size()];
  return next == ';' || next == ' ' || next == '\t';
}

}  // namespace

bool IsActiveMediaType(std::string_view v) {
  if (!ValidMediaType(v)) return true;
  const std::string essence = Essence(v);
  // The WHATWG MIME Sniffing standard's JavaScript MIME types among them: any of these runs as a script.
  static constexpr std::array<std::string_view, 30> kActive = {
      "text/html",
      "application/xhtml+xml",
      "image/svg+xml",
      "text/xml",
      "application/xml",
      "text/xsl",
      "application/xslt+xml",
      "text/javascript",
      "text/javascript1.0",
      "text/javascript1.1",
      "text/javascript1.2",
      "text/javascript1.3",
      "text/javascript1.4",
      "text/javascript1.5",
      "application/javascript",
      "application/ecmascript",
      "application/x-ecmascript",
      "application/x-javascript",
      "text/ecmascript",
      "text/x-ecmascript",
      "text/x-javascript",
      "text/jscript",
      "text/livescript",
      "text/vbscript",
      "application/x-shockwave-flash",
      "application/pdf",
      "multipart/x-mixed-replace",
      "text/cache-manifest",
      "text/xml-external-parsed-entity",
      "application/xml-dtd",
  };
  if (std::find(kActive.begin(), kActive.end(), essence) != kActive.end()) return true;
  return essence.ends_with("+xml");
}

void SetStoredBytesHeaders(Response& r, std::optional<std::string_view> content_type) {
  const std::string_view type =
      content_type && ValidMediaType(*content_type) ? *content_type : "application/octet-stream";
  // Several ranges: the answer is multipart/byteranges (each part names its own type), which stays.
  bool multipart = false;
  for (const auto& [name, value] : r.headers)
    if (boost::beast::iequals(name, "Content-Type") && ValidMediaType(value) &&
        Essence(value) == "multipart/byteranges")
      multipart = true;
  if (!multipart) r.Header("Content-Type", std::string(type));
  r.Header("X-Content-Type-Options", "nosniff");
  // Rendered anyway (a browser that ignores the disposition): no scripts, no same-origin, nothing loaded.
  r.Header("Content-Security-Policy", "sandbox; default-src 'none'");
  if (!IsActiveMediaType(type)) return;
  for (const auto& [name, value] : r.headers)
    if (boost::beast::iequals(name, "Content-Disposition") && IsAttachment(value)) return;
  r.Header("Content-Disposition", "attachment");
}

}  // namespace cairn::http
