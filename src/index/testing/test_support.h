// Helpers shared by the index's tests and benchmarks.
#pragma once

#include <cstdint>
#include <cstring>
#include <random>

#include "xet/hash.h"

namespace cairn::index::fixtures {

// A hash of four words from `rng`: distinct, reproducible keys.
inline xet::Hash RandomHash(std::mt19937_64& rng) {
  xet::Hash h;
  for (int i = 0; i < 4; ++i) {
    const uint64_t w = rng();
    std::memcpy(h.bytes.data() + 8 * i, &w, 8);
  }
  return h;
}

}  // namespace cairn::index::fixtures
