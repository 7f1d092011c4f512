// Plain files: what GET /v1/files serves, without HTTP. Finds a stored file for a scope (by its Xet file hash
// or the SHA-256 of its bytes), opens verified readers of its byte ranges (file_reader.h) that share one
// fetch pool and one server-wide read-ahead budget, and signs and checks download links (file_link.h).
//
// Thread-safety: every method may be called concurrently. Readers are used by one thread each.
// Ownership: the service owns its fetch threads and budget; it must outlive every reader it opened.
// Failures: kNotFound for a file unknown to the scope (alike when it exists for another scope), and
// the index's and store's errors.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cas/service.h"
#include "common/clock.h"
#include "common/error.h"
#include "common/work_queue.h"
#include "files/byte_budget.h"
#include "files/file_link.h"
#include "files/file_reader.h"
#include "index/index.h"

namespace cairn::files {

struct FileServiceOptions {
  ReadAheadOptions read_ahead;
  uint64_t total_read_ahead_bytes = 1ULL << 30;  // what all plain downloads together hold ahead, at most
  size_t fetch_threads = 8;                      // store reads in flight for read-ahead, at most
  cas::UrlKeys url_keys =
      cas::UrlKeys::Single(xet::Hash{});  // the server's; links use keys derived from them
  uint64_t max_link_ttl_seconds = 30ULL * 86400;
  const Clock* clock = &Clock::System();  // link expiries; tests move a TestClock (outlives the service)
  std::function<void(const std::string&)> log =
      nullptr;  // where corrupt chunks are reported (stderr when empty)
};

// A stored file as the scope that asked sees it.
struct StoredFile {
  xet::FileHash hash;
  uint64_t size = 0;
  std::shared_ptr<const std::vector<cas::FileTermRef>> terms;
};

// A page of a scope's listing, and (on the first page) what the scope and the server hold.
struct FileListing {
  std::vector<index::ListedFile> files;
  std::optional<xet::FileHash> next;  // the cursor of the next page; none after the last
  std::optional<index::ScopeTotals> totals;
  double dedup_ratio = 0;  // server-wide: logical bytes per stored unpacked byte (first page only)
};

class FileService {
 public:
  FileService(cas::CasService& cas, index::CasIndex& index, FileServiceOptions options);
  ~FileService();
  FileService(const FileService&) = delete;
  FileService& operator=(const FileService&) = delete;

  Result<StoredFile> Find(const xet::FileHash& hash, const std::string& scope);
  Result<StoredFile> FindBySha256(const xet::Hash& sha256, const std::string& scope);
  // A verified reader of [offset, offset + length) of `file` (length > 0).
  Result<std::unique_ptr<FileReader>> Open(const StoredFile& file, uint64_t offset, uint64_t length);

  // The files `scope` sees in hash order after `cursor` (the first page when empty), at most `limit`.
  Result<FileListing> List(const std::string& scope, std::optional<xet::FileHash> cursor, size_t limit);
  // What the files `scope` sees add up to (each file once).
  Result<index::ScopeTotals> Totals(const std::string& scope) { return index_.ScopeStats(scope); }
  // Takes the file out of `scope`'s view (DELETE /v1/files): false when `scope` did not see it. What the
  // file's bytes are stored in stays, and a rebuild does not give the file back
  // (cas::CasService::Unregister). Callers keep repositories' scopes out: their files go with commits and
  // deletions (the Hub's).
  Result<bool> Unregister(const xet::FileHash& hash, const std::string& scope);

  // ---- For the Hub and buckets, which reach files through this service, never through the index's CAS
  // slice. The record of the file `scope` sees with this SHA-256 (as shards store it); nullptr when there is
  // none.
  Result<std::shared_ptr<const index::FileEntry>> VisibleBySha256(const xet::Hash& sha256,
                                                                  const std::string& scope);
  // The record of a file `scope` sees: kNotFound alike when it is unknown and when `scope` does not see it.
  Result<std::shared_ptr<const index::FileEntry>> VisibleEntry(const xet::FileHash& hash,
                                                               const std::string& scope);
  // Makes `files` (repeats allowed) visible to `scope` too: each batch of index::CasIndex::kMaxSharedFiles
  // all or nothing; kNotFound when one is unknown.
  // With `charge`, the first transaction also charges a namespace's quota (index::QuotaCharge).
  Status Share(std::vector<xet::FileHash> files, const std::string& scope,
               const index::QuotaCharge* charge = nullptr);

  // The link signer of the current URL keys.
  std::shared_ptr<const LinkSigner> links() const;
  // The signer of links to a repository's file at a commit, which the pages hand to browsers
  // (hub/download_link.h): keys of their own, derived from the same URL keys, rotated with them.
  std::shared_ptr<const LinkSigner> repo_links() const;
  // Signs links with keys.current() from now on and accepts links of every key in `keys` only (a rotation).
  void SetUrlKeys(const cas::UrlKeys& keys);

  uint64_t corrupt_chunks() const { return corrupt_chunks_.load(); }
  const ByteBudget& budget() const { return budget_; }
  const FileServiceOptions& options() const { return options_; }

 private:
  cas::CasService& cas_;
  index::CasIndex& index_;
  FileServiceOptions options_;
  mutable std::mutex links_mu_;
  std::shared_ptr<const LinkSigner> links_;       // guarded by links_mu_
  std::shared_ptr<const LinkSigner> repo_links_;  // guarded by links_mu_
  std::atomic<uint64_t> corrupt_chunks_{0};
  ByteBudget budget_;
  WorkQueue fetchers_;  // after the budget: its threads are joined first
  ReaderContext context_;
};

}  // namespace cairn::files
