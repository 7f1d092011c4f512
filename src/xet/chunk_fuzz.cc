// Fuzzes the chunk decoder (xet::ChunkDecoder: LZ4 frames, with cairn's own fast path for the frames the
// stock client writes, and BG4 byte grouping). The input's first four bytes choose the scheme (byte 0, mod 3)
// and the uncompressed length (bytes 1-3, mod 128 KiB, plus one); the rest is the payload. Checks: the
// decoder agrees with liblz4's own frame decoder (LZ4F) on what is valid and on the bytes it decodes to;
// DecodeAndHash hashes what Decode produced; and the payload, taken as raw bytes, survives AppendChunk and
// decoding.
#include <lz4frame.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <vector>

#include "common/fuzz_check.h"
#include "xet/xorb.h"

namespace {

using cairn::xet::ChunkHeader;
using cairn::xet::CompressionScheme;

// Exactly one LZ4 frame, all of `in`, decoding to exactly `length` bytes; nullopt otherwise.
std::optional<std::vector<uint8_t>> ReferenceDecode(std::span<const uint8_t> in, size_t length) {
  LZ4F_dctx* dctx = nullptr;
  if (LZ4F_isError(LZ4F_createDecompressionContext(&dctx, LZ4F_VERSION))) return std::nullopt;
  std::vector<uint8_t> out(length + 1);  // room for one byte too many, to see it
  size_t in_pos = 0;
  size_t out_pos = 0;
  bool complete = false;
  for (;;) {
    size_t dst = out.size() - out_pos;
    size_t src = in.size() - in_pos;
    const size_t hint = LZ4F_decompress(dctx, out.data() + out_pos, &dst, in.data() + in_pos, &src, nullptr);
    if (LZ4F_isError(hint)) break;
    in_pos += src;
    out_pos += dst;
    if (hint == 0) {
      complete = true;
      break;
    }
    if (src == 0 && dst == 0) break;
  }
  LZ4F_freeDecompressionContext(dctx);
  if (!complete || in_pos != in.size() || out_pos != length) return std::nullopt;
  out.resize(length);
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 4) return 0;
  const auto scheme = static_cast<CompressionScheme>(data[0] % 3);
  const uint32_t length =
      (uint32_t{data[1]} | uint32_t{data[2]} << 8 | uint32_t{data[3]} << 16) % cairn::xet::kMaxChunkUnpacked +
      1;
  const std::span<const uint8_t> payload(data + 4, size - 4);
  if (payload.size() > cairn::xet::kMaxChunkPayload) return 0;

  cairn::xet::ChunkDecoder decoder;
  if (scheme != CompressionScheme::kNone) {
    const ChunkHeader header{static_cast<uint32_t>(payload.size()), scheme, length};
    std::vector<uint8_t> out(length);
    const auto decoded = decoder.Decode(header, payload, out);
    auto reference = ReferenceDecode(payload, length);
    FUZZ_CHECK(decoded.ok() == reference.has_value());
    if (decoded) {
      if (scheme == CompressionScheme::kBg4Lz4) {
        std::vector<uint8_t> joined(length);
        cairn::xet::Bg4Join(*reference, joined);
        reference = std::move(joined);
      }
      FUZZ_CHECK(out == *reference);
      const auto hash = decoder.DecodeAndHash(header, payload);
      FUZZ_CHECK(hash && *hash == cairn::xet::ChunkHashOf(out));
    }
  }

  // The payload as a chunk's raw bytes: whatever AppendChunk makes of it decodes back to it.
  if (!payload.empty() && payload.size() <= cairn::xet::kMaxChunkUnpacked) {
    std::vector<uint8_t> stored;
    cairn::xet::AppendChunk(stored, payload, scheme);
    const auto chunk = cairn::xet::StoredChunk::Parse(stored);
    FUZZ_CHECK(chunk && chunk->stored_size() == stored.size());
    std::vector<uint8_t> out(chunk->header.uncompressed_length);
    FUZZ_CHECK(decoder.Decode(chunk->header, chunk->payload, out));
    FUZZ_CHECK(out.size() == payload.size() && std::memcmp(out.data(), payload.data(), out.size()) == 0);
  }
  return 0;
}
