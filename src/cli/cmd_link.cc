// `cairn link`: a signed, expiring download link to a stored file, for a browser or curl.
#include <iostream>
#include <map>
#include <string>

#include "cli/backend.h"
#include "cli/commands.h"
#include "config/config.h"
#include "files/file_link.h"

namespace cairn::cli {

int RunLink(const LinkOptions& opts) {
  std::map<std::string, std::string> flags;
  if (!opts.data_dir.empty()) flags["data_dir"] = opts.data_dir;
  if (!opts.index.empty()) flags["index"] = opts.index;
  if (!opts.public_url.empty()) flags["public_url"] = opts.public_url;
  auto cfg = config::LoadCommandConfig(opts.config_file, std::move(flags));
  if (!cfg) {
    std::cerr << "cairn link: " << cfg.error().message << "\n";
    return 2;
  }
  const auto file = xet::Hash::FromHex(opts.file);
  if (!file) {
    std::cerr << "cairn link: FILE must be a file hash (64 hex digits)\n";
    return 2;
  }
  auto ttl = config::ParseDuration(opts.ttl);
  if (!ttl) {
    std::cerr << "cairn link: --ttl: " << ttl.error().message << "\n";
    return 2;
  }
  auto index = OpenConfiguredIndex(*cfg);
  if (!index) {
    std::cerr << "cairn link: " << index.error().message << "\n";
    return 1;
  }
  // A link only to what the scope can read: a scope's reader could not fetch anything else with it.
  auto visible = (*index)->FileVisibleTo(*file, opts.scope);
  if (!visible) {
    std::cerr << "cairn link: " << visible.error().message << "\n";
    return 1;
  }
  if (!*visible) {
    std::cerr << "cairn link: scope " << opts.scope << " has no file " << file->hex() << "\n";
    return 1;
  }
  auto secrets = LoadConfiguredSecrets(*cfg, **index);
  if (!secrets) {
    std::cerr << "cairn link: " << secrets.error().message << "\n";
    return 1;
  }
  const files::LinkSigner signer(UrlKeysFrom(secrets->url), static_cast<uint64_t>(cfg->max_link_ttl.count()));
  auto link = signer.Sign(*file, opts.scope, static_cast<uint64_t>(ttl->count()), opts.name);
  if (!link) {
    std::cerr << "cairn link: " << link.error().message << "\n";
    return 2;
  }
  std::string base = cfg->public_url;
  while (!base.empty() && base.back() == '/') base.pop_back();
  std::cerr << "scope=" << opts.scope << " expires_in=" << ttl->count() << "s\n";
  std::cout << base << "/v1/files/" << file->hex() << "?" << link->query << "\n";
  return 0;
}

}  // namespace cairn::cli
