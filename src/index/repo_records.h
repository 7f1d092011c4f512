// The index's records of Hub repositories (hub/ gives them meaning): a repository's name and settings, the
// objects of its history (opaque bytes under a key: git objects by their 20-byte id, links from an LFS
// SHA-256 to a Xet file by the 32-byte digest), and its refs, which name objects. The index stores and
// compares these bytes; it parses none of them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

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
  // the scope of another repository (even one created later under the same name).
  std::string scope;
};

// One object of a repository's history. Objects are immutable: a key names one value forever.
struct RepoObject {
  std::vector<uint8_t> key;  // 1 to 32 bytes
  uint8_t kind = 0;
  std::vector<uint8_t> data;
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
  std::optional<std::vector<uint8_t>> expected;  // the current target; nullopt: the ref must not exist
  std::optional<std::vector<uint8_t>> target;    // the new target; nullopt: delete the ref
};

// A new repository and what it starts with, created together or not at all.
struct NewRepo {
  RepoType type = RepoType::kModel;
  std::string ns;
  std::string name;
  bool is_private = false;
  int64_t created_at = 0;
  std::string scope;
  std::vector<RepoObject> objects;
  std::vector<Ref> refs;
};

// Settings to change; an absent member stays as it is.
struct RepoChange {
  std::optional<bool> is_private;
  std::optional<std::string> ns;  // with name: a move
  std::optional<std::string> name;
};

}  // namespace cairn::index
