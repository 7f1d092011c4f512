// Fuzzes the Range header parser (http::ParseRange, used by plain downloads and the Hub's resolve routes) and
// the 206 answers built from what it returns (http::RangeResponse). The input's first eight bytes are the
// representation's size (little-endian), the ninth the most ranges allowed (mod 70); the rest is the header.
// Checks: every range returned lies inside the representation, no more ranges than allowed, 416 only when
// nothing is satisfiable, and the answer has one part (single range) or a head and a part per range plus a
// closing delimiter (multipart).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string_view>

#include "common/fuzz_check.h"
#include "http/range.h"
#include "http/status.h"

namespace {

class NoBytes final : public cairn::http::ByteSource {
 public:
  cairn::http::Status ReadAt(uint64_t, std::span<uint8_t>) const override { return cairn::http::Ok{}; }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 9) return 0;
  uint64_t length = 0;
  std::memcpy(&length, data, 8);
  const size_t max_ranges = data[8] % 70;
  const std::string_view header(reinterpret_cast<const char*>(data + 9), size - 9);

  const auto ranges = cairn::http::ParseRange(header, length, max_ranges);
  if (!ranges) {
    FUZZ_CHECK(cairn::http::HttpStatusOf(ranges.error().code) == 400 ||
               cairn::http::HttpStatusOf(ranges.error().code) == 416);
    return 0;
  }
  FUZZ_CHECK(!ranges->empty() && ranges->size() <= max_ranges);
  for (const auto& r : *ranges) FUZZ_CHECK(r.first <= r.last && r.last < length);

  const auto source = std::make_shared<const NoBytes>();
  const auto answer = cairn::http::RangeResponse(source, length, *ranges, "application/octet-stream");
  FUZZ_CHECK(answer.status == 206);
  FUZZ_CHECK(answer.body.size() == (ranges->size() == 1 ? 1 : 2 * ranges->size() + 1));
  return 0;
}
