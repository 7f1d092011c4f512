#include "store/local_disk_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>
#include <system_error>
#include <vector>

#include "common/posix_io.h"

namespace cairn::store {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view kTmpPrefix = ".tmp.";

Error Errno(std::string_view what, const std::string& path, int err = errno) {
  return IoError(std::string(what) + " " + path + ": " + ErrnoText(err));
}

Status FsyncFd(int fd, const std::string& path) {
  while (::fsync(fd) != 0) {
    if (errno != EINTR) return Errno("fsync", path);
  }
  return Ok{};
}

Status FsyncPath(const fs::path& dir) {
  UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd.valid()) return Errno("open", dir.string());
  return FsyncFd(fd.get(), dir.string());
}

// Creates `dir` if missing; returns whether it was created.
Result<bool> MakeDir(const fs::path& dir) {
  if (::mkdir(dir.c_str(), 0755) == 0) return true;
  if (errno == EEXIST) return false;
  return Errno("mkdir", dir.string());
}

Status WriteAll(int fd, std::span<const uint8_t> data, const std::string& path) {
  if (const int err = WriteFull(fd, data); err != 0) return Errno("write", path, err);
  return Ok{};
}

// Reads exactly out.size() bytes at `offset`; a short file is an error (blobs never shrink).
Status PreadAll(int fd, uint64_t offset, std::span<uint8_t> out, const std::string& path) {
  const int err = PreadFull(fd, offset, out);
  if (err == kShortFile) return IoError("read " + path + ": unexpected end of file");
  if (err != 0) return Errno("read", path, err);
  return Ok{};
}

// Whether two files of `size` bytes hold the same bytes.
Result<bool> SameBytes(int a, int b, uint64_t size, const std::string& path) {
  constexpr size_t kBlock = 256 * 1024;
  std::vector<uint8_t> x(kBlock), y(kBlock);
  for (uint64_t off = 0; off < size; off += kBlock) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(kBlock, size - off));
    if (auto st = PreadAll(a, off, std::span(x).first(n), path); !st.ok()) return st.error();
    if (auto st = PreadAll(b, off, std::span(y).first(n), path); !st.ok()) return st.error();
    if (std::memcmp(x.data(), y.data(), n) != 0) return false;
  }
  return true;
}

// Hands a verifier the whole file without copying it.
Result<bool> VerifyMapped(int fd, uint64_t size, const ExistingVerifier& verify, const std::string& path) {
  if (size == 0) return verify({});
  void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  if (p == MAP_FAILED) return Errno("mmap", path);
  const bool ok = verify({static_cast<const uint8_t*>(p), size});
  ::munmap(p, size);
  return ok;
}

std::atomic<uint64_t> g_tmp_counter{0};

std::string UniqueTmpName(const std::string& name) {
  return std::string(kTmpPrefix) + name + "." + std::to_string(::getpid()) + "." +
         std::to_string(g_tmp_counter.fetch_add(1, std::memory_order_relaxed));
}

// Calls fn(dir, name) for every entry of the two-level hash-prefix tree under `kind_dir`.
Status WalkBlobDirs(const fs::path& kind_dir,
                    const std::function<void(const fs::path& dir, const std::string& name)>& fn) {
  const auto list = [](const fs::path& dir, std::vector<std::string>& names) -> Status {
    names.clear();
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) {
      if (errno == ENOENT || errno == ENOTDIR) return Ok{};  // removed meanwhile, or a stray file
      return Errno("opendir", dir.string());
    }
    // NOLINTNEXTLINE(concurrency-mt-unsafe): each call has its own DIR stream, which glibc makes safe
    while (const dirent* e = ::readdir(d)) {
      if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0)
        names.emplace_back(e->d_name);
    }
    ::closedir(d);
    return Ok{};
  };
  std::vector<std::string> l1, l2, l3;
  if (auto st = list(kind_dir, l1); !st.ok()) return st;
  for (const auto& a : l1) {
    if (auto st = list(kind_dir / a, l2); !st.ok()) return st;
    for (const auto& b : l2) {
      const fs::path dir = kind_dir / a / b;
      if (auto st = list(dir, l3); !st.ok()) return st;
      for (const auto& name : l3) fn(dir, name);
    }
  }
  return Ok{};
}

// A step's paths for the fault injector (PutStepInfo).
struct StepPaths {
  std::string path;
  std::string target;
};

std::string ProcFdPath(int fd) {
  return "/proc/self/fd/" + std::to_string(fd);
}

}  // namespace

template <typename Paths>
Status LocalDiskStore::Inject(PutStep step, const Paths& paths) const {
  if (!options_.fault_injector) return Ok{};
  const StepPaths p = paths();
  return options_.fault_injector(PutStepInfo{.step = step, .path = p.path, .target = p.target});
}

// ---- Writer

class LocalDiskStore::Writer final : public BlobWriter {
 public:
  Writer(LocalDiskStore* store, std::string name, std::string dir_path, UniqueFd dir, UniqueFd file,
         std::string tmp_name)
      : store_(store),
        name_(std::move(name)),
        dir_path_(std::move(dir_path)),
        dir_(std::move(dir)),
        file_(std::move(file)),
        tmp_name_(std::move(tmp_name)) {}

  ~Writer() override { Discard(); }

  Status Append(std::span<const uint8_t> data) override {
    if (state_ != State::kOpen) return IoError("put of " + FinalPath() + " is no longer open");
    Status st = store_->Inject(PutStep::kWrite, [&] { return StepPaths{OpenPath(), {}}; });
    if (st.ok()) st = WriteAll(file_.get(), data, TmpPath());
    if (!st.ok()) return Fail(st.error());
    appended_ += data.size();
    return Ok{};
  }

  std::unique_ptr<BlobFlusher> NewFlusher() override;

  int ReadableFd() const override { return state_ == State::kOpen ? file_.get() : -1; }

  Result<PutOutcome> Commit(const PutOptions& options) override {
    if (state_ != State::kOpen) return IoError("put of " + FinalPath() + " is no longer open");
    // A failed flush reported the write error to the flusher alone (the kernel reports it once per open file
    // description, which the flusher shares): the fsync below could succeed over lost pages.
    if (flush_failed_->load()) return Fail(IoError("an earlier flush of " + TmpPath() + " failed"));
    Status st = store_->Inject(PutStep::kFsyncFile, [&] { return StepPaths{OpenPath(), {}}; });
    if (st.ok()) st = FsyncFd(file_.get(), TmpPath());
    if (!st.ok()) return Fail(st.error());

    PutOutcome outcome;
    // Two rounds at most: a put that loses a race for the name checks the winner's blob instead.
    for (int round = 0; round < 2; ++round) {
      auto existing = CheckExisting(options);
      if (!existing.ok()) return Fail(existing.error());
      if (*existing == Existing::kIntact) {
        outcome.already_present = true;
        break;
      }
      const bool replace = *existing == Existing::kCorrupt;
      auto linked = Link(replace);
      if (!linked.ok()) return Fail(linked.error());
      if (*linked) {
        outcome.replaced_corrupt = replace;
        break;
      }
      if (round == 1) return Fail(IoError("could not claim " + FinalPath()));
    }
    st = store_->Inject(PutStep::kFsyncDir, [&] { return StepPaths{dir_path_, {}}; });
    // Also when the blob was already there: whoever linked it may not have synced the directory yet.
    if (st.ok()) st = FsyncFd(dir_.get(), dir_path_);
    if (!st.ok()) return Fail(st.error());
    Discard();
    state_ = State::kCommitted;
    return outcome;
  }

  uint64_t bytes_appended() const override { return appended_; }

 private:
  enum class State { kOpen, kFailed, kCommitted };
  enum class Existing { kAbsent, kIntact, kCorrupt };

  std::string FinalPath() const { return dir_path_ + "/" + name_; }
  std::string TmpPath() const {
    return tmp_name_.empty() ? FinalPath() + " (unnamed)" : dir_path_ + "/" + tmp_name_;
  }
  // A path that opens the temporary file (for the fault injector).
  std::string OpenPath() const {
    return tmp_name_.empty() ? ProcFdPath(file_.get()) : dir_path_ + "/" + tmp_name_;
  }

  Error Fail(Error e) {
    state_ = State::kFailed;
    Discard();
    return e;
  }

  // Removes the temporary file, if it still has a name, and closes it. Idempotent.
  void Discard() {
    if (!tmp_name_.empty() && dir_.valid()) ::unlinkat(dir_.get(), tmp_name_.c_str(), 0);
    tmp_name_.clear();
    file_.reset();
  }

  Result<Existing> CheckExisting(const PutOptions& options) {
    UniqueFd fd(::openat(dir_.get(), name_.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd.valid()) {
      if (errno == ENOENT) return Existing::kAbsent;
      return Errno("open", FinalPath());
    }
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) return Errno("stat", FinalPath());
    if (static_cast<uint64_t>(st.st_size) != appended_) return Existing::kCorrupt;
    auto intact = options.verify_existing
                      ? VerifyMapped(fd.get(), appended_, options.verify_existing, FinalPath())
                      : SameBytes(fd.get(), file_.get(), appended_, FinalPath());
    if (!intact.ok()) return intact.error();
    return *intact ? Existing::kIntact : Existing::kCorrupt;
  }

  // Gives the temporary file its final name. Returns false when another put took the (free) name first.
  Result<bool> Link(bool replace) {
    if (auto st = store_->Inject(PutStep::kLink,
                                 [&] {
                                   return StepPaths{OpenPath(), FinalPath()};
                                 });
        !st.ok())
      return st.error();
    if (tmp_name_.empty()) {
      // O_TMPFILE: linkat through /proc works without CAP_DAC_READ_SEARCH (unlike AT_EMPTY_PATH).
      const std::string proc = "/proc/self/fd/" + std::to_string(file_.get());
      const std::string& target = replace ? (tmp_name_ = UniqueTmpName(name_)) : name_;
      if (::linkat(AT_FDCWD, proc.c_str(), dir_.get(), target.c_str(), AT_SYMLINK_FOLLOW) != 0) {
        const int err = errno;
        if (replace) tmp_name_.clear();
        if (err == EEXIST && !replace) return false;
        return Errno("linkat", dir_path_ + "/" + target, err);
      }
      if (!replace) return true;
    }
    if (replace) {
      // rename(2) swaps the name atomically: readers see the old bytes or the new, never neither.
      if (::renameat(dir_.get(), tmp_name_.c_str(), dir_.get(), name_.c_str()) != 0)
        return Errno("rename", FinalPath());
    } else if (::renameat2(dir_.get(), tmp_name_.c_str(), dir_.get(), name_.c_str(), RENAME_NOREPLACE) != 0) {
      if (errno == EEXIST) return false;
      if (errno != EINVAL) return Errno("rename", FinalPath());
      // File systems without RENAME_NOREPLACE: a racing put wrote the same verified-by-hash content.
      if (::renameat(dir_.get(), tmp_name_.c_str(), dir_.get(), name_.c_str()) != 0)
        return Errno("rename", FinalPath());
    }
    tmp_name_.clear();
    return true;
  }

  LocalDiskStore* store_;
  const std::string name_;
  const std::string dir_path_;
  UniqueFd dir_;
  UniqueFd file_;
  std::string tmp_name_;  // empty for an unnamed O_TMPFILE (or after the file got its final name)
  uint64_t appended_ = 0;
  State state_ = State::kOpen;
  std::shared_ptr<std::atomic<bool>> flush_failed_ = std::make_shared<std::atomic<bool>>(false);
};

// fsyncs a duplicate of the writer's descriptor: the same file, without sharing the writer's state.
class LocalDiskStore::Flusher final : public BlobFlusher {
 public:
  // `named`: the temporary file's path, empty when it has none.
  Flusher(const LocalDiskStore* store, UniqueFd fd, std::string path, std::string named,
          std::shared_ptr<std::atomic<bool>> failed)
      : store_(store),
        fd_(std::move(fd)),
        path_(std::move(path)),
        named_(std::move(named)),
        failed_(std::move(failed)) {}

  Status Flush() override {
    Status st = store_->Inject(PutStep::kFsyncFile, [&] {
      return StepPaths{named_.empty() ? ProcFdPath(fd_.get()) : named_, {}};
    });
    if (st.ok()) st = FsyncFd(fd_.get(), path_);
    if (!st.ok()) failed_->store(true);
    return st;
  }

 private:
  const LocalDiskStore* store_;
  UniqueFd fd_;
  std::string path_;
  std::string named_;
  std::shared_ptr<std::atomic<bool>> failed_;
};

std::unique_ptr<BlobFlusher> LocalDiskStore::Writer::NewFlusher() {
  UniqueFd fd = file_.Duplicate();
  if (!fd.valid()) return nullptr;  // out of descriptors: Commit flushes everything instead
  return std::make_unique<Flusher>(store_, std::move(fd), TmpPath(),
                                   tmp_name_.empty() ? std::string() : dir_path_ + "/" + tmp_name_,
                                   flush_failed_);
}

// ---- Store

LocalDiskStore::LocalDiskStore(fs::path root, LocalDiskOptions options)
    : root_(std::move(root)), options_(std::move(options)) {}

Result<std::unique_ptr<LocalDiskStore>> LocalDiskStore::Open(const fs::path& root, LocalDiskOptions options) {
  std::unique_ptr<LocalDiskStore> store(new LocalDiskStore(root, std::move(options)));
  // The syncs also when the directories existed: a process that crashed after creating them may have left
  // their entries not durable yet (as OpenBlobDir). Two syncs per start.
  if (auto st = store->MakeDirStep(root); !st.ok()) return st.error();
  if (root.has_parent_path()) {
    if (auto st = store->SyncDirStep(root.parent_path()); !st.ok()) return st.error();
  }
  for (BlobKind kind : kBlobKinds) {
    if (auto st = store->MakeDirStep(store->KindDir(kind)); !st.ok()) return st.error();
  }
  if (auto st = store->SyncDirStep(root); !st.ok()) return st.error();

  // Leftovers of puts interrupted by a crash. Unnamed O_TMPFILE files vanish by themselves.
  for (BlobKind kind : kBlobKinds) {
    auto st = WalkBlobDirs(store->KindDir(kind), [](const fs::path& dir, const std::string& name) {
      if (name.starts_with(kTmpPrefix)) ::unlink((dir / name).c_str());  // best effort: it is garbage
    });
    if (!st.ok()) return st.error();
  }

  if (store->options_.use_o_tmpfile && ::access("/proc/self/fd", X_OK) == 0) {
    UniqueFd probe(::open(store->KindDir(BlobKind::kXorb).c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0644));
    store->use_o_tmpfile_ = probe.valid();
  }
  return store;
}

fs::path LocalDiskStore::KindDir(BlobKind kind) const {
  return root_ / BlobKindFolder(kind);
}

fs::path LocalDiskStore::PathOf(BlobKind kind, const xet::Hash& hash) const {
  const std::string hex = hash.hex();
  return KindDir(kind) / hex.substr(0, 2) / hex.substr(2, 2) / hex;
}

Status LocalDiskStore::MakeDirStep(const fs::path& dir) const {
  if (auto st = Inject(PutStep::kMakeDir, [&] { return StepPaths{dir.string(), {}}; }); !st.ok()) return st;
  if (auto made = MakeDir(dir); !made.ok()) return made.error();
  return Ok{};
}

Status LocalDiskStore::SyncDirStep(const fs::path& dir) const {
  if (auto st = Inject(PutStep::kFsyncDir, [&] { return StepPaths{dir.string(), {}}; }); !st.ok()) return st;
  return FsyncPath(dir);
}

Result<UniqueFd> LocalDiskStore::OpenBlobDir(BlobKind kind, const xet::Hash& hash) {
  const fs::path dir = PathOf(kind, hash).parent_path();
  bool known;
  {
    std::lock_guard lock(dirs_mu_);
    known = durable_dirs_.contains(dir.string());
  }
  if (!known) {
    // Sync each parent even when the directory already existed: another thread (or a process that then
    // crashed) may have created it without its entry being durable yet.
    for (const fs::path& d : {dir.parent_path(), dir}) {
      if (auto st = MakeDirStep(d); !st.ok()) return st.error();
      if (auto st = SyncDirStep(d.parent_path()); !st.ok()) return st.error();
    }
    std::lock_guard lock(dirs_mu_);
    durable_dirs_.insert(dir.string());
  }
  UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd.valid()) return Errno("open", dir.string());
  return fd;
}

Result<std::unique_ptr<BlobWriter>> LocalDiskStore::BeginPut(BlobKind kind, const xet::Hash& hash) {
  auto dir = OpenBlobDir(kind, hash);
  if (!dir.ok()) return dir.error();
  const std::string dir_path = PathOf(kind, hash).parent_path().string();
  const std::string name = hash.hex();
  std::string tmp_name = use_o_tmpfile_ ? std::string() : UniqueTmpName(name);
  if (auto st = Inject(PutStep::kCreate,
                       [&] {
                         return StepPaths{tmp_name.empty() ? dir_path : dir_path + "/" + tmp_name, {}};
                       });
      !st.ok())
    return st.error();
  UniqueFd file;
  if (use_o_tmpfile_) file.reset(::openat(dir->get(), ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0644));
  if (!file.valid()) {
    if (tmp_name.empty()) tmp_name = UniqueTmpName(name);
    file.reset(::openat(dir->get(), tmp_name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0644));
    if (!file.valid()) return Errno("create", dir_path + "/" + tmp_name);
  }
  return std::unique_ptr<BlobWriter>(
      std::make_unique<Writer>(this, name, dir_path, std::move(*dir), std::move(file), std::move(tmp_name)));
}

Result<BlobStat> LocalDiskStore::Stat(BlobKind kind, const xet::Hash& hash) {
  struct stat st {};
  const fs::path p = PathOf(kind, hash);
  if (::stat(p.c_str(), &st) != 0) {
    if (errno == ENOENT) return BlobStat{};
    return Errno("stat", p.string());
  }
  return BlobStat{.exists = true, .size = static_cast<uint64_t>(st.st_size)};
}

Result<OpenBlob> LocalDiskStore::OpenForRead(BlobKind kind, const xet::Hash& hash) {
  const fs::path p = PathOf(kind, hash);
  // A blob is a regular file its put made: a FIFO, a device or a symbolic link in its place (a bundle's or a
  // backup's objects are someone else's directory) is refused rather than waited on or followed.
  int raw = -1;
  const int err = OpenRegularFile(p.c_str(), &raw);
  UniqueFd fd(raw);
  if (err == ENOENT) return NotFound("no " + std::string(BlobKindName(kind)) + " " + hash.hex());
  if (err == kNotRegularFile || err == kSymbolicLink)
    return Malformed(p.string() + " is " + OpenErrorText(err) + ", not a " + std::string(BlobKindName(kind)));
  if (err != 0) return Errno("open", p.string(), err);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return Errno("stat", p.string());
  return OpenBlob{.fd = std::move(fd), .size = static_cast<uint64_t>(st.st_size)};
}

Status LocalDiskStore::ReadRange(BlobKind kind, const xet::Hash& hash, uint64_t offset,
                                 std::span<uint8_t> out) {
  auto blob = OpenForRead(kind, hash);
  if (!blob.ok()) return blob.error();
  if (offset > blob->size || out.size() > blob->size - offset) {
    return Inconsistent("range [" + std::to_string(offset) + ", +" + std::to_string(out.size()) +
                        ") is outside " + std::string(BlobKindName(kind)) + " " + hash.hex() + " of " +
                        std::to_string(blob->size) + " bytes");
  }
  return PreadAll(blob->fd.get(), offset, out, PathOf(kind, hash).string());
}

Status LocalDiskStore::List(BlobKind kind, const std::function<void(const xet::Hash&)>& fn) {
  return WalkBlobDirs(KindDir(kind), [&](const fs::path&, const std::string& name) {
    if (auto h = xet::Hash::FromHex(name)) fn(*h);
  });
}

Result<bool> LocalDiskStore::Delete(BlobKind kind, const xet::Hash& hash) {
  const fs::path p = PathOf(kind, hash);
  if (::unlink(p.c_str()) != 0) {
    if (errno == ENOENT) return false;
    return Errno("unlink", p.string());
  }
  if (auto st = FsyncPath(p.parent_path()); !st.ok()) return st.error();
  return true;
}

}  // namespace cairn::store
