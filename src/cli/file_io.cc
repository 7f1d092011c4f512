#include "cli/file_io.h"

#include <cerrno>
#include <fstream>
#include <system_error>

namespace cairn::cli {

std::optional<std::vector<uint8_t>> ReadWholeFile(const std::string& path, std::string* error) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) {
    *error = path + ": " + std::generic_category().message(errno);
    return std::nullopt;
  }
  const auto size = static_cast<size_t>(in.tellg());
  std::vector<uint8_t> data(size);
  in.seekg(0);
  if (size > 0 && !in.read(reinterpret_cast<char*>(data.data()), static_cast<std::streamsize>(size))) {
    *error = path + ": read failed";
    return std::nullopt;
  }
  return data;
}

}  // namespace cairn::cli
