// What the card shows of a model's weights, read from its safetensors files' headers as the Hub shows it:
// the parameter count and the tensor types. A header is an 8-byte little-endian length, then that many bytes
// of JSON naming each tensor's dtype and shape ("__metadata__" aside). Pure functions, any thread.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "common/error.h"

namespace cairn::web {

// Headers past this are not read for a page (a large model's run to a few MB).
inline constexpr uint64_t kMaxSafetensorsHeader = 16 << 20;

// The header's length from the file's first 8 bytes; nullopt when fewer or past kMaxSafetensorsHeader.
std::optional<uint64_t> SafetensorsHeaderLength(std::string_view first8);

struct TensorCounts {
  std::map<std::string, uint64_t> by_dtype;  // parameters of each dtype ("F32", "BF16", …)
  uint64_t total() const;
  void Add(const TensorCounts& other);
};

// The counts a header's JSON declares; kMalformed for JSON that is no safetensors header.
Result<TensorCounts> CountTensors(std::string_view header);

// "1.2B", "350M", "7.0k": a parameter count as the Hub shows it.
std::string ParameterText(uint64_t n);

}  // namespace cairn::web
