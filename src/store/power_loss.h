// Test support: a simulated power cut under a LocalDiskStore (the pattern of LevelDB's
// FaultInjectionTestEnv).
//
// The tracker is the store's fault injector (LocalDiskOptions::fault_injector). From the steps the store
// reports it keeps a model of what the disk under `root` holds durably:
//   - a file's bytes as of its last fsync (a file never fsynced has none: it comes back empty);
//   - a directory's entries as of its last fsync. An entry created, linked, renamed or removed since is not
//     durable: the entry as of that sync is what survives (a name a rename replaced comes back with the old
//     file's durable bytes), and a directory never synced comes back empty.
// Baseline() takes everything under root as durable; PowerLoss() rewrites root to exactly the model, as the
// disk would be found after the machine lost power and restarted. The model is strict POSIX: no file
// system's extra ordering (ext4's data=ordered, auto_da_alloc) is relied on.
//
// What the store does not report is not modelled, and the model only errs on the side of losing more:
// directory changes the store makes without reporting them (a failed put's cleanup, Open removing leftover
// temporary files, Delete) are not durable until a reported sync of that directory, and Delete's own sync
// is not seen (a deleted blob may come back). Files are told apart by inode; a file created after another
// was removed may reuse its inode, so the tracker forgets the durable bytes of the inode a put's first step
// after kCreate names: puts must therefore start one at a time (their other steps may interleave).
//
// Thread safety: the injector may be called from any thread; the other members must not race with a put.
// The tracker must outlive every store using its injector.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "store/local_disk_store.h"

namespace cairn::store::testing {

class PowerLossTracker {
 public:
  // `root` is "the disk": the store's root or a directory above it. It is created if missing.
  explicit PowerLossTracker(const std::filesystem::path& root);
  PowerLossTracker(const PowerLossTracker&) = delete;
  PowerLossTracker& operator=(const PowerLossTracker&) = delete;

  // Takes everything under root, as it is now, as durable (reads every file).
  Status Baseline();
  // The fault injector to give the store: it records each step, and fails it from a crash on.
  FaultInjector Injector();

  // The step `n` steps from now (0: the next one) fails as if the machine stopped there: it and every later
  // step fail (and are not recorded) until Restart or PowerLoss.
  void CrashAt(size_t n);
  // The process restarted after a crash with the disk as it was (no power loss): steps run again.
  void Restart();
  bool crashed() const;
  size_t steps() const;  // steps reported so far

  // Negative controls: steps `ignore` accepts run, but count in the model as if they had not (an fsync
  // the store forgot). Null: none.
  void Ignore(std::function<bool(const PutStepInfo&)> ignore);

  // Rewrites root to its durable state, then takes that as the new baseline. Close the store (and every
  // descriptor into root) first. Also the tracker's own errors (a file it could not read) surface here.
  Status PowerLoss();

 private:
  struct Entry {
    bool dir = false;
    ino_t inode = 0;
  };
  using Entries = std::map<std::string, Entry>;

  Status OnStep(const PutStepInfo& step);
  Status Record(const PutStepInfo& step);
  Status SnapshotDir(const std::string& dir);
  Status SnapshotFile(const std::string& path);
  Status BaselineLocked(const std::filesystem::path& dir);
  Status Materialize(const std::filesystem::path& dir) const;
  static std::string Key(const std::filesystem::path& p);

  const std::filesystem::path root_;
  mutable std::mutex mu_;
  std::map<std::string, Entries> dirs_;                    // durable entries, by directory
  std::unordered_map<ino_t, std::vector<uint8_t>> files_;  // durable bytes, by inode
  std::function<bool(const PutStepInfo&)> ignore_;
  size_t steps_ = 0;
  std::optional<size_t> crash_at_;
  bool crashed_ = false;
  bool fresh_file_ = false;  // a kCreate ran: the next file step names a new file
  Status failure_ = Ok{};    // the first error the tracker met
};

}  // namespace cairn::store::testing
