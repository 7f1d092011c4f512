// Buckets: huggingface_hub's non-git storage (create_bucket, hf buckets, hf sync). A bucket is a repository
// of type kBucket whose paths name Xet files directly and change in place: no commits, no history. Files
// reach a bucket through hf_xet uploads made with the bucket's write token (its own CAS scope, as for
// repositories), then a batch that adds them by Xet hash; sizes come from the files the uploads registered,
// never from the client.
//
// Access is as for repositories (hub_service.h): public buckets are readable by anyone, private ones only by
// a scope that covers them, and to anybody else they do not exist (kNotFound).
//
// Thread-safety: every method may be called concurrently; a batch is applied in one index transaction.
// Ownership: borrows the index, which must outlive it. Opening a bucket for a caller (visibility, write
// access) is HubService::Open's, as for any repository.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "hub/hub_service.h"

namespace cairn::hub {

// One line of a batch.
struct BucketOp {
  enum class Kind { kAdd, kCopy, kDelete } kind = Kind::kAdd;
  std::string path;
  std::optional<xet::FileHash> file;  // kAdd, kCopy
  int64_t mtime_ms = 0;
  std::optional<std::string> content_type;
  std::optional<RepoId> source;  // kCopy: where the file is
};

struct BucketOpFailure {
  std::string path;
  std::string error;
};

struct BucketEntry {
  std::string path;
  bool is_dir = false;
  index::BucketFile file;  // files only
};

struct BucketPage {
  std::vector<BucketEntry> entries;
  std::optional<std::string> next;  // the cursor of the next page
};

class BucketService {
 public:
  // `clock` and `quota` (null: no quotas; batches are admitted by it) must outlive the service.
  BucketService(index::RepoIndex& index, files::FileService& files, const Clock& clock = Clock::System(),
                quota::QuotaService* quota = nullptr);

  Result<index::BucketTotals> Totals(const Repo& bucket);
  // The entries under `prefix` ("" for all; a file's path gives that file), after `cursor`: every file when
  // `recursive`, else the files and folders one level down. At most `limit` entries a page.
  Result<BucketPage> List(const Repo& bucket, std::string prefix, bool recursive,
                          const std::optional<std::string>& cursor, size_t limit);
  // The files among `paths` (folders and missing paths are left out).
  Result<std::vector<index::BucketFile>> Stat(const Repo& bucket, const std::vector<std::string>& paths);
  Result<index::BucketFile> StatOne(const Repo& bucket, const std::string& path);
  // Applies the operations that can be applied, in one transaction; returns the ones that cannot (a file not
  // uploaded for this bucket, a bad path). A copy from another bucket or repository needs the file lent to
  // this bucket first (HubService::ShareLarge); then it is an add. The batch is in the audit log as
  // `caller`'s (bucket.batch), in its transaction.
  Result<std::vector<BucketOpFailure>> Apply(const Caller& caller, const Repo& bucket,
                                             const std::vector<BucketOp>& ops);

  static constexpr size_t kMaxOps = 1000;

 private:
  int64_t Now() const;

  index::RepoIndex& index_;
  files::FileService& files_;  // files are reached through it, never through the index's CAS slice
  const Clock& clock_;
  quota::QuotaService* quota_;
};

}  // namespace cairn::hub
