// Air-gapped transfer (`cairn export`, `cairn import`; docs/mirror.md): one repository at one or more of its
// revisions, written by one cairn into a self-describing directory and loaded by another, checked, so that a
// site with no connection can be seeded from one that has.
//
// A bundle (docs/formats.md, "Bundles"):
//     DEST/objects/xorbs/…, shards/…   the local-disk store's layout, as a backup's objects: the xorbs of the
//                                      large files, and shards that describe those files (ordinary shards,
//                                      in the stock client's upload form)
//     DEST/history.pack                the repository's git history (commits, trees, small files, LFS
//                                      pointers): a git pack, as upload-pack sends one
//     DEST/manifest                    written last: what the bundle holds, with sizes and hashes
//
// Export reads the index and the store (a server may run meanwhile) and refuses a repository whose history
// is incomplete, or whose exported revisions name a large file the server does not hold (a mirrored
// repository's files come when first read: `cairn mirror prefetch` them first). Import checks everything it
// can before it stores anything — the manifest, the pack (read as a push is, its BLAKE3 and git's SHA-1),
// that the history is complete, that every large file of the revisions is in a shard with the pointer's
// size, and the bytes: each such file rebuilt from the xorbs (validated against their hashes) per its
// shard's terms, its file hash, SHA-256 and size computed and compared with its link's and its pointer's (a
// shard's claimed SHA-256 is not trusted; a shard describing a file the bundle does not link is refused)
// — then stores the xorbs (each validated against its hash, as an upload), registers the shards
// (each file verified against the stored xorbs, as an upload), and creates the repository with its history,
// links and refs in one transaction. A bundle refused at the last steps leaves no repository; xorbs or files
// it stored before then are referenced by nothing and freed by the collector.
//
// Thread-safety: each call runs on the caller's thread. Ownership: borrows what it is given. Failures:
// kConflict when the importing server holds a repository of that name, kNotFound for a repository or
// revision export does not find, kMalformed / kHashMismatch for a bundle that is not what its manifest says,
// kIo from the disk, the index's and the store's errors.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cas/service.h"
#include "common/error.h"
#include "files/file_service.h"
#include "hub/hub_service.h"
#include "index/index.h"
#include "store/blob_store.h"

namespace cairn::bundle {

// DEST/manifest: text, one field a line, every line ended by a newline (docs/formats.md).
struct Manifest {
  hub::RepoId repo;
  bool mirrored = false;  // a copy of an upstream Hub's repository (hub::IsMirrored) at the exporting server
  bool is_private = false;
  int64_t exported_at = 0;  // unix seconds
  struct Ref {
    index::RefKind kind = index::RefKind::kBranch;
    std::string name;
    hub::ObjectId target;
  };
  std::vector<Ref> refs;
  uint64_t pack_bytes = 0;
  std::string pack_blake3;  // 64 hex digits
  uint64_t objects = 0;     // in the pack
  struct Link {
    std::string sha256;  // the LFS pointer's oid
    xet::FileHash file;
  };
  std::vector<Link> links;  // the large files the bundle holds
  struct Blob {
    xet::Hash hash;
    uint64_t bytes = 0;
  };
  std::vector<Blob> xorbs, shards;

  std::string Encode() const;
};
// kMalformed for anything Encode did not produce (bounded by `text`).
Result<Manifest> ParseManifest(std::string_view text);
inline constexpr uint64_t kMaxManifestBytes = 256ULL << 20;

using Progress = std::function<void(std::string_view what, uint64_t done, uint64_t total)>;

struct ExportOptions {
  // A branch or tag (exported under its name), or a commit id (exported as `default_branch`); empty: every
  // branch and tag.
  std::string revision;
  std::string default_branch = "main";
  int64_t now = 0;    // unix seconds, for the manifest
  Progress progress;  // may be empty
};

struct ExportReport {
  Manifest manifest;
  uint64_t xorb_bytes = 0;
  uint64_t shard_bytes = 0;
};

// Writes the bundle of repository `id` into `dest` (created; an existing directory must be empty).
Result<ExportReport> Export(index::Index& index, store::BlobStore& store, const hub::RepoId& id,
                            const std::filesystem::path& dest, const ExportOptions& options);

struct ImportOptions {
  std::optional<hub::RepoId> as;  // the name to import under (default: the manifest's)
  int64_t now = 0;                // unix seconds: the repository's creation time
  Progress progress;              // may be empty
};

struct ImportReport {
  Manifest manifest;
  hub::RepoId repo;  // as imported
  // Mirrored here too: the bundle's repository was, and it keeps its name (under another name it is a
  // repository of this server's own).
  bool mirrored = false;
  uint64_t new_xorbs = 0;  // xorbs this server did not hold
  uint64_t xorb_bytes = 0;
};

// Loads the bundle at `src` into this server as a new repository (mirrored when the exported one was and it
// keeps its name: it is refreshed from this server's upstream when it can reach one).
Result<ImportReport> Import(index::Index& index, cas::CasService& cas, files::FileService& files,
                            const std::filesystem::path& src, const ImportOptions& options);

}  // namespace cairn::bundle
