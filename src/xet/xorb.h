// Xorbs (protocol §3): a sequence of compressed chunks, optionally followed by a footer that lists their
// hashes and boundaries. Clients upload the chunk region alone; cairn stores it with a footer it regenerates
// itself.
//
// Everything here works on caller-owned byte spans: no I/O and no threads. Where work can run in parallel
// (validation), the caller passes an executor.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "common/error.h"
#include "xet/hash.h"
#include "xet/hashing.h"

namespace cairn::xet {

inline constexpr size_t kChunkHeaderSize = 8;
inline constexpr uint32_t kMaxChunkUnpacked = 128 * 1024;
// Upstream accepts payloads up to twice the largest chunk (LZ4 can expand incompressible data a little).
inline constexpr uint32_t kMaxChunkPayload = 2 * kMaxChunkUnpacked;
// The stock client cuts xorbs at 64 MiB of uncompressed data or 8192 chunks, whichever comes first.
inline constexpr uint64_t kMaxXorbUnpacked = 64ULL * 1024 * 1024;
inline constexpr uint32_t kMaxXorbChunks = 8192;
// Largest acceptable upload: the chunk region of an incompressible full xorb, plus a v1 footer if one is
// sent.
inline constexpr uint64_t kMaxXorbUploadBytes =
    kMaxXorbUnpacked + kChunkHeaderSize * kMaxXorbChunks + 92 + 40ULL * kMaxXorbChunks + 4;

enum class CompressionScheme : uint8_t { kNone = 0, kLz4 = 1, kBg4Lz4 = 2 };
const char* SchemeName(CompressionScheme s);

struct ChunkHeader {
  uint32_t compressed_length = 0;  // payload bytes following the header
  CompressionScheme scheme = CompressionScheme::kNone;
  uint32_t uncompressed_length = 0;  // bytes after decoding

  // Parses and checks an 8-byte header: version 0, known scheme, lengths within limits, a None payload
  // exactly its uncompressed length.
  static Result<ChunkHeader> Parse(std::span<const uint8_t> bytes);
  void Write(uint8_t out[kChunkHeaderSize]) const;
};

// The chunk at the front of `bytes` (chunks as a xorb stores them: header, then payload), bounded by the
// bytes present: the header's errors, or kMalformed when the payload runs past `bytes`.
struct StoredChunk {
  ChunkHeader header;
  std::span<const uint8_t> payload;  // within `bytes`

  size_t stored_size() const { return kChunkHeaderSize + payload.size(); }
  static Result<StoredChunk> Parse(std::span<const uint8_t> bytes);
};

// One chunk as a stored xorb knows it.
struct XorbChunk {
  ChunkHash hash;
  uint32_t unpacked_size = 0;
  uint32_t end_offset = 0;  // end of this chunk (header included) in the chunk region
};

// The layout of a xorb: everything the index needs to plan reconstructions and verify shards. Immutable.
struct XorbLayout {
  std::vector<XorbChunk> chunks;

  uint32_t chunk_region_size() const { return chunks.empty() ? 0 : chunks.back().end_offset; }
  uint32_t begin_offset(size_t i) const { return i == 0 ? 0 : chunks[i - 1].end_offset; }
  uint64_t unpacked_size() const;
  std::vector<HashedChunk> hashed_chunks() const;
};

// ---- Decoding

// Decodes chunk payloads. Holds an LZ4 decompression context and scratch space, so keep one per thread and
// reuse it. Output never exceeds the header's uncompressed length, and a payload must decode to exactly that
// length with no bytes left over.
class ChunkDecoder {
 public:
  ChunkDecoder();
  ~ChunkDecoder();
  ChunkDecoder(const ChunkDecoder&) = delete;
  ChunkDecoder& operator=(const ChunkDecoder&) = delete;

  // Decodes `payload` into `out`, which must be exactly header.uncompressed_length bytes.
  Status Decode(const ChunkHeader& header, std::span<const uint8_t> payload, std::span<uint8_t> out);
  // Decodes and hashes. For scheme None the payload is hashed in place (no copy).
  Result<ChunkHash> DecodeAndHash(const ChunkHeader& header, std::span<const uint8_t> payload);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// ---- Encoding (client side: tests, benchmarks, `cairn put`)

// kAutoSampled: kAuto's scheme, tried on the first chunk of each group of chunks kAuto predicts for; when
// that chunk does not shrink, the rest of its group is stored as it is, untried (incompressible data — most
// model weights, anything already compressed — then costs no compression attempts; compressible data is
// compressed as kAuto would). For a server chunking uploads itself, where the attempts are its own CPU.
enum class CompressionPolicy { kNone, kLz4, kBg4Lz4, kAuto, kAutoSampled };

// Appends one chunk (header + payload) to `out`, compressed per `policy`. As the stock client does, a chunk
// whose compressed form is not strictly smaller than the raw bytes is stored as None. Returns the scheme
// used.
CompressionScheme AppendChunk(std::vector<uint8_t>& out, std::span<const uint8_t> raw,
                              CompressionScheme scheme);

// Builds a footer-less xorb (what a client uploads) from raw chunks. kAuto chooses BG4 or LZ4 per group of
// chunks the way the stock client does.
struct EncodedXorb {
  std::vector<uint8_t> bytes;  // chunk region only
  XorbLayout layout;
  XorbHash hash;
};
EncodedXorb EncodeXorb(std::span<const std::span<const uint8_t>> chunks, CompressionPolicy policy);
// The same for chunks the caller has hashed already (`hashes[i]` is chunks[i]'s): they are not hashed again.
EncodedXorb EncodeXorb(std::span<const std::span<const uint8_t>> chunks, CompressionPolicy policy,
                       std::span<const ChunkHash> hashes);
// The same into `into`, whose buffers are reused (a writer of many xorbs keeps one: no fresh 64 MiB to fault
// in).
void EncodeXorb(std::span<const std::span<const uint8_t>> chunks, CompressionPolicy policy,
                std::span<const ChunkHash> hashes, EncodedXorb& into);

// Byte grouping: stream k holds bytes k, k+4, k+8, ...; the streams are concatenated.
void Bg4Split(std::span<const uint8_t> in, std::span<uint8_t> out);
void Bg4Join(std::span<const uint8_t> in, std::span<uint8_t> out);

// ---- Footer

enum class FooterVersion { kNone, kV0, kV1 };

struct XorbFooter {
  FooterVersion version = FooterVersion::kNone;
  XorbHash hash;
  XorbLayout layout;  // hashes, boundaries and (v1 only) unpacked sizes; v0 leaves unpacked_size 0
  std::array<uint8_t, 16> buffer{};  // bytes 0..3: optional uniqueness nonce
  size_t chunk_region_size = 0;      // bytes before the footer
};

// Serialized size of a v1 footer plus its trailing u32 length, for n chunks.
inline constexpr size_t FooterV1Size(size_t n) {
  return 92 + 40 * n + 4;
}

// Appends a v1 footer and its length trailer to `out`.
void AppendFooterV1(std::vector<uint8_t>& out, const XorbHash& hash, const XorbLayout& layout,
                    uint32_t nonce = 0);

// Reads the footer at the end of a whole stored object (v1, or legacy v0). Every count and offset is checked
// against the bytes present; nothing may follow the trailer.
Result<XorbFooter> ParseFooter(std::span<const uint8_t> object);

// ---- Validation

// Runs `task(i)` for every i in [0, count), possibly concurrently, and returns when all are done.
using ParallelFor = std::function<void(size_t count, const std::function<void(size_t)>& task)>;

struct ValidatedXorb {
  XorbHash hash;
  XorbLayout layout;
  size_t chunk_region_size = 0;
  FooterVersion footer = FooterVersion::kNone;  // a footer found after the chunks (it was checked)
  std::array<uint32_t, 3> chunks_by_scheme{};   // indexed by CompressionScheme
};

// A chunk hashed before validation (by ChunkPrehasher), with where its payload starts in the body.
struct PrehashedChunk {
  uint32_t payload_offset = 0;
  ChunkHash hash;
};

struct ValidateOptions {
  const XorbHash* expected_hash = nullptr;  // when set, the computed hash must equal it
  const ParallelFor* parallel = nullptr;    // when set, chunks are decoded and hashed on it
  // The body's leading chunks, already decoded and hashed from these same bytes: not decoded again. A chunk
  // whose offset does not match the one found here ends the list.
  std::span<const PrehashedChunk> prehashed = {};
};

// Validates an uploaded xorb in one pass: walks the chunk headers (stopping at a footer if one follows the
// chunks, which must then agree with what was computed), decodes and hashes every chunk exactly once, and
// checks the xorb hash. Returns the layout from that same pass.
Result<ValidatedXorb> ValidateXorb(std::span<const uint8_t> body, const ValidateOptions& options = {});

// Decodes and hashes the chunks of a xorb body while the body is still arriving, so that ValidateXorb at the
// end (given hashes() as ValidateOptions::prehashed) has only the tail left. It walks chunks exactly as
// ValidateXorb does and stops for good at anything else (a footer, a malformed header, a decoding error): the
// validator then finds and reports it.
class ChunkPrehasher {
 public:
  // `body`: the bytes received so far, a prefix of the final body (bytes already given never change). Returns
  // early, between two chunks, once `*interrupt` is set.
  void Advance(std::span<const uint8_t> body, const std::atomic<bool>* interrupt = nullptr);
  std::span<const PrehashedChunk> hashes() const { return hashes_; }

 private:
  ChunkDecoder decoder_;
  size_t pos_ = 0;
  bool stopped_ = false;
  std::vector<PrehashedChunk> hashes_;
};

}  // namespace cairn::xet
