// Online backup and restore (`cairn backup`, `cairn restore`): the index at one moment and every stored
// object it names, bytes included, taken while servers take uploads and the collector runs, and brought up
// again under another deployment's settings (SQLite or PostgreSQL, local disk or S3, either way).
//
// A backup is kept in a directory or an S3 bucket (space.h has the layout): a blob store of objects, and
// snapshots, each an index file (SQLite, whatever the source) and a manifest.
//
// Taking one:
//  1. holds deletions off, shared (index.h HoldDeletions): from then on no collector deletes a stored byte
//     until the backup ends, so every object the snapshot names stays readable while it is copied;
//  2. copies the index into a new snapshot inside one read transaction (index_copy.h, snapshot mode), so
//     the snapshot is the index at one moment; a xorb or shard a sweep had claimed before it is left out
//     (its bytes may be gone; the collector of a restored deployment finishes that sweep);
//  3. copies every xorb, shard and grant the snapshot names that no earlier snapshot of DEST named
//     (incremental: content-addressed objects never change), each verified against its hash at the source;
//  4. keeps the index file and then the manifest (the snapshot is complete), points LATEST at it; then
//     drops snapshots beyond `keep` and the objects none of the kept ones name.
// Revocations (cas/grant.h) are not copied: a restore writes them from the snapshot's rows, which say the
// same. A backup killed at any point leaves the earlier snapshots whole; the next run starts afresh.
//
// Thread-safety: each function uses `threads` threads of its own; one backup at a time per space
// (BackupSpace::Hold; a second one is refused). The source's servers may run meanwhile. A backup to a
// bucket, and a restore or verify from one, fetch index files into a scratch directory (`scratch`, else
// TMPDIR): room for two snapshots' index files.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "backup/space.h"
#include "common/clock.h"
#include "common/error.h"
#include "index/index_copy.h"
#include "store/blob_store.h"

namespace cairn::backup {

// What a snapshot holds (DEST/snapshots/NAME/manifest).
struct Manifest {
  std::string name;
  int64_t taken_at = 0;  // unix seconds
  int schema = 0;        // the index's schema version
  uint64_t index_bytes = 0;
  std::string index_blake3;  // hex, of index.sqlite
  uint64_t xorbs = 0, xorb_bytes = 0;
  uint64_t shards = 0, shard_bytes = 0;
  uint64_t grants = 0;
  std::vector<index::TableCopyReport> tables;  // rows and digests, as the copy verified them

  std::string Encode() const;
};
// kMalformed for anything Encode did not produce (bounded by `text`).
Result<Manifest> ParseManifest(std::string_view text);

struct BackupOptions {
  size_t threads = 4;
  size_t keep = 2;                // complete snapshots kept (at least 1)
  std::filesystem::path scratch;  // empty: TMPDIR
  const Clock* clock = &Clock::System();
  // Tests: called after each step ("held", "snapshot", "copied", "complete"); an error ends the backup there,
  // as a kill would.
  std::function<Status(std::string_view step)> hook;
  std::function<void(std::string_view what, uint64_t done, uint64_t total)> progress;  // may be empty
};

struct ObjectCounts {
  uint64_t named = 0;   // by the snapshot
  uint64_t copied = 0;  // by this run
  uint64_t already =
      0;  // held by the backup already (an earlier snapshot named it, or an earlier run copied it)
  uint64_t bytes_copied = 0;
};

struct BackupReport {
  Manifest manifest;
  double waited_seconds = 0;  // for a collector's deletions to end before the snapshot
  double seconds = 0;
  ObjectCounts xorbs, shards, grants;
  uint64_t dropped_snapshots = 0;
  uint64_t pruned_objects = 0;  // named by no kept snapshot, deleted from the backup
};

// Backs up the index at `index_url` and its `store` into `dest`.
Result<BackupReport> TakeBackup(std::string_view index_url, store::BlobStore& store, BackupSpace& dest,
                                const BackupOptions& options);

struct VerifyReport {
  std::vector<std::string> snapshots;  // checked: each index file against its manifest
  uint64_t objects = 0;                // read and hashed (each once, whichever snapshots name it)
  uint64_t bytes = 0;
  std::vector<std::string> failed;  // "what: why"
  bool ok() const { return failed.empty(); }
};

// Re-hashes what `space` holds: every kept snapshot's index file, and every object they name.
Result<VerifyReport> VerifyBackup(BackupSpace& space, size_t threads);

struct RestoreOptions {
  std::string snapshot;  // empty: LATEST
  // The destination index may hold an interrupted restore of this same snapshot (else it must be empty).
  bool resume = false;
  size_t threads = 4;
  std::filesystem::path scratch;                                                       // empty: TMPDIR
  std::function<void(std::string_view what, uint64_t done, uint64_t total)> progress;  // may be empty
};

struct RestoreReport {
  Manifest manifest;
  ObjectCounts xorbs, shards, grants;
  uint64_t revocations = 0;
  index::CopyReport index;
  double seconds = 0;
};

// Restores the snapshot from the backup in `src` into the index at `index_url` and the store `store`
// (objects first, then the index, which names them; checked throughout). Refuses a destination index that
// holds anything unless `resume`.
Result<RestoreReport> Restore(BackupSpace& src, std::string_view index_url, store::BlobStore& store,
                              const RestoreOptions& options);

}  // namespace cairn::backup
