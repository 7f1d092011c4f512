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
// Commit return. Named temporary files a crash left behind are removed by Open. PowerLossTracker
// (store/power_loss.h) checks this against a simulated power cut at every step.
//
// Thread-safety: as BlobStore. Several processes must not share a root (Open removes temporary files that
// another process may be writing).
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_set>

#include "store/blob_store.h"

namespace cairn::store {

// The steps of a put (and of Open) that change the file system, where a fault can be injected (tests).
enum class PutStep { kCreate, kWrite, kFsyncFile, kLink, kFsyncDir, kMakeDir };

// One step as the fault injector sees it, before the step runs. The views are valid during the call only.
struct PutStepInfo {
  PutStep step = PutStep::kCreate;
  // What the step acts on:
  //   kCreate     the named temporary file about to be created; for an unnamed O_TMPFILE file, the
  //               directory it is created in
  //   kWrite, kFsyncFile, kLink
  //               the file; an unnamed one as /proc/self/fd/<n>, which opens it during the call
  //   kMakeDir    the directory about to be created (it may exist already: mkdir then fails with EEXIST)
  //   kFsyncDir   the directory
  std::string_view path;
  // kLink: the name the file gets, by linkat(2) or by rename(2) over `path`; empty for the other steps.
  std::string_view target;
};

// Tests: called before each step of Open and of every put (blob directories, the temporary file, its
// name, the syncs). Not called by reads, List or Delete. Ownership: the store keeps a copy; whatever it
// captures must outlive the store. Thread safety: called from any thread that writes or flushes a put
// (XorbUpload writes and flushes on threads of its own), possibly concurrently for different puts, so it
// must synchronize itself. Failures: a returned error is treated as if the system call had failed (the
// step does not run, the put or Open fails with that error and cleans up as after a real failure). Unset
// (the default), nothing is called and no path is built.
using FaultInjector = std::function<Status(const PutStepInfo&)>;

struct LocalDiskOptions {
  // Use O_TMPFILE + linkat when the file system allows it. Off: always a named temporary file.
  bool use_o_tmpfile = true;
  FaultInjector fault_injector;  // tests (see FaultInjector)
};

class LocalDiskStore final : public BlobStore {
 public:
  // Creates <root>, <root>/xorbs and <root>/shards as needed and removes leftover temporary files.
  static Result<std::unique_ptr<LocalDiskStore>> Open(const std::filesystem::path& root,
                                                      LocalDiskOptions options = {});

  Result<std::unique_ptr<BlobWriter>> BeginPut(BlobKind kind, const xet::Hash& hash) override;
  Result<BlobStat> Stat(BlobKind kind, const xet::Hash& hash) override;
  Status ReadRange(BlobKind kind, const xet::Hash& hash, uint64_t offset, std::span<uint8_t> out) override;
  Result<OpenBlob> OpenForRead(BlobKind kind, const xet::Hash& hash) override;
  Status List(BlobKind kind, const std::function<void(const xet::Hash&)>& fn) override;
  Result<bool> Delete(BlobKind kind, const xet::Hash& hash) override;
  std::string Describe() const override { return "file:" + root_.string(); }

  // Where a blob lives (whether or not it exists).
  std::filesystem::path PathOf(BlobKind kind, const xet::Hash& hash) const;
  bool using_o_tmpfile() const { return use_o_tmpfile_; }

 private:
  class Writer;
  class Flusher;
  LocalDiskStore(std::filesystem::path root, LocalDiskOptions options);

  std::filesystem::path KindDir(BlobKind kind) const;
  // Calls the fault injector, if any, on {step, paths()}: paths() (returning the path and the target) runs
  // only when an injector is set.
  template <typename Paths>
  Status Inject(PutStep step, const Paths& paths) const;
  // Creates `dir` if missing / syncs its entries, each after the fault injector saw the step.
  Status MakeDirStep(const std::filesystem::path& dir) const;
  Status SyncDirStep(const std::filesystem::path& dir) const;
  // Creates the blob's directory and makes its entry in every parent durable (once per process).
  Result<UniqueFd> OpenBlobDir(BlobKind kind, const xet::Hash& hash);

  const std::filesystem::path root_;
  const LocalDiskOptions options_;
  bool use_o_tmpfile_ = false;

  std::mutex dirs_mu_;
  std::unordered_set<std::string> durable_dirs_;  // blob directories whose creation is known durable
};

}  // namespace cairn::store
