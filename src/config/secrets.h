// The server's secrets: the token-signing key and the transfer-URL signing key, kept apart so one can be
// rotated without the other.
//
// Each is taken from the configuration when it supplies one, else from <data_dir>/secrets/{jwt,url}.key. On
// first start the files are created: 32 bytes from OpenSSL's RAND_bytes, stored as 64 hex characters (the key
// is that text, so a value copied into the configuration signs identically), mode 0600 in a 0700 directory,
// written to a temp file, fsynced, linked into place (never overwriting one a concurrent start created) and
// the directory fsynced.
#pragma once

#include <filesystem>
#include <string>

#include "config/config.h"

namespace cairn::config {

struct Secrets {
  std::string jwt_key;
  std::string url_key;
};

// Reads the secret at `path`, creating it first when absent and `create` is set.
Result<std::string> LoadSecretFile(const std::filesystem::path& path, bool create);

// The secrets for `config`; `create` makes missing files (the server), false only reads them (`cairn token`).
Result<Secrets> LoadSecrets(const Config& config, bool create);

std::filesystem::path JwtKeyPath(const Config& config);
std::filesystem::path UrlKeyPath(const Config& config);

}  // namespace cairn::config
