// `cairn store …`: operations on the blob store.
#include <iostream>
#include <map>
#include <string>

#include "cli/backend.h"
#include "cli/commands.h"
#include "config/config.h"
#include "store/store_copy.h"
#include "xet/hashing.h"
#include "xet/xorb.h"

namespace cairn::cli {
namespace {

// A stored blob is what its name says: a xorb validates against its hash (every chunk decoded and hashed)
// with the footer cairn writes; a shard's bytes hash to its name.
bool VerifyBlob(store::BlobKind kind, const xet::Hash& hash, std::span<const uint8_t> bytes) {
  if (kind == store::BlobKind::kShard) return xet::ChunkHashOf(bytes) == hash;
  xet::ValidateOptions vo;
  vo.expected_hash = &hash;
  auto v = xet::ValidateXorb(bytes, vo);
  return v.ok() && v->footer == xet::FooterVersion::kV1;
}

}  // namespace

int RunStoreCopy(const StoreCopyOptions& opts) {
  auto base = config::LoadCommandConfig(opts.config_file, {});
  if (!base) {
    std::cerr << "cairn store copy: " << base.error().message << "\n";
    return 2;
  }
  const auto open = [&](const std::string& url, const char* flag) -> std::unique_ptr<store::BlobStore> {
    config::Config cfg = *base;
    cfg.store = url;
    auto st = OpenConfiguredStore(cfg);
    if (!st) {
      std::cerr << "cairn store copy: " << flag << ": " << st.error().message << "\n";
      return nullptr;
    }
    return std::move(*st);
  };
  auto from = open(opts.from, "--from");
  if (from == nullptr) return 1;
  auto to = open(opts.to, "--to");
  if (to == nullptr) return 1;
  std::cerr << "copying " << from->Describe() << " -> " << to->Describe() << "\n";
  store::StoreCopyOptions co;
  co.verify = VerifyBlob;
  co.threads = opts.threads;
  co.progress = [](store::BlobKind kind, uint64_t done, uint64_t total) {
    if (done % 64 == 0 || done == total)
      std::cerr << "  " << store::BlobKindName(kind) << "s: " << done << " / " << total << "\r" << std::flush;
  };
  auto report = store::CopyStore(*from, *to, co);
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
  std::cout << "verified: " << to->Describe() << " holds every blob of " << from->Describe() << "\n";
  return 0;
}

}  // namespace cairn::cli
