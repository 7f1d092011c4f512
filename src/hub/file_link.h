// A repository's link from a large file's LFS SHA-256 to the Xet file holding its bytes: what makes an LFS
// pointer blob of the repository's history one of its large files (a pointer without a link is a small file
// that reads like one, unless the repository is a mirror's).
//
// The record, in the index, is one repository object: the SHA-256's 32 bytes as its key, index::kFileLinkKind
// as its kind, the Xet file's 32-byte hash as its data. A push, a commit, a mirror's fetch and a bundle's
// import write it (a key names one file for good); path info and downloads, the history walk, list_lfs_files,
// purge, the collector's mark, export and the mirror read it. This type alone writes and parses it.
//
// Failures: Parse answers nullopt for an object that is not a whole link (another kind, a key or data of
// another size), which its callers treat as absent or as damage, each as it says. Pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "index/repo_records.h"
#include "xet/hash.h"

namespace cairn::hub {

struct FileLink {
  std::string sha256;  // the large file's LFS SHA-256: 64 lowercase hex digits (IsSha256Hex)
  xet::FileHash file;  // the Xet file of its bytes

  // The kind of every link object, to list a repository's links by.
  static constexpr uint8_t kKind = index::kFileLinkKind;

  // The index key of the link of `sha256_hex` (its 32 bytes), which must be IsSha256Hex.
  static std::vector<uint8_t> Key(std::string_view sha256_hex);
  // Whether `object` is stored as a link (its kind), whole or damaged: any other object is a git object.
  static bool IsLink(const index::RepoObject& object) { return object.kind == kKind; }
  // The link `object` records; nullopt when it is not a whole one.
  static std::optional<FileLink> Parse(const index::RepoObject& object);
  // The file a link-kind object names, whatever its key: the collector's mark, which keeps what a damaged
  // link may still name rather than free it (nullopt: not a link, or data that is no file hash).
  static std::optional<xet::FileHash> FileNamed(const index::RepoObject& object);

  // The record to store; `sha256` must be IsSha256Hex.
  index::RepoObject ToObject() const;

  bool operator==(const FileLink&) const = default;
};

}  // namespace cairn::hub
