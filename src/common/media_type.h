// Media types (RFC 9110 §8.3.1) as a client may give one for a stored file (a bucket file's contentType):
// checked where it enters, so that what is stored can go into a Content-Type header as it is.
//
// Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <string_view>

namespace cairn {

inline constexpr size_t kMaxMediaTypeBytes = 256;

// An RFC 9110 tchar: "!#$%&'*+-.^_`|~", digits and letters.
bool IsTchar(char c);

// `type "/" subtype *( OWS ";" OWS parameter )` with parameter = token "=" ( token / quoted-string ): RFC
// 9110's grammar without its empty parameters ("text/plain;"), and ASCII only (no obs-text in a quoted
// string). At most kMaxMediaTypeBytes, no whitespace before or after.
bool ValidMediaType(std::string_view v);

}  // namespace cairn
