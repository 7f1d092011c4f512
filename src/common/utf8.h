// Text a client sends, checked where it enters: whether bytes are UTF-8 and whether they hold the C1
// controls terminals act on. Pure functions; safe from any thread.
#pragma once

#include <string_view>

namespace cairn {

// Whether `s` is UTF-8: no overlong form, surrogate or code point past U+10FFFF, nothing truncated.
bool ValidUtf8(std::string_view s);
// Whether valid UTF-8 `s` holds a C1 control character (U+0080 to U+009F: CSI, NEL...), which terminals
// and some parsers act on as they do on C0 ones.
bool HasC1Control(std::string_view s);

}  // namespace cairn
