// `cairn token`: mint a bearer token signed with the server's key.
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
  // The key the server signs with: configured, or kept in the index (created there if this comes first).
  std::string key;
  if (cfg->jwt_secret) {
    key = *cfg->jwt_secret;
  } else {
    auto index = OpenConfiguredIndex(*cfg);
    if (!index) {
      std::cerr << "cairn token: " << index.error().message << "\n";
      return 1;
    }
    auto secrets = LoadConfiguredSecrets(*cfg, **index);
    if (!secrets) {
      std::cerr << "cairn token: " << secrets.error().message << "\n";
      return 1;
    }
    key = std::move(secrets->jwt_key);
  }
  const http::Principal who{opts.scope, opts.write ? http::Permission::kWrite : http::Permission::kRead};
  auto token = http::MintToken(key, who, *ttl);
  if (!token) {
    std::cerr << "cairn token: " << token.error().message << "\n";
    return 2;
  }
  std::cerr << "scope=" << who.scope << " perm=" << http::PermissionName(who.perm)
            << " expires_in=" << ttl->count() << "s\n";
  std::cout << *token << "\n";
  return 0;
}

}  // namespace cairn::cli
