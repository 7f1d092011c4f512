#include "config/secrets.h"

#include <fcntl.h>
#include <openssl/rand.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <system_error>

namespace cairn::config {
namespace {

std::string Errno(const std::string& what, const std::filesystem::path& p) {
  return what + " " + p.string() + ": " + std::error_code(errno, std::generic_category()).message();
}

Result<std::string> ReadSecret(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return xet::NotFound(Errno("cannot open", path));
  std::string data;
  char buf[512];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      ::close(fd);
      return xet::Malformed(Errno("cannot read", path));
    }
    if (n == 0) break;
    data.append(buf, static_cast<size_t>(n));
    if (data.size() > 4096) break;
  }
  ::close(fd);
  while (!data.empty() && (data.back() == '\n' || data.back() == '\r' || data.back() == ' ')) data.pop_back();
  if (data.size() < 32) return xet::Malformed(path.string() + ": secret shorter than 32 characters");
  return data;
}

}  // namespace

Result<std::string> NewSecret() {
  unsigned char raw[32];
  if (RAND_bytes(raw, sizeof raw) != 1) return xet::IoError("RAND_bytes failed");
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  for (unsigned char b : raw) {
    hex += kHex[b >> 4];
    hex += kHex[b & 15];
  }
  return hex;
}

std::filesystem::path LegacyKeyPath(const Config& config, std::string_view name) {
  return std::filesystem::path(config.data_dir) / "secrets" / (std::string(name) + ".key");
}

Result<Secrets> LoadSecrets(const Config& config, const SharedSecretFn& shared) {
  const auto load = [&](const std::optional<std::string>& configured,
                        std::string_view name) -> Result<std::string> {
    if (configured) return *configured;
    auto candidate = ReadSecret(LegacyKeyPath(config, name));
    if (!candidate.ok()) {
      if (candidate.error().code != xet::ErrorCode::kNotFound) return candidate.error();
      candidate = NewSecret();
      if (!candidate.ok()) return candidate.error();
    }
    auto stored = shared(name, *candidate);
    if (!stored.ok())
      return xet::Error{stored.error().code, "secret " + std::string(name) + ": " + stored.error().message};
    if (stored->size() < 32)
      return xet::Inconsistent("secret " + std::string(name) + " in the index is shorter than 32 characters");
    return stored;
  };
  Secrets s;
  auto jwt = load(config.jwt_secret, "jwt");
  if (!jwt.ok()) return jwt.error();
  s.jwt_key = std::move(*jwt);
  auto url = load(config.url_secret, "url");
  if (!url.ok()) return url.error();
  s.url_key = std::move(*url);
  return s;
}

}  // namespace cairn::config
