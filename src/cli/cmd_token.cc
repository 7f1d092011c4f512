// `cairn token`: mint a bearer token signed with the server's current key.
#include <iostream>
#include <map>
#include <string>

#include "cli/backend.h"
#include "cli/commands.h"
#include "config/config.h"
#include "config/secrets.h"
#include "http/auth.h"

namespace cairn::cli {

int RunToken(const TokenOptions& opts) {
  if (opts.scope.empty()) {
    std::cerr << "cairn token: --scope is required (or: cairn token create|ls|revoke for a person's token)\n";
    return 2;
  }
  std::map<std::string, std::string> flags;
  if (!opts.data_dir.empty()) flags["data_dir"] = opts.data_dir;
  if (!opts.index.empty()) flags["index"] = opts.index;
  auto cfg = config::LoadCommandConfig(opts.config_file, std::move(flags));
  if (!cfg) {
    std::cerr << "cairn token: " << cfg.error().message << "\n";
    return 2;
  }
  auto ttl = config::ParseDuration(opts.ttl);
  if (!ttl) {
    std::cerr << "cairn token: --ttl: " << ttl.error().message << "\n";
    return 2;
  }
  // The keys the server signs with: configured, or kept in the index (created there if this comes first).
  const int64_t now = http::UnixNow();
  std::unique_ptr<index::Index> index;
  std::unique_ptr<config::SecretTable> table;
  if (!config::KeysConfigured(*cfg, config::KeyKind::kJwt)) {
    auto opened = OpenConfiguredIndex(*cfg);
    if (!opened) {
      std::cerr << "cairn token: " << opened.error().message << "\n";
      return 1;
    }
    index = std::move(*opened);
    table = SecretsOf(*index);
  }
  auto keys = config::LoadKeys(*cfg, table.get(), config::KeyKind::kJwt, now);
  if (!keys) {
    std::cerr << "cairn token: " << keys.error().message << "\n";
    return 1;
  }
  const http::Principal who{opts.scope, opts.write ? http::Permission::kWrite : http::Permission::kRead};
  auto token = http::MintToken(keys->current(), who, *ttl, now);
  if (!token) {
    std::cerr << "cairn token: " << token.error().message << "\n";
    return 2;
  }
  std::cerr << "scope=" << who.scope << " perm=" << http::PermissionName(who.perm)
            << " expires_in=" << ttl->count() << "s key=" << keys->current().id << "\n";
  std::cout << *token << "\n";
  return 0;
}

}  // namespace cairn::cli
