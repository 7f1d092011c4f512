#include "backup/backup.h"

#include <blake3.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>

#include "cas/grant.h"
#include "common/posix_io.h"
#include "common/unique_fd.h"
#include "common/worker_pool.h"
#include "index/open_index.h"
#include "index/snapshot.h"
#include "repair/fsck.h"
#include "store/store_copy.h"

namespace cairn::backup {
namespace fs = std::filesystem;
namespace {

using xet::Hash;

constexpr std::string_view kManifestHeader = "cairn-backup 1";
constexpr size_t kMaxManifestBytes = 1 << 20;

// A private temporary directory, removed with everything in it when this goes.
class Scratch {
 public:
  static Result<Scratch> Make(const fs::path& base) {
    std::error_code ec;
    const fs::path parent = base.empty() ? fs::temp_directory_path(ec) : base;
    if (ec) return IoError("no temporary directory: " + ec.message());
    std::string pattern = (parent / "cairn-backup-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) return PathIoError("create a directory in", parent, errno);
    return Scratch(pattern);
  }
  Scratch(Scratch&& o) noexcept : path_(std::move(o.path_)) { o.path_.clear(); }
  Scratch& operator=(Scratch&&) = delete;
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  ~Scratch() {
    std::error_code ec;
    if (!path_.empty()) fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  explicit Scratch(fs::path p) : path_(std::move(p)) {}
  fs::path path_;
};

// The size and BLAKE3 (hex) of a file.
Result<std::pair<uint64_t, std::string>> HashFile(const fs::path& path) {
  int raw = -1;
  const int err = OpenRegularFile(path.c_str(), &raw);
  UniqueFd fd(raw);
  if (err == kNotRegularFile || err == kSymbolicLink)
    return Malformed(path.string() + " is " + OpenErrorText(err));
  if (err != 0) return PathIoError("open", path, err);
  blake3_hasher h;
  blake3_hasher_init(&h);
  std::vector<uint8_t> buf(1 << 20);
  uint64_t size = 0;
  for (;;) {
    const ssize_t n = ::read(fd.get(), buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return PathIoError("read", path, errno);
    if (n == 0) break;
    blake3_hasher_update(&h, buf.data(), static_cast<size_t>(n));
    size += static_cast<uint64_t>(n);
  }
  Hash out;
  blake3_hasher_finalize(&h, out.bytes.data(), out.bytes.size());
  return std::pair{size, out.hex()};
}

std::string SnapshotName(int64_t unix_seconds) {
  const auto t = static_cast<time_t>(unix_seconds);
  std::tm tm{};
  (void)gmtime_r(&t, &tm);
  char buf[32];
  (void)std::strftime(buf, sizeof buf, "%Y%m%dT%H%M%SZ", &tm);
  return buf;
}

// A snapshot's manifest, and its index file (fetched into `scratch` from a bucket) checked against it.
Result<std::pair<Manifest, fs::path>> CheckedSnapshot(BackupSpace& space, const std::string& name,
                                                      const fs::path& scratch) {
  const std::string where = space.Describe() + " snapshot " + name;
  auto text = space.ReadManifest(name);
  if (!text.ok()) return text.error();
  auto m = ParseManifest(*text);
  if (!m.ok()) return Error{m.error().code, where + " manifest: " + m.error().message};
  auto file = space.IndexFile(name, scratch);
  if (!file.ok()) return file.error();
  auto h = HashFile(*file);
  if (!h.ok()) return h.error();
  if (h->first != m->index_bytes || h->second != m->index_blake3) {
    return HashMismatch(where + ": index.sqlite is not the file its manifest describes (" +
                        std::to_string(h->first) + " bytes, BLAKE3 " + h->second.substr(0, 16) +
                        "…; the manifest says " + std::to_string(m->index_bytes) + " bytes, " +
                        m->index_blake3.substr(0, 16) + "…)");
  }
  return std::pair{std::move(*m), std::move(*file)};
}

// The objects of one snapshot, by kind: its xorbs and shards, and the grants of those shards (named from
// the recorded scopes; for shards registered before scopes were recorded, found among `grants_from`'s).
struct Named {
  std::vector<Hash> xorbs, shards, grants;
  index::SnapshotObjects objects;
};

Result<Named> NamedBy(const fs::path& index_file, store::BlobStore& grants_from) {
  auto objects = index::ReadSnapshotObjects(index_file.string());
  if (!objects.ok()) return objects.error();
  Named n;
  n.xorbs.assign(objects->xorbs.begin(), objects->xorbs.end());
  n.shards = objects->shards;
  for (const auto& s : objects->shard_scopes) n.grants.push_back(cas::GrantName({s.shard, s.scope}));
  if (!objects->unscoped_shards.empty()) {
    const std::set<Hash> unscoped(objects->unscoped_shards.begin(), objects->unscoped_shards.end());
    std::vector<Hash> all;
    if (auto st = grants_from.List(store::BlobKind::kGrant, [&](const Hash& h) { all.push_back(h); });
        !st.ok())
      return st.error();
    for (const Hash& name : all) {
      auto bytes = grants_from.ReadWhole(store::BlobKind::kGrant, name);
      if (!bytes.ok()) continue;  // gone meanwhile: its shard's sweep (claimed, so not in the snapshot)
      if (auto g = cas::ParseGrant(*bytes); g.ok() && unscoped.contains(g->shard)) n.grants.push_back(name);
    }
  }
  std::sort(n.grants.begin(), n.grants.end());
  n.grants.erase(std::unique(n.grants.begin(), n.grants.end()), n.grants.end());
  n.objects = std::move(*objects);
  return n;
}

// Copies the blobs of `kind` in `hashes` that `have` lacks; counts into `counts`; failures into `failed`.
void CopyMissing(store::BlobStore& from, store::BlobStore& to, store::BlobKind kind,
                 const std::vector<Hash>& hashes, const std::set<Hash>& have, size_t threads,
                 const std::function<void(std::string_view, uint64_t, uint64_t)>& progress,
                 ObjectCounts& counts, std::vector<std::string>& failed) {
  std::vector<Hash> todo;
  for (const Hash& h : hashes) {
    if (!have.contains(h)) todo.push_back(h);
  }
  store::StoreCopyOptions o;
  o.verify = repair::VerifyStoredBlob;
  o.threads = threads;
  o.read_back = false;  // durable once Put returns; `cairn backup --verify` and `cairn fsck --deep` re-read
  if (progress) {
    o.progress = [&](store::BlobKind k, uint64_t done, uint64_t total) {
      progress(store::BlobKindName(k), done, total);
    };
  }
  const store::KindCopyReport r = store::CopyBlobs(from, to, kind, todo, o);
  counts.named = hashes.size();
  counts.copied = r.copied;
  counts.already = hashes.size() - todo.size() + r.present;
  counts.bytes_copied = r.copied_bytes;
  for (const auto& f : r.failed) failed.push_back(std::string(store::BlobKindName(kind)) + " " + f);
}

Status Step(const BackupOptions& o, std::string_view step) {
  return o.hook ? o.hook(step) : Status(Ok{});
}

// What a kept snapshot names: read once per run (for the copy and for the prune) from its index file.
Result<const Named*> NamedIn(BackupSpace& space, const std::string& name, const fs::path& scratch,
                             std::map<std::string, Named>& named) {
  if (auto it = named.find(name); it != named.end()) return &it->second;
  auto file = space.IndexFile(name, scratch);
  if (!file.ok()) return file.error();
  auto n = NamedBy(*file, space.objects());
  if (file->parent_path() == scratch) {
    std::error_code ec;
    fs::remove(*file, ec);  // fetched from a bucket: not needed any more
  }
  if (!n.ok()) return Error{n.error().code, "snapshot " + name + ": " + n.error().message};
  return &named.emplace(name, std::move(*n)).first->second;
}

// Drops unfinished snapshots and those beyond `keep`, then the objects no kept snapshot names.
Status Prune(BackupSpace& space, size_t keep, const fs::path& scratch, BackupReport& report,
             std::map<std::string, Named>& named) {
  if (auto st = space.DropUnfinished(); !st.ok()) return st;
  auto names = space.Snapshots();
  if (!names.ok()) return names.error();
  while (names->size() > std::max<size_t>(keep, 1)) {
    if (auto st = space.Drop(names->front()); !st.ok()) return st;
    names->erase(names->begin());
    ++report.dropped_snapshots;
  }
  std::set<Hash> wanted[3];
  for (const auto& name : *names) {
    auto n = NamedIn(space, name, scratch, named);
    if (!n.ok()) return n.error();
    wanted[0].insert((*n)->xorbs.begin(), (*n)->xorbs.end());
    wanted[1].insert((*n)->shards.begin(), (*n)->shards.end());
    wanted[2].insert((*n)->grants.begin(), (*n)->grants.end());
  }
  const store::BlobKind kinds[] = {store::BlobKind::kXorb, store::BlobKind::kShard, store::BlobKind::kGrant};
  for (size_t k = 0; k < 3; ++k) {
    std::vector<Hash> unwanted;
    if (auto st = space.objects().List(kinds[k],
                                       [&](const Hash& h) {
                                         if (!wanted[k].contains(h)) unwanted.push_back(h);
                                       });
        !st.ok())
      return st;
    if (auto st = space.objects().DeleteMany(kinds[k], unwanted); !st.ok()) return st;
    report.pruned_objects += unwanted.size();
  }
  return Ok{};
}

}  // namespace

std::string Manifest::Encode() const {
  std::string out = std::string(kManifestHeader) + "\n";
  out += "name " + name + "\n";
  out += "taken_at " + std::to_string(taken_at) + "\n";
  out += "schema " + std::to_string(schema) + "\n";
  out += "index " + std::to_string(index_bytes) + " " + index_blake3 + "\n";
  out += "xorbs " + std::to_string(xorbs) + " " + std::to_string(xorb_bytes) + "\n";
  out += "shards " + std::to_string(shards) + " " + std::to_string(shard_bytes) + "\n";
  out += "grants " + std::to_string(grants) + "\n";
  for (const auto& t : tables)
    out += "table " + t.table + " " + std::to_string(t.rows) + " " + t.digest + "\n";
  return out;
}

Result<Manifest> ParseManifest(std::string_view text) {
  if (text.size() > kMaxManifestBytes) return Malformed("manifest too large");
  std::vector<std::vector<std::string_view>> lines;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    if (nl == std::string_view::npos) return Malformed("manifest: the last line is not ended");
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl + 1);
    std::vector<std::string_view> words;
    while (!line.empty()) {
      const size_t sp = line.find(' ');
      words.push_back(line.substr(0, sp));
      if (sp == std::string_view::npos) break;
      line.remove_prefix(sp + 1);
    }
    lines.push_back(std::move(words));
  }
  if (lines.empty() || lines[0].size() != 2 || lines[0][0] != "cairn-backup" || lines[0][1] != "1")
    return Malformed("not a cairn backup manifest (version 1)");
  const auto number = [](std::string_view s, uint64_t& out) {
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    return ec == std::errc() && p == s.data() + s.size() && !s.empty();
  };
  const auto hex64 = [](std::string_view s) {
    return s.size() == 64 && std::all_of(s.begin(), s.end(), [](char c) {
             return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
           });
  };
  Manifest m;
  std::set<std::string_view> seen;
  for (size_t i = 1; i < lines.size(); ++i) {
    const auto& w = lines[i];
    const std::string_view key = w.empty() ? std::string_view() : w[0];
    if (key != "table" && !seen.insert(key).second)
      return Malformed("manifest: " + std::string(key) + " twice");
    uint64_t a = 0, b = 0;
    bool good = false;
    if (key == "name" && w.size() == 2) {
      m.name = w[1];
      good = ValidSnapshotName(m.name);
    } else if (key == "taken_at" && w.size() == 2) {
      good = number(w[1], a) && a < (1ULL << 62);
      m.taken_at = static_cast<int64_t>(a);
    } else if (key == "schema" && w.size() == 2) {
      good = number(w[1], a) && a < 1000000;
      m.schema = static_cast<int>(a);
    } else if (key == "index" && w.size() == 3) {
      good = number(w[1], m.index_bytes) && hex64(w[2]);
      m.index_blake3 = w[2];
    } else if (key == "xorbs" && w.size() == 3) {
      good = number(w[1], m.xorbs) && number(w[2], m.xorb_bytes);
    } else if (key == "shards" && w.size() == 3) {
      good = number(w[1], m.shards) && number(w[2], m.shard_bytes);
    } else if (key == "grants" && w.size() == 2) {
      good = number(w[1], m.grants);
    } else if (key == "table" && w.size() == 4) {
      good = number(w[2], b) && hex64(w[3]) && !w[1].empty();
      m.tables.push_back({std::string(w[1]), b, 0, std::string(w[3])});
    }
    if (!good) return Malformed("manifest: line " + std::to_string(i + 1) + " is not understood");
  }
  for (std::string_view key : {"name", "taken_at", "schema", "index", "xorbs", "shards", "grants"}) {
    if (!seen.contains(key)) return Malformed("manifest: no " + std::string(key));
  }
  return m;
}

Result<BackupReport> TakeBackup(std::string_view index_url, store::BlobStore& store, BackupSpace& dest,
                                const BackupOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  auto dest_hold = dest.Hold();
  if (!dest_hold.ok()) return dest_hold.error();
  auto scratch = Scratch::Make(options.scratch);
  if (!scratch.ok()) return scratch.error();
  auto source = index::OpenIndex(index_url);
  if (!source.ok()) return source.error();

  BackupReport report;
  // 1. No collector deletes a stored byte from now until the objects are copied.
  const auto w0 = std::chrono::steady_clock::now();
  auto hold = (*source)->HoldDeletions(index::GcIndex::DeletionHold::kShared, /*wait=*/true);
  if (!hold.ok()) return hold.error();
  report.waited_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count();
  if (auto st = Step(options, "held"); !st.ok()) return st.error();

  // 2. The index at one moment.
  Manifest& m = report.manifest;
  m.taken_at = options.clock->UnixSeconds();
  m.name = SnapshotName(m.taken_at);
  for (int n = 2;; ++n) {
    auto taken = dest.Taken(m.name);
    if (!taken.ok()) return taken.error();
    if (!*taken) break;
    m.name = SnapshotName(m.taken_at) + "-" + std::to_string(n);
  }
  auto index_file = dest.Begin(m.name, scratch->path());
  if (!index_file.ok()) return index_file.error();
  index::CopyIndexOptions co;
  co.snapshot = true;
  if (options.progress) {
    co.progress = [&](const index::TableCopyReport& t) { options.progress(t.table, t.copied, 0); };
  }
  auto copied = index::CopyIndex(index_url, "sqlite:" + index_file->string(), co);
  if (!copied.ok()) return Error{copied.error().code, "snapshot of the index: " + copied.error().message};
  m.tables = std::move(copied->tables);
  if (auto st = index::SealSnapshotFile(index_file->string()); !st.ok()) return st.error();
  auto version = index::SqliteSchemaVersion(index_file->string());
  if (!version.ok()) return version.error();
  m.schema = *version;
  if (auto st = Step(options, "snapshot"); !st.ok()) return st.error();

  // 3. The objects it names that the backup does not hold yet.
  auto named = NamedBy(*index_file, store);
  if (!named.ok()) return named.error();
  std::set<Hash> have[3];
  auto earlier = dest.Snapshots();
  if (!earlier.ok()) return earlier.error();
  std::map<std::string, Named> named_by;  // read once, for the copy and for the prune
  for (const auto& name : *earlier) {
    auto n = NamedIn(dest, name, scratch->path(), named_by);
    if (!n.ok()) return n.error();
    have[0].insert((*n)->xorbs.begin(), (*n)->xorbs.end());
    have[1].insert((*n)->shards.begin(), (*n)->shards.end());
    have[2].insert((*n)->grants.begin(), (*n)->grants.end());
  }
  std::vector<std::string> failed;
  CopyMissing(store, dest.objects(), store::BlobKind::kXorb, named->xorbs, have[0], options.threads,
              options.progress, report.xorbs, failed);
  CopyMissing(store, dest.objects(), store::BlobKind::kShard, named->shards, have[1], options.threads,
              options.progress, report.shards, failed);
  CopyMissing(store, dest.objects(), store::BlobKind::kGrant, named->grants, have[2], options.threads,
              options.progress, report.grants, failed);
  if (!failed.empty()) {
    std::string list;
    for (size_t i = 0; i < failed.size() && i < 10; ++i) list += "\n  " + failed[i];
    return Inconsistent("backup: " + std::to_string(failed.size()) +
                        " objects could not be copied and verified; the backup is not complete:" + list);
  }
  hold->reset();  // every byte the snapshot names is in the backup
  if (auto st = Step(options, "copied"); !st.ok()) return st.error();

  // 4. Complete: the index file and the manifest kept, then LATEST.
  m.xorbs = named->xorbs.size();
  m.xorb_bytes = named->objects.xorb_bytes;
  m.shards = named->shards.size();
  m.shard_bytes = named->objects.shard_bytes;
  m.grants = named->grants.size();
  auto h = HashFile(*index_file);
  if (!h.ok()) return h.error();
  m.index_bytes = h->first;
  m.index_blake3 = h->second;
  if (auto st = dest.Complete(m.name, *index_file, m.Encode()); !st.ok()) return st.error();
  if (auto st = dest.SetLatest(m.name); !st.ok()) return st.error();
  if (auto st = Step(options, "complete"); !st.ok()) return st.error();

  named_by.emplace(m.name, std::move(*named));
  if (auto st = Prune(dest, options.keep, scratch->path(), report, named_by); !st.ok()) return st.error();
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return report;
}

Result<VerifyReport> VerifyBackup(BackupSpace& space, size_t threads) {
  if (auto latest = space.Latest(); !latest.ok()) return latest.error();
  auto names = space.Snapshots();
  if (!names.ok()) return names.error();
  auto scratch = Scratch::Make({});
  if (!scratch.ok()) return scratch.error();
  VerifyReport report;
  std::map<std::pair<store::BlobKind, Hash>, int> todo;
  for (const auto& name : *names) {
    report.snapshots.push_back(name);
    auto checked = CheckedSnapshot(space, name, scratch->path());
    if (!checked.ok()) {
      report.failed.push_back("snapshot " + name + ": " + checked.error().message);
      continue;
    }
    auto n = NamedBy(checked->second, space.objects());
    if (!n.ok()) {
      report.failed.push_back("snapshot " + name + ": " + n.error().message);
      continue;
    }
    for (const Hash& x : n->xorbs) todo[{store::BlobKind::kXorb, x}] = 0;
    for (const Hash& s : n->shards) todo[{store::BlobKind::kShard, s}] = 0;
    for (const Hash& g : n->grants) todo[{store::BlobKind::kGrant, g}] = 0;
    std::error_code ec;
    if (checked->second.parent_path() == scratch->path()) fs::remove(checked->second, ec);  // fetched
  }
  const std::vector<std::pair<store::BlobKind, Hash>> list = [&] {
    std::vector<std::pair<store::BlobKind, Hash>> v;
    for (const auto& [k, unused] : todo) v.push_back(k);
    return v;
  }();
  std::mutex mu;
  WorkerPool pool(std::max<size_t>(threads, 1) - 1);
  pool.ParallelFor(list.size(), [&](size_t i) {
    const auto& [kind, hash] = list[i];
    auto bytes = space.objects().ReadWhole(kind, hash);
    std::string why;
    if (!bytes.ok()) {
      why = bytes.error().message;
    } else if (!repair::VerifyStoredBlob(kind, hash, *bytes)) {
      why = "its bytes do not hash to its name";
    }
    std::lock_guard lock(mu);
    ++report.objects;
    if (bytes.ok()) report.bytes += bytes->size();
    if (!why.empty())
      report.failed.push_back(std::string(store::BlobKindName(kind)) + " " + hash.hex() + ": " + why);
  });
  std::sort(report.failed.begin(), report.failed.end());
  return report;
}

Result<RestoreReport> Restore(BackupSpace& src, std::string_view index_url, store::BlobStore& store,
                              const RestoreOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  std::string name = options.snapshot;
  if (name.empty()) {
    auto latest = src.Latest();
    if (!latest.ok()) return latest.error();
    name = *latest;
  }
  if (!ValidSnapshotName(name)) return Malformed("no snapshot is named '" + name + "'");
  auto scratch = Scratch::Make(options.scratch);
  if (!scratch.ok()) return scratch.error();
  RestoreReport report;
  auto checked = CheckedSnapshot(src, name, scratch->path());
  if (!checked.ok()) return checked.error();
  report.manifest = std::move(checked->first);
  const fs::path snapshot_file = std::move(checked->second);

  {  // The destination holds nothing (no server has started on it), or an interrupted restore.
    auto target = index::OpenIndex(index_url);
    if (!target.ok()) return target.error();
    auto stats = (*target)->Stats();
    if (!stats.ok()) return stats.error();
    auto secrets = (*target)->ListSecrets();
    if (!secrets.ok()) return secrets.error();
    bool repos = false;
    for (auto type : {index::RepoType::kModel, index::RepoType::kDataset, index::RepoType::kSpace,
                      index::RepoType::kBucket}) {
      auto r = (*target)->ListRepos(type, std::nullopt, std::nullopt, 1);
      if (!r.ok()) return r.error();
      repos = repos || !r->empty();
    }
    const bool empty =
        stats->xorbs == 0 && stats->files == 0 && stats->shards == 0 && secrets->empty() && !repos;
    if (!empty && !options.resume) {
      return Conflict(
          "the destination index is not empty (" + std::to_string(stats->files) + " files, " +
          std::to_string(stats->xorbs) + " xorbs, " + std::to_string(secrets->size()) +
          " secrets): restore into a fresh deployment, one no server has started on (or add --resume to "
          "finish an interrupted restore of this snapshot)");
    }
  }

  // Objects first: the index, copied last, names them.
  auto named = NamedBy(snapshot_file, src.objects());
  if (!named.ok()) return named.error();
  std::vector<std::string> failed;
  const std::set<Hash> none;
  CopyMissing(src.objects(), store, store::BlobKind::kXorb, named->xorbs, none, options.threads,
              options.progress, report.xorbs, failed);
  CopyMissing(src.objects(), store, store::BlobKind::kShard, named->shards, none, options.threads,
              options.progress, report.shards, failed);
  CopyMissing(src.objects(), store, store::BlobKind::kGrant, named->grants, none, options.threads,
              options.progress, report.grants, failed);
  if (!failed.empty()) {
    std::string list;
    for (size_t i = 0; i < failed.size() && i < 10; ++i) list += "\n  " + failed[i];
    return Inconsistent("restore: " + std::to_string(failed.size()) +
                        " objects could not be copied and verified (cairn backup --verify tells which the "
                        "backup lost); nothing was written to the index:" +
                        list);
  }
  for (const auto& r : named->objects.revocations) {
    if (auto st = cas::RecordRevocation(store, {r.file, r.scope}); !st.ok()) return st.error();
    ++report.revocations;
  }

  auto version = index::SqliteSchemaVersion(snapshot_file.string());
  if (!version.ok()) return version.error();
  index::CopyIndexOptions co;
  if (options.progress) {
    co.progress = [&](const index::TableCopyReport& t) { options.progress(t.table, t.copied, 0); };
  }
  // An older snapshot is migrated in a scratch copy, never in the backup.
  std::string from = snapshot_file.string();
  if (*version == index::SchemaVersion()) {
    co.read_only_source = true;
  } else {
    std::error_code ec;
    const fs::path migrated = scratch->path() / "migrated.sqlite";
    fs::copy_file(snapshot_file, migrated, fs::copy_options::overwrite_existing, ec);
    if (ec) return IoError("copy the snapshot to " + migrated.string() + ": " + ec.message());
    from = migrated.string();
  }
  auto copied = index::CopyIndex("sqlite:" + from, index_url, co);
  if (!copied.ok()) return Error{copied.error().code, "restore of the index: " + copied.error().message};
  report.index = std::move(*copied);
  for (const auto& t : co.read_only_source ? report.manifest.tables : std::vector<index::TableCopyReport>{}) {
    // The rows the backup took are the rows restored (an older snapshot's were migrated: not compared).
    auto it = std::find_if(report.index.tables.begin(), report.index.tables.end(),
                           [&](const index::TableCopyReport& r) { return r.table == t.table; });
    if (it == report.index.tables.end() || it->rows != t.rows || it->digest != t.digest) {
      return Inconsistent("restore: table " + t.table + " differs from what the backup's manifest says");
    }
  }
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return report;
}

}  // namespace cairn::backup
