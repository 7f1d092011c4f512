// Media types (RFC 9110 §8.3.1) as a client may give one for a stored file (a bucket file's contentType):
// checked where it enters, so that what is stored can go into a Content-Type header as it is.
//
// Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <string_view>

namespace cairn {

inline constexpr size_t kMaxMediaTypeBytes = 256;

// `s` without RFC 9110's optional whitespace (SP, HTAB) at either end: a header field's element as written.
inline std::string_view TrimOws(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// An RFC 9110 tchar: "!#$%&'*+-.^_`|~", digits and letters.
bool IsTchar(char c);

// `type "/" subtype *( OWS ";" OWS parameter )` with parameter = token "=" ( token / quoted-string ): RFC
// 9110's grammar without its empty parameters ("text/plain;"), and ASCII only (no obs-text in a quoted
// string). At most kMaxMediaTypeBytes, no whitespace before or after.
bool ValidMediaType(std::string_view v);

}  // namespace cairn
