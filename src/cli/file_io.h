// Whole-file reads for the offline subcommands.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace cairn::cli {

// Reads a whole file; nullopt (with `error` set) if it cannot be read.
std::optional<std::vector<uint8_t>> ReadWholeFile(const std::string& path, std::string* error);

}  // namespace cairn::cli
