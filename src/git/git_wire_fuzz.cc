// Fuzzes what git clients send: pkt-line framing (PktReader) and gzip request bodies (Gunzip with a bound).
// Checks: the reader never yields a payload that is not inside the input and always advances or ends; an
// inflated body is never longer than the bound.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "common/fuzz_check.h"
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
  return 0;
}
