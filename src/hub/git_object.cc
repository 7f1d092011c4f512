#include "hub/git_object.h"

#include <openssl/evp.h>

#include <algorithm>
#include <cctype>
#include <charconv>

#include "common/hex.h"

namespace cairn::hub {
namespace {

std::string_view AsText(std::span<const uint8_t> b) {
  return {reinterpret_cast<const char*>(b.data()), b.size()};
}

bool ParseSignature(std::string_view s, Signature& out) {
  // "Name <email> 1700000000 +0000"
  const size_t lt = s.find(" <");
  const size_t gt = s.find("> ", lt == std::string_view::npos ? 0 : lt);
  if (lt == std::string_view::npos || gt == std::string_view::npos) return false;
  out.name = std::string(s.substr(0, lt));
  out.email = std::string(s.substr(lt + 2, gt - lt - 2));
  std::string_view rest = s.substr(gt + 2);
  const size_t sp = rest.find(' ');
  const std::string_view secs = rest.substr(0, sp);
  const auto [end, ec] = std::from_chars(secs.data(), secs.data() + secs.size(), out.time);
  return ec == std::errc() && end == secs.data() + secs.size() && sp != std::string_view::npos;
}

void AppendSignature(std::string& out, std::string_view role, const Signature& s) {
  out.append(role).append(" ").append(s.name).append(" <").append(s.email).append("> ");
  out.append(std::to_string(s.time)).append(" +0000\n");
}

}  // namespace

std::optional<ObjectId> ObjectId::FromHex(std::string_view hex) {
  ObjectId id;
  if (!HexDecode(hex, id.bytes)) return std::nullopt;
  return id;
}

std::optional<ObjectId> ObjectId::FromBytes(std::span<const uint8_t> b) {
  if (b.size() != 20) return std::nullopt;
  ObjectId id;
  std::copy(b.begin(), b.end(), id.bytes.begin());
  return id;
}

std::string ObjectId::hex() const {
  return HexEncode(bytes);
}

std::string_view KindName(ObjectKind kind) {
  switch (kind) {
    case ObjectKind::kBlob:
      return "blob";
    case ObjectKind::kTree:
      return "tree";
    case ObjectKind::kCommit:
      return "commit";
  }
  return "blob";
}

ObjectId HashObject(ObjectKind kind, std::span<const uint8_t> body) {
  const std::string header = std::string(KindName(kind)) + " " + std::to_string(body.size()) + '\0';
  ObjectId id;
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  unsigned len = 0;
  // SHA-1 cannot fail on a valid context; a null context (out of memory) leaves a zero id, which no
  // stored object has, so the failure shows as a missing object rather than a wrong one.
  if (ctx != nullptr && EVP_DigestInit_ex(ctx, EVP_sha1(), nullptr) == 1 &&
      EVP_DigestUpdate(ctx, header.data(), header.size()) == 1 &&
      EVP_DigestUpdate(ctx, body.data(), body.size()) == 1) {
    EVP_DigestFinal_ex(ctx, id.bytes.data(), &len);
  }
  EVP_MD_CTX_free(ctx);
  return id;
}

namespace {

// HFS+ ignores these code points when it compares names (git's utf8.c, next_hfs_char): ".g\u200cit" is
// ".git" there.
bool HfsIgnorable(uint32_t cp) {
  return (cp >= 0x200c && cp <= 0x200f) || (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x206a && cp <= 0x206f) ||
         cp == 0xfeff;
}

// `name` (valid UTF-8) without the code points HFS+ ignores.
std::string WithoutIgnorable(std::string_view name) {
  std::string out;
  for (size_t i = 0; i < name.size();) {
    const auto c = static_cast<unsigned char>(name[i]);
    const size_t n = c < 0x80 ? 1 : c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4;
    if (n == 3 && i + 2 < name.size()) {
      const uint32_t cp = (c & 0x0fU) << 12 | (static_cast<unsigned char>(name[i + 1]) & 0x3fU) << 6 |
                          (static_cast<unsigned char>(name[i + 2]) & 0x3fU);
      if (HfsIgnorable(cp)) {
        i += 3;
        continue;
      }
    }
    out.append(name.substr(i, n));
    i += n;
  }
  return out;
}

// Whether `name` is git's own folder under a spelling some file system takes for it, by git's own rules
// (read-cache.c verify_path: is_ntfs_dotgit, is_hfs_dotgit): any case; HFS+'s ignorable code points
// anywhere; on NTFS, trailing dots and spaces dropped, an alternate data stream after ':'
// (".git::$INDEX_ALLOCATION" is the folder itself) and the 8.3 short name (GIT~1, and any GIT~N here).
bool NamesGitFolder(std::string_view name) {
  // Every spelling holds a 'g' (".git", "git~"), which no ignorable code point's bytes are.
  if (name.find_first_of("gG") == std::string_view::npos) return false;
  std::string s = WithoutIgnorable(name);
  if (const size_t colon = s.find(':'); colon != std::string::npos) s.resize(colon);
  while (!s.empty() && (s.back() == '.' || s.back() == ' ')) s.pop_back();
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s == ".git" || s.starts_with("git~");
}

bool IsControl(unsigned char c) {
  return c < 0x20 || c == 0x7f;
}

}  // namespace

bool ValidSegment(std::string_view name) {
  if (name.empty() || name.size() > 255 || name == "." || name == "..") return false;
  if (!ValidUtf8(name) || HasC1Control(name) || NamesGitFolder(name)) return false;
  return std::none_of(name.begin(), name.end(), [](char ch) {
    const auto c = static_cast<unsigned char>(ch);
    return IsControl(c) || c == '/' || c == '\\';
  });
}

bool ValidRefName(std::string_view ref) {
  if (ref.empty() || ref.size() > kMaxRefNameBytes || !ValidUtf8(ref) || HasC1Control(ref)) return false;
  // 6: no leading or trailing '/', no empty component; 7: no trailing '.'; 9: not "@".
  if (ref.front() == '/' || ref.back() == '/' || ref.back() == '.' || ref == "@") return false;
  // 3: no ".."; 8: no "@{"; 4, 5, 10: no control character, space, ~ ^ : ? * [ or backslash.
  if (ref.find("..") != std::string_view::npos || ref.find("@{") != std::string_view::npos ||
      ref.find("//") != std::string_view::npos)
    return false;
  for (const char ch : ref) {
    const auto c = static_cast<unsigned char>(ch);
    if (IsControl(c) || std::string_view(" ~^:?*[\\").find(ch) != std::string_view::npos) return false;
  }
  // 1: no component starts with '.' or ends with ".lock".
  size_t start = 0;
  while (start <= ref.size()) {
    const size_t slash = std::min(ref.find('/', start), ref.size());
    const std::string_view component = ref.substr(start, slash - start);
    if (component.empty() || component.front() == '.' || component.ends_with(".lock")) return false;
    start = slash + 1;
  }
  return true;
}

bool ValidBranchOrTagName(std::string_view name, bool tag) {
  // What `git branch` and `git tag` refuse beside check-ref-format: a leading '-' (read as an option), HEAD
  // and "@" (git reads it as HEAD); and what would read as something else here: a commit id, a full ref.
  if (name.empty() || name.front() == '-' || name == "HEAD" || name == "@" || name.starts_with("refs/"))
    return false;
  if (ObjectId::FromHex(name)) return false;
  const std::string full = std::string(tag ? "refs/tags/" : "refs/heads/") + std::string(name);
  return full.size() <= kMaxRefNameBytes && ValidRefName(full);
}

void SortTree(std::vector<TreeEntry>& entries) {
  std::sort(entries.begin(), entries.end(), [](const TreeEntry& a, const TreeEntry& b) {
    const size_t n = std::min(a.name.size(), b.name.size());
    const int c = a.name.compare(0, n, b.name, 0, n);
    if (c != 0) return c < 0;
    const auto next = [n](const TreeEntry& e) -> int {
      if (e.name.size() > n) return static_cast<unsigned char>(e.name[n]);
      return e.is_tree() ? '/' : 0;
    };
    return next(a) < next(b);
  });
}

std::vector<uint8_t> EncodeTree(std::span<const TreeEntry> entries) {
  std::vector<uint8_t> out;
  for (const TreeEntry& e : entries) {
    char mode[8];
    const auto [end, ec] = std::to_chars(mode, mode + sizeof(mode), static_cast<uint32_t>(e.mode), 8);
    out.insert(out.end(), mode, end);
    out.push_back(' ');
    out.insert(out.end(), e.name.begin(), e.name.end());
    out.push_back(0);
    out.insert(out.end(), e.id.bytes.begin(), e.id.bytes.end());
  }
  return out;
}

Result<std::vector<TreeEntry>> ParseTree(std::span<const uint8_t> body) {
  std::vector<TreeEntry> out;
  std::string_view rest = AsText(body);
  while (!rest.empty()) {
    const size_t sp = rest.find(' ');
    if (sp > 6) return Malformed("tree: entry without a mode");  // npos too
    uint32_t mode = 0;
    const auto [end, ec] = std::from_chars(rest.data(), rest.data() + sp, mode, 8);
    if (ec != std::errc() || end != rest.data() + sp) return Malformed("tree: bad mode");
    if (mode != static_cast<uint32_t>(EntryMode::kFile) && mode != static_cast<uint32_t>(EntryMode::kTree) &&
        mode != static_cast<uint32_t>(EntryMode::kExecutable) &&
        mode != static_cast<uint32_t>(EntryMode::kSymlink)) {
      return Malformed("tree: unsupported mode " + std::string(rest.substr(0, sp)));
    }
    rest.remove_prefix(sp + 1);
    const size_t nul = rest.find('\0');
    if (nul == std::string_view::npos || rest.size() - nul - 1 < 20) {
      return Malformed("tree: truncated entry");
    }
    TreeEntry e;
    e.mode = static_cast<EntryMode>(mode);
    e.name = std::string(rest.substr(0, nul));
    // Only what the tree's structure needs: a name an older cairn accepted (before a rule for paths was
    // added) still parses, and the Hub leaves it out of what it serves (fsck reports it).
    if (e.name.empty() || e.name == "." || e.name == ".." || e.name == ".git" ||
        e.name.find('/') != std::string::npos)
      return Malformed("tree: bad entry name");
    std::copy_n(reinterpret_cast<const uint8_t*>(rest.data() + nul + 1), 20, e.id.bytes.begin());
    rest.remove_prefix(nul + 21);
    out.push_back(std::move(e));
  }
  std::vector<TreeEntry> sorted = out;
  SortTree(sorted);
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i].name != sorted[i].name) return Malformed("tree: entries out of order");
  }
  // A name once, whatever its mode: a file "a" and a folder "a" sort apart ("a", "a-b", "a/"), so
  // neighbours alone do not show it (git fsck's duplicateEntries).
  std::vector<std::string_view> names;
  names.reserve(out.size());
  for (const TreeEntry& e : out) names.push_back(e.name);
  std::sort(names.begin(), names.end());
  if (std::adjacent_find(names.begin(), names.end()) != names.end())
    return Malformed("tree: a name appears twice");
  return out;
}

std::string Commit::title() const {
  return message.substr(0, message.find('\n'));
}

std::string EncodeCommit(const Commit& c) {
  std::string out = "tree " + c.tree.hex() + "\n";
  for (const ObjectId& p : c.parents) out += "parent " + p.hex() + "\n";
  AppendSignature(out, "author", c.author);
  AppendSignature(out, "committer", c.committer);
  out += "\n";
  out += c.message;
  if (out.back() != '\n') out += '\n';
  return out;
}

Result<Commit> ParseCommit(std::span<const uint8_t> body) {
  std::string_view rest = AsText(body);
  Commit c;
  bool have_tree = false;
  bool have_author = false;
  bool have_committer = false;
  for (;;) {
    const size_t nl = rest.find('\n');
    if (nl == std::string_view::npos) return Malformed("commit: truncated header");
    const std::string_view line = rest.substr(0, nl);
    rest.remove_prefix(nl + 1);
    if (line.empty()) break;
    const size_t sp = line.find(' ');
    const std::string_view key = line.substr(0, sp);
    const std::string_view value = sp == std::string_view::npos ? "" : line.substr(sp + 1);
    if (key == "tree" || key == "parent") {
      auto id = ObjectId::FromHex(value);
      if (!id || (key == "tree" && have_tree)) return Malformed("commit: bad " + std::string(key));
      if (key == "tree") {
        c.tree = *id;
        have_tree = true;
      } else {
        c.parents.push_back(*id);
      }
    } else if (key == "author" || key == "committer") {
      Signature& s = key == "author" ? c.author : c.committer;
      if (!ParseSignature(value, s)) return Malformed("commit: bad " + std::string(key));
      (key == "author" ? have_author : have_committer) = true;
    }
    // Other headers (encoding, gpgsig and its continuation lines) are git's too; they are kept in the
    // object's bytes and not needed here.
  }
  if (!have_tree || !have_author || !have_committer) return Malformed("commit: missing header");
  c.message = std::string(rest);
  if (c.message.ends_with('\n')) c.message.pop_back();
  return c;
}

bool IsSha256Hex(std::string_view s) {
  return s.size() == 64 && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

std::string EncodeLfsPointer(const LfsPointer& p) {
  return "version https://git-lfs.github.com/spec/v1\noid sha256:" + p.sha256 + "\nsize " +
         std::to_string(p.size) + "\n";
}

std::optional<LfsPointer> ParseLfsPointer(std::span<const uint8_t> body) {
  constexpr std::string_view kHead = "version https://git-lfs.github.com/spec/v1\noid sha256:";
  std::string_view s = AsText(body);
  if (s.size() > 200 || !s.starts_with(kHead)) return std::nullopt;
  s.remove_prefix(kHead.size());
  LfsPointer p;
  if (s.size() < 64 + 6 || !IsSha256Hex(s.substr(0, 64))) return std::nullopt;
  p.sha256 = std::string(s.substr(0, 64));
  s.remove_prefix(64);
  if (!s.starts_with("\nsize ") || !s.ends_with('\n')) return std::nullopt;
  s = s.substr(6, s.size() - 7);
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), p.size);
  if (ec != std::errc() || end != s.data() + s.size() || s.empty() || (s.size() > 1 && s[0] == '0')) {
    return std::nullopt;
  }
  return p;
}

}  // namespace cairn::hub
