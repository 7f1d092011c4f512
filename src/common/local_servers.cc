#include "common/local_servers.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>

#include "common/unique_fd.h"

namespace cairn {
namespace {

// Binds 127.0.0.1:port (0: any) and returns the port bound, or 0.
uint16_t Bind(uint16_t port) {
  const UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  socklen_t len = sizeof(addr);
  const bool ok = ::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
                  ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  return ok ? ntohs(addr.sin_port) : 0;
}

}  // namespace

std::optional<uint16_t> FreeLoopbackPort() {
  const uint16_t port = Bind(0);
  if (port == 0) return std::nullopt;
  return port;
}

bool LoopbackPortFree(uint16_t port) {
  return port != 0 && Bind(port) == port;
}

std::filesystem::path FreshTempDir(const std::string& prefix, const std::string& name, std::error_code& ec) {
  static std::atomic<int> counter{0};
  std::string plain;
  for (const char c : name) {
    const bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
    plain += keep ? c : '_';
  }
  auto dir = std::filesystem::temp_directory_path(ec) /
             (prefix + "-" + plain.substr(0, 60) + "-" + std::to_string(::getpid()) + "-" +
              std::to_string(counter++));
  if (ec) return dir;
  std::filesystem::remove_all(dir, ec);
  std::filesystem::create_directories(dir, ec);
  return dir;
}

}  // namespace cairn
