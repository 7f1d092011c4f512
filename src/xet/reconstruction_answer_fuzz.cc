// Fuzzes the reconstruction answer parser (xet::ParseReconstruction): a mirror reads it from an upstream it
// does not control. The input's first byte picks the form (v1 or v2), the rest is the answer. Checks: a
// parsed answer keeps what the parser promises — every fetch range non-empty, every term's chunks inside the
// fetch it names — and decoding arbitrary bytes as its first fetch never reads past them.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "common/fuzz_check.h"
#include "xet/reconstruction_answer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const bool v2 = (data[0] & 1) != 0;
  const std::string body(reinterpret_cast<const char*>(data + 1), size - 1);
  auto parsed = cairn::xet::ParseReconstruction(body, v2);
  if (!parsed.ok()) return 0;
  for (const auto& f : parsed->fetches) {
    FUZZ_CHECK(f.cs < f.ce);
    FUZZ_CHECK(f.first <= f.last);
  }
  for (const auto& t : parsed->terms) {
    FUZZ_CHECK(t.fetch < parsed->fetches.size());
    const auto& f = parsed->fetches[t.fetch];
    FUZZ_CHECK(f.xorb == t.xorb);
    FUZZ_CHECK(f.cs <= t.cs && t.ce <= f.ce && t.cs < t.ce);
  }
  if (!parsed->fetches.empty()) {
    auto f = parsed->fetches[0];
    f.first = 0;
    f.last = size - 2;  // the whole input as its bytes
    (void)cairn::xet::DecodeFetch(f, std::span<const uint8_t>(data + 1, size - 1));
  }
  return 0;
}
