// `cairn keys list|rotate|retire`: the signing keys in the index's secrets table, managed in one place for
// every node on the index (config/secrets.h). Never prints a secret.
#include <ctime>
#include <iomanip>
#include <iostream>
#include <optional>
#include <string>

#include "cli/backend.h"
#include "cli/commands.h"
#include "config/config.h"
#include "config/secrets.h"
#include "http/auth.h"

namespace cairn::cli {
namespace {

std::optional<config::KeyKind> KindOf(const std::string& name) {
  if (name == "jwt") return config::KeyKind::kJwt;
  if (name == "url") return config::KeyKind::kUrl;
  return std::nullopt;
}

// Runs `fn(config, table, kind)` with the command's configuration, index and --kind (when `needs_kind`);
// prints errors as `cairn keys <verb>`.
template <typename F>
int WithKeys(const char* verb, const KeysOptions& opts, bool needs_kind, F fn) {
  const std::string who = std::string("cairn keys ") + verb + ": ";
  const auto kind = KindOf(opts.kind);
  if (needs_kind && !kind) {
    std::cerr << who << "--kind must be jwt or url\n";
    return 2;
  }
  auto opened = OpenCommandIndex(who, opts.config_file, opts.data_dir, opts.index);
  if (opened.status != 0) return opened.status;
  auto table = SecretsOf(*opened.index);
  auto st = fn(*opened.cfg, *table, kind.value_or(config::KeyKind::kJwt));
  if (!st) {
    std::cerr << who << st.error().message << "\n";
    return st.error().code == ErrorCode::kMalformed ? 2 : 1;
  }
  return 0;
}

}  // namespace

int RunKeysList(const KeysOptions& opts) {
  return WithKeys("list", opts, false,
                  [](const config::Config& cfg, config::SecretTable& table, config::KeyKind) -> Status {
                    auto keys = config::ListKeys(cfg, table, http::UnixNow());
                    if (!keys) return keys.error();
                    std::cout << std::left << std::setw(5) << "KIND" << std::setw(24) << "ID" << std::setw(10)
                              << "STATE" << std::setw(8) << "SOURCE" << std::setw(22) << "ADDED"
                              << "CURRENT FROM\n";
                    for (const auto& k : *keys) {
                      std::cout << std::setw(5) << config::KeyKindName(k.kind) << std::setw(24) << k.id
                                << std::setw(10) << config::KeyStateName(k.state) << std::setw(8)
                                << (k.configured ? "config" : "index") << std::setw(22)
                                << (k.configured ? "-" : Utc(k.created_at))
                                << (k.configured ? "-" : Utc(k.active_from)) << "\n";
                    }
                    return Ok{};
                  });
}

int RunKeysRotate(const KeysOptions& opts) {
  return WithKeys(
      "rotate", opts, true,
      [&](const config::Config& cfg, config::SecretTable& table, config::KeyKind kind) -> Status {
        auto added = config::RotateKey(cfg, table, kind, opts.id, http::UnixNow());
        if (!added) return added.error();
        std::cerr
            << opts.kind << " key " << added->id << " added; it signs from " << Utc(added->active_from)
            << " (2 x key_refresh: every node re-reads the keys within key_refresh, or at once on SIGHUP)."
            << " The keys before stay accepted until `cairn keys retire --kind " << opts.kind << " ID`.\n";
        std::cout << added->id << "\n";
        return Ok{};
      });
}

int RunKeysRetire(const KeysOptions& opts) {
  return WithKeys(
      "retire", opts, true,
      [&](const config::Config& cfg, config::SecretTable& table, config::KeyKind kind) -> Status {
        if (auto st = config::RetireKey(cfg, table, kind, opts.id, http::UnixNow()); !st) return st;
        std::cerr
            << opts.kind << " key " << opts.id
            << " retired: the nodes refuse what it signed from their next refresh (key_refresh, or SIGHUP)\n";
        return Ok{};
      });
}

}  // namespace cairn::cli
