// The 32-byte Xet hash and its string form.
//
// A Hash is 32 raw bytes (what BLAKE3 produces). Xet prints it as four little-endian u64 words, each as 16
// hex digits, words in order: i.e. each 8-byte group is byte-reversed before hex encoding. That string form
// appears in URLs, JSON and shard file names; `hash % n` always means word 3 modulo n.
#pragma once

#include <array>
#include <compare>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

namespace cairn::xet {

struct Hash {
  std::array<uint8_t, 32> bytes{};

  static Hash FromBytes(const uint8_t* p) {
    Hash h;
    std::memcpy(h.bytes.data(), p, 32);
    return h;
  }
  // Parses the 64-digit Xet hex form (either case). nullopt on any other input.
  static std::optional<Hash> FromHex(std::string_view hex);

  // Word i = bytes [8i, 8i+8) as a little-endian u64.
  uint64_t word(int i) const {
    uint64_t w;
    std::memcpy(&w, bytes.data() + 8 * i, 8);
    return w;  // the protocol is little-endian and so are the hosts cairn supports (static_assert in hash.cc)
  }
  // The key used by shard lookup tables ("truncated hash").
  uint64_t truncated() const { return word(0); }
  // `hash % n` as the protocol defines it.
  uint64_t mod(uint64_t n) const { return word(3) % n; }
  bool is_zero() const { return *this == Hash{}; }

  std::string hex() const;
  // Writes the 64 hex digits to `out` (no terminator). For answer writers that avoid allocations.
  void write_hex(char* out) const;

  friend bool operator==(const Hash&, const Hash&) = default;
  friend std::strong_ordering operator<=>(const Hash& a, const Hash& b) {
    const int c = std::memcmp(a.bytes.data(), b.bytes.data(), 32);
    if (c < 0) return std::strong_ordering::less;
    return c > 0 ? std::strong_ordering::greater : std::strong_ordering::equal;
  }
};

// Names that say what a hash identifies. They are the same type: the protocol derives one from the other
// (a file hash from an aggregate of chunk hashes), and conversions would only add noise.
using ChunkHash = Hash;
using XorbHash = Hash;
using FileHash = Hash;
using RangeHash = Hash;  // a term's verification hash
using HmacKey = Hash;    // a key for keyed chunk hashes in dedup answers

struct HashHasher {
  size_t operator()(const Hash& h) const noexcept { return static_cast<size_t>(h.word(0) ^ h.word(3)); }
};

}  // namespace cairn::xet
