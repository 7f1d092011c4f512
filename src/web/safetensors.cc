#include "web/safetensors.h"

#include <fmt/format.h>

#include <array>
#include <boost/json.hpp>

namespace cairn::web {

std::optional<uint64_t> SafetensorsHeaderLength(std::string_view first8) {
  if (first8.size() < 8) return std::nullopt;
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = n << 8 | static_cast<uint8_t>(first8[static_cast<size_t>(i)]);
  if (n == 0 || n > kMaxSafetensorsHeader) return std::nullopt;
  return n;
}

uint64_t TensorCounts::total() const {
  uint64_t sum = 0;
  for (const auto& [dtype, n] : by_dtype) sum += n;
  return sum;
}

void TensorCounts::Add(const TensorCounts& other) {
  for (const auto& [dtype, n] : other.by_dtype) by_dtype[dtype] += n;
}

Result<TensorCounts> CountTensors(std::string_view header) {
  boost::system::error_code ec;
  const boost::json::value doc = boost::json::parse(header, ec);
  if (ec || !doc.is_object()) return Error{ErrorCode::kMalformed, "not a safetensors header"};
  TensorCounts out;
  for (const auto& [name, tensor] : doc.as_object()) {
    if (name == "__metadata__") continue;
    const auto* t = tensor.if_object();
    const auto* dtype = t != nullptr ? t->if_contains("dtype") : nullptr;
    const auto* shape = t != nullptr ? t->if_contains("shape") : nullptr;
    if (dtype == nullptr || !dtype->is_string() || shape == nullptr || !shape->is_array()) {
      return Error{ErrorCode::kMalformed, "not a safetensors header"};
    }
    uint64_t count = 1;
    for (const auto& dim : shape->as_array()) {
      if (!dim.is_int64() || dim.as_int64() < 0) return Error{ErrorCode::kMalformed, "a bad tensor shape"};
      const auto d = static_cast<uint64_t>(dim.as_int64());
      if (d != 0 && count > UINT64_MAX / d) return Error{ErrorCode::kMalformed, "a bad tensor shape"};
      count *= d;
    }
    out.by_dtype[std::string(dtype->as_string())] += count;
  }
  return out;
}

std::string ParameterText(uint64_t n) {
  static constexpr std::array<std::pair<uint64_t, const char*>, 4> kUnits = {
      {{1'000'000'000'000, "T"}, {1'000'000'000, "B"}, {1'000'000, "M"}, {1'000, "k"}}};
  for (const auto& [unit, suffix] : kUnits) {
    if (n >= unit) {
      return fmt::format("{:.1f}{}", static_cast<double>(n) / static_cast<double>(unit), suffix);
    }
  }
  return std::to_string(n);
}

}  // namespace cairn::web
