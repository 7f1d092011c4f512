#include "files/file_service.h"

#include <algorithm>
#include <iostream>

#include "xet/hashing.h"

namespace cairn::files {

namespace {
constexpr std::string_view kRepoLinkPurpose = "cairn repository file links";
}  // namespace

FileService::FileService(cas::CasService& cas, index::CasIndex& index, FileServiceOptions options)
    : cas_(cas),
      index_(index),
      options_(std::move(options)),
      links_(std::make_shared<const LinkSigner>(options_.url_keys, options_.max_link_ttl_seconds,
                                                *options_.clock)),
      repo_links_(std::make_shared<const LinkSigner>(options_.url_keys, options_.max_link_ttl_seconds,
                                                     *options_.clock, kRepoLinkPurpose)),
      budget_(options_.total_read_ahead_bytes),
      fetchers_(std::max<size_t>(1, options_.fetch_threads), 1 << 16),
      context_{cas_, fetchers_, budget_, [this](const std::string& message) {
                 corrupt_chunks_.fetch_add(1);
                 if (options_.log) {
                   options_.log(message);
                 } else {
                   std::cerr << "cairn: serving a file: " << message << "\n";
                 }
               }} {}

FileService::~FileService() = default;

std::shared_ptr<const LinkSigner> FileService::links() const {
  std::lock_guard lock(links_mu_);
  return links_;
}

std::shared_ptr<const LinkSigner> FileService::repo_links() const {
  std::lock_guard lock(links_mu_);
  return repo_links_;
}

void FileService::SetUrlKeys(const cas::UrlKeys& keys) {
  auto next = std::make_shared<const LinkSigner>(keys, options_.max_link_ttl_seconds, *options_.clock);
  auto next_repo = std::make_shared<const LinkSigner>(keys, options_.max_link_ttl_seconds, *options_.clock,
                                                      kRepoLinkPurpose);
  std::lock_guard lock(links_mu_);
  links_ = std::move(next);
  repo_links_ = std::move(next_repo);
}

Result<StoredFile> FileService::Find(const xet::FileHash& hash, const std::string& scope) {
  auto terms = cas_.VisibleTerms(hash, scope);
  if (!terms) return terms.error();
  const uint64_t size = (*terms)->empty() ? 0 : (*terms)->back().end_offset;
  return StoredFile{hash, size, std::move(*terms)};
}

Result<StoredFile> FileService::FindBySha256(const xet::Hash& sha256, const std::string& scope) {
  auto hash = index_.FileBySha256(sha256, scope);
  if (!hash) return hash.error();
  if (!*hash) return NotFound("no file with SHA-256 " + sha256.hex() + " is stored");
  return Find(**hash, scope);
}

Result<std::shared_ptr<const index::FileEntry>> FileService::VisibleBySha256(const xet::Hash& sha256,
                                                                             const std::string& scope) {
  auto hash = index_.FileBySha256(sha256, scope);
  if (!hash) return hash.error();
  if (!*hash) return std::shared_ptr<const index::FileEntry>();
  return index_.GetVisibleFile(**hash, scope);
}

Result<std::shared_ptr<const index::FileEntry>> FileService::VisibleEntry(const xet::FileHash& hash,
                                                                          const std::string& scope) {
  return index_.GetVisibleFile(hash, scope);
}

Status FileService::Share(std::vector<xet::FileHash> files, const std::string& scope,
                          const index::QuotaCharge* charge) {
  std::sort(files.begin(), files.end());
  files.erase(std::unique(files.begin(), files.end()), files.end());
  for (size_t i = 0; i < files.size(); i += index::CasIndex::kMaxSharedFiles) {
    const size_t n = std::min(files.size() - i, index::CasIndex::kMaxSharedFiles);
    if (auto st = index_.ShareFiles(std::span(files).subspan(i, n), scope, i == 0 ? charge : nullptr); !st)
      return st;
  }
  return Ok{};
}

Result<std::unique_ptr<FileReader>> FileService::Open(const StoredFile& file, uint64_t offset,
                                                      uint64_t length) {
  return FileReader::Open(context_, file.terms, offset, length, options_.read_ahead);
}

Result<bool> FileService::Unregister(const xet::FileHash& hash, const std::string& scope) {
  return cas_.Unregister(hash, scope);
}

Result<FileListing> FileService::List(const std::string& scope, std::optional<xet::FileHash> cursor,
                                      size_t limit) {
  // One more than asked tells whether another page follows.
  auto files = index_.ListFiles(scope, cursor, limit + 1);
  if (!files) return files.error();
  FileListing out;
  if (files->size() > limit) {
    files->resize(limit);
    out.next = files->back().hash;
  }
  out.files = std::move(*files);
  if (!cursor) {
    auto totals = index_.ScopeStats(scope);
    if (!totals) return totals.error();
    out.totals = *totals;
    auto stats = index_.Stats();
    if (!stats) return stats.error();
    out.dedup_ratio = stats->dedup_ratio();
  }
  return out;
}

}  // namespace cairn::files
