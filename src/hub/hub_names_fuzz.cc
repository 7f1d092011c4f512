// Fuzzes the Hub's checks of what a client names: path segments and paths (hub::ValidSegment, ValidPath:
// git's verify_path rules for NTFS and HFS+, C0 and C1 controls), ref names (ValidRefName,
// ValidBranchOrTagName: git check-ref-format), commit text (ValidText) and Printable, which fsck writes them
// with. The first byte picks nothing: every check sees the whole input. Checks, against independent
// restatements of the rules: an accepted segment is valid UTF-8, 1-255 bytes, holds no '/', '\\', C0, DEL or
// C1 control, and is no spelling of .git (lower-cased with HFS+'s ignored code points removed, cut at ':' and
// stripped of trailing dots and spaces, it is neither ".git" nor "git~..."); an accepted ref holds none of
// git's forbidden characters or sequences; Printable's output is printable ASCII.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/fuzz_check.h"
#include "hub/git_object.h"
#include "hub/hub_check.h"
#include "hub/hub_service.h"

namespace {

using cairn::hub::ValidUtf8;

bool HasControl(std::string_view s) {
  for (size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7f) return true;
    if (c == 0xc2 && i + 1 < s.size() && static_cast<unsigned char>(s[i + 1]) < 0xa0) return true;
  }
  return false;
}

// The segment as NTFS and HFS+ would compare it with ".git", restated byte by byte.
std::string Folded(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    // U+200C-U+200F, U+202A-U+202E, U+206A-U+206F: E2 80 8C-8F, E2 80 AA-AE, E2 81 AA-AF; U+FEFF: EF BB BF.
    if (i + 2 < s.size()) {
      const auto a = static_cast<unsigned char>(s[i]), b = static_cast<unsigned char>(s[i + 1]),
                 c = static_cast<unsigned char>(s[i + 2]);
      if ((a == 0xe2 && b == 0x80 && ((c >= 0x8c && c <= 0x8f) || (c >= 0xaa && c <= 0xae))) ||
          (a == 0xe2 && b == 0x81 && c >= 0xaa && c <= 0xaf) || (a == 0xef && b == 0xbb && c == 0xbf)) {
        i += 2;
        continue;
      }
    }
    out.push_back(s[i] >= 'A' && s[i] <= 'Z' ? static_cast<char>(s[i] - 'A' + 'a') : s[i]);
  }
  if (const size_t colon = out.find(':'); colon != std::string::npos) out.resize(colon);
  while (!out.empty() && (out.back() == '.' || out.back() == ' ')) out.pop_back();
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);

  if (cairn::hub::ValidSegment(in)) {
    FUZZ_CHECK(!in.empty() && in.size() <= 255 && ValidUtf8(in) && !HasControl(in));
    FUZZ_CHECK(in.find('/') == std::string_view::npos && in.find('\\') == std::string_view::npos);
    FUZZ_CHECK(in != "." && in != "..");
    const std::string folded = Folded(in);
    FUZZ_CHECK(folded != ".git" && !folded.starts_with("git~"));
  }
  if (cairn::hub::ValidPath(in)) {
    FUZZ_CHECK(in.size() <= 4096 && ValidUtf8(in) && !HasControl(in));
    FUZZ_CHECK(!in.starts_with('/') && !in.ends_with('/') && in.find("//") == std::string_view::npos);
  }
  if (cairn::hub::ValidRefName(in)) {
    FUZZ_CHECK(!in.empty() && in.size() <= cairn::hub::kMaxRefNameBytes && ValidUtf8(in) && !HasControl(in));
    for (std::string_view bad : {"..", "@{", "//", "/.", ".lock/", " ", "~", "^", ":", "?", "*", "[", "\\"})
      FUZZ_CHECK(in.find(bad) == std::string_view::npos);
    FUZZ_CHECK(in != "@" && !in.starts_with('.') && !in.starts_with('/') && !in.ends_with('/') &&
               !in.ends_with('.') && !in.ends_with(".lock"));
  }
  if (cairn::hub::ValidBranchOrTagName(in, false)) {
    FUZZ_CHECK(cairn::hub::ValidRefName("refs/heads/" + std::string(in)));
    FUZZ_CHECK(!in.starts_with('-') && in != "HEAD" && !in.starts_with("refs/"));
  }
  if (cairn::hub::ValidText(in, "\t\n\r")) {
    FUZZ_CHECK(ValidUtf8(in));
    for (const char ch : in) {
      const auto c = static_cast<unsigned char>(ch);
      FUZZ_CHECK(c >= 0x20 || ch == '\t' || ch == '\n' || ch == '\r');
    }
  }
  const std::string shown = cairn::Printable(in);
  for (const char ch : shown) FUZZ_CHECK(ch >= 0x20 && ch < 0x7f);
  FUZZ_CHECK(shown.size() >= in.size());
  return 0;
}
