// `cairn mirror ls|prefetch|evict|trim` (docs/mirror.md): the pull-through mirror's repositories, worked on
// through the deployment's index and store as `cairn serve` would (prefetch runs the mirror itself: a
// repository and its large files copied before a job needs them).
#include <boost/json.hpp>
#include <iostream>
#include <optional>
#include <string>

#include "cas/service.h"
#include "cli/backend.h"
#include "cli/commands.h"
#include "common/worker_pool.h"
#include "files/file_service.h"
#include "hub/hub_service.h"
#include "mirror/mirror_service.h"

namespace cairn::cli {
namespace {

using Opened = OpenedBackend;
std::optional<Opened> Open(const char* verb, const MirrorCommandOptions& opts, int* status) {
  return OpenCommandBackend(std::string("cairn mirror ") + verb + ": ", opts.config_file, opts.data_dir,
                            opts.index, opts.store, status);
}

// The services a mirror runs on, over the command's backend, as `cairn serve` makes them (signing nothing).
struct MirrorStack {
  explicit MirrorStack(Opened& o)
      : workers(2),
        cas(*o.backend.index, *o.backend.store, workers, {}),
        files(cas, *o.backend.index, {}),
        hub(*o.backend.index, files, {}),
        mirror(*o.backend.index, *o.backend.index, hub, files, cas, Options(o.cfg)) {}
  static mirror::MirrorOptions Options(const config::Config& cfg) {
    auto mo = MirrorOptionsOf(cfg);
    mo.evict_interval = std::chrono::seconds(0);  // a command checks the limit when it says so
    return mo;
  }
  WorkerPool workers;
  cas::CasService cas;
  files::FileService files;
  hub::HubService hub;
  mirror::MirrorService mirror;
};

}  // namespace

int RunMirrorLs(const MirrorCommandOptions& opts) {
  int status = 0;
  auto opened = Open("ls", opts, &status);
  if (!opened) return status;
  index::Index& index = *opened->backend.index;
  size_t listed = 0;
  auto st = hub::ForEachMirrored(index, [&](index::RepoRecord&& r) -> Status {
    auto refs = index.ListRefs(r.id);
    if (!refs) return refs.error();
    const std::string name = hub::RepoPath({r.type, r.ns, r.name});
    boost::json::object out{{"repo", name}, {"fetched_at", r.created_at}};
    boost::json::object targets;
    std::string line = name;
    for (const auto& ref : *refs) {
      const auto oid = hub::ObjectId::FromBytes(ref.target);
      const std::string hex = oid ? oid->hex() : "?";
      targets[(ref.kind == index::RefKind::kBranch ? "refs/heads/" : "refs/tags/") + ref.name] = hex;
      line += " " + ref.name + "=" + hex.substr(0, 12);
    }
    out["refs"] = std::move(targets);
    std::cout << (opts.json ? boost::json::serialize(out) : line) << "\n";
    ++listed;
    return Ok{};
  });
  if (!st) {
    std::cerr << "cairn mirror ls: " << st.error().message << "\n";
    return 1;
  }
  if (!opts.json) std::cerr << listed << " mirrored repositories\n";
  return 0;
}

int RunMirrorPrefetch(const MirrorCommandOptions& opts) {
  auto arg = ParseRepoArg(opts.repo, true);
  if (!arg) {
    std::cerr << "cairn mirror prefetch: REPO is [datasets/|spaces/]NS/NAME[@REVISION], not " << opts.repo
              << "\n";
    return 2;
  }
  int status = 0;
  auto opened = Open("prefetch", opts, &status);
  if (!opened) return status;
  if (opened->cfg.mirror_upstream.empty()) {
    std::cerr << "cairn mirror prefetch: mirror_upstream is not set (docs/mirror.md)\n";
    return 2;
  }
  MirrorStack stack(*opened);
  mirror::MirrorService& mirror = stack.mirror;
  hub::HubService& hub = stack.hub;
  const auto fail = [](const Error& e) {
    std::cerr << "cairn mirror prefetch: " << e.message << "\n";
    return e.code == ErrorCode::kUnavailable ? 3 : 1;
  };
  // The command speaks for the deployment: a caller the read policy lets through.
  const hub::Caller caller{.scope = "cairn mirror prefetch", .write = false, .expires = 0};
  auto repo = mirror.Open(caller, arg->id);
  if (!repo) return fail(repo.error());
  if (!hub::IsMirrored(repo->record)) {
    std::cerr << "cairn mirror prefetch: " << hub::RepoPath(arg->id) << " is held here, not mirrored\n";
    return 2;
  }
  auto commit = mirror.Resolve(*repo, arg->revision.empty() ? hub.options().default_branch : arg->revision);
  if (!commit) return fail(commit.error());
  auto entries = hub.List(*repo, *commit, "", true);
  if (!entries) return fail(entries.error());
  size_t large = 0, done = 0;
  uint64_t total = 0;
  for (const auto& e : *entries) {
    if (!e.is_dir && e.lfs) {
      ++large;
      total += e.size;
    }
  }
  std::cerr << hub::RepoPath(arg->id) << "@" << commit->hex() << ": " << entries->size() << " entries, "
            << large << " large files (" << total << " bytes)\n";
  for (const auto& e : *entries) {
    if (e.is_dir || !e.lfs) continue;
    auto file = mirror.Large(*repo, *commit, e);
    if (!file) return fail(file.error());
    std::cerr << "[" << ++done << "/" << large << "] " << e.path << " " << e.size << " bytes\n";
  }
  const auto c = mirror.counters();
  if (opts.json) {
    std::cout << boost::json::serialize(boost::json::object{{"repo", hub::RepoPath(arg->id)},
                                                            {"commit", commit->hex()},
                                                            {"large_files", large},
                                                            {"fetched", c.files_fetched},
                                                            {"held", c.file_hits},
                                                            {"upstream_bytes", c.upstream_bytes},
                                                            {"stored_bytes", c.new_bytes}})
              << "\n";
  } else {
    std::cout << hub::RepoPath(arg->id) << "@" << commit->hex() << ": " << large << " large files, "
              << c.files_fetched << " fetched (" << c.upstream_bytes << " bytes from upstream, "
              << c.new_bytes << " stored), " << c.file_hits << " held already\n";
  }
  return 0;
}

int RunMirrorEvict(const MirrorCommandOptions& opts) {
  auto arg = ParseRepoArg(opts.repo, false);
  if (!arg) {
    std::cerr << "cairn mirror evict: REPO is [datasets/|spaces/]NS/NAME, not " << opts.repo << "\n";
    return 2;
  }
  int status = 0;
  auto opened = Open("evict", opts, &status);
  if (!opened) return status;
  index::Index& index = *opened->backend.index;
  auto found = index.FindRepo(arg->id.type, arg->id.ns, arg->id.name);
  if (!found) {
    std::cerr << "cairn mirror evict: " << hub::RepoPath(arg->id) << ": " << found.error().message << "\n";
    return found.error().code == ErrorCode::kNotFound ? 2 : 1;
  }
  if (!hub::IsMirrored(*found)) {
    std::cerr << "cairn mirror evict: " << hub::RepoPath(arg->id)
              << " is held here, not mirrored: nothing evicted\n";
    return 2;
  }
  const auto event =
      CommandActor().Event(Clock::System().UnixSeconds(), "repo.evict", arg->id.ns, hub::RepoPath(arg->id));
  if (auto st = index.DeleteRepo(found->id, &event); !st) {
    std::cerr << "cairn mirror evict: " << st.error().message << "\n";
    return 1;
  }
  std::cout
      << "evicted " << hub::RepoPath(arg->id)
      << ": the collector frees what nothing else uses once gc_grace has passed; a read copies it again\n";
  return 0;
}

int RunMirrorTrim(const MirrorCommandOptions& opts) {
  int status = 0;
  auto opened = Open("trim", opts, &status);
  if (!opened) return status;
  uint64_t limit = opened->cfg.mirror_max_bytes;
  if (!opts.max_bytes.empty()) {
    auto n = config::ParseByteSize(opts.max_bytes);
    if (!n) {
      std::cerr << "cairn mirror trim: --max-bytes: " << n.error().message << "\n";
      return 2;
    }
    limit = *n;
  }
  MirrorStack stack(*opened);
  auto report = stack.mirror.Evict(limit);
  if (!report) {
    std::cerr << "cairn mirror trim: " << report.error().message << "\n";
    return 1;
  }
  if (opts.json) {
    boost::json::array evicted;
    for (const auto& name : report->evicted) evicted.emplace_back(name);
    std::cout << boost::json::serialize(boost::json::object{{"repos", report->repos},
                                                            {"held_bytes", report->held_bytes},
                                                            {"kept_bytes", report->kept_bytes},
                                                            {"limit_bytes", limit},
                                                            {"evicted", std::move(evicted)}})
              << "\n";
  } else {
    for (const auto& name : report->evicted) std::cout << "evicted " << name << "\n";
    std::cout << report->repos << " mirrored repositories held " << report->held_bytes
              << " bytes of large files; " << report->kept_bytes << " kept"
              << (limit > 0 ? " (limit " + std::to_string(limit) + ")"
                            : std::string(" (no limit: measured only)"))
              << "; the collector frees what the evicted ones held once gc_grace has passed\n";
  }
  return 0;
}

}  // namespace cairn::cli
