#include "store/power_loss.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>
#include <utility>

#include "common/posix_io.h"
#include "common/unique_fd.h"

namespace cairn::store::testing {

namespace fs = std::filesystem;

namespace {

Error SysError(const std::string& what, const std::string& path, int err = errno) {
  return IoError("power-loss tracker: " + what + " " + path + ": " +
                 std::error_code(err, std::generic_category()).message());
}

// The whole content of the file `path` opens (following /proc/self/fd links), and its inode.
Status ReadWhole(const std::string& path, ino_t* inode, std::vector<uint8_t>* out) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return SysError("open", path);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return SysError("stat", path);
  *inode = st.st_ino;
  out->resize(static_cast<size_t>(st.st_size));
  size_t done = 0;
  while (done < out->size()) {
    const ssize_t n = ::pread(fd.get(), out->data() + done, out->size() - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return SysError("read", path);
    if (n == 0) break;  // shrank meanwhile: what was read is what there is
    done += static_cast<size_t>(n);
  }
  out->resize(done);
  return Ok{};
}

Status WriteWhole(const fs::path& path, const std::vector<uint8_t>& data) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
  if (!fd.valid()) return SysError("create", path.string());
  if (const int err = WriteFull(fd.get(), data); err != 0) return SysError("write", path.string(), err);
  return Ok{};
}

}  // namespace

PowerLossTracker::PowerLossTracker(const fs::path& root) : root_(Key(root)) {}

// Paths as the store reports them and as the tracker walks them compare equal.
std::string PowerLossTracker::Key(const fs::path& p) {
  fs::path n = p.lexically_normal();
  if (!n.has_filename() && n.has_parent_path() && n != n.root_path()) n = n.parent_path();
  return n.string();
}

Status PowerLossTracker::Baseline() {
  std::lock_guard lock(mu_);
  dirs_.clear();
  files_.clear();
  std::error_code ec;
  fs::create_directories(root_, ec);
  if (ec) return IoError("power-loss tracker: create " + root_.string() + ": " + ec.message());
  return BaselineLocked(root_);
}

Status PowerLossTracker::BaselineLocked(const fs::path& dir) {
  if (auto st = SnapshotDir(Key(dir)); !st.ok()) return st;
  for (const auto& [name, entry] : dirs_[Key(dir)]) {
    const fs::path p = dir / name;
    auto st = entry.dir ? BaselineLocked(p) : SnapshotFile(p.string());
    if (!st.ok()) return st;
  }
  return Ok{};
}

FaultInjector PowerLossTracker::Injector() {
  return [this](const PutStepInfo& step) { return OnStep(step); };
}

void PowerLossTracker::CrashAt(size_t n) {
  std::lock_guard lock(mu_);
  crash_at_ = steps_ + n;
}

void PowerLossTracker::Restart() {
  std::lock_guard lock(mu_);
  crash_at_.reset();
  crashed_ = false;
}

bool PowerLossTracker::crashed() const {
  std::lock_guard lock(mu_);
  return crashed_;
}

size_t PowerLossTracker::steps() const {
  std::lock_guard lock(mu_);
  return steps_;
}

void PowerLossTracker::Ignore(std::function<bool(const PutStepInfo&)> ignore) {
  std::lock_guard lock(mu_);
  ignore_ = std::move(ignore);
}

Status PowerLossTracker::OnStep(const PutStepInfo& step) {
  std::lock_guard lock(mu_);
  const size_t index = steps_++;
  if (crash_at_ == index) crashed_ = true;
  if (crashed_) return IoError("simulated power cut before step " + std::to_string(index));
  if (!failure_.ok()) return failure_;
  if (ignore_ && ignore_(step)) return Ok{};
  if (auto st = Record(step); !st.ok()) {
    failure_ = st;
    return st;
  }
  return Ok{};
}

// The step is about to run (and, on the test's file system, will succeed): what it makes durable, the model
// takes as durable now. A sync only makes durable what is already there, so taking the state just before it
// is exact for the caller's own writes (and at worst misses a concurrent write, losing more).
Status PowerLossTracker::Record(const PutStepInfo& step) {
  switch (step.step) {
    case PutStep::kCreate:
      fresh_file_ = true;
      return Ok{};
    case PutStep::kMakeDir:
      return Ok{};  // durable with its parent's next sync
    case PutStep::kFsyncDir:
      return SnapshotDir(Key(fs::path(step.path)));
    case PutStep::kWrite:
    case PutStep::kLink:
    case PutStep::kFsyncFile:
      break;
  }
  if (fresh_file_) {
    // The first step on a new file: whatever the model held for a removed file with this inode is gone.
    struct stat st {};
    if (::stat(std::string(step.path).c_str(), &st) != 0) return SysError("stat", std::string(step.path));
    files_.erase(st.st_ino);
    fresh_file_ = false;
  }
  if (step.step == PutStep::kFsyncFile) return SnapshotFile(std::string(step.path));
  return Ok{};  // a write or a new name: nothing durable until the syncs
}

Status PowerLossTracker::SnapshotFile(const std::string& path) {
  ino_t inode = 0;
  std::vector<uint8_t> bytes;
  if (auto st = ReadWhole(path, &inode, &bytes); !st.ok()) return st;
  files_[inode] = std::move(bytes);
  return Ok{};
}

Status PowerLossTracker::SnapshotDir(const std::string& dir) {
  Entries entries;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    struct stat st {};
    if (::lstat(it->path().c_str(), &st) != 0) {
      if (errno == ENOENT) continue;  // removed meanwhile
      return SysError("stat", it->path().string());
    }
    entries[it->path().filename().string()] = Entry{.dir = S_ISDIR(st.st_mode), .inode = st.st_ino};
  }
  if (ec) return IoError("power-loss tracker: list " + dir + ": " + ec.message());
  dirs_[dir] = std::move(entries);
  return Ok{};
}

Status PowerLossTracker::PowerLoss() {
  {
    std::lock_guard lock(mu_);
    if (!failure_.ok()) return failure_;
    std::error_code ec;
    for (fs::directory_iterator it(root_, ec), end; !ec && it != end; it.increment(ec)) {
      fs::remove_all(it->path(), ec);
      if (ec) return IoError("power-loss tracker: remove " + it->path().string() + ": " + ec.message());
    }
    if (ec) return IoError("power-loss tracker: list " + root_.string() + ": " + ec.message());
    if (auto st = Materialize(root_); !st.ok()) return st;
    crash_at_.reset();
    crashed_ = false;
    fresh_file_ = false;
  }
  return Baseline();
}

Status PowerLossTracker::Materialize(const fs::path& dir) const {
  const auto it = dirs_.find(Key(dir));
  if (it == dirs_.end()) return Ok{};  // created, never synced: empty
  for (const auto& [name, entry] : it->second) {
    const fs::path p = dir / name;
    if (entry.dir) {
      if (::mkdir(p.c_str(), 0755) != 0) return SysError("mkdir", p.string());
      if (auto st = Materialize(p); !st.ok()) return st;
      continue;
    }
    const auto file = files_.find(entry.inode);
    static const std::vector<uint8_t> kNone;
    if (auto st = WriteWhole(p, file == files_.end() ? kNone : file->second); !st.ok()) return st;
  }
  return Ok{};
}

}  // namespace cairn::store::testing
