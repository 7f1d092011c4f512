// `cairn export` and `cairn import` (bundle/bundle.h, docs/mirror.md): a repository carried between servers
// with no connection between them, with the settings of `cairn serve`.
#include <boost/json.hpp>
#include <iostream>
#include <optional>
#include <string>

#include "bundle/bundle.h"
#include "cli/backend.h"
#include "cli/commands.h"
#include "common/clock.h"
#include "common/printable.h"
#include "common/worker_pool.h"

namespace cairn::cli {
namespace {

void Progress(std::string_view what, uint64_t done, uint64_t total) {
  if (total == 0) {
    std::cerr << "  " << what << "…\n";
  } else if (done % 16 == 0 || done == total) {
    std::cerr << "  " << what << ": " << done << " / " << total << "\r" << std::flush;
    if (done == total) std::cerr << "\n";
  }
}

// Exit status for an error: 2 for what the command was told (a name, a place), 1 for the rest.
int Failed(const char* who, const Error& e) {
  std::cerr << who << e.message << "\n";
  const bool usage = e.code == ErrorCode::kNotFound || e.code == ErrorCode::kConflict;
  return usage ? 2 : 1;
}

}  // namespace

int RunExport(const BundleCommandOptions& opts) {
  const char* who = "cairn export: ";
  auto arg = ParseRepoArg(opts.repo, true);
  if (!arg) {
    std::cerr << who << "REPO is [datasets/|spaces/]NS/NAME[@REVISION], not " << opts.repo << "\n";
    return 2;
  }
  int status = 0;
  auto opened = OpenCommandBackend(who, opts.config_file, opts.data_dir, opts.index, opts.store, &status);
  if (!opened) return status;
  ConfiguredBackend* backend = &opened->backend;
  bundle::ExportOptions eo;
  eo.revision = arg->revision;
  eo.now = Clock::System().UnixSeconds();
  eo.progress = Progress;
  auto report = bundle::Export(*backend->index, *backend->store, arg->id, opts.path, eo);
  if (!report) return Failed(who, report.error());
  const bundle::Manifest& m = report->manifest;
  // Not a change, but a repository's whole content leaving the site: who took it is worth knowing.
  RecordCommand(*backend->index, "bundle.export", m.repo.ns, hub::RepoPath(m.repo),
                std::to_string(m.refs.size()) + " refs to " + Printable(opts.path, 256));
  if (opts.json) {
    boost::json::array refs;
    for (const auto& r : m.refs)
      refs.push_back(boost::json::object{{"name", r.name}, {"commit", r.target.hex()}});
    std::cout << boost::json::serialize(boost::json::object{{"repo", hub::RepoPath(m.repo)},
                                                            {"refs", refs},
                                                            {"objects", m.objects},
                                                            {"pack_bytes", m.pack_bytes},
                                                            {"large_files", m.links.size()},
                                                            {"xorbs", m.xorbs.size()},
                                                            {"xorb_bytes", report->xorb_bytes},
                                                            {"shards", m.shards.size()}})
              << "\n";
  } else {
    std::cout << hub::RepoPath(m.repo) << " -> " << opts.path << ": " << m.refs.size() << " refs, "
              << m.objects << " git objects (" << m.pack_bytes << " bytes), " << m.links.size()
              << " large files in " << m.xorbs.size() << " xorbs (" << report->xorb_bytes << " bytes)\n";
  }
  return 0;
}

int RunImport(const BundleCommandOptions& opts) {
  const char* who = "cairn import: ";
  bundle::ImportOptions io;
  if (!opts.as.empty()) {
    auto as = ParseRepoArg(opts.as, false);
    if (!as) {
      std::cerr << who << "--as is [datasets/|spaces/]NS/NAME, not " << opts.as << "\n";
      return 2;
    }
    io.as = as->id;
  }
  int status = 0;
  auto opened = OpenCommandBackend(who, opts.config_file, opts.data_dir, opts.index, opts.store, &status);
  if (!opened) return status;
  ConfiguredBackend* backend = &opened->backend;
  // The services an upload goes through, as `cairn serve` makes them (signing nothing).
  WorkerPool workers(2);
  cas::CasService cas(*backend->index, *backend->store, workers, {});
  files::FileService files(cas, *backend->index, {});
  io.now = Clock::System().UnixSeconds();
  io.progress = Progress;
  auto report = bundle::Import(*backend->index, cas, files, opts.path, io);
  if (!report) return Failed(who, report.error());
  const bundle::Manifest& m = report->manifest;
  RecordCommand(*backend->index, "bundle.import", report->repo.ns, hub::RepoPath(report->repo),
                std::to_string(m.refs.size()) + " refs, " + std::to_string(report->new_xorbs) + " new xorbs" +
                    (report->mirrored ? " (mirrored)" : ""));
  if (opts.json) {
    std::cout << boost::json::serialize(boost::json::object{{"repo", hub::RepoPath(report->repo)},
                                                            {"mirrored", report->mirrored},
                                                            {"refs", m.refs.size()},
                                                            {"objects", m.objects},
                                                            {"large_files", m.links.size()},
                                                            {"xorbs", m.xorbs.size()},
                                                            {"new_xorbs", report->new_xorbs},
                                                            {"xorb_bytes", report->xorb_bytes}})
              << "\n";
  } else {
    std::cout << opts.path << " -> " << hub::RepoPath(report->repo) << (report->mirrored ? " (mirrored)" : "")
              << ": " << m.refs.size() << " refs, " << m.objects << " git objects, " << m.links.size()
              << " large files; " << report->new_xorbs << " of " << m.xorbs.size() << " xorbs new here\n";
  }
  return 0;
}

}  // namespace cairn::cli
