#include "common/media_type.h"

namespace cairn {
namespace {

// Reads a token at `v[i]`; false when there is none.
bool ReadToken(std::string_view v, size_t& i) {
  const size_t start = i;
  while (i < v.size() && IsTchar(v[i])) ++i;
  return i > start;
}

void SkipOws(std::string_view v, size_t& i) {
  while (i < v.size() && (v[i] == ' ' || v[i] == '\t')) ++i;
}

// Reads a quoted-string at `v[i]` (the opening quote); false when it is malformed or unterminated.
bool ReadQuoted(std::string_view v, size_t& i) {
  ++i;
  while (i < v.size()) {
    const auto c = static_cast<unsigned char>(v[i]);
    if (c == '"') {
      ++i;
      return true;
    }
    if (c == '\\') {
      if (i + 1 >= v.size()) return false;
      const auto q = static_cast<unsigned char>(v[i + 1]);
      if (q != '\t' && (q < 0x20 || q > 0x7e)) return false;  // HTAB / SP / VCHAR
      i += 2;
      continue;
    }
    if (c != '\t' && (c < 0x20 || c > 0x7e)) return false;  // qdtext, without obs-text
    ++i;
  }
  return false;
}

}  // namespace

bool IsTchar(char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

bool ValidMediaType(std::string_view v) {
  if (v.empty() || v.size() > kMaxMediaTypeBytes) return false;
  size_t i = 0;
  if (!ReadToken(v, i) || i >= v.size() || v[i] != '/') return false;
  ++i;
  if (!ReadToken(v, i)) return false;
  while (i < v.size()) {
    SkipOws(v, i);
    if (i >= v.size() || v[i] != ';') return false;  // trailing whitespace, or junk after a part
    ++i;
    SkipOws(v, i);
    if (!ReadToken(v, i) || i >= v.size() || v[i] != '=') return false;
    ++i;
    if (i < v.size() && v[i] == '"') {
      if (!ReadQuoted(v, i)) return false;
    } else if (!ReadToken(v, i)) {
      return false;
    }
  }
  return true;
}

}  // namespace cairn
