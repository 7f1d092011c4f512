#include "xet/xorb.h"

#include <lz4.h>
#include <lz4frame.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstring>
#include <string>

#include "xet/bytes.h"

namespace cairn::xet {
namespace {

constexpr uint8_t kFooterIdent[7] = {'X', 'E', 'T', 'B', 'L', 'O', 'B'};
constexpr uint8_t kHashIdent[7] = {'X', 'B', 'L', 'B', 'H', 'S', 'H'};
constexpr uint8_t kBoundaryIdent[7] = {'X', 'B', 'L', 'B', 'B', 'N', 'D'};

bool StartsWithFooterIdent(std::span<const uint8_t> b) {
  return b.size() >= 7 && std::memcmp(b.data(), kFooterIdent, 7) == 0;
}

std::string At(size_t offset) {
  return " at byte " + std::to_string(offset);
}

}  // namespace

const char* SchemeName(CompressionScheme s) {
  switch (s) {
    case CompressionScheme::kNone:
      return "none";
    case CompressionScheme::kLz4:
      return "lz4";
    case CompressionScheme::kBg4Lz4:
      return "bg4_lz4";
  }
  return "unknown";
}

// ---------------------------------------------------------------------------------------------------------------
// Chunk header

Result<ChunkHeader> ChunkHeader::Parse(std::span<const uint8_t> b) {
  if (b.size() < kChunkHeaderSize) return Malformed("truncated chunk header");
  if (b[0] != 0) return Malformed("unsupported chunk header version " + std::to_string(b[0]));
  ChunkHeader h;
  h.compressed_length = LoadU24(b.data() + 1);
  const uint8_t scheme = b[4];
  h.uncompressed_length = LoadU24(b.data() + 5);
  if (scheme > 2) return Malformed("unknown compression scheme " + std::to_string(scheme));
  h.scheme = static_cast<CompressionScheme>(scheme);
  if (h.uncompressed_length == 0) return Malformed("empty chunk");
  if (h.uncompressed_length > kMaxChunkUnpacked) {
    return LimitExceeded("chunk of " + std::to_string(h.uncompressed_length) + " bytes exceeds 131072");
  }
  if (h.compressed_length > kMaxChunkPayload) {
    return LimitExceeded("chunk payload of " + std::to_string(h.compressed_length) + " bytes exceeds 262144");
  }
  if (h.scheme == CompressionScheme::kNone && h.compressed_length != h.uncompressed_length) {
    return Malformed("uncompressed chunk with differing lengths");
  }
  return h;
}

Result<StoredChunk> StoredChunk::Parse(std::span<const uint8_t> bytes) {
  auto h = ChunkHeader::Parse(bytes);
  if (!h) return h.error();
  if (h->compressed_length > bytes.size() - kChunkHeaderSize)
    return Malformed("chunk payload of " + std::to_string(h->compressed_length) + " bytes runs past the " +
                     std::to_string(bytes.size() - kChunkHeaderSize) + " bytes present");
  return StoredChunk{*h, bytes.subspan(kChunkHeaderSize, h->compressed_length)};
}

void ChunkHeader::Write(uint8_t out[kChunkHeaderSize]) const {
  out[0] = 0;
  StoreU24(out + 1, compressed_length);
  out[4] = static_cast<uint8_t>(scheme);
  StoreU24(out + 5, uncompressed_length);
}

// ---------------------------------------------------------------------------------------------------------------
// Layout

uint64_t XorbLayout::unpacked_size() const {
  uint64_t n = 0;
  for (const auto& c : chunks) n += c.unpacked_size;
  return n;
}

std::vector<HashedChunk> XorbLayout::hashed_chunks() const {
  std::vector<HashedChunk> out;
  out.reserve(chunks.size());
  for (const auto& c : chunks) out.push_back({c.hash, c.unpacked_size});
  return out;
}

// ---------------------------------------------------------------------------------------------------------------
// Byte grouping

void Bg4Split(std::span<const uint8_t> in, std::span<uint8_t> out) {
  const size_t n = in.size();
  const size_t q = n / 4;
  const size_t r = n % 4;
  uint8_t* s[4];
  s[0] = out.data();
  for (size_t k = 1; k < 4; ++k) s[k] = s[k - 1] + q + (k - 1 < r ? 1 : 0);
  const uint8_t* p = in.data();
  for (size_t i = 0; i < q; ++i, p += 4) {
    s[0][i] = p[0];
    s[1][i] = p[1];
    s[2][i] = p[2];
    s[3][i] = p[3];
  }
  for (size_t k = 0; k < r; ++k) s[k][q] = p[k];
}

void Bg4Join(std::span<const uint8_t> in, std::span<uint8_t> out) {
  const size_t n = in.size();
  const size_t q = n / 4;
  const size_t r = n % 4;
  const uint8_t* s[4];
  s[0] = in.data();
  for (size_t k = 1; k < 4; ++k) s[k] = s[k - 1] + q + (k - 1 < r ? 1 : 0);
  uint8_t* p = out.data();
  for (size_t i = 0; i < q; ++i, p += 4) {
    p[0] = s[0][i];
    p[1] = s[1][i];
    p[2] = s[2][i];
    p[3] = s[3][i];
  }
  for (size_t k = 0; k < r; ++k) p[k] = s[k][q];
}

// ---------------------------------------------------------------------------------------------------------------
// Decoding

namespace {

// XXH32 of a short input (< 16 bytes): only needed for the LZ4 frame header checksum.
uint8_t FrameHeaderChecksum(const uint8_t* p, size_t len) {
  constexpr uint32_t kP1 = 2654435761U, kP2 = 2246822519U, kP3 = 3266489917U, kP4 = 668265263U,
                     kP5 = 374761393U;
  uint32_t h = kP5 + static_cast<uint32_t>(len);
  size_t i = 0;
  for (; i + 4 <= len; i += 4) {
    uint32_t w;
    std::memcpy(&w, p + i, 4);
    h = std::rotl(h + w * kP3, 17) * kP4;
  }
  for (; i < len; ++i) h = std::rotl(h + p[i] * kP5, 11) * kP1;
  h ^= h >> 15;
  h *= kP2;
  h ^= h >> 13;
  h *= kP3;
  h ^= h >> 16;
  return static_cast<uint8_t>(h >> 8);
}

enum class FastFrame { kDecoded, kNotApplicable };

// Decodes the frames the stock client writes (independent blocks, no checksums, no dictionary) block by block
// with LZ4_decompress_safe straight into `out`, skipping liblz4's frame state machine. Anything else (linked
// blocks, checksums) is left to LZ4F. Every length is checked against the bytes present and the room in
// `out`.
Result<FastFrame> DecodeSimpleFrame(std::span<const uint8_t> in, std::span<uint8_t> out) {
  if (in.size() < 7 || LoadU32(in, 0) != 0x184D2204U) return FastFrame::kNotApplicable;
  const uint8_t flg = in[4];
  const uint8_t bd = in[5];
  const bool independent = flg & 0x20;
  const bool block_checksum = flg & 0x10;
  const bool content_size = flg & 0x08;
  const bool content_checksum = flg & 0x04;
  const bool dict_id = flg & 0x01;
  if ((flg >> 6) != 1 || (flg & 0x02) || (bd & 0x8F) || !independent || block_checksum || content_checksum ||
      dict_id) {
    return FastFrame::kNotApplicable;  // LZ4F validates or rejects these
  }
  const unsigned block_id = (bd >> 4) & 7;
  if (block_id < 4) return FastFrame::kNotApplicable;
  const size_t block_max = size_t{1} << (8 + 2 * block_id);
  const size_t desc_len = content_size ? 10 : 2;
  if (in.size() < 4 + desc_len + 1) return Malformed("truncated LZ4 frame");
  if (FrameHeaderChecksum(in.data() + 4, desc_len) != in[4 + desc_len]) {
    return Malformed("invalid LZ4 frame: header checksum");
  }
  if (content_size && LoadU64(in, 6) != out.size()) {
    return Malformed("LZ4 frame content size differs from the chunk header");
  }
  size_t pos = 4 + desc_len + 1;
  size_t produced = 0;
  for (;;) {
    if (in.size() - pos < 4) return Malformed("truncated LZ4 frame");
    const uint32_t word = LoadU32(in, pos);
    pos += 4;
    if (word == 0) break;  // end mark
    const size_t size = word & 0x7FFFFFFFU;
    if (size > block_max) return Malformed("invalid LZ4 frame: block larger than the frame's block size");
    if (in.size() - pos < size) return Malformed("truncated LZ4 frame");
    const size_t room = out.size() - produced;
    if (word & 0x80000000U) {  // stored block
      if (size > room) return Malformed("LZ4 frame decodes to more than the chunk's uncompressed length");
      std::memcpy(out.data() + produced, in.data() + pos, size);
      produced += size;
    } else {
      const int n = LZ4_decompress_safe(reinterpret_cast<const char*>(in.data() + pos),
                                        reinterpret_cast<char*>(out.data() + produced),
                                        static_cast<int>(size), static_cast<int>(std::min(room, block_max)));
      if (n < 0) {
        return Malformed("invalid LZ4 block, or it decodes to more than the chunk's uncompressed length");
      }
      produced += static_cast<size_t>(n);
    }
    pos += size;
  }
  if (pos != in.size()) return Malformed("trailing bytes after the LZ4 frame");
  if (produced != out.size())
    return Malformed("LZ4 frame decodes to fewer bytes than the chunk header states");
  return FastFrame::kDecoded;
}

}  // namespace

struct ChunkDecoder::Impl {
  LZ4F_dctx* dctx = nullptr;
  std::vector<uint8_t> scratch;  // decoded bytes (hashing path)
  std::vector<uint8_t> grouped;  // BG4: the grouped streams before re-interleaving

  Impl() {
    if (LZ4F_isError(LZ4F_createDecompressionContext(&dctx, LZ4F_VERSION))) dctx = nullptr;
    scratch.resize(kMaxChunkUnpacked);
    grouped.resize(kMaxChunkUnpacked);
  }
  ~Impl() { LZ4F_freeDecompressionContext(dctx); }
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  // Decodes exactly one LZ4 frame that fills `out` exactly.
  Status Lz4Frame(std::span<const uint8_t> in, std::span<uint8_t> out) {
    auto fast = DecodeSimpleFrame(in, out);
    if (!fast) return fast.error();
    if (*fast == FastFrame::kDecoded) return Ok{};
    if (dctx == nullptr) return Malformed("LZ4 decoder unavailable");
    size_t in_pos = 0;
    size_t out_pos = 0;
    for (;;) {
      size_t dst = out.size() - out_pos;
      size_t src = in.size() - in_pos;
      const size_t hint =
          LZ4F_decompress(dctx, out.data() + out_pos, &dst, in.data() + in_pos, &src, nullptr);
      if (LZ4F_isError(hint)) {
        LZ4F_resetDecompressionContext(dctx);
        return Malformed(std::string("invalid LZ4 frame: ") + LZ4F_getErrorName(hint));
      }
      in_pos += src;
      out_pos += dst;
      if (hint == 0) break;  // frame complete
      if (src == 0 && dst == 0) {
        LZ4F_resetDecompressionContext(dctx);
        return Malformed(in_pos == in.size()
                             ? "truncated LZ4 frame"
                             : "LZ4 frame decodes to more than the chunk's uncompressed length");
      }
    }
    if (in_pos != in.size()) return Malformed("trailing bytes after the LZ4 frame");
    if (out_pos != out.size())
      return Malformed("LZ4 frame decodes to fewer bytes than the chunk header states");
    return Ok{};
  }
};

ChunkDecoder::ChunkDecoder() : impl_(std::make_unique<Impl>()) {}
ChunkDecoder::~ChunkDecoder() = default;

Status ChunkDecoder::Decode(const ChunkHeader& h, std::span<const uint8_t> payload, std::span<uint8_t> out) {
  if (payload.size() != h.compressed_length || out.size() != h.uncompressed_length) {
    return Malformed("chunk payload length does not match its header");
  }
  switch (h.scheme) {
    case CompressionScheme::kNone:
      std::memcpy(out.data(), payload.data(), payload.size());
      return Ok{};
    case CompressionScheme::kLz4:
      return impl_->Lz4Frame(payload, out);
    case CompressionScheme::kBg4Lz4: {
      std::span<uint8_t> grouped(impl_->grouped.data(), out.size());
      if (auto s = impl_->Lz4Frame(payload, grouped); !s) return s;
      Bg4Join(grouped, out);
      return Ok{};
    }
  }
  return Malformed("unknown compression scheme");
}

Result<ChunkHash> ChunkDecoder::DecodeAndHash(const ChunkHeader& h, std::span<const uint8_t> payload) {
  if (h.scheme == CompressionScheme::kNone) {
    if (payload.size() != h.uncompressed_length)
      return Malformed("chunk payload length does not match its header");
    return ChunkHashOf(payload);
  }
  std::span<uint8_t> out(impl_->scratch.data(), h.uncompressed_length);
  if (auto s = Decode(h, payload, out); !s) return s.error();
  return ChunkHashOf(out);
}

// ---------------------------------------------------------------------------------------------------------------
// Encoding

namespace {

// Compresses `raw` into one LZ4 frame framed as the stock client frames chunks: independent blocks, no
// checksums, no content size, and a block size that holds the whole chunk (64 KiB, else 256 KiB).
std::vector<uint8_t> Lz4FrameCompress(std::span<const uint8_t> raw) {
  LZ4F_preferences_t prefs{};
  prefs.frameInfo.blockSizeID = raw.size() <= 65536 ? LZ4F_max64KB : LZ4F_max256KB;
  prefs.frameInfo.blockMode = LZ4F_blockIndependent;
  std::vector<uint8_t> out(LZ4F_compressFrameBound(raw.size(), &prefs));
  const size_t n = LZ4F_compressFrame(out.data(), out.size(), raw.data(), raw.size(), &prefs);
  if (LZ4F_isError(n)) return {};
  out.resize(n);
  return out;
}

// The stock client's Auto policy decides once per block of kRetestInterval chunks (counted from the start of
// a file's chunks), from the block's first chunk alone.
constexpr size_t kRetestInterval = 32;

// The stock BG4 predictor: per byte group (index mod 4), the KL divergence of its popcount histogram from the
// histogram of all bytes (+1 per bin, divided by the plain byte count). BG4 iff the largest divergence
// exceeds 0.02. A group with an empty bin has a NaN divergence and, as upstream's fmax-based maximum does, is
// ignored.
// Bits set per byte value: std::popcount of a byte is a library call without -mpopcnt.
constexpr auto kBitsSet = [] {
  std::array<uint8_t, 256> t{};
  for (unsigned v = 0; v < 256; ++v) t[v] = static_cast<uint8_t>(std::popcount(v));
  return t;
}();

bool Bg4Recommended(std::span<const uint8_t> chunk) {
  uint32_t hist[4][9] = {};
  for (size_t i = 0; i < chunk.size(); ++i) hist[i % 4][kBitsSet[chunk[i]]]++;
  double base[9];
  for (int c = 0; c < 9; ++c) base[c] = 1.0 + hist[0][c] + hist[1][c] + hist[2][c] + hist[3][c];
  const double total = static_cast<double>(chunk.size());
  double max_kl = 0.0;
  for (const auto& group : hist) {
    uint32_t tot = 0;
    for (uint32_t v : group) tot += v;
    double kl = 0.0;
    for (int c = 0; c < 9; ++c) {
      const double p = static_cast<double>(group[c]) / tot;
      const double q = base[c] / total;
      kl += p * std::log(p / q);
    }
    max_kl = std::fmax(max_kl, kl);
  }
  return max_kl > 0.02;
}

CompressionScheme PredictScheme(std::span<const std::span<const uint8_t>> chunks, size_t i) {
  const auto& first = chunks[i - i % kRetestInterval];
  return Bg4Recommended(first) ? CompressionScheme::kBg4Lz4 : CompressionScheme::kLz4;
}

}  // namespace

CompressionScheme AppendChunk(std::vector<uint8_t>& out, std::span<const uint8_t> raw,
                              CompressionScheme scheme) {
  std::vector<uint8_t> payload;
  if (scheme == CompressionScheme::kLz4) {
    payload = Lz4FrameCompress(raw);
  } else if (scheme == CompressionScheme::kBg4Lz4) {
    std::vector<uint8_t> grouped(raw.size());
    Bg4Split(raw, grouped);
    payload = Lz4FrameCompress(grouped);
  }
  if (scheme == CompressionScheme::kNone || payload.empty() || payload.size() >= raw.size()) {
    scheme = CompressionScheme::kNone;  // stored as it is, copied once
  }
  const std::span<const uint8_t> stored = scheme == CompressionScheme::kNone ? raw : payload;
  ChunkHeader h{static_cast<uint32_t>(stored.size()), scheme, static_cast<uint32_t>(raw.size())};
  uint8_t header[kChunkHeaderSize];
  h.Write(header);
  PutBytes(out, header, sizeof header);
  PutBytes(out, stored.data(), stored.size());
  return scheme;
}

EncodedXorb EncodeXorb(std::span<const std::span<const uint8_t>> chunks, CompressionPolicy policy) {
  return EncodeXorb(chunks, policy, {});
}

EncodedXorb EncodeXorb(std::span<const std::span<const uint8_t>> chunks, CompressionPolicy policy,
                       std::span<const ChunkHash> hashes) {
  EncodedXorb x;
  EncodeXorb(chunks, policy, hashes, x);
  return x;
}

void EncodeXorb(std::span<const std::span<const uint8_t>> chunks, CompressionPolicy policy,
                std::span<const ChunkHash> hashes, EncodedXorb& x) {
  x.bytes.clear();
  x.layout.chunks.clear();
  x.layout.chunks.reserve(chunks.size());
  size_t raw = 0;
  for (const auto& c : chunks) raw += c.size();
  x.bytes.reserve(raw + kChunkHeaderSize * chunks.size());  // at most: a chunk never grows past its header
  // kAuto's prediction holds for a group of kRetestInterval chunks: made once per group.
  const bool auto_policy = policy == CompressionPolicy::kAuto || policy == CompressionPolicy::kAutoSampled;
  CompressionScheme predicted = CompressionScheme::kNone;
  for (size_t i = 0; i < chunks.size(); ++i) {
    CompressionScheme scheme = CompressionScheme::kNone;
    if (auto_policy && i % kRetestInterval == 0) predicted = PredictScheme(chunks, i);
    switch (policy) {
      case CompressionPolicy::kNone:
        break;
      case CompressionPolicy::kLz4:
        scheme = CompressionScheme::kLz4;
        break;
      case CompressionPolicy::kBg4Lz4:
        scheme = CompressionScheme::kBg4Lz4;
        break;
      case CompressionPolicy::kAuto:
      case CompressionPolicy::kAutoSampled:
        scheme = predicted;
        break;
    }
    const CompressionScheme used = AppendChunk(x.bytes, chunks[i], scheme);
    // Sampled: a group whose first chunk did not shrink is stored as it is.
    if (policy == CompressionPolicy::kAutoSampled && i % kRetestInterval == 0 &&
        used == CompressionScheme::kNone)
      predicted = CompressionScheme::kNone;
    x.layout.chunks.push_back({i < hashes.size() ? hashes[i] : ChunkHashOf(chunks[i]),
                               static_cast<uint32_t>(chunks[i].size()),
                               static_cast<uint32_t>(x.bytes.size())});
  }
  x.hash = XorbHashOf(x.layout.hashed_chunks());
}

// ---------------------------------------------------------------------------------------------------------------
// Footer

void AppendFooterV1(std::vector<uint8_t>& out, const XorbHash& hash, const XorbLayout& layout,
                    uint32_t nonce) {
  const auto n = static_cast<uint32_t>(layout.chunks.size());
  out.reserve(out.size() + FooterV1Size(n));
  const size_t start = out.size();
  PutBytes(out, kFooterIdent, 7);
  out.push_back(1);
  PutBytes(out, hash.bytes.data(), 32);
  PutBytes(out, kHashIdent, 7);
  out.push_back(0);
  PutU32(out, n);
  for (const auto& c : layout.chunks) PutBytes(out, c.hash.bytes.data(), 32);
  PutBytes(out, kBoundaryIdent, 7);
  out.push_back(1);
  PutU32(out, n);
  for (const auto& c : layout.chunks) PutU32(out, c.end_offset);
  uint32_t unpacked = 0;
  for (const auto& c : layout.chunks) PutU32(out, unpacked += c.unpacked_size);
  PutU32(out, n);
  PutU32(out, 52 + 40 * n);
  PutU32(out, 40 + 8 * n);
  PutU32(out, nonce);
  PutZeros(out, 12);
  PutU32(out, static_cast<uint32_t>(out.size() - start));
}

Result<XorbFooter> ParseFooter(std::span<const uint8_t> object) {
  if (object.size() < 4) return Malformed("object too short for a footer");
  const uint32_t info_len = LoadU32(object, object.size() - 4);
  if (info_len > object.size() - 4) return Malformed("footer length exceeds the object");
  const size_t start = object.size() - 4 - info_len;
  std::span<const uint8_t> f = object.subspan(start, info_len);
  if (f.size() < 8 || !StartsWithFooterIdent(f)) return Malformed("footer does not start with XETBLOB");

  if (f.size() < 40) return Malformed("truncated footer");  // before reading the hash at bytes 8..39

  XorbFooter out;
  out.chunk_region_size = start;
  out.hash = Hash::FromBytes(f.data() + 8);
  auto& chunks = out.layout.chunks;
  const uint8_t version = f[7];

  if (version == 1) {
    if (f.size() < 52) return Malformed("truncated footer");
    if (std::memcmp(f.data() + 40, kHashIdent, 7) != 0 || f[47] != 0)
      return Malformed("bad hash section header");
    const uint32_t n = LoadU32(f, 48);
    // The footer's size is fixed by n; check before allocating anything.
    if (uint64_t{92} + 40ULL * n != f.size())
      return Malformed("footer length does not match its chunk count");
    const size_t b = 52 + 32 * size_t{n};
    if (std::memcmp(f.data() + b, kBoundaryIdent, 7) != 0 || f[b + 7] != 1) {
      return Malformed("bad boundary section header");
    }
    if (LoadU32(f, b + 8) != n || LoadU32(f, 64 + 40 * size_t{n}) != n)
      return Malformed("chunk counts disagree");
    if (LoadU32(f, 68 + 40 * size_t{n}) != 52 + 40 * n || LoadU32(f, 72 + 40 * size_t{n}) != 40 + 8 * n) {
      return Malformed("section offsets do not match the layout");
    }
    chunks.resize(n);
    uint32_t prev_end = 0;
    uint32_t prev_unpacked = 0;
    for (uint32_t i = 0; i < n; ++i) {
      chunks[i].hash = Hash::FromBytes(f.data() + 52 + 32 * size_t{i});
      const uint32_t end = LoadU32(f, 64 + 32 * size_t{n} + 4 * size_t{i});
      const uint32_t unpacked = LoadU32(f, 64 + 36 * size_t{n} + 4 * size_t{i});
      if (end <= prev_end || unpacked <= prev_unpacked) return Malformed("footer offsets are not increasing");
      chunks[i].end_offset = end;
      chunks[i].unpacked_size = unpacked - prev_unpacked;
      prev_end = end;
      prev_unpacked = unpacked;
    }
    std::memcpy(out.buffer.data(), f.data() + 76 + 40 * size_t{n}, 16);
    out.version = FooterVersion::kV1;
  } else if (version == 0) {
    if (f.size() < 44) return Malformed("truncated footer");
    const uint32_t n = LoadU32(f, 40);
    if (uint64_t{60} + 36ULL * n != f.size())
      return Malformed("footer length does not match its chunk count");
    chunks.resize(n);
    uint32_t prev_end = 0;
    for (uint32_t i = 0; i < n; ++i) {
      const uint32_t end = LoadU32(f, 44 + 4 * size_t{i});
      if (end <= prev_end) return Malformed("footer offsets are not increasing");
      chunks[i].end_offset = end;
      chunks[i].hash = Hash::FromBytes(f.data() + 44 + 4 * size_t{n} + 32 * size_t{i});
      prev_end = end;
    }
    std::memcpy(out.buffer.data(), f.data() + 44 + 36 * size_t{n}, 16);
    out.version = FooterVersion::kV0;
  } else {
    return Malformed("unsupported footer version " + std::to_string(version));
  }
  if (out.layout.chunk_region_size() != out.chunk_region_size) {
    return Malformed("footer boundaries do not end where the footer starts");
  }
  return out;
}

// ---------------------------------------------------------------------------------------------------------------
// Validation

namespace {

// A chunk found by its header: where its payload starts.
struct PendingChunk {
  ChunkHeader header;
  uint32_t payload_offset;
};

// Pass 1 (headers only, cheap): every chunk found and the limits checked; `out` gets the chunk region's size
// and the count per compression scheme.
Result<std::vector<PendingChunk>> FindChunks(std::span<const uint8_t> body, ValidatedXorb& out) {
  std::vector<PendingChunk> pending;
  pending.reserve(std::min<size_t>(kMaxXorbChunks, body.size() / (kChunkHeaderSize + 1) + 1));
  size_t pos = 0;
  uint64_t unpacked = 0;
  while (pos < body.size()) {
    const auto rest = body.subspan(pos);
    if (StartsWithFooterIdent(rest)) break;
    auto h = ChunkHeader::Parse(rest);
    if (!h)
      return Error{h.error().code,
                   h.error().message + " (chunk " + std::to_string(pending.size()) + At(pos) + ")"};
    if (h->compressed_length > rest.size() - kChunkHeaderSize) {
      return Malformed("chunk " + std::to_string(pending.size()) + " runs past the end of the body" +
                       At(pos));
    }
    if (pending.size() == kMaxXorbChunks) return LimitExceeded("more than 8192 chunks in one xorb");
    unpacked += h->uncompressed_length;
    if (unpacked > kMaxXorbUnpacked)
      return LimitExceeded("more than 64 MiB of uncompressed data in one xorb");
    pending.push_back({*h, static_cast<uint32_t>(pos + kChunkHeaderSize)});
    pos += kChunkHeaderSize + h->compressed_length;
    out.chunks_by_scheme[static_cast<size_t>(h->scheme)]++;
  }
  if (pending.empty()) return Malformed("xorb has no chunks");
  out.chunk_region_size = pos;
  return pending;
}

// Pass 2: each chunk decoded and hashed once (but those hashed while the body arrived), possibly in parallel;
// the first chunk that fails is the error.
Status HashChunks(std::span<const uint8_t> body, const std::vector<PendingChunk>& pending,
                  const ValidateOptions& options, std::vector<XorbChunk>& chunks) {
  chunks.resize(pending.size());
  for (size_t i = 0; i < pending.size(); ++i) {
    chunks[i].unpacked_size = pending[i].header.uncompressed_length;
    chunks[i].end_offset = pending[i].payload_offset + pending[i].header.compressed_length;
  }
  // Chunks hashed while the body arrived, as long as they are the chunks found here.
  size_t known = 0;
  while (known < std::min(options.prehashed.size(), pending.size()) &&
         options.prehashed[known].payload_offset == pending[known].payload_offset) {
    chunks[known].hash = options.prehashed[known].hash;
    ++known;
  }
  std::atomic<size_t> first_bad{pending.size()};
  std::vector<Error> errors;
  const size_t todo = pending.size() - known;
  const size_t groups = options.parallel ? std::clamp<size_t>(todo, 1, 64) : 1;
  errors.resize(groups, Error{ErrorCode::kMalformed, {}});
  auto run_group = [&](size_t g) {
    ChunkDecoder decoder;
    const size_t begin = known + todo * g / groups;
    const size_t end = known + todo * (g + 1) / groups;
    for (size_t i = begin; i < end; ++i) {
      if (first_bad.load(std::memory_order_relaxed) < i) return;  // an earlier chunk already failed
      const auto& p = pending[i];
      auto hash = decoder.DecodeAndHash(p.header, body.subspan(p.payload_offset, p.header.compressed_length));
      if (!hash) {
        errors[g] = Error{hash.error().code, hash.error().message + " (chunk " + std::to_string(i) +
                                                 At(p.payload_offset - kChunkHeaderSize) + ")"};
        size_t cur = first_bad.load();
        while (i < cur && !first_bad.compare_exchange_weak(cur, i)) {
        }
        return;
      }
      chunks[i].hash = *hash;
    }
  };
  if (options.parallel) {
    (*options.parallel)(groups, run_group);
  } else {
    run_group(0);
  }
  if (first_bad.load() < pending.size()) {
    for (auto& e : errors) {
      if (!e.message.empty()) return e;
    }
  }
  return Ok{};
}

// A footer sent after the chunks must describe exactly what was computed; `out.footer` gets its version.
Status CheckSentFooter(std::span<const uint8_t> body, ValidatedXorb& out) {
  const size_t pos = out.chunk_region_size;
  const auto& chunks = out.layout.chunks;
  auto footer = ParseFooter(body);
  if (!footer) return Malformed("invalid footer after the chunks: " + footer.error().message);
  if (footer->chunk_region_size != pos) return Malformed("footer does not start right after the last chunk");
  if (footer->hash != out.hash) return HashMismatch("footer names xorb " + footer->hash.hex());
  const auto& fc = footer->layout.chunks;
  if (fc.size() != chunks.size()) return Inconsistent("footer lists a different number of chunks");
  for (size_t i = 0; i < chunks.size(); ++i) {
    const bool sizes_ok =
        footer->version == FooterVersion::kV0 || fc[i].unpacked_size == chunks[i].unpacked_size;
    if (fc[i].hash != chunks[i].hash || fc[i].end_offset != chunks[i].end_offset || !sizes_ok) {
      return Inconsistent("footer disagrees with chunk " + std::to_string(i));
    }
  }
  out.footer = footer->version;
  return Ok{};
}

}  // namespace

Result<ValidatedXorb> ValidateXorb(std::span<const uint8_t> body, const ValidateOptions& options) {
  if (body.size() > kMaxXorbUploadBytes) {
    return LimitExceeded("xorb of " + std::to_string(body.size()) + " bytes exceeds the upload limit");
  }
  ValidatedXorb out;
  auto pending = FindChunks(body, out);
  if (!pending.ok()) return pending.error();
  if (auto st = HashChunks(body, *pending, options, out.layout.chunks); !st.ok()) return st.error();
  out.hash = XorbHashOf(out.layout.hashed_chunks());
  if (options.expected_hash && out.hash != *options.expected_hash) {
    return HashMismatch("xorb hash is " + out.hash.hex() + ", not " + options.expected_hash->hex());
  }
  if (out.chunk_region_size < body.size()) {
    if (auto st = CheckSentFooter(body, out); !st.ok()) return st.error();
  }
  return out;
}

void ChunkPrehasher::Advance(std::span<const uint8_t> body, const std::atomic<bool>* interrupt) {
  while (!stopped_ && pos_ < body.size() &&
         !(interrupt != nullptr && interrupt->load(std::memory_order_relaxed))) {
    const auto rest = body.subspan(pos_);
    // Enough bytes to tell a footer's ident from a chunk header.
    if (rest.size() < 16) return;
    if (StartsWithFooterIdent(rest) || hashes_.size() == kMaxXorbChunks) {
      stopped_ = true;
      return;
    }
    auto h = ChunkHeader::Parse(rest);
    if (!h) {
      stopped_ = true;
      return;
    }
    if (h->compressed_length > rest.size() - kChunkHeaderSize) return;  // the payload is still arriving
    auto hash = decoder_.DecodeAndHash(*h, rest.subspan(kChunkHeaderSize, h->compressed_length));
    if (!hash) {
      stopped_ = true;
      return;
    }
    hashes_.push_back({static_cast<uint32_t>(pos_ + kChunkHeaderSize), *hash});
    pos_ += kChunkHeaderSize + h->compressed_length;
  }
}

}  // namespace cairn::xet
