// The index's records of Hub repositories (hub/ gives them meaning): a repository's name and settings, the
// objects of its history (opaque bytes under a key: git objects by their 20-byte id, links from an LFS
// SHA-256 to a Xet file by the 32-byte digest), and its refs, which name objects. The index stores and
// compares these bytes; it parses none of them (schema 9's migration alone reads the links, kFileLinkKind).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "index/audit_records.h"
#include "xet/hash.h"

namespace cairn::index {

// Stored as its number: never renumber.
enum class RepoType : uint8_t { kModel = 0, kDataset = 1, kSpace = 2, kBucket = 3 };

struct RepoRecord {
  int64_t id = 0;  // never reused, even after the repository is deleted
  RepoType type = RepoType::kModel;
  std::string ns;  // namespace (user or organization)
  std::string name;
  bool is_private = false;
  int64_t created_at = 0;  // unix seconds
  // The CAS scope of the repository's files: chosen at random when it is created, kept across moves, never
  // the scope of another repository (even one created later under the same name). Write tokens carry it:
  // every upload made for the repository is visible to it, committed or not.
  std::string scope;
  // The CAS scope read tokens carry: it sees only the files the repository committed (the Hub shares each
  // into it as a commit or bucket batch names it). Replaced by a fresh one (RepoChange::read_scope) when the
  // repository goes private, so that no read token minted before still reads.
  std::string read_scope;
};

// The kind of a repository object that links an LFS SHA-256 (its key) to a Xet file (its data, 32 bytes).
inline constexpr uint8_t kFileLinkKind = 16;

// One object of a repository's history. Objects are immutable: a key names one value forever.
struct RepoObject {
  std::vector<uint8_t> key;  // 1 to 32 bytes
  uint8_t kind = 0;
  std::vector<uint8_t> data;
};

// A repository object as the garbage collector sees it: its key, its size, and since when marks have found it
// unreachable from the repository's refs (unix seconds; 0: it is not quarantined).
struct RepoObjectMark {
  std::vector<uint8_t> key;
  uint64_t size = 0;
  int64_t since = 0;
};

// What reviving one object found: none with that key, one that was not quarantined, or one a mark had
// quarantined and that is wanted again now.
enum class ObjectRevival : uint8_t { kAbsent, kPresent, kRevived };

// The start of one object and its whole size: what a reader that needs no more than a bound reads.
struct RepoObjectHead {
  uint8_t kind = 0;
  uint64_t size = 0;          // the whole object's
  std::vector<uint8_t> data;  // its first min(size, max_bytes) bytes
};

// Stored as its number: never renumber.
enum class RefKind : uint8_t { kBranch = 0, kTag = 1 };

struct Ref {
  RefKind kind = RefKind::kBranch;
  std::string name;
  std::vector<uint8_t> target;  // an object's key
};

// A change of one ref, applied only if the ref still has the value the change was computed from.
struct RefUpdate {
  RefKind kind = RefKind::kBranch;
  std::string name;
  std::optional<std::vector<uint8_t>> expected;    // the current target; nullopt: the ref must not exist
  std::optional<std::vector<uint8_t>> target;      // the new target; nullopt: delete the ref
  std::optional<AuditEvent> audit = std::nullopt;  // written with the update, when it is made
};

// A new repository and what it starts with, created together or not at all.
struct NewRepo {
  RepoType type = RepoType::kModel;
  std::string ns;
  std::string name;
  bool is_private = false;
  int64_t created_at = 0;
  std::string scope;
  std::string read_scope;
  std::vector<RepoObject> objects;
  std::vector<Ref> refs;
  std::optional<AuditEvent> audit = std::nullopt;  // written with the repository, when it is created
};

// A file of a bucket (non-git storage: paths name Xet files directly, and change in place).
struct BucketFile {
  std::string path;
  xet::FileHash file;  // all zeros for an empty file
  uint64_t size = 0;
  int64_t mtime_ms = 0;  // as the client gave it
  std::optional<std::string> content_type;
  int64_t uploaded_at = 0;  // unix seconds
};

// One change of a bucket: `put` stores the file at `path` (replacing what was there), nullopt deletes it.
struct BucketChange {
  std::string path;
  std::optional<BucketFile> put;
};

// The least string above every string that starts with `prefix`, for a range scan: `prefix` with its last
// byte incremented when that byte is ASCII below 0x7f (the bound stays valid UTF-8); nullopt otherwise, and
// then the scan has no upper bound and the caller filters what it reads.
inline std::optional<std::string> PrefixEnd(std::string_view prefix) {
  if (prefix.empty() || static_cast<unsigned char>(prefix.back()) >= 0x7f) return std::nullopt;
  std::string end(prefix);
  end.back() = static_cast<char>(end.back() + 1);
  return end;
}

struct BucketTotals {
  uint64_t files = 0;
  uint64_t bytes = 0;
};

// Settings to change; an absent member stays as it is.
struct RepoChange {
  std::optional<bool> is_private;
  std::optional<std::string> ns;  // with name: a move
  std::optional<std::string> name;
  // A new read scope (a scope no repository had): every file visible to the old one, and its totals, move to
  // it in the same transaction, so the old scope sees nothing from then on.
  std::optional<std::string> read_scope;
  std::optional<AuditEvent> audit = std::nullopt;  // written with the change, when it is made
};

}  // namespace cairn::index
