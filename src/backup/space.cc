#include "backup/space.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "common/clock.h"
#include "common/posix_io.h"
#include "common/unique_fd.h"
#include "store/local_disk_store.h"
#include "store/s3_objects.h"
#include "store/s3_store.h"

namespace cairn::backup {
namespace fs = std::filesystem;
namespace {

constexpr size_t kMaxSmallFile = 1 << 20;  // a manifest, LATEST, a lease
constexpr const char kPartial[] = ".partial";
constexpr const char kIndexPart[] = "index.sqlite.";

std::span<const uint8_t> AsBytes(std::string_view s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

Result<std::string> NameIn(std::string text, const std::string& where) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  if (!ValidSnapshotName(text)) return Malformed(where + " does not name a snapshot");
  return text;
}

// ---------------------------------------------------------------------------------------------------------------

class DirHold final : public SpaceHold {
 public:
  explicit DirHold(UniqueFd fd) : fd_(std::move(fd)) {}

 private:
  UniqueFd fd_;  // flock'ed; closing it releases the lock
};

class DirSpace final : public BackupSpace {
 public:
  DirSpace(fs::path root, std::unique_ptr<store::BlobStore> objects)
      : root_(std::move(root)), objects_(std::move(objects)) {}

  std::string Describe() const override { return root_.string(); }
  store::BlobStore& objects() override { return *objects_; }

  Result<std::unique_ptr<SpaceHold>> Hold() override {
    const fs::path path = root_ / ".lock";
    UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
    if (!fd.valid()) return PathIoError("open", path, errno);
    while (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
      if (errno == EWOULDBLOCK) return Unavailable("another backup of " + root_.string() + " is running");
      if (errno != EINTR) return PathIoError("lock", path, errno);
    }
    return std::unique_ptr<SpaceHold>(std::make_unique<DirHold>(std::move(fd)));
  }

  Result<std::vector<std::string>> Snapshots() override {
    std::vector<std::string> out;
    std::error_code ec;
    const fs::path dir = root_ / "snapshots";
    if (!fs::exists(dir, ec)) return out;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      const std::string name = e.path().filename().string();
      if (ValidSnapshotName(name) && fs::exists(e.path() / "manifest")) out.push_back(name);
    }
    if (ec) return IoError("list " + dir.string() + ": " + ec.message());
    std::sort(out.begin(), out.end());
    return out;
  }

  Result<bool> Taken(const std::string& name) override {
    std::error_code ec;
    return fs::exists(Dir(name), ec) || fs::exists(Dir(name + kPartial), ec);
  }

  Result<std::string> Latest() override {
    auto text = ReadFileBounded(root_ / "LATEST", kMaxSmallFile);
    if (!text.ok()) {
      if (text.error().code == ErrorCode::kNotFound)
        return NotFound(root_.string() + " holds no complete backup (no LATEST)");
      return text.error();
    }
    return NameIn(std::move(*text), (root_ / "LATEST").string());
  }

  Status SetLatest(const std::string& name) override {
    return WriteFileDurably(root_ / "LATEST", name + "\n");
  }

  Result<std::string> ReadManifest(const std::string& name) override {
    return ReadFileBounded(Dir(name) / "manifest", kMaxSmallFile);
  }

  Result<fs::path> IndexFile(const std::string& name, const fs::path&) override {
    return Dir(name) / "index.sqlite";
  }

  Result<fs::path> Begin(const std::string& name, const fs::path&) override {
    const fs::path partial = Dir(name + kPartial);
    std::error_code ec;
    fs::remove_all(partial, ec);
    fs::create_directories(partial, ec);
    if (ec) return IoError("create " + partial.string() + ": " + ec.message());
    return partial / "index.sqlite";
  }

  Status Complete(const std::string& name, const fs::path& index_file, std::string_view manifest) override {
    const fs::path partial = Dir(name + kPartial);
    if (index_file != partial / "index.sqlite") return Malformed("not this snapshot's index file");
    if (auto st = SyncPath(index_file); !st.ok()) return st;
    if (auto st = WriteFileDurably(partial / "manifest", manifest); !st.ok()) return st;
    const fs::path final_dir = Dir(name);
    if (::rename(partial.c_str(), final_dir.c_str()) != 0) return PathIoError("rename", partial, errno);
    return SyncPath(root_ / "snapshots");
  }

  Status Drop(const std::string& name) override {
    std::error_code ec;
    fs::remove(Dir(name) / "manifest", ec);
    fs::remove_all(Dir(name), ec);
    if (ec) return IoError("remove " + Dir(name).string() + ": " + ec.message());
    return SyncPath(root_ / "snapshots");
  }

  Status DropUnfinished() override {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(root_ / "snapshots", ec)) {
      if (e.path().filename().string().ends_with(kPartial)) fs::remove_all(e.path(), ec);
    }
    if (ec) return IoError("drop unfinished snapshots in " + root_.string() + ": " + ec.message());
    return Ok{};
  }

 private:
  fs::path Dir(const std::string& name) const { return root_ / "snapshots" / name; }

  const fs::path root_;
  std::unique_ptr<store::BlobStore> objects_;
};

// ---------------------------------------------------------------------------------------------------------------

// The text of a lease: "cairn-backup-lease UNIX HOST PID".
std::string LeaseText(int64_t now) {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) host[0] = '?';
  std::string h(host);
  std::replace_if(
      h.begin(), h.end(), [](char c) { return c <= ' ' || c > '~'; }, '_');
  return "cairn-backup-lease " + std::to_string(now) + " " + h + " " + std::to_string(::getpid()) + "\n";
}

// The time a lease was last renewed; nullopt for text that is not a lease (taken over like a stale one).
std::optional<int64_t> LeaseTime(std::string_view text) {
  constexpr std::string_view kHead = "cairn-backup-lease ";
  if (!text.starts_with(kHead)) return std::nullopt;
  text.remove_prefix(kHead.size());
  int64_t t = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), t);
  if (ec != std::errc() || p == text.data()) return std::nullopt;
  return t;
}

// Renews a bucket's lease each minute until destroyed, then deletes it.
class Lease final : public SpaceHold {
 public:
  Lease(store::S3Client& client, std::string key) : client_(client), key_(std::move(key)) {
    renewer_ = std::thread([this] {
      std::unique_lock lock(mu_);
      while (!cv_.wait_for(lock, std::chrono::seconds(60), [this] { return stop_; })) {
        lock.unlock();
        // A renewal that fails is retried at the next; a lease lapses only after kLeaseSeconds.
        (void)store::S3PutObject(client_, key_, AsBytes(LeaseText(Clock::System().UnixSeconds())));
        lock.lock();
      }
    });
  }
  ~Lease() override {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    renewer_.join();
    const std::string keys[] = {key_};
    (void)store::S3DeleteKeys(client_, keys);  // else it lapses
  }
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;

 private:
  store::S3Client& client_;
  const std::string key_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread renewer_;
};

class BucketSpace final : public BackupSpace {
 public:
  BucketSpace(std::string bucket, std::string prefix, std::unique_ptr<store::S3Store> objects,
              size_t part_bytes)
      : bucket_(std::move(bucket)),
        prefix_(std::move(prefix)),
        objects_(std::move(objects)),
        part_bytes_(std::max<size_t>(part_bytes, 1)) {}

  std::string Describe() const override { return "s3://" + bucket_ + "/" + prefix_; }
  store::BlobStore& objects() override { return *objects_; }

  Result<std::unique_ptr<SpaceHold>> Hold() override {
    const std::string key = prefix_ + "lock";
    for (int attempt = 0; attempt < 2; ++attempt) {
      const int64_t now = Clock::System().UnixSeconds();
      auto put = store::S3PutObject(client(), key, AsBytes(LeaseText(now)), /*if_absent=*/true);
      if (!put.ok()) return put.error();
      if (*put) return std::unique_ptr<SpaceHold>(std::make_unique<Lease>(client(), key));
      auto held = store::S3GetObject(client(), key, kMaxSmallFile);
      if (!held.ok()) return held.error();
      if (!held->has_value()) continue;  // released meanwhile
      const auto since = LeaseTime(**held);
      if (since && now - *since <= kLeaseSeconds) {
        std::string who(**held);
        while (!who.empty() && who.back() == '\n') who.pop_back();
        return Unavailable("another backup of " + Describe() + " is running (" + who +
                           "); a lease not renewed for " + std::to_string(kLeaseSeconds) +
                           " s is taken over");
      }
      const std::string keys[] = {key};  // lapsed: its backup died
      if (auto st = store::S3DeleteKeys(client(), keys); !st.ok()) return st.error();
    }
    return Unavailable("another backup of " + Describe() + " took the lease first");
  }

  Result<std::vector<std::string>> Snapshots() override {
    std::vector<std::string> out;
    if (auto st = ListSnapshotKeys([&](const std::string& name, std::string_view file, uint64_t) {
          if (file == "manifest") out.push_back(name);
        });
        !st.ok())
      return st.error();
    std::sort(out.begin(), out.end());
    return out;
  }

  Result<bool> Taken(const std::string& name) override {
    bool any = false;
    if (auto st = store::S3ListKeys(client(), Dir(name), [&](std::string_view, uint64_t) { any = true; });
        !st.ok())
      return st.error();
    return any;
  }

  Result<std::string> Latest() override {
    auto text = store::S3GetObject(client(), prefix_ + "LATEST", kMaxSmallFile);
    if (!text.ok()) return text.error();
    if (!text->has_value()) return NotFound(Describe() + " holds no complete backup (no LATEST)");
    return NameIn(std::move(**text), Describe() + "LATEST");
  }

  Status SetLatest(const std::string& name) override {
    auto put = store::S3PutObject(client(), prefix_ + "LATEST", AsBytes(name + "\n"));
    if (!put.ok()) return put.error();
    return Ok{};
  }

  Result<std::string> ReadManifest(const std::string& name) override {
    auto text = store::S3GetObject(client(), Dir(name) + "manifest", kMaxSmallFile);
    if (!text.ok()) return text.error();
    if (!text->has_value()) return NotFound(Describe() + "snapshots/" + name + " has no manifest");
    return std::move(**text);
  }

  Result<fs::path> IndexFile(const std::string& name, const fs::path& scratch) override {
    // The parts, numbered from 0 without a gap (a part missing at the end shows in the manifest's size).
    std::map<uint64_t, uint64_t> parts;  // number -> size
    const std::string dir = Dir(name);
    if (auto st = store::S3ListKeys(client(), dir + kIndexPart,
                                    [&](std::string_view key, uint64_t size) {
                                      const std::string_view n =
                                          key.substr(dir.size() + sizeof kIndexPart - 1);
                                      uint64_t number = 0;
                                      auto [p, ec] = std::from_chars(n.data(), n.data() + n.size(), number);
                                      if (ec == std::errc() && p == n.data() + n.size() && n.size() == 6)
                                        parts[number] = size;
                                    });
        !st.ok())
      return st.error();
    if (parts.empty()) return NotFound(Describe() + "snapshots/" + name + " holds no index file");
    if (parts.rbegin()->first != parts.size() - 1)
      return Damaged(Describe() + "snapshots/" + name + ": a part of its index file is missing");
    std::error_code ec;
    fs::create_directories(scratch, ec);
    const fs::path out = scratch / (name + ".index.sqlite");
    UniqueFd fd(::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
    if (!fd.valid()) return PathIoError("create", out, errno);
    std::vector<uint8_t> buf;
    for (const auto& [number, size] : parts) {
      if (size > part_bytes_ * 4 + (64ULL << 20))
        return Damaged(PartKey(name, number) + " is larger than any part a backup writes");
      buf.resize(size);
      if (auto st = store::S3GetObjectInto(client(), PartKey(name, number), buf); !st.ok()) return st.error();
      if (int e = WriteFull(fd.get(), buf); e != 0) return PathIoError("write", out, e);
    }
    return out;
  }

  Result<fs::path> Begin(const std::string& name, const fs::path& scratch) override {
    if (auto st = DropKeysUnder(Dir(name)); !st.ok()) return st.error();  // what a killed run left
    std::error_code ec;
    fs::create_directories(scratch, ec);
    if (ec) return IoError("create " + scratch.string() + ": " + ec.message());
    return scratch / "index.sqlite";
  }

  Status Complete(const std::string& name, const fs::path& index_file, std::string_view manifest) override {
    UniqueFd fd(::open(index_file.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd.valid()) return PathIoError("open", index_file, errno);
    std::vector<uint8_t> buf(part_bytes_);
    for (uint64_t number = 0;; ++number) {
      size_t got = 0;
      while (got < buf.size()) {
        const ssize_t n = ::read(fd.get(), buf.data() + got, buf.size() - got);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return PathIoError("read", index_file, errno);
        if (n == 0) break;
        got += static_cast<size_t>(n);
      }
      if (got == 0 && number > 0) break;
      auto put = store::S3PutObject(client(), PartKey(name, number), std::span(buf.data(), got));
      if (!put.ok()) return put.error();
      if (got < buf.size()) break;
    }
    auto put = store::S3PutObject(client(), Dir(name) + "manifest", AsBytes(manifest));
    if (!put.ok()) return put.error();
    return Ok{};
  }

  Status Drop(const std::string& name) override {
    const std::string keys[] = {Dir(name) + "manifest"};
    if (auto st = store::S3DeleteKeys(client(), keys); !st.ok()) return st;
    return DropKeysUnder(Dir(name));
  }

  Status DropUnfinished() override {
    std::map<std::string, bool> names;  // name -> complete
    if (auto st = ListSnapshotKeys([&](const std::string& name, std::string_view file, uint64_t) {
          names[name] = names[name] || file == "manifest";
        });
        !st.ok())
      return st;
    for (const auto& [name, complete] : names) {
      if (complete) continue;
      if (auto st = DropKeysUnder(Dir(name)); !st.ok()) return st;
    }
    return Ok{};
  }

 private:
  store::S3Client& client() { return objects_->client(); }
  std::string Dir(const std::string& name) const { return prefix_ + "snapshots/" + name + "/"; }
  std::string PartKey(const std::string& name, uint64_t number) const {
    char digits[16];
    (void)std::snprintf(digits, sizeof digits, "%06llu", static_cast<unsigned long long>(number));
    return Dir(name) + kIndexPart + digits;
  }

  // Every key under snapshots/, as (snapshot name, file name, size); keys of no valid name are skipped.
  Status ListSnapshotKeys(const std::function<void(const std::string&, std::string_view, uint64_t)>& fn) {
    const std::string under = prefix_ + "snapshots/";
    return store::S3ListKeys(client(), under, [&](std::string_view key, uint64_t size) {
      key.remove_prefix(under.size());
      const size_t slash = key.find('/');
      if (slash == std::string_view::npos) return;
      const std::string name(key.substr(0, slash));
      if (ValidSnapshotName(name)) fn(name, key.substr(slash + 1), size);
    });
  }

  Status DropKeysUnder(const std::string& dir) {
    std::vector<std::string> keys;
    if (auto st =
            store::S3ListKeys(client(), dir, [&](std::string_view key, uint64_t) { keys.emplace_back(key); });
        !st.ok())
      return st;
    return store::S3DeleteKeys(client(), keys);
  }

  const std::string bucket_;
  const std::string prefix_;  // "" or ending in '/'
  std::unique_ptr<store::S3Store> objects_;
  const size_t part_bytes_;
};

}  // namespace

Status SyncPath(const fs::path& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return PathIoError("open", path, errno);
  if (::fsync(fd.get()) != 0) return PathIoError("sync", path, errno);
  return Ok{};
}

Status WriteFileDurably(const fs::path& path, std::string_view text) {
  const fs::path tmp = path.string() + ".tmp";
  {
    UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (!fd.valid()) return PathIoError("create", tmp, errno);
    if (int e = WriteFull(fd.get(), AsBytes(text)); e != 0) return PathIoError("write", tmp, e);
    if (::fsync(fd.get()) != 0) return PathIoError("sync", tmp, errno);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) return PathIoError("rename", tmp, errno);
  return SyncPath(path.parent_path());
}

Result<std::string> ReadFileBounded(const fs::path& path, size_t max_bytes) {
  int raw = -1;
  const int err = OpenRegularFile(path.c_str(), &raw);
  UniqueFd fd(raw);
  if (err == ENOENT) return NotFound(path.string() + " does not exist");
  if (err == kNotRegularFile || err == kSymbolicLink)
    return Malformed(path.string() + " is " + OpenErrorText(err));
  if (err != 0) return PathIoError("open", path, err);
  std::string out;
  char buf[8192];
  for (;;) {
    const ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return PathIoError("read", path, errno);
    if (n == 0) return out;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > max_bytes) return Malformed(path.string() + " is too large");
  }
}

bool ValidSnapshotName(std::string_view name) {
  return !name.empty() && name.size() <= 64 && name.front() != '.' &&
         std::all_of(name.begin(), name.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '-' ||
                  c == '_';
         });
}

Result<std::unique_ptr<BackupSpace>> OpenBackupSpace(std::string_view where, const SpaceOptions& options) {
  if (where.starts_with("s3://")) {
    auto location = store::ParseStoreUrl(where);
    if (!location.ok()) return location.error();
    store::S3StoreOptions so;
    so.s3 = options.s3.s3;
    so.s3.bucket = location->bucket;
    so.prefix = location->prefix + "objects/";
    so.part_bytes = options.s3.s3_part_bytes;
    auto objects = store::S3Store::Open(so);
    if (!objects.ok()) return objects.error();
    return std::unique_ptr<BackupSpace>(std::make_unique<BucketSpace>(
        location->bucket, location->prefix, std::move(*objects), options.index_part_bytes));
  }
  if (where.starts_with("file:")) where.remove_prefix(5);
  if (where.empty()) return Malformed("a backup's place is a directory or s3://BUCKET[/PREFIX]");
  std::error_code ec;
  const fs::path root = fs::absolute(where, ec);
  if (ec) return IoError("backup " + std::string(where) + ": " + ec.message());
  if (options.create) {
    // A backup holds the signing keys: a directory this creates is its owner's alone.
    if (!fs::exists(root, ec) && fs::create_directories(root, ec))
      fs::permissions(root, fs::perms::owner_all, ec);
    fs::create_directories(root / "snapshots", ec);
    if (ec) return IoError("create " + (root / "snapshots").string() + ": " + ec.message());
  } else if (!fs::is_directory(root, ec)) {
    return NotFound(root.string() + " is not a directory (no backup there)");
  }
  auto objects = store::LocalDiskStore::Open(root / "objects");
  if (!objects.ok()) return objects.error();
  return std::unique_ptr<BackupSpace>(std::make_unique<DirSpace>(root, std::move(*objects)));
}

}  // namespace cairn::backup
