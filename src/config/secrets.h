// The server's secrets: the token-signing key and the transfer-URL signing key, kept apart so one can be
// rotated without the other.
//
// Each is taken from the configuration when it supplies one (jwt_secret, url_secret), else from the index
// (its `secrets` table), so that every node on a shared index signs and checks with the same keys. The first
// process to need a key stores it there atomically: 32 bytes from OpenSSL's RAND_bytes as 64 hex characters
// (the key is that text, so a value copied into the configuration signs identically). A data directory from
// before keys lived in the index still has <data_dir>/secrets/{jwt,url}.key: their values are the ones
// stored, so tokens minted before keep working.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <string_view>

#include "config/config.h"

namespace cairn::config {

struct Secrets {
  std::string jwt_key;
  std::string url_key;
};

// The stored secret `name`, storing `candidate` when there is none (Index::SharedSecret).
using SharedSecretFn = std::function<Result<std::string>(std::string_view name, std::string_view candidate)>;

// The secrets for `config`, from the configuration or through `shared`.
Result<Secrets> LoadSecrets(const Config& config, const SharedSecretFn& shared);

// 32 random bytes as 64 hex characters.
Result<std::string> NewSecret();

// Where a data directory from before kept each key (read once, when the index has none yet).
std::filesystem::path LegacyKeyPath(const Config& config, std::string_view name);

}  // namespace cairn::config
