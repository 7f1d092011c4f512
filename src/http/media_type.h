// Media types (RFC 9110 §8.3.1), and the headers of every answer that carries stored bytes.
//
// Users' uploads are served from cairn's own origin. A browser that took them for a page (HTML, SVG, XML with
// a stylesheet) or a script would run them with that origin's standing: stored cross-site scripting. So an
// answer with stored bytes names a type only when it is well formed (else application/octet-stream), forbids
// sniffing another, sandboxes whatever a browser renders anyway, and makes an active type a download.
//
// Pure functions of their arguments; thread-safe.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

#include "common/media_type.h"
#include "http/handler.h"

namespace cairn::http {

// The media type grammar itself is common/media_type.h's (the Hub checks a bucket file's type with it where
// it enters, below this layer).
using ::cairn::kMaxMediaTypeBytes;
using ::cairn::ValidMediaType;

// True when a browser could run a representation of this type as a page or a script on our origin (HTML,
// XHTML, SVG and every +xml, XSLT, the JavaScript types, Flash, PDF, multipart/x-mixed-replace, cache
// manifests), comparing type and subtype case-insensitively and ignoring parameters; true for an invalid one.
bool IsActiveMediaType(std::string_view v);

// For an answer with stored (user-uploaded) bytes: Content-Type `content_type` when it is given and valid,
// else application/octet-stream (replacing whatever was set, but a valid multipart/byteranges: several
// ranges, each part naming its own type); X-Content-Type-Options: nosniff;
// Content-Security-Policy: sandbox; default-src 'none'; and for an active type Content-Disposition:
// attachment (a Content-Disposition already set to attachment, a filename with it, is kept).
void SetStoredBytesHeaders(Response& r, std::optional<std::string_view> content_type);

}  // namespace cairn::http
