// Fuzzes what git clients send: pkt-line framing (PktReader), gzip request bodies (Gunzip with a bound) and
// packs (ReadPack with small limits; ApplyDelta on the input split in two). Checks: the reader never yields a
// payload that is not inside the input and always advances or ends; an inflated body is never longer than the
// bound; every object a pack yields is within the limits and its id is its body's.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "common/fuzz_check.h"
#include "git/pack_reader.h"
#include "git/pkt_line.h"
#include "git/zlib.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  cairn::git::PktReader reader(in);
  for (size_t steps = 0;; ++steps) {
    FUZZ_CHECK(steps <= size / 4 + 1);
    auto pkt = reader.Next();
    if (!pkt.ok() || !*pkt) break;
    const std::string_view p = (*pkt)->payload;
    FUZZ_CHECK(p.empty() || (p.data() >= in.data() && p.data() + p.size() <= in.data() + in.size()));
  }
  constexpr size_t kBound = 1 << 16;
  auto inflated = cairn::git::Gunzip(in, kBound);
  FUZZ_CHECK(!inflated.ok() || inflated->size() <= kBound);

  cairn::git::PackLimits limits;
  limits.max_objects = 64;
  limits.max_object_bytes = kBound;
  limits.max_total_bytes = 4 * kBound;
  const std::span<const uint8_t> bytes(data, size);
  if (auto objects = cairn::git::ReadPack(bytes, limits)) {
    FUZZ_CHECK(objects->size() <= limits.max_objects);
    for (const auto& o : *objects) {
      FUZZ_CHECK(o.body.size() <= limits.max_object_bytes);
      FUZZ_CHECK(o.id == cairn::hub::HashObject(o.kind, o.body));
    }
  }
  const size_t split = size == 0 ? 0 : data[0] % (size + 1);
  if (auto out = cairn::git::ApplyDelta(bytes.first(split), bytes.subspan(split), kBound)) {
    FUZZ_CHECK(out->size() <= kBound);
  }
  return 0;
}
