// A BlobStore on a local file system (see blob_store.h for the contract every store keeps).
//
// Layout: <root>/xorbs/ab/cd/<hex> and <root>/shards/ab/cd/<hex>, where <hex> is the Xet hex form of the
// hash and ab, cd its first four digits (two levels of 256 keep directories small at hundreds of millions
// of blobs).
//
// How a put becomes durable and atomic: the bytes go to a temporary file in the blob's final directory
// (an unnamed O_TMPFILE when the file system supports it, else ".tmp.<hex>.<unique>"), the file is
// fsynced, linked or renamed to its final name, and the directory is fsynced (and, the first time this
// process uses a directory, its parents too, so freshly created directories are durable). Only then does
// Commit return. Named temporary files a crash left behind are removed by Open.
//
// Thread-safety: as BlobStore. Several processes must not share a root (Open removes temporary files that
// another process may be writing).
#pragma once

#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_set>

#include "store/blob_store.h"

namespace cairn::store {

// The steps of a put where a fault can be injected (tests).
enum class PutStep { kCreate, kWrite, kFsyncFile, kLink, kFsyncDir };

struct LocalDiskOptions {
  // Use O_TMPFILE + linkat when the file system allows it. Off: always a named temporary file.
  bool use_o_tmpfile = true;
  // Tests: called before each step of a put; a failure is treated as if the system call had failed.
  std::function<xet::Status(PutStep)> fault_injector;
};

class LocalDiskStore final : public BlobStore {
 public:
  // Creates <root>, <root>/xorbs and <root>/shards as needed and removes leftover temporary files.
  static xet::Result<std::unique_ptr<LocalDiskStore>> Open(const std::filesystem::path& root,
                                                           LocalDiskOptions options = {});

  xet::Result<std::unique_ptr<BlobWriter>> BeginPut(BlobKind kind, const xet::Hash& hash) override;
  xet::Result<BlobStat> Stat(BlobKind kind, const xet::Hash& hash) override;
  xet::Status ReadRange(BlobKind kind, const xet::Hash& hash, uint64_t offset,
                        std::span<uint8_t> out) override;
  xet::Result<OpenBlob> OpenForRead(BlobKind kind, const xet::Hash& hash) override;
  xet::Status List(BlobKind kind, const std::function<void(const xet::Hash&)>& fn) override;
  xet::Result<bool> Delete(BlobKind kind, const xet::Hash& hash) override;
  std::string Describe() const override { return "file:" + root_.string(); }

  // Where a blob lives (whether or not it exists).
  std::filesystem::path PathOf(BlobKind kind, const xet::Hash& hash) const;
  bool using_o_tmpfile() const { return use_o_tmpfile_; }

 private:
  class Writer;
  class Flusher;
  LocalDiskStore(std::filesystem::path root, LocalDiskOptions options);

  std::filesystem::path KindDir(BlobKind kind) const;
  xet::Status Inject(PutStep step) const;
  // Creates the blob's directory and makes its entry in every parent durable (once per process).
  xet::Result<UniqueFd> OpenBlobDir(BlobKind kind, const xet::Hash& hash);

  const std::filesystem::path root_;
  const LocalDiskOptions options_;
  bool use_o_tmpfile_ = false;

  std::mutex dirs_mu_;
  std::unordered_set<std::string> durable_dirs_;  // blob directories whose creation is known durable
};

}  // namespace cairn::store
