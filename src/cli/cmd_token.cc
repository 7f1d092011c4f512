// `cairn token`: mint a bearer token signed with the server's key.
#include <iostream>
#include <map>
#include <string>

#include "cli/commands.h"
#include "config/config.h"
#include "config/secrets.h"
#include "http/auth.h"

namespace cairn::cli {

int RunToken(const TokenOptions& opts) {
  std::map<std::string, std::string> flags;
  if (!opts.data_dir.empty()) flags["data_dir"] = opts.data_dir;
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
  std::string key;
  if (cfg->jwt_secret) {
    key = *cfg->jwt_secret;
  } else {
    auto k = config::LoadSecretFile(config::JwtKeyPath(*cfg), /*create=*/false);
    if (!k) {
      std::cerr << "cairn token: " << k.error().message << " (start `cairn serve --data " << cfg->data_dir
                << "` once to create it, or configure jwt_secret)\n";
      return 1;
    }
    key = std::move(*k);
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
