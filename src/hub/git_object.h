// Git objects, byte for byte as git writes them: blobs, trees and commits, their SHA-1 object ids, and the
// Git LFS pointer files that stand for large files in trees. A repository's history is made of these, so
// that its commit ids are the ones git would compute (and a later `git clone` can be served from them).
//
// Pure functions: no I/O, no threads. Parsers are bounded by the bytes given and refuse anything git would
// not have written (kMalformed); they never read past their input.
#pragma once

#include <array>
#include <compare>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"
#include "common/utf8.h"

namespace cairn::hub {

// A git object id: the SHA-1 of "<kind> <size>\0<body>". Printed as 40 lowercase hex digits.
struct ObjectId {
  std::array<uint8_t, 20> bytes{};

  static std::optional<ObjectId> FromHex(std::string_view hex);          // 40 hex digits, either case
  static std::optional<ObjectId> FromBytes(std::span<const uint8_t> b);  // exactly 20 bytes
  std::string hex() const;
  // Its key in the index (index::RepoObject::key): the id's bytes.
  std::vector<uint8_t> key() const { return {bytes.begin(), bytes.end()}; }
  friend bool operator==(const ObjectId&, const ObjectId&) = default;
  friend std::strong_ordering operator<=>(const ObjectId&, const ObjectId&) = default;
};

// A hash of an id for unordered containers: its first bytes (ids are SHA-1s, uniform already).
struct ObjectIdHash {
  size_t operator()(const ObjectId& id) const {
    size_t h = 0;
    for (size_t i = 0; i < sizeof h; ++i) h = h << 8 | id.bytes[i];
    return h;
  }
};

enum class ObjectKind : uint8_t { kBlob = 1, kTree = 2, kCommit = 3 };

std::string_view KindName(ObjectKind kind);
ObjectId HashObject(ObjectKind kind, std::span<const uint8_t> body);
inline ObjectId HashObject(ObjectKind kind, std::string_view body) {
  return HashObject(kind, std::span(reinterpret_cast<const uint8_t*>(body.data()), body.size()));
}

// An object with its kind and id, as a pack carries it (a push, an upstream's fetch).
struct RawObject {
  ObjectKind kind = ObjectKind::kBlob;
  ObjectId id;
  std::vector<uint8_t> body;
};

// ---- Trees
// A symbolic link is a blob holding its target, as git keeps it. A submodule (gitlink, 0160000) is refused.
enum class EntryMode : uint32_t {
  kFile = 0100644,
  kExecutable = 0100755,
  kSymlink = 0120000,
  kTree = 040000
};

struct TreeEntry {
  EntryMode mode = EntryMode::kFile;
  std::string name;  // one path segment
  ObjectId id;
  bool is_tree() const { return mode == EntryMode::kTree; }
};

// Entries in git's order (names compared bytewise, a tree's name as if it ended in '/'), which EncodeTree
// expects and ParseTree checks. Names written must be valid segments (ValidSegment) and unique; ParseTree
// refuses a name given twice (as a file and a folder too, as git fsck does) but checks only that a name is
// one non-empty segment otherwise, so trees stored under older rules still parse.
void SortTree(std::vector<TreeEntry>& entries);
std::vector<uint8_t> EncodeTree(std::span<const TreeEntry> entries);
Result<std::vector<TreeEntry>> ParseTree(std::span<const uint8_t> body);

// A path segment git and every file system accept: valid UTF-8, not empty, not "." or "..", not git's folder
// under any spelling a file system may take for it (git's verify_path rules for NTFS and HFS+: ".GIT",
// ".git.", "GIT~1", ".git::$INDEX_ALLOCATION", ".g\u200cit"), no '/', '\\', C0 or C1 control characters
// (U+0000-U+001F, U+007F-U+009F), at most 255 bytes.
bool ValidSegment(std::string_view name);
using cairn::HasC1Control;  // common/utf8.h
using cairn::ValidUtf8;

// A full ref name ("refs/heads/main", "refs/pr/1") by `git check-ref-format`'s rules, valid UTF-8 without C1
// controls, at most kMaxRefNameBytes.
inline constexpr size_t kMaxRefNameBytes = 255;
bool ValidRefName(std::string_view ref);
// A branch or tag name as the Hub API takes it ("main", "v1.0"): refs/heads/<name> (refs/tags/<name>) is
// ValidRefName, and it is not "HEAD", does not start with '-' or "refs/" and is not a 40-digit commit id.
bool ValidBranchOrTagName(std::string_view name, bool tag);

// ---- Commits
struct Signature {
  std::string name;   // no '<', '>' or newline
  std::string email;  // likewise
  int64_t time = 0;   // unix seconds, always written as +0000
};

struct Commit {
  ObjectId tree;
  std::vector<ObjectId> parents;
  Signature author;
  Signature committer;
  std::string message;        // title, then "\n\n" and the description when there is one
  std::string title() const;  // the message's first line
};

std::string EncodeCommit(const Commit& commit);
Result<Commit> ParseCommit(std::span<const uint8_t> body);

// ---- Git LFS pointers (https://github.com/git-lfs/git-lfs/blob/main/docs/spec.md)
struct LfsPointer {
  std::string sha256;  // 64 lowercase hex digits
  uint64_t size = 0;
};

std::string EncodeLfsPointer(const LfsPointer& pointer);
// The pointer a blob holds, or nullopt when the blob is not exactly a pointer cairn writes.
std::optional<LfsPointer> ParseLfsPointer(std::span<const uint8_t> body);
bool IsSha256Hex(std::string_view s);  // 64 lowercase hex digits

}  // namespace cairn::hub
