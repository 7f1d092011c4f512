// `cairn store …`: operations on the blob store.
#include <iostream>
#include <map>
#include <string>

#include "cli/backend.h"
#include "cli/commands.h"
#include "config/config.h"
#include "repair/fsck.h"
#include "store/store_copy.h"

namespace cairn::cli {
int RunStoreCopy(const StoreCopyOptions& opts) {
  // Each side's settings come from its own file when one is given (two S3 endpoints, each with its own
  // credentials), else from --config; the environment applies to both.
  const auto open = [&](const std::string& url, const std::string& side_config,
                        const char* flag) -> Result<std::unique_ptr<store::BlobStore>> {
    auto cfg = config::LoadCommandConfig(side_config.empty() ? opts.config_file : side_config, {});
    if (!cfg) return Malformed(std::string(flag) + ": " + cfg.error().message);
    cfg->store = url;
    auto st = OpenConfiguredStore(*cfg);
    if (!st) return IoError(std::string(flag) + ": " + st.error().message);
    return std::move(*st);
  };
  const auto refused = [](const Error& e) {
    std::cerr << "cairn store copy: " << e.message << "\n";
    return e.code == ErrorCode::kMalformed ? 2 : 1;
  };
  auto from = open(opts.from, opts.from_config, "--from");
  if (!from) return refused(from.error());
  auto to = open(opts.to, opts.to_config, "--to");
  if (!to) return refused(to.error());
  store::BlobStore& source = **from;
  store::BlobStore& target = **to;
  std::cerr << "copying " << source.Describe() << " -> " << target.Describe() << "\n";
  store::StoreCopyOptions co;
  co.verify = repair::VerifyStoredBlob;
  co.threads = opts.threads;
  co.progress = [](store::BlobKind kind, uint64_t done, uint64_t total) {
    if (done % 64 == 0 || done == total)
      std::cerr << "  " << store::BlobKindName(kind) << "s: " << done << " / " << total << "\r" << std::flush;
  };
  auto report = store::CopyStore(source, target, co);
  std::cerr << "\n";
  if (!report) {
    std::cerr << "cairn store copy: " << report.error().message << "\n";
    return 1;
  }
  for (const auto& k : report->kinds) {
    std::cout << store::BlobKindName(k.kind) << "s: " << k.listed << " (" << k.copied << " copied now, "
              << k.present << " already there), " << k.bytes << " bytes";
    std::cout << (k.failed.empty() ? ", every one verified\n"
                                   : ", " + std::to_string(k.failed.size()) + " FAILED\n");
    for (const auto& f : k.failed) std::cout << "  failed " << f << "\n";
  }
  if (!report->ok()) {
    std::cerr
        << "cairn store copy: some blobs are not verified at the destination (listed above); run it again "
           "once their cause is mended\n";
    return 1;
  }
  std::cout << "verified: " << target.Describe() << " holds every blob of " << source.Describe() << "\n";
  return 0;
}

}  // namespace cairn::cli
