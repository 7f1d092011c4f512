// Fuzzes the bundle manifest parser (bundle::ParseManifest): `cairn import` reads manifests a bundle brought
// from elsewhere. Checks: what parses encodes back to the same text (the parser accepts only what Encode
// writes), and names every ref and link it promised to check.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "bundle/bundle.h"
#include "common/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto m = cairn::bundle::ParseManifest(text);
  if (!m.ok()) return 0;
  FUZZ_CHECK(!m->refs.empty());
  FUZZ_CHECK(m->pack_blake3.size() == 64);
  for (const auto& l : m->links) FUZZ_CHECK(cairn::hub::IsSha256Hex(l.sha256));
  const std::string again = m->Encode();
  auto back = cairn::bundle::ParseManifest(again);
  FUZZ_CHECK(back.ok());
  FUZZ_CHECK(back->Encode() == again);
  return 0;
}
