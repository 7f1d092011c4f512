// Where backups are kept: a directory, or a bucket of an S3-compatible store (with a key prefix). The same
// layout in both:
//     objects/                        a blob store: xorbs, shards and grants, as the deployment stores them
//     snapshots/NAME/index.sqlite     the index at one moment (a directory: one file; a bucket: its parts,
//                                     index.sqlite.000000, .000001 … of `index_part_bytes` each, in order)
//     snapshots/NAME/manifest         written last: a snapshot is complete once its manifest is there
//     LATEST                          the name of the newest complete snapshot
//     .lock (a directory) / lock (a bucket)    one backup at a time
//
// A bucket has no rename: a snapshot's parts go up first and its manifest last, so a snapshot without a
// manifest is unfinished (the next backup drops it). Objects of a bucket are durable once their PUT is
// answered; files of a directory are synced (and their directory) before a step counts as done.
//
// Thread-safety: a BackupSpace is used by one thread at a time; objects() is a BlobStore (thread-safe).
// Ownership: the space owns its objects store. Failures: kNotFound for a snapshot or LATEST that is not
// there, kUnavailable for a space another backup holds, kIo / kUnavailable from the disk or the store.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"
#include "store/blob_store.h"
#include "store/open_store.h"

namespace cairn::backup {

// Holds a space for one backup; released when destroyed (or when the process ends: a directory's lock is a
// file lock; a bucket's a lease the holder renews, taken over once it is `kLeaseSeconds` old).
class SpaceHold {
 public:
  virtual ~SpaceHold() = default;
};

class BackupSpace {
 public:
  virtual ~BackupSpace() = default;
  virtual std::string Describe() const = 0;
  virtual store::BlobStore& objects() = 0;

  // Refuses (kUnavailable) while another backup holds the space.
  virtual Result<std::unique_ptr<SpaceHold>> Hold() = 0;

  // The complete snapshots, oldest first (names sort by time).
  virtual Result<std::vector<std::string>> Snapshots() = 0;
  // Whether anything (complete or not) is kept under `name`.
  virtual Result<bool> Taken(const std::string& name) = 0;
  virtual Result<std::string> Latest() = 0;
  virtual Status SetLatest(const std::string& name) = 0;
  // A snapshot's manifest text (bounded).
  virtual Result<std::string> ReadManifest(const std::string& name) = 0;
  // A local file holding the snapshot's index: in place (a directory), or fetched into `scratch` (a bucket).
  // Not checked against the manifest here.
  virtual Result<std::filesystem::path> IndexFile(const std::string& name,
                                                  const std::filesystem::path& scratch) = 0;

  // Begins snapshot `name`: where to write its index file (in the space, or in `scratch`).
  virtual Result<std::filesystem::path> Begin(const std::string& name,
                                              const std::filesystem::path& scratch) = 0;
  // Completes it: the index file Begin named (written and closed) and `manifest` kept durably; the snapshot
  // is listed by Snapshots once this returns, never before.
  virtual Status Complete(const std::string& name, const std::filesystem::path& index_file,
                          std::string_view manifest) = 0;
  // Drops a complete snapshot (its manifest first: it is never listed half gone).
  virtual Status Drop(const std::string& name) = 0;
  // Drops what unfinished snapshots left.
  virtual Status DropUnfinished() = 0;
};

struct SpaceOptions {
  store::OpenStoreOptions s3;  // connection settings for s3:// (the bucket comes from the location)
  bool create = false;         // a directory is created (0700: a backup holds the signing keys)
  size_t index_part_bytes =
      64ULL << 20;  // a bucket: the size of an index file's parts (the last may be less)
};

// Opens the space at `where`: a directory path (or file:PATH), or s3://BUCKET[/PREFIX].
Result<std::unique_ptr<BackupSpace>> OpenBackupSpace(std::string_view where, const SpaceOptions& options);

// Files of a directory space, written as a backup writes them (also a bundle's: bundle/bundle.h).
// Replaces `path` with `text` durably: a temporary beside it, synced, renamed, the directory synced.
Status WriteFileDurably(const std::filesystem::path& path, std::string_view text);
// Syncs a file or a directory (opened read-only).
Status SyncPath(const std::filesystem::path& path);
// A file's bytes, at most `max_bytes` (kMalformed past that, kNotFound when there is no such file).
Result<std::string> ReadFileBounded(const std::filesystem::path& path, size_t max_bytes);

// Snapshot names are what a backup gives them (a UTC time, maybe with "-N"): nothing that could leave
// snapshots/ or make an odd key.
bool ValidSnapshotName(std::string_view name);

// A lease on a bucket this old (its holder renews it each minute) belongs to a backup that died.
inline constexpr int64_t kLeaseSeconds = 300;

}  // namespace cairn::backup
