#include "xet/xorb.h"

#include <gtest/gtest.h>
#include <lz4frame.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstring>
#include <functional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "xet/hashing.h"
#include "xet/test_support.h"

namespace cairn::xet {
namespace {

using Bytes = std::vector<uint8_t>;
using testing::Contains;
using testing::GetU32;
using testing::SetU32;

void AppendU32(Bytes& b, uint32_t v) {
  const size_t n = b.size();
  b.resize(n + 4);
  SetU32(b, n, v);
}

void AppendText(Bytes& b, const char* s) {
  for (; *s != '\0'; ++s) b.push_back(static_cast<uint8_t>(*s));
}

Bytes HeaderBytes(uint8_t version, uint32_t compressed, uint8_t scheme, uint32_t uncompressed) {
  Bytes b(kChunkHeaderSize);
  b[0] = version;
  b[1] = static_cast<uint8_t>(compressed);
  b[2] = static_cast<uint8_t>(compressed >> 8);
  b[3] = static_cast<uint8_t>(compressed >> 16);
  b[4] = scheme;
  b[5] = static_cast<uint8_t>(uncompressed);
  b[6] = static_cast<uint8_t>(uncompressed >> 8);
  b[7] = static_cast<uint8_t>(uncompressed >> 16);
  return b;
}

// Raw chunks plus the span views EncodeXorb takes.
struct Chunks {
  std::vector<Bytes> data;
  std::vector<std::span<const uint8_t>> views;

  void Add(Bytes b) {
    data.push_back(std::move(b));
    views.clear();
    for (const auto& d : data) views.emplace_back(d);
  }
  std::vector<HashedChunk> Hashed() const {
    std::vector<HashedChunk> out;
    for (const auto& d : data) out.push_back({ChunkHashOf(d), d.size()});
    return out;
  }
};

Chunks HundredByteChunks() {
  Chunks c;
  for (uint64_t i = 0; i < 3; ++i) c.Add(testing::SplitMix64Bytes(i + 1, 100));
  return c;
}

// Compressible and incompressible chunks interleaved, of varied sizes.
Chunks MixedChunks(size_t count) {
  Chunks c;
  for (size_t i = 0; i < count; ++i) {
    const size_t size = 1000 + (i * 7919) % 20000;
    c.Add(i % 3 == 2 ? testing::SplitMix64Bytes(i, size) : testing::TextLikeBytes(i, size));
  }
  return c;
}

// One chunk as AppendChunk writes it, split into its parsed header and payload.
struct EncodedChunk {
  CompressionScheme used;
  ChunkHeader header;
  Bytes payload;
};

EncodedChunk EncodeOne(std::span<const uint8_t> raw, CompressionScheme scheme) {
  Bytes out;
  const CompressionScheme used = AppendChunk(out, raw, scheme);
  auto header = ChunkHeader::Parse(out);
  EXPECT_TRUE(header.ok()) << header.error().message;
  return {used, header.value(), Bytes(out.begin() + kChunkHeaderSize, out.end())};
}

Status DecodeWith(ChunkDecoder& decoder, const ChunkHeader& header, const Bytes& payload) {
  Bytes out(header.uncompressed_length);
  return decoder.Decode(header, payload, out);
}

// A ParallelFor that runs each task on its own thread, counting how often it was used.
ParallelFor ThreadPerTask(std::atomic<int>* calls) {
  return [calls](size_t count, const std::function<void(size_t)>& task) {
    calls->fetch_add(1);
    std::vector<std::thread> threads;
    threads.reserve(count);
    for (size_t i = 0; i < count; ++i) threads.emplace_back([&task, i] { task(i); });
    for (auto& t : threads) t.join();
  };
}

void ExpectSameLayout(const XorbLayout& actual, const XorbLayout& expected) {
  ASSERT_EQ(actual.chunks.size(), expected.chunks.size());
  for (size_t i = 0; i < expected.chunks.size(); ++i) {
    SCOPED_TRACE("chunk " + std::to_string(i));
    EXPECT_EQ(actual.chunks[i].hash, expected.chunks[i].hash);
    EXPECT_EQ(actual.chunks[i].unpacked_size, expected.chunks[i].unpacked_size);
    EXPECT_EQ(actual.chunks[i].end_offset, expected.chunks[i].end_offset);
  }
}

// -----------------------------------------------------------------------------------------------------------
// Chunk header

TEST(XorbHeader, WritesTheProtocolExample) {
  const ChunkHeader h{100, CompressionScheme::kNone, 100};
  std::array<uint8_t, kChunkHeaderSize> b{};
  h.Write(b.data());
  EXPECT_EQ(b, (std::array<uint8_t, 8>{0x00, 0x64, 0x00, 0x00, 0x00, 0x64, 0x00, 0x00}));
}

TEST(XorbHeader, ParseWriteRoundtrip) {
  const ChunkHeader cases[] = {
      {100, CompressionScheme::kNone, 100},
      {0x01F0A3, CompressionScheme::kLz4, 0x020000},  // every byte of both u24 fields in use
      {kMaxChunkPayload, CompressionScheme::kBg4Lz4, kMaxChunkUnpacked},
      {1, CompressionScheme::kLz4, 1},
  };
  for (const auto& h : cases) {
    SCOPED_TRACE(std::to_string(h.compressed_length) + "/" + SchemeName(h.scheme));
    std::array<uint8_t, kChunkHeaderSize> b{};
    h.Write(b.data());
    auto parsed = ChunkHeader::Parse(b);
    ASSERT_TRUE(parsed.ok()) << parsed.error().message;
    EXPECT_EQ(parsed->compressed_length, h.compressed_length);
    EXPECT_EQ(parsed->scheme, h.scheme);
    EXPECT_EQ(parsed->uncompressed_length, h.uncompressed_length);
  }
  auto example = ChunkHeader::Parse(HeaderBytes(0, 100, 0, 100));
  ASSERT_TRUE(example.ok());
  EXPECT_EQ(example->compressed_length, 100u);
  EXPECT_EQ(example->uncompressed_length, 100u);
}

TEST(XorbHeader, RejectsTruncatedHeader) {
  const Bytes b = HeaderBytes(0, 100, 0, 100);
  auto r = ChunkHeader::Parse(std::span(b).first(7));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kMalformed);
  EXPECT_FALSE(ChunkHeader::Parse({}).ok());
}

TEST(XorbHeader, StoredChunkIsBoundedByTheBytesPresent) {
  Bytes two;
  const Bytes a = xet::testing::SplitMix64Bytes(1, 1000);
  const Bytes b = xet::testing::TextLikeBytes(2, 5000);
  (void)AppendChunk(two, a, CompressionScheme::kNone);
  (void)AppendChunk(two, b, CompressionScheme::kLz4);
  auto first = StoredChunk::Parse(two);
  ASSERT_TRUE(first.ok()) << first.error().message;
  EXPECT_EQ(first->stored_size(), kChunkHeaderSize + 1000);
  EXPECT_EQ(Bytes(first->payload.begin(), first->payload.end()), a);
  auto second = StoredChunk::Parse(std::span(two).subspan(first->stored_size()));
  ASSERT_TRUE(second.ok()) << second.error().message;
  EXPECT_EQ(first->stored_size() + second->stored_size(), two.size());
  EXPECT_EQ(second->header.uncompressed_length, 5000U);
  // A payload cut short, a header cut short, nothing at all.
  auto cut = StoredChunk::Parse(std::span(two).first(kChunkHeaderSize + 999));
  ASSERT_FALSE(cut.ok());
  EXPECT_EQ(cut.error().code, ErrorCode::kMalformed);
  EXPECT_FALSE(StoredChunk::Parse(std::span(two).first(5)).ok());
  EXPECT_FALSE(StoredChunk::Parse({}).ok());
}

TEST(XorbHeader, RejectsVersionOne) {
  auto r = ChunkHeader::Parse(HeaderBytes(1, 100, 0, 100));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kMalformed);
  EXPECT_TRUE(Contains(r.error().message, "version")) << r.error().message;
}

TEST(XorbHeader, RejectsUnknownSchemes) {
  for (uint8_t scheme : {uint8_t{3}, uint8_t{99}}) {  // 99 is the client's "auto" policy, never on the wire
    auto r = ChunkHeader::Parse(HeaderBytes(0, 100, scheme, 200));
    ASSERT_FALSE(r.ok()) << "scheme " << int{scheme};
    EXPECT_EQ(r.error().code, ErrorCode::kMalformed);
    EXPECT_TRUE(Contains(r.error().message, "scheme")) << r.error().message;
  }
}

TEST(XorbHeader, RejectsZeroUncompressedLength) {
  auto r = ChunkHeader::Parse(HeaderBytes(0, 10, 1, 0));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kMalformed);
  EXPECT_FALSE(ChunkHeader::Parse(HeaderBytes(0, 0, 0, 0)).ok());
}

TEST(XorbHeader, RejectsUncompressedLengthOverLimit) {
  EXPECT_TRUE(ChunkHeader::Parse(HeaderBytes(0, 1000, 1, kMaxChunkUnpacked)).ok());
  auto r = ChunkHeader::Parse(HeaderBytes(0, 1000, 1, kMaxChunkUnpacked + 1));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kLimit);
}

TEST(XorbHeader, RejectsPayloadOverLimit) {
  EXPECT_TRUE(ChunkHeader::Parse(HeaderBytes(0, kMaxChunkPayload, 1, 1000)).ok());
  auto r = ChunkHeader::Parse(HeaderBytes(0, kMaxChunkPayload + 1, 1, 1000));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kLimit);
}

TEST(XorbHeader, RejectsNoneWithDifferingLengths) {
  auto r = ChunkHeader::Parse(HeaderBytes(0, 99, 0, 100));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kMalformed);
  EXPECT_FALSE(ChunkHeader::Parse(HeaderBytes(0, 101, 0, 100)).ok());
}

// -----------------------------------------------------------------------------------------------------------
// Byte grouping and codecs

TEST(XorbCodec, Bg4GroupsTheProtocolExample) {
  const Bytes in = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  Bytes grouped(in.size());
  Bg4Split(in, grouped);
  EXPECT_EQ(grouped, (Bytes{0x00, 0x04, 0x08, 0x01, 0x05, 0x09, 0x02, 0x06, 0x03, 0x07}));
  Bytes back(in.size());
  Bg4Join(grouped, back);
  EXPECT_EQ(back, in);
}

TEST(XorbCodec, Bg4SplitJoinRoundtrip) {
  std::vector<size_t> lengths = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 65537};
  for (size_t n : lengths) {
    SCOPED_TRACE("length " + std::to_string(n));
    const Bytes in = testing::SplitMix64Bytes(n + 17, n);
    Bytes grouped(n);
    Bg4Split(in, grouped);
    // Stream k holds bytes k, k+4, ...; the first n % 4 streams have one byte more.
    size_t at = 0;
    for (size_t k = 0; k < 4; ++k) {
      for (size_t i = k; i < n; i += 4) ASSERT_EQ(grouped[at++], in[i]) << "stream " << k << " byte " << i;
    }
    EXPECT_EQ(at, n);
    Bytes back(n);
    Bg4Join(grouped, back);
    EXPECT_EQ(back, in);
  }
}

TEST(XorbCodec, RoundtripsEverySchemeOnCompressibleData) {
  ChunkDecoder decoder;
  for (size_t size : {size_t{100000}, size_t{kMaxChunkUnpacked}}) {
    const Bytes raw = testing::TextLikeBytes(size, size);
    for (auto scheme : {CompressionScheme::kNone, CompressionScheme::kLz4, CompressionScheme::kBg4Lz4}) {
      SCOPED_TRACE(std::string(SchemeName(scheme)) + " " + std::to_string(size));
      const auto c = EncodeOne(raw, scheme);
      EXPECT_EQ(c.used, scheme);
      EXPECT_EQ(c.header.scheme, scheme);
      EXPECT_EQ(c.header.uncompressed_length, raw.size());
      EXPECT_EQ(c.header.compressed_length, c.payload.size());
      if (scheme == CompressionScheme::kNone) {
        EXPECT_EQ(c.payload, raw);
      } else {
        // LZ4 shrinks text well; grouping text into byte streams breaks up its words, so BG4 gains less.
        EXPECT_LT(c.payload.size(), scheme == CompressionScheme::kLz4 ? raw.size() * 3 / 4 : raw.size());
        EXPECT_EQ(c.payload[0], 0x04);  // an LZ4 frame: magic 04 22 4D 18
        EXPECT_EQ(c.payload[3], 0x18);
      }
      Bytes out(raw.size());
      auto s = decoder.Decode(c.header, c.payload, out);
      ASSERT_TRUE(s.ok()) << s.error().message;
      EXPECT_EQ(out, raw);
      auto h = decoder.DecodeAndHash(c.header, c.payload);
      ASSERT_TRUE(h.ok()) << h.error().message;
      EXPECT_EQ(*h, ChunkHashOf(raw));
    }
  }
}

TEST(XorbCodec, Bg4IsLz4OverGroupedBytes) {
  // Little-endian u32 counters: the high-byte streams are nearly constant once grouped.
  Bytes raw;
  for (uint32_t i = 0; raw.size() < 65536; ++i) {
    const uint32_t v = 0x01000000 + i * 37;
    for (int k = 0; k < 4; ++k) raw.push_back(static_cast<uint8_t>(v >> (8 * k)));
  }
  Bytes grouped(raw.size());
  Bg4Split(raw, grouped);
  const auto bg4 = EncodeOne(raw, CompressionScheme::kBg4Lz4);
  const auto lz4 = EncodeOne(raw, CompressionScheme::kLz4);
  const auto lz4_of_grouped = EncodeOne(grouped, CompressionScheme::kLz4);
  ASSERT_EQ(bg4.used, CompressionScheme::kBg4Lz4);
  ASSERT_EQ(lz4_of_grouped.used, CompressionScheme::kLz4);
  EXPECT_EQ(bg4.payload, lz4_of_grouped.payload);
  EXPECT_LT(bg4.payload.size(), lz4.payload.size());
  ChunkDecoder decoder;
  Bytes out(raw.size());
  auto s = decoder.Decode(bg4.header, bg4.payload, out);
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(out, raw);
}

TEST(XorbCodec, IncompressibleDataFallsBackToNone) {
  ChunkDecoder decoder;
  const Bytes raw = testing::SplitMix64Bytes(5, 50000);
  for (auto scheme : {CompressionScheme::kNone, CompressionScheme::kLz4, CompressionScheme::kBg4Lz4}) {
    SCOPED_TRACE(SchemeName(scheme));
    const auto c = EncodeOne(raw, scheme);
    EXPECT_EQ(c.used, CompressionScheme::kNone);
    EXPECT_EQ(c.header.scheme, CompressionScheme::kNone);
    EXPECT_EQ(c.header.compressed_length, raw.size());
    EXPECT_EQ(c.payload, raw);
    auto h = decoder.DecodeAndHash(c.header, c.payload);
    ASSERT_TRUE(h.ok()) << h.error().message;
    EXPECT_EQ(*h, ChunkHashOf(raw));
  }
}

TEST(XorbCodec, RejectsTruncatedLz4Frame) {
  ChunkDecoder decoder;
  for (auto scheme : {CompressionScheme::kLz4, CompressionScheme::kBg4Lz4}) {
    SCOPED_TRACE(SchemeName(scheme));
    auto c = EncodeOne(testing::TextLikeBytes(1, 20000), scheme);
    ASSERT_EQ(c.used, scheme);
    for (size_t cut : {size_t{1}, size_t{4}, c.payload.size() / 2}) {
      Bytes payload(c.payload.begin(), c.payload.end() - static_cast<std::ptrdiff_t>(cut));
      ChunkHeader h = c.header;
      h.compressed_length = static_cast<uint32_t>(payload.size());
      auto s = DecodeWith(decoder, h, payload);
      ASSERT_FALSE(s.ok()) << "cut " << cut;
      EXPECT_EQ(s.error().code, ErrorCode::kMalformed);
      EXPECT_TRUE(Contains(s.error().message, "truncated")) << s.error().message;
    }
  }
}

// Frames other encoders may write (checksums, linked blocks, a content size, several blocks) take liblz4's
// general path or the fast path; both must accept every valid frame.
TEST(XorbCodec, AcceptsEveryValidLz4FrameVariant) {
  const Bytes raw = testing::TextLikeBytes(4, 100000);
  struct Variant {
    const char* name;
    LZ4F_blockSizeID_t block;
    LZ4F_blockMode_t mode;
    bool content_checksum;
    bool block_checksum;
    bool content_size;
  };
  const Variant variants[] = {
      {"plain 256K", LZ4F_max256KB, LZ4F_blockIndependent, false, false, false},
      {"two 64K blocks", LZ4F_max64KB, LZ4F_blockIndependent, false, false, false},
      {"content size", LZ4F_max256KB, LZ4F_blockIndependent, false, false, true},
      {"linked blocks", LZ4F_max64KB, LZ4F_blockLinked, false, false, false},
      {"content checksum", LZ4F_max64KB, LZ4F_blockIndependent, true, false, false},
      {"block checksum", LZ4F_max64KB, LZ4F_blockIndependent, false, true, false},
  };
  ChunkDecoder decoder;
  for (const auto& v : variants) {
    SCOPED_TRACE(v.name);
    LZ4F_preferences_t prefs{};
    prefs.frameInfo.blockSizeID = v.block;
    prefs.frameInfo.blockMode = v.mode;
    prefs.frameInfo.contentChecksumFlag =
        v.content_checksum ? LZ4F_contentChecksumEnabled : LZ4F_noContentChecksum;
    prefs.frameInfo.blockChecksumFlag = v.block_checksum ? LZ4F_blockChecksumEnabled : LZ4F_noBlockChecksum;
    prefs.frameInfo.contentSize = v.content_size ? raw.size() : 0;
    Bytes frame(LZ4F_compressFrameBound(raw.size(), &prefs));
    const size_t n = LZ4F_compressFrame(frame.data(), frame.size(), raw.data(), raw.size(), &prefs);
    ASSERT_FALSE(LZ4F_isError(n));
    frame.resize(n);
    const ChunkHeader h{static_cast<uint32_t>(n), CompressionScheme::kLz4, static_cast<uint32_t>(raw.size())};
    Bytes out(raw.size());
    ASSERT_TRUE(decoder.Decode(h, frame, out).ok());
    EXPECT_EQ(out, raw);
  }
}

TEST(XorbCodec, RejectsLz4FrameWithBadHeaderChecksum) {
  ChunkDecoder decoder;
  auto c = EncodeOne(testing::TextLikeBytes(5, 20000), CompressionScheme::kLz4);
  ASSERT_EQ(c.used, CompressionScheme::kLz4);
  c.payload[6] ^= 0xFF;  // the header checksum byte after FLG and BD
  auto s = DecodeWith(decoder, c.header, c.payload);
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(Contains(s.error().message, "checksum")) << s.error().message;
}

TEST(XorbCodec, RejectsLz4FrameWithAlteredContentSize) {
  const Bytes raw = testing::TextLikeBytes(6, 30000);
  LZ4F_preferences_t prefs{};
  prefs.frameInfo.contentSize = raw.size();
  Bytes frame(LZ4F_compressFrameBound(raw.size(), &prefs));
  const size_t n = LZ4F_compressFrame(frame.data(), frame.size(), raw.data(), raw.size(), &prefs);
  ASSERT_FALSE(LZ4F_isError(n));
  frame.resize(n);
  ChunkDecoder decoder;
  const ChunkHeader h{static_cast<uint32_t>(n), CompressionScheme::kLz4, static_cast<uint32_t>(raw.size())};
  ASSERT_TRUE(DecodeWith(decoder, h, frame).ok());
  frame[6] ^= 1;  // content size (bytes 6..13) now says one byte more or less
  EXPECT_FALSE(DecodeWith(decoder, h, frame).ok());
}

TEST(XorbCodec, RejectsTrailingBytesAfterLz4Frame) {
  ChunkDecoder decoder;
  auto c = EncodeOne(testing::TextLikeBytes(2, 20000), CompressionScheme::kLz4);
  ASSERT_EQ(c.used, CompressionScheme::kLz4);
  c.payload.push_back(0);
  c.header.compressed_length += 1;
  auto s = DecodeWith(decoder, c.header, c.payload);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, ErrorCode::kMalformed);
  EXPECT_TRUE(Contains(s.error().message, "trailing")) << s.error().message;
}

TEST(XorbCodec, RejectsLz4FrameDecodingToMoreThanTheHeaderSays) {
  // A decompression bomb: 128 KiB of zeros compress to a few hundred bytes; the header claims 1000.
  const Bytes zeros(kMaxChunkUnpacked, 0);
  for (auto scheme : {CompressionScheme::kLz4, CompressionScheme::kBg4Lz4}) {
    SCOPED_TRACE(SchemeName(scheme));
    auto c = EncodeOne(zeros, scheme);
    ASSERT_EQ(c.used, scheme);
    c.header.uncompressed_length = 1000;
    ChunkDecoder decoder;
    auto s = DecodeWith(decoder, c.header, c.payload);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.error().code, ErrorCode::kMalformed);
    EXPECT_TRUE(Contains(s.error().message, "more than")) << s.error().message;
    auto h = decoder.DecodeAndHash(c.header, c.payload);
    EXPECT_FALSE(h.ok());
  }
}

TEST(XorbCodec, RejectsLz4FrameDecodingToFewerBytes) {
  ChunkDecoder decoder;
  auto c = EncodeOne(testing::TextLikeBytes(3, 1000), CompressionScheme::kLz4);
  ASSERT_EQ(c.used, CompressionScheme::kLz4);
  c.header.uncompressed_length = 2000;
  auto s = DecodeWith(decoder, c.header, c.payload);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, ErrorCode::kMalformed);
  EXPECT_TRUE(Contains(s.error().message, "fewer")) << s.error().message;
}

TEST(XorbCodec, RejectsGarbagePayload) {
  ChunkDecoder decoder;
  const Bytes garbage = testing::SplitMix64Bytes(9, 500);
  const ChunkHeader h{500, CompressionScheme::kLz4, 1000};
  auto s = DecodeWith(decoder, h, garbage);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, ErrorCode::kMalformed);

  // A valid frame whose descriptor (after the magic) is overwritten with garbage.
  auto c = EncodeOne(testing::TextLikeBytes(4, 5000), CompressionScheme::kLz4);
  ASSERT_EQ(c.used, CompressionScheme::kLz4);
  for (size_t i = 4; i < c.payload.size(); ++i) c.payload[i] = garbage[i % garbage.size()];
  EXPECT_FALSE(DecodeWith(decoder, c.header, c.payload).ok());
}

TEST(XorbCodec, DecoderIsReusableAfterAnError) {
  ChunkDecoder decoder;
  const Bytes raw = testing::TextLikeBytes(6, 30000);
  auto good = EncodeOne(raw, CompressionScheme::kLz4);
  ASSERT_EQ(good.used, CompressionScheme::kLz4);
  // Leave the decoder mid-frame (truncated input), then mid-output (bomb), then decode a good chunk.
  Bytes truncated(good.payload.begin(), good.payload.begin() + 20);
  EXPECT_FALSE(DecodeWith(decoder, {20, CompressionScheme::kLz4, 30000}, truncated).ok());
  auto bomb = EncodeOne(Bytes(kMaxChunkUnpacked, 0), CompressionScheme::kLz4);
  bomb.header.uncompressed_length = 10;
  EXPECT_FALSE(DecodeWith(decoder, bomb.header, bomb.payload).ok());
  auto h = decoder.DecodeAndHash(good.header, good.payload);
  ASSERT_TRUE(h.ok()) << h.error().message;
  EXPECT_EQ(*h, ChunkHashOf(raw));
}

TEST(XorbCodec, RejectsPayloadLengthNotMatchingHeader) {
  ChunkDecoder decoder;
  const Bytes raw = testing::SplitMix64Bytes(8, 100);
  Bytes out(100);
  EXPECT_FALSE(decoder.Decode({100, CompressionScheme::kNone, 100}, std::span(raw).first(99), out).ok());
  EXPECT_FALSE(decoder.DecodeAndHash({100, CompressionScheme::kNone, 100}, std::span(raw).first(99)).ok());
  Bytes small(99);
  EXPECT_FALSE(decoder.Decode({100, CompressionScheme::kNone, 100}, raw, small).ok());
}

// -----------------------------------------------------------------------------------------------------------
// Footer

struct FooterExample {
  Chunks chunks = HundredByteChunks();
  EncodedXorb xorb = EncodeXorb(chunks.views, CompressionPolicy::kNone);
  Bytes object;
  static constexpr size_t kStart = 324;  // footer start

  explicit FooterExample(uint32_t nonce = 0xA1B2C3D4) {
    object = xorb.bytes;
    AppendFooterV1(object, xorb.hash, xorb.layout, nonce);
  }
};

TEST(XorbFooter, WorkedExample) {
  FooterExample ex;
  const auto& x = ex.xorb;
  ASSERT_EQ(x.bytes.size(), 324u);
  ASSERT_EQ(x.layout.chunks.size(), 3u);
  EXPECT_EQ(x.layout.chunks[0].end_offset, 108u);
  EXPECT_EQ(x.layout.chunks[1].end_offset, 216u);
  EXPECT_EQ(x.layout.chunks[2].end_offset, 324u);
  EXPECT_EQ(x.hash, XorbHashOf(ex.chunks.Hashed()));
  EXPECT_EQ(Bytes(x.bytes.begin(), x.bytes.begin() + 8), HeaderBytes(0, 100, 0, 100));

  const Bytes& o = ex.object;
  ASSERT_EQ(o.size(), 540u);
  EXPECT_EQ(FooterV1Size(3), 216u);
  EXPECT_EQ(GetU32(o, 536), 212u);  // info_length
  const size_t s = FooterExample::kStart;
  EXPECT_EQ(std::string(o.begin() + s, o.begin() + s + 7), "XETBLOB");
  EXPECT_EQ(o[s + 7], 1);
  EXPECT_EQ(Hash::FromBytes(o.data() + s + 8), x.hash);
  EXPECT_EQ(std::string(o.begin() + s + 40, o.begin() + s + 47), "XBLBHSH");
  EXPECT_EQ(GetU32(o, s + 48), 3u);
  EXPECT_EQ(std::string(o.begin() + s + 148, o.begin() + s + 155), "XBLBBND");
  EXPECT_EQ(o[s + 155], 1);
  EXPECT_EQ(GetU32(o, s + 156), 3u);
  EXPECT_EQ(GetU32(o, s + 160), 108u);
  EXPECT_EQ(GetU32(o, s + 168), 324u);
  EXPECT_EQ(GetU32(o, s + 172), 100u);  // unpacked offsets
  EXPECT_EQ(GetU32(o, s + 180), 300u);
  EXPECT_EQ(GetU32(o, s + 184), 3u);
  EXPECT_EQ(GetU32(o, s + 188), 52u + 40 * 3);
  EXPECT_EQ(GetU32(o, s + 192), 40u + 8 * 3);

  auto f = ParseFooter(o);
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_EQ(f->version, FooterVersion::kV1);
  EXPECT_EQ(f->hash, x.hash);
  EXPECT_EQ(f->chunk_region_size, 324u);
  ExpectSameLayout(f->layout, x.layout);
  EXPECT_EQ(f->layout.unpacked_size(), 300u);
  // Chunk range [1,3) is bytes [108, 324).
  EXPECT_EQ(f->layout.begin_offset(1), 108u);
  EXPECT_EQ(f->layout.chunk_region_size(), 324u);
}

TEST(XorbFooter, NonceLivesInBufferBytesZeroToThree) {
  FooterExample ex(0xA1B2C3D4);
  EXPECT_EQ(GetU32(ex.object, FooterExample::kStart + 196), 0xA1B2C3D4u);
  auto f = ParseFooter(ex.object);
  ASSERT_TRUE(f.ok()) << f.error().message;
  const std::array<uint8_t, 16> expected = {0xD4, 0xC3, 0xB2, 0xA1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  EXPECT_EQ(f->buffer, expected);
  // The nonce is not part of the hash: two serializations differ only there.
  FooterExample other(7);
  auto g = ParseFooter(other.object);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->hash, f->hash);
  EXPECT_NE(other.object, ex.object);
}

void ExpectFooterRejected(const Bytes& object, const std::string& why) {
  auto f = ParseFooter(object);
  ASSERT_FALSE(f.ok()) << "accepted a footer with " << why;
  EXPECT_EQ(f.error().code, ErrorCode::kMalformed) << f.error().message;
}

TEST(XorbFooter, RejectsBadIdent) {
  FooterExample ex;
  ex.object[FooterExample::kStart + 3] = 'X';
  ExpectFooterRejected(ex.object, "XETXLOB");
  FooterExample hash_ident;
  hash_ident.object[FooterExample::kStart + 41] = 'X';
  ExpectFooterRejected(hash_ident.object, "a bad hash section ident");
  FooterExample boundary_ident;
  boundary_ident.object[FooterExample::kStart + 150] = 'X';
  ExpectFooterRejected(boundary_ident.object, "a bad boundary section ident");
}

TEST(XorbFooter, RejectsBadVersion) {
  FooterExample ex;
  ex.object[FooterExample::kStart + 7] = 2;
  auto f = ParseFooter(ex.object);
  ASSERT_FALSE(f.ok());
  EXPECT_TRUE(Contains(f.error().message, "version")) << f.error().message;
  FooterExample hashes_version;
  hashes_version.object[FooterExample::kStart + 47] = 1;
  ExpectFooterRejected(hashes_version.object, "hashes_version 1");
  FooterExample boundaries_version;
  boundaries_version.object[FooterExample::kStart + 155] = 0;
  ExpectFooterRejected(boundaries_version.object, "boundaries_version 0");
}

TEST(XorbFooter, RejectsLengthNotMatchingChunkCount) {
  FooterExample ex;
  SetU32(ex.object, FooterExample::kStart + 48, 4);
  ExpectFooterRejected(ex.object, "num_chunks 4 in a 3-chunk footer");
  FooterExample huge;
  SetU32(huge.object, FooterExample::kStart + 48, 0xFFFFFFFF);
  ExpectFooterRejected(huge.object, "num_chunks 2^32-1");
}

TEST(XorbFooter, RejectsChunkCountsThatDisagree) {
  for (size_t off : {size_t{156}, size_t{184}}) {  // second and third num_chunks
    FooterExample ex;
    SetU32(ex.object, FooterExample::kStart + off, 2);
    auto f = ParseFooter(ex.object);
    ASSERT_FALSE(f.ok()) << "count at footer byte " << off;
    EXPECT_TRUE(Contains(f.error().message, "counts")) << f.error().message;
  }
}

TEST(XorbFooter, RejectsWrongSectionOffsets) {
  for (size_t off : {size_t{188}, size_t{192}}) {  // hashes / boundary section offset from end
    FooterExample ex;
    SetU32(ex.object, FooterExample::kStart + off, GetU32(ex.object, FooterExample::kStart + off) + 1);
    auto f = ParseFooter(ex.object);
    ASSERT_FALSE(f.ok()) << "offset at footer byte " << off;
    EXPECT_TRUE(Contains(f.error().message, "offsets")) << f.error().message;
  }
}

TEST(XorbFooter, RejectsNonIncreasingOffsets) {
  FooterExample boundaries;
  SetU32(boundaries.object, FooterExample::kStart + 164, 108);  // boundary[1] = boundary[0]
  ExpectFooterRejected(boundaries.object, "repeated boundary");
  FooterExample unpacked;
  SetU32(unpacked.object, FooterExample::kStart + 176, 100);  // unpacked[1] = unpacked[0]: an empty chunk
  ExpectFooterRejected(unpacked.object, "repeated unpacked offset");
  FooterExample zero;
  SetU32(zero.object, FooterExample::kStart + 160, 0);
  ExpectFooterRejected(zero.object, "a first boundary of 0");
}

TEST(XorbFooter, RejectsBoundariesNotEndingAtFooterStart) {
  FooterExample ex;
  SetU32(ex.object, FooterExample::kStart + 168, 325);
  auto f = ParseFooter(ex.object);
  ASSERT_FALSE(f.ok());
  EXPECT_TRUE(Contains(f.error().message, "footer starts")) << f.error().message;
}

TEST(XorbFooter, RejectsInfoLengthLargerThanObject) {
  FooterExample ex;
  SetU32(ex.object, 536, 537);
  ExpectFooterRejected(ex.object, "info_length 537 in a 540-byte object");
  SetU32(ex.object, 536, 0xFFFFFFFF);
  ExpectFooterRejected(ex.object, "info_length 2^32-1");
  ExpectFooterRejected(Bytes{1, 0, 0}, "a 3-byte object");
}

TEST(XorbFooter, RejectsTruncatedFooter) {
  // A footer of 8 bytes: ident and version but no room for the hash.
  Bytes tiny;
  AppendText(tiny, "XETBLOB");
  tiny.push_back(1);
  AppendU32(tiny, 8);
  ExpectFooterRejected(tiny, "8 bytes");
  tiny[7] = 0;
  ExpectFooterRejected(tiny, "8 bytes (v0)");
  // 44 bytes: a whole v1 head but no hash section.
  Bytes head;
  AppendText(head, "XETBLOB");
  head.push_back(1);
  head.resize(44, 0);
  AppendU32(head, 44);
  ExpectFooterRejected(head, "44 bytes");
}

TEST(XorbFooter, RejectsTrailingByteAfterTrailer) {
  for (uint8_t extra : {uint8_t{0}, uint8_t{0xD4}}) {
    FooterExample ex;
    ex.object.push_back(extra);
    ExpectFooterRejected(ex.object, "a trailing byte");
  }
}

// Legacy v0: XETBLOB, 0, hash, num_chunks, boundaries u32×N, hashes 32×N, 16-byte buffer.
Bytes V0Footer(const EncodedXorb& x, uint32_t nonce) {
  Bytes f;
  AppendText(f, "XETBLOB");
  f.push_back(0);
  f.insert(f.end(), x.hash.bytes.begin(), x.hash.bytes.end());
  AppendU32(f, static_cast<uint32_t>(x.layout.chunks.size()));
  for (const auto& c : x.layout.chunks) AppendU32(f, c.end_offset);
  for (const auto& c : x.layout.chunks) f.insert(f.end(), c.hash.bytes.begin(), c.hash.bytes.end());
  AppendU32(f, nonce);
  f.resize(f.size() + 12, 0);
  AppendU32(f, static_cast<uint32_t>(f.size()));
  return f;
}

TEST(XorbFooter, ParsesLegacyV0) {
  FooterExample ex;
  const Bytes footer = V0Footer(ex.xorb, 0x01020304);
  ASSERT_EQ(footer.size(), 60u + 36 * 3 + 4);
  Bytes object = ex.xorb.bytes;
  object.insert(object.end(), footer.begin(), footer.end());
  auto f = ParseFooter(object);
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_EQ(f->version, FooterVersion::kV0);
  EXPECT_EQ(f->hash, ex.xorb.hash);
  EXPECT_EQ(f->chunk_region_size, 324u);
  EXPECT_EQ(f->buffer[0], 0x04);
  EXPECT_EQ(f->buffer[3], 0x01);
  ASSERT_EQ(f->layout.chunks.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(f->layout.chunks[i].hash, ex.xorb.layout.chunks[i].hash);
    EXPECT_EQ(f->layout.chunks[i].end_offset, ex.xorb.layout.chunks[i].end_offset);
    EXPECT_EQ(f->layout.chunks[i].unpacked_size, 0u);  // v0 has no unpacked offsets
  }
  // A count that does not fit the v0 length is rejected.
  object[324 + 40] = 4;
  EXPECT_FALSE(ParseFooter(object).ok());
}

// -----------------------------------------------------------------------------------------------------------
// Validation

TEST(XorbEncode, KnownHashesGiveTheSameXorb) {
  const Chunks chunks = MixedChunks(40);
  std::vector<ChunkHash> hashes;
  for (const auto& c : chunks.Hashed()) hashes.push_back(c.hash);
  const EncodedXorb a = EncodeXorb(chunks.views, CompressionPolicy::kAuto);
  const EncodedXorb b = EncodeXorb(chunks.views, CompressionPolicy::kAuto, hashes);
  EXPECT_EQ(a.bytes, b.bytes);
  EXPECT_EQ(a.hash, b.hash);
  ExpectSameLayout(a.layout, b.layout);
}

TEST(XorbEncode, SampledAutoTriesOneChunkPerGroupOfIncompressibleData) {
  // 64 chunks: a group of 32 incompressible ones, then a group of 32 text-like ones.
  Chunks chunks;
  for (size_t i = 0; i < 64; ++i)
    chunks.Add(i < 32 ? testing::SplitMix64Bytes(i, 4000) : testing::TextLikeBytes(i, 4000));
  const EncodedXorb sampled = EncodeXorb(chunks.views, CompressionPolicy::kAutoSampled);
  const EncodedXorb full = EncodeXorb(chunks.views, CompressionPolicy::kAuto);
  EXPECT_EQ(sampled.hash, full.hash);    // the same chunks, however stored
  EXPECT_EQ(sampled.bytes, full.bytes);  // random bytes never shrink: kAuto stored them as they are too
  // A group whose first chunk is incompressible is stored as it is even where kAuto would compress.
  Chunks mixed;
  mixed.Add(testing::SplitMix64Bytes(1, 4000));
  for (size_t i = 1; i < 32; ++i) mixed.Add(testing::TextLikeBytes(i, 4000));
  auto v = ValidateXorb(EncodeXorb(mixed.views, CompressionPolicy::kAutoSampled).bytes, {});
  ASSERT_TRUE(v.ok()) << v.error().message;
  EXPECT_EQ(v->chunks_by_scheme[0], 32u);
  auto w = ValidateXorb(EncodeXorb(mixed.views, CompressionPolicy::kAuto).bytes, {});
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->chunks_by_scheme[0], 1u);
}

TEST(XorbValidate, AcceptsEveryPolicy) {
  const Chunks chunks = MixedChunks(40);
  for (auto policy : {CompressionPolicy::kNone, CompressionPolicy::kLz4, CompressionPolicy::kBg4Lz4,
                      CompressionPolicy::kAuto, CompressionPolicy::kAutoSampled}) {
    SCOPED_TRACE("policy " + std::to_string(static_cast<int>(policy)));
    const EncodedXorb x = EncodeXorb(chunks.views, policy);
    EXPECT_EQ(x.hash, XorbHashOf(chunks.Hashed()));
    auto v = ValidateXorb(x.bytes, {.expected_hash = &x.hash});
    ASSERT_TRUE(v.ok()) << v.error().message;
    EXPECT_EQ(v->hash, x.hash);
    EXPECT_EQ(v->chunk_region_size, x.bytes.size());
    EXPECT_EQ(v->footer, FooterVersion::kNone);
    ExpectSameLayout(v->layout, x.layout);
    const auto& by = v->chunks_by_scheme;
    EXPECT_EQ(by[0] + by[1] + by[2], 40u);
    if (policy == CompressionPolicy::kNone) {
      EXPECT_EQ(by[0], 40u);
    } else {
      EXPECT_GT(by[0], 0u);  // the random chunks stay uncompressed
      EXPECT_GT(by[1] + by[2], 0u);
    }
    if (policy == CompressionPolicy::kLz4) {
      EXPECT_EQ(by[2], 0u);
    }
    if (policy == CompressionPolicy::kBg4Lz4) {
      EXPECT_EQ(by[1], 0u);
    }
  }
}

TEST(XorbValidate, ParallelMatchesSerial) {
  const Chunks chunks = MixedChunks(150);
  const EncodedXorb x = EncodeXorb(chunks.views, CompressionPolicy::kLz4);
  std::atomic<int> calls{0};
  const ParallelFor parallel = ThreadPerTask(&calls);
  auto serial = ValidateXorb(x.bytes);
  auto threaded = ValidateXorb(x.bytes, {.expected_hash = &x.hash, .parallel = &parallel});
  ASSERT_TRUE(serial.ok()) << serial.error().message;
  ASSERT_TRUE(threaded.ok()) << threaded.error().message;
  EXPECT_EQ(calls.load(), 1);
  EXPECT_EQ(threaded->hash, serial->hash);
  EXPECT_EQ(threaded->hash, x.hash);
  EXPECT_EQ(threaded->chunk_region_size, serial->chunk_region_size);
  EXPECT_EQ(threaded->chunks_by_scheme, serial->chunks_by_scheme);
  ExpectSameLayout(threaded->layout, serial->layout);
  ExpectSameLayout(threaded->layout, x.layout);
}

TEST(XorbValidate, RejectsExpectedHashMismatch) {
  const Chunks chunks = MixedChunks(5);
  const EncodedXorb x = EncodeXorb(chunks.views, CompressionPolicy::kLz4);
  Hash wrong = x.hash;
  wrong.bytes[31] ^= 1;
  auto v = ValidateXorb(x.bytes, {.expected_hash = &wrong});
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.error().code, ErrorCode::kHashMismatch);
}

TEST(XorbValidate, RejectsZeroChunks) {
  auto v = ValidateXorb({});
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.error().code, ErrorCode::kMalformed);
  // A body that is only a footer has no chunks either.
  Bytes footer_only;
  AppendFooterV1(footer_only, Hash{}, XorbLayout{});
  EXPECT_FALSE(ValidateXorb(footer_only).ok());
}

TEST(XorbValidate, RejectsTruncatedPayload) {
  const Chunks chunks = MixedChunks(4);
  EncodedXorb x = EncodeXorb(chunks.views, CompressionPolicy::kLz4);
  x.bytes.pop_back();
  auto v = ValidateXorb(x.bytes);
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.error().code, ErrorCode::kMalformed);
  EXPECT_TRUE(Contains(v.error().message, "chunk 3")) << v.error().message;
  // Cut inside a header.
  x.bytes.resize(x.layout.chunks[1].end_offset + 5);
  EXPECT_FALSE(ValidateXorb(x.bytes).ok());
}

// Hashing chunks as the body arrives (pieces that cut chunks anywhere) gives what validation computes, and
// validation given those hashes gives the same answer; a footer or a corrupt chunk stops the prehasher there
// and validation still reports the corruption.
TEST(XorbValidate, PrehashedChunksAsTheBodyArrives) {
  const Chunks chunks = MixedChunks(30);
  const EncodedXorb x = EncodeXorb(chunks.views, CompressionPolicy::kLz4);
  Bytes body = x.bytes;
  AppendFooterV1(body, x.hash, x.layout, 7);
  ChunkPrehasher pre;
  for (size_t end = 0; end < body.size();) {
    end = std::min(body.size(), end + 9'999);
    pre.Advance(std::span(body).first(end));
  }
  ASSERT_EQ(pre.hashes().size(), 30u);  // every chunk, and not the footer
  for (size_t i = 0; i < 30; ++i) {
    EXPECT_EQ(pre.hashes()[i].hash, x.layout.chunks[i].hash) << i;
    EXPECT_EQ(pre.hashes()[i].payload_offset, x.layout.begin_offset(i) + kChunkHeaderSize) << i;
  }
  auto v = ValidateXorb(body, {.expected_hash = &x.hash, .prehashed = pre.hashes()});
  ASSERT_TRUE(v.ok()) << v.error().message;
  EXPECT_EQ(v->footer, FooterVersion::kV1);
  ExpectSameLayout(v->layout, x.layout);

  // Interrupted: nothing more is hashed once the flag is set.
  const std::atomic<bool> interrupt{true};
  ChunkPrehasher stopped;
  stopped.Advance(body, &interrupt);
  EXPECT_TRUE(stopped.hashes().empty());

  // Chunk 4 corrupt (its LZ4 frame magic broken): hashing stops before it, validation names it.
  Bytes bad = x.bytes;
  const size_t payload = x.layout.begin_offset(4) + kChunkHeaderSize;
  ASSERT_EQ(bad[payload - 4], static_cast<uint8_t>(CompressionScheme::kLz4));
  bad[payload] ^= 0xFF;
  ChunkPrehasher pre_bad;
  pre_bad.Advance(bad);
  EXPECT_EQ(pre_bad.hashes().size(), 4u);
  auto r = ValidateXorb(bad, {.expected_hash = &x.hash, .prehashed = pre_bad.hashes()});
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(Contains(r.error().message, "(chunk 4 ")) << r.error().message;

  // Hashes that do not belong to these bytes are not checked again (the caller vouches for them), but the
  // xorb hash then comes out wrong.
  std::vector<PrehashedChunk> forged(pre.hashes().begin(), pre.hashes().end());
  forged[2].hash.bytes[0] ^= 1;
  auto f = ValidateXorb(x.bytes, {.expected_hash = &x.hash, .prehashed = forged});
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.error().code, ErrorCode::kHashMismatch);
}

TEST(XorbValidate, CorruptMiddleChunkReportsItsIndex) {
  const Chunks chunks = MixedChunks(12);
  EncodedXorb x = EncodeXorb(chunks.views, CompressionPolicy::kLz4);
  // Chunks 4 and 7 are text (LZ4); break their frame magic.
  for (size_t i : {size_t{4}, size_t{7}}) {
    const size_t payload = x.layout.begin_offset(i) + kChunkHeaderSize;
    ASSERT_EQ(x.bytes[payload - 4], static_cast<uint8_t>(CompressionScheme::kLz4)) << "chunk " << i;
    x.bytes[payload] ^= 0xFF;
  }
  std::atomic<int> calls{0};
  const ParallelFor parallel = ThreadPerTask(&calls);
  for (const ParallelFor* p : {static_cast<const ParallelFor*>(nullptr), &parallel}) {
    SCOPED_TRACE(p ? "parallel" : "serial");
    auto v = ValidateXorb(x.bytes, {.parallel = p});
    ASSERT_FALSE(v.ok());
    EXPECT_EQ(v.error().code, ErrorCode::kMalformed);
    EXPECT_TRUE(Contains(v.error().message, "(chunk 4 ")) << v.error().message;
  }
}

Bytes NoneChunks(size_t count, uint32_t size) {
  Bytes body;
  body.reserve(count * (kChunkHeaderSize + size));
  const Bytes header = HeaderBytes(0, size, 0, size);
  for (size_t i = 0; i < count; ++i) {
    body.insert(body.end(), header.begin(), header.end());
    for (uint32_t j = 0; j < size; ++j) body.push_back(static_cast<uint8_t>(i + j));
  }
  return body;
}

TEST(XorbValidate, RejectsMoreThan8192Chunks) {
  Bytes body = NoneChunks(kMaxXorbChunks, 1);
  auto ok = ValidateXorb(body);
  ASSERT_TRUE(ok.ok()) << ok.error().message;
  EXPECT_EQ(ok->layout.chunks.size(), kMaxXorbChunks);
  const Bytes one_more = NoneChunks(1, 1);
  body.insert(body.end(), one_more.begin(), one_more.end());
  auto v = ValidateXorb(body);
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.error().code, ErrorCode::kLimit);
}

TEST(XorbValidate, RejectsMoreThan64MiBUnpacked) {
  const size_t full = kMaxXorbUnpacked / kMaxChunkUnpacked;  // 512 chunks of 128 KiB
  Bytes body;
  body.reserve((full + 1) * (kChunkHeaderSize + kMaxChunkUnpacked));
  const Bytes header = HeaderBytes(0, kMaxChunkUnpacked, 0, kMaxChunkUnpacked);
  for (size_t i = 0; i <= full; ++i) {
    body.insert(body.end(), header.begin(), header.end());
    body.resize(body.size() + kMaxChunkUnpacked, static_cast<uint8_t>(i));
  }
  auto v = ValidateXorb(body);
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.error().code, ErrorCode::kLimit);
  EXPECT_TRUE(Contains(v.error().message, "64 MiB")) << v.error().message;
  body.resize(full * (kChunkHeaderSize + kMaxChunkUnpacked));
  auto ok = ValidateXorb(body);
  ASSERT_TRUE(ok.ok()) << ok.error().message;
  EXPECT_EQ(ok->layout.unpacked_size(), kMaxXorbUnpacked);
}

TEST(XorbValidate, AcceptsMatchingV1Footer) {
  const Chunks chunks = MixedChunks(10);
  const EncodedXorb x = EncodeXorb(chunks.views, CompressionPolicy::kLz4);
  Bytes body = x.bytes;
  AppendFooterV1(body, x.hash, x.layout, 0xDEADBEEF);  // any nonce
  auto v = ValidateXorb(body, {.expected_hash = &x.hash});
  ASSERT_TRUE(v.ok()) << v.error().message;
  EXPECT_EQ(v->footer, FooterVersion::kV1);
  EXPECT_EQ(v->chunk_region_size, x.bytes.size());
  EXPECT_EQ(v->hash, x.hash);
  ExpectSameLayout(v->layout, x.layout);
}

TEST(XorbValidate, AcceptsMatchingV0Footer) {
  const Chunks chunks = MixedChunks(6);
  const EncodedXorb x = EncodeXorb(chunks.views, CompressionPolicy::kLz4);
  Bytes body = x.bytes;
  const Bytes footer = V0Footer(x, 0);
  body.insert(body.end(), footer.begin(), footer.end());
  auto v = ValidateXorb(body);
  ASSERT_TRUE(v.ok()) << v.error().message;
  EXPECT_EQ(v->footer, FooterVersion::kV0);
  ExpectSameLayout(v->layout, x.layout);  // sizes come from the chunks, not the v0 footer
}

TEST(XorbValidate, RejectsFooterWithWrongChunkHash) {
  const Chunks chunks = MixedChunks(6);
  const EncodedXorb x = EncodeXorb(chunks.views, CompressionPolicy::kLz4);
  XorbLayout lying = x.layout;
  lying.chunks[2].hash.bytes[0] ^= 1;
  Bytes body = x.bytes;
  AppendFooterV1(body, x.hash, lying, 5);
  auto v = ValidateXorb(body);
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.error().code, ErrorCode::kInconsistent);
  EXPECT_TRUE(Contains(v.error().message, "chunk 2")) << v.error().message;
}

TEST(XorbValidate, RejectsFooterWithWrongSizes) {
  const Chunks chunks = MixedChunks(6);
  const EncodedXorb x = EncodeXorb(chunks.views, CompressionPolicy::kLz4);
  XorbLayout lying = x.layout;
  lying.chunks[1].unpacked_size += 1;  // later unpacked offsets shift; boundaries stay right
  Bytes body = x.bytes;
  AppendFooterV1(body, x.hash, lying);
  auto v = ValidateXorb(body);
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.error().code, ErrorCode::kInconsistent);
}

TEST(XorbValidate, RejectsFooterNamingAnotherXorb) {
  const Chunks chunks = MixedChunks(6);
  const EncodedXorb x = EncodeXorb(chunks.views, CompressionPolicy::kLz4);
  Hash other = x.hash;
  other.bytes[5] ^= 0x40;
  Bytes body = x.bytes;
  AppendFooterV1(body, other, x.layout);
  auto v = ValidateXorb(body);
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.error().code, ErrorCode::kHashMismatch);
}

TEST(XorbValidate, RejectsGarbageStartingWithFooterIdent) {
  const Chunks chunks = MixedChunks(3);
  const EncodedXorb x = EncodeXorb(chunks.views, CompressionPolicy::kLz4);
  Bytes body = x.bytes;
  AppendText(body, "XETBLOB");
  const Bytes junk = testing::SplitMix64Bytes(3, 200);
  body.insert(body.end(), junk.begin(), junk.end());
  auto v = ValidateXorb(body);
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.error().code, ErrorCode::kMalformed);
  EXPECT_TRUE(Contains(v.error().message, "footer")) << v.error().message;
}

TEST(XorbValidate, RejectsGarbageAfterChunks) {
  const Chunks chunks = MixedChunks(3);
  const EncodedXorb x = EncodeXorb(chunks.views, CompressionPolicy::kLz4);
  Bytes body = x.bytes;
  body.push_back(0);  // a lone byte: a truncated header
  EXPECT_FALSE(ValidateXorb(body).ok());
}

}  // namespace
}  // namespace cairn::xet
