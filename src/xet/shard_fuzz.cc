// Fuzzes the shard parser (xet::ParseShard), which every uploaded shard and every dedup answer cairn reads
// goes through: the input is the shard. A shard that parses must serialize (xet::SerializeShard) and parse
// back to the same records, and the shard verifier (xet::VerifyFile, VerifyXorbListing) must give an answer
// for its files against layouts made from its own xorb listings.
#include <cstddef>
#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "common/fuzz_check.h"
#include "xet/shard.h"
#include "xet/verify.h"

namespace {

using cairn::xet::FileRecord;
using cairn::xet::XorbRecord;

bool SameFile(const FileRecord& a, const FileRecord& b) {
  if (a.hash != b.hash || a.terms.size() != b.terms.size() || a.verification != b.verification ||
      a.sha256 != b.sha256)
    return false;
  for (size_t i = 0; i < a.terms.size(); ++i) {
    const auto& x = a.terms[i];
    const auto& y = b.terms[i];
    if (x.xorb != y.xorb || x.xorb_flags != y.xorb_flags || x.unpacked_bytes != y.unpacked_bytes ||
        x.chunk_start != y.chunk_start || x.chunk_end != y.chunk_end)
      return false;
  }
  return true;
}

bool SameXorb(const XorbRecord& a, const XorbRecord& b) {
  if (a.hash != b.hash || a.flags != b.flags || a.bytes_in_xorb != b.bytes_in_xorb ||
      a.bytes_on_disk != b.bytes_on_disk || a.chunks.size() != b.chunks.size())
    return false;
  for (size_t i = 0; i < a.chunks.size(); ++i) {
    const auto& x = a.chunks[i];
    const auto& y = b.chunks[i];
    if (x.hash != y.hash || x.byte_start != y.byte_start || x.size != y.size || x.flags != y.flags)
      return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto shard = cairn::xet::ParseShard(std::span<const uint8_t>(data, size));
  if (!shard) return 0;
  for (const auto& f : shard->files)
    FUZZ_CHECK(f.verification.empty() || f.verification.size() == f.terms.size());

  const auto bytes = cairn::xet::SerializeShard(*shard);
  const auto again = cairn::xet::ParseShard(bytes);
  FUZZ_CHECK(again);
  FUZZ_CHECK(again->files.size() == shard->files.size() && again->xorbs.size() == shard->xorbs.size());
  for (size_t i = 0; i < shard->files.size(); ++i) FUZZ_CHECK(SameFile(shard->files[i], again->files[i]));
  for (size_t i = 0; i < shard->xorbs.size(); ++i) FUZZ_CHECK(SameXorb(shard->xorbs[i], again->xorbs[i]));

  // Layouts as the listings describe them (offsets made up: the verifier reads hashes and sizes).
  std::unordered_map<cairn::xet::XorbHash, cairn::xet::XorbLayout, cairn::xet::HashHasher> layouts;
  for (const auto& x : shard->xorbs) {
    cairn::xet::XorbLayout layout;
    uint32_t end = 0;
    for (const auto& c : x.chunks) {
      end += static_cast<uint32_t>(cairn::xet::kChunkHeaderSize) + 1;
      layout.chunks.push_back({c.hash, c.size, end});
    }
    // The listing agrees with a layout of its own hashes and sizes when its offsets add up.
    uint64_t offset = 0;
    bool consistent = true;
    for (const auto& c : x.chunks) {
      consistent = consistent && c.byte_start == offset;
      offset += c.size;
    }
    consistent = consistent && x.bytes_in_xorb == offset;
    FUZZ_CHECK(cairn::xet::VerifyXorbListing(x, layout).ok() == consistent);
    layouts.emplace(x.hash, std::move(layout));
  }
  const cairn::xet::LayoutLookup lookup =
      [&](const cairn::xet::XorbHash& h) -> const cairn::xet::XorbLayout* {
    auto it = layouts.find(h);
    return it == layouts.end() ? nullptr : &it->second;
  };
  for (const auto& f : shard->files) {
    const auto verified = cairn::xet::VerifyFile(f, lookup, {.require_verification = false});
    if (verified) FUZZ_CHECK(*verified == f.size());
  }
  return 0;
}
