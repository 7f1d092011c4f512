// Fuzzes the xorb validator (xet::ValidateXorb), which every uploaded xorb body goes through before it is
// stored: the input is the body. Beside "no crash, no undefined behaviour", it checks what a caller relies
// on: a validated layout lies within the input and hashes to the xorb hash; an expected hash is honoured; the
// prehashed, parallel and one-pass validations of the same bytes agree; and cairn's stored form (the chunks
// plus a regenerated v1 footer) validates to the same xorb.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "common/fuzz_check.h"
#include "xet/xorb.h"

namespace {

using cairn::xet::ValidatedXorb;
using cairn::xet::ValidateOptions;

bool SameOutcome(const cairn::Result<ValidatedXorb>& a, const cairn::Result<ValidatedXorb>& b) {
  if (a.ok() != b.ok()) return false;
  if (!a) return a.error().code == b.error().code;
  return a->hash == b->hash && a->chunk_region_size == b->chunk_region_size &&
         a->layout.chunks.size() == b->layout.chunks.size();
}

void CheckLayout(std::span<const uint8_t> body, const ValidatedXorb& v) {
  const auto& chunks = v.layout.chunks;
  FUZZ_CHECK(!chunks.empty() && chunks.size() <= cairn::xet::kMaxXorbChunks);
  FUZZ_CHECK(v.chunk_region_size <= body.size());
  FUZZ_CHECK(v.layout.chunk_region_size() == v.chunk_region_size);
  FUZZ_CHECK(v.layout.unpacked_size() <= cairn::xet::kMaxXorbUnpacked);
  uint32_t prev = 0;
  for (const auto& c : chunks) {
    FUZZ_CHECK(c.end_offset > prev + cairn::xet::kChunkHeaderSize);  // a header and a non-empty payload
    FUZZ_CHECK(c.end_offset <= v.chunk_region_size);
    FUZZ_CHECK(c.unpacked_size > 0 && c.unpacked_size <= cairn::xet::kMaxChunkUnpacked);
    prev = c.end_offset;
  }
  FUZZ_CHECK(v.chunks_by_scheme[0] + v.chunks_by_scheme[1] + v.chunks_by_scheme[2] == chunks.size());
  FUZZ_CHECK(v.hash == cairn::xet::XorbHashOf(v.layout.hashed_chunks()));
  if (v.footer == cairn::xet::FooterVersion::kNone) FUZZ_CHECK(v.chunk_region_size == body.size());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> body(data, size);
  const auto plain = cairn::xet::ValidateXorb(body);

  // With an expected hash: the same answer when it is the right one, a hash mismatch (or the same error) when
  // it is not.
  cairn::xet::XorbHash other;
  other.bytes[0] = 1;
  if (plain) {
    CheckLayout(body, *plain);
    ValidateOptions right;
    right.expected_hash = &plain->hash;
    FUZZ_CHECK(SameOutcome(plain, cairn::xet::ValidateXorb(body, right)));
    if (plain->hash != other) {
      ValidateOptions wrong;
      wrong.expected_hash = &other;
      const auto refused = cairn::xet::ValidateXorb(body, wrong);
      FUZZ_CHECK(!refused && refused.error().code == cairn::ErrorCode::kHashMismatch);
    }
  } else {
    ValidateOptions any;
    any.expected_hash = &other;
    FUZZ_CHECK(!cairn::xet::ValidateXorb(body, any));
  }

  // The chunks hashed while the body arrived (in three pieces), then the rest: the same answer.
  cairn::xet::ChunkPrehasher prehasher;
  prehasher.Advance(body.first(size / 3));
  prehasher.Advance(body.first(2 * size / 3));
  prehasher.Advance(body);
  ValidateOptions prehashed;
  prehashed.prehashed = prehasher.hashes();
  FUZZ_CHECK(SameOutcome(plain, cairn::xet::ValidateXorb(body, prehashed)));

  // Groups run in reverse order, as a worker pool may run them: the same answer.
  const cairn::xet::ParallelFor reverse = [](size_t count, const std::function<void(size_t)>& task) {
    for (size_t i = count; i > 0; --i) task(i - 1);
  };
  ValidateOptions parallel;
  parallel.parallel = &reverse;
  FUZZ_CHECK(SameOutcome(plain, cairn::xet::ValidateXorb(body, parallel)));

  // What cairn stores: the chunk region and a v1 footer of its own. It parses back to the same layout.
  if (plain) {
    std::vector<uint8_t> stored(body.begin(),
                                body.begin() + static_cast<std::ptrdiff_t>(plain->chunk_region_size));
    cairn::xet::AppendFooterV1(stored, plain->hash, plain->layout);
    const auto footer = cairn::xet::ParseFooter(stored);
    FUZZ_CHECK(footer && footer->hash == plain->hash &&
               footer->chunk_region_size == plain->chunk_region_size);
    FUZZ_CHECK(footer->layout.chunks.size() == plain->layout.chunks.size());
    for (size_t i = 0; i < footer->layout.chunks.size(); ++i) {
      const auto& a = footer->layout.chunks[i];
      const auto& b = plain->layout.chunks[i];
      FUZZ_CHECK(a.hash == b.hash && a.end_offset == b.end_offset && a.unpacked_size == b.unpacked_size);
    }
    const auto again = cairn::xet::ValidateXorb(stored);
    FUZZ_CHECK(again && again->hash == plain->hash && again->footer == cairn::xet::FooterVersion::kV1);
  }
  return 0;
}
