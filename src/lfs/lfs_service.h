// git-lfs uploads (docs/git.md): the objects a batch request announces are received through signed upload
// links, whole (git-lfs's and huggingface_hub's `basic` transfer) or in parts (huggingface_hub's
// `multipart`), and made Xet files by FileIngest: chunked, deduplicated, stored as xorbs and registered with
// their SHA-256 for the repository's scope, where a commit naming the SHA-256 (an LFS pointer, an `lfsFile`
// line) finds them.
//
// An upload link is a capability like a download link (files/file_link.h), signed with keys of its own
// purpose: it grants storing the one object it names (its SHA-256 and size) for one scope until it expires,
// never longer than the token that asked for it lives (the caller bounds `ttl`). Its parts wait in
// `staging_dir`, each written and synced before its ETag is answered; parts of uploads whose links expired
// are removed at the next plan.
//
// Thread-safety: every method may be called concurrently. `cas` and `index` must outlive the service.
// Failures: kMalformed for a bad object id or part list, kDenied for a link that does not check, kNotFound
// for a part never received, kIo for the staging directory, and the ingest's and CAS's errors.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cas/service.h"
#include "common/clock.h"
#include "files/file_link.h"
#include "index/index.h"
#include "lfs/file_ingest.h"

namespace cairn::lfs {

struct LfsOptions {
  std::string public_url = "http://127.0.0.1:8080";  // base of the links
  cas::UrlKeys url_keys = cas::UrlKeys::Single(xet::Hash{});
  uint64_t max_link_ttl_seconds = 3600;
  // A client offering `multipart` sends objects larger than this in parts of this size.
  uint64_t part_bytes = 64ULL << 20;
  uint64_t max_object_bytes = 1ULL << 40;  // larger objects are refused in the batch answer
  std::filesystem::path staging_dir;       // multipart parts; created when needed
  const Clock* clock = &Clock::System();
};

// What a checked upload link grants.
struct UploadGrant {
  std::string oid;  // the SHA-256, lower-case hex
  uint64_t size = 0;
  std::string scope;
  std::string upload;  // names the upload whose parts belong together
  uint64_t expires = 0;
};

// One object's upload action, as git-lfs's batch answer carries it.
struct UploadAction {
  std::string href;  // PUT the bytes (basic) / POST the parts (multipart)
  std::vector<std::pair<std::string, std::string>> header;  // multipart: chunk_size and the part URLs
  std::string verify_href;                                  // POST {oid, size}
  uint64_t expires_in = 0;
};

// A part being received into the staging directory.
class PartWriter {
 public:
  virtual ~PartWriter() = default;
  virtual Status Write(std::span<const uint8_t> data) = 0;
  // Synced and in place; returns the part's ETag.
  virtual Result<std::string> Finish() = 0;
};

class LfsService {
 public:
  LfsService(cas::CasService& cas, index::CasIndex& index, LfsOptions options);

  // The stored file `scope` sees with this SHA-256 and size, if any.
  Result<std::optional<xet::FileHash>> Stored(const std::string& scope, std::string_view oid, uint64_t size);
  // The links to upload `oid` for `scope`, valid `ttl_seconds` (at most max_link_ttl_seconds); in parts
  // when `multipart` is offered and the object is larger than part_bytes.
  Result<UploadAction> PlanUpload(const std::string& scope, std::string_view oid, uint64_t size,
                                  uint64_t ttl_seconds, bool multipart);
  // Checks an upload link's query for object `oid`.
  Result<UploadGrant> Check(std::string_view oid,
                            const std::vector<std::pair<std::string, std::string>>& query) const;

  // basic: the whole object, streamed into an ingest.
  Result<std::unique_ptr<FileIngest>> BeginUpload(const UploadGrant& grant);
  // multipart: part `number` (from 1), of exactly the size the plan gave it.
  Result<std::unique_ptr<PartWriter>> BeginPart(const UploadGrant& grant, uint32_t number);
  // All parts in order, each with the ETag its PUT answered: ingested, then the parts removed.
  Result<Ingested> CompleteParts(const UploadGrant& grant,
                                 const std::vector<std::pair<uint32_t, std::string>>& parts);

  void SetUrlKeys(const cas::UrlKeys& keys);
  uint64_t part_bytes() const { return options_.part_bytes; }
  uint64_t max_link_ttl_seconds() const { return options_.max_link_ttl_seconds; }

 private:
  std::shared_ptr<const files::LinkSigner> Signer() const;
  std::filesystem::path UploadDir(const UploadGrant& grant) const;
  uint64_t PartSize(const UploadGrant& grant, uint32_t number) const;
  uint32_t PartCount(uint64_t size) const;
  void RemoveExpiredStaging();

  cas::CasService& cas_;
  index::CasIndex& index_;
  LfsOptions options_;
  mutable std::mutex mu_;
  std::shared_ptr<const files::LinkSigner> signer_;  // guarded by mu_
  int64_t last_cleanup_ = 0;                         // guarded by mu_
};

}  // namespace cairn::lfs
