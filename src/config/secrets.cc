#include "config/secrets.h"

#include <fcntl.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <system_error>

namespace cairn::config {
namespace {

std::string Errno(const std::string& what, const std::filesystem::path& p) {
  return what + " " + p.string() + ": " + std::error_code(errno, std::generic_category()).message();
}

bool WriteAll(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

xet::Status FsyncDir(const std::filesystem::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return xet::Malformed(Errno("cannot open", dir));
  const int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) return xet::Malformed(Errno("cannot fsync", dir));
  return xet::Ok{};
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

Result<std::string> CreateSecret(const std::filesystem::path& path) {
  const auto dir = path.parent_path();
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return xet::Malformed("cannot create " + dir.string() + ": " + ec.message());
  ::chmod(dir.c_str(), 0700);

  unsigned char raw[32];
  if (RAND_bytes(raw, sizeof raw) != 1) return xet::Malformed("RAND_bytes failed");
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  for (unsigned char b : raw) {
    hex += kHex[b >> 4];
    hex += kHex[b & 15];
  }
  const auto tmp = dir / (path.filename().string() + ".tmp." + std::to_string(::getpid()));
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return xet::Malformed(Errno("cannot create", tmp));
  const bool ok = WriteAll(fd, hex + "\n") && ::fsync(fd) == 0;
  ::close(fd);
  if (!ok) {
    ::unlink(tmp.c_str());
    return xet::Malformed(Errno("cannot write", tmp));
  }
  // link(2) fails if a concurrent start won the race: then its secret is the one.
  const int rc = ::link(tmp.c_str(), path.c_str());
  const int link_errno = errno;
  ::unlink(tmp.c_str());
  if (rc != 0 && link_errno != EEXIST) {
    errno = link_errno;
    return xet::Malformed(Errno("cannot create", path));
  }
  if (auto st = FsyncDir(dir); !st) return st.error();
  return ReadSecret(path);
}

}  // namespace

Result<std::string> LoadSecretFile(const std::filesystem::path& path, bool create) {
  auto existing = ReadSecret(path);
  if (existing || existing.error().code != xet::ErrorCode::kNotFound) return existing;
  if (!create) return existing;
  return CreateSecret(path);
}

std::filesystem::path JwtKeyPath(const Config& config) {
  return std::filesystem::path(config.data_dir) / "secrets" / "jwt.key";
}

std::filesystem::path UrlKeyPath(const Config& config) {
  return std::filesystem::path(config.data_dir) / "secrets" / "url.key";
}

Result<Secrets> LoadSecrets(const Config& config, bool create) {
  Secrets s;
  if (config.jwt_secret) {
    s.jwt_key = *config.jwt_secret;
  } else {
    auto k = LoadSecretFile(JwtKeyPath(config), create);
    if (!k) return k.error();
    s.jwt_key = std::move(*k);
  }
  if (config.url_secret) {
    s.url_key = *config.url_secret;
  } else {
    auto k = LoadSecretFile(UrlKeyPath(config), create);
    if (!k) return k.error();
    s.url_key = std::move(*k);
  }
  return s;
}

}  // namespace cairn::config
