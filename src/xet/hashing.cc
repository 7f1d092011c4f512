#include "xet/hashing.h"

#include <blake3.h>

#include <algorithm>
#include <charconv>
#include <cstring>

// The single-block compression of the BLAKE3 C library built with cairn (blake3_dispatch.c picks the SIMD
// variant at run time). Not in blake3.h; ChunkHashKeyer's test pins it to the public API's results.
extern "C" void blake3_compress_in_place(uint32_t cv[8], const uint8_t block[64], uint8_t block_len,
                                         uint64_t counter, uint8_t flags);

namespace cairn::xet {
namespace {

constexpr uint8_t kDataKey[32] = {102, 151, 245, 119, 91,  149, 80,  222, 49,  53,  203,
                                  172, 165, 151, 24,  28,  157, 228, 33,  16,  155, 235,
                                  43,  88,  180, 208, 176, 75,  147, 173, 242, 41};
constexpr uint8_t kInternalNodeKey[32] = {1,   126, 197, 199, 165, 71,  41,  150, 253, 148, 102,
                                          102, 180, 138, 2,   230, 93,  221, 83,  111, 55,  199,
                                          109, 210, 248, 99,  82,  230, 74,  83,  113, 63};
constexpr uint8_t kVerificationKey[32] = {127, 24,  87,  214, 206, 86,  237, 102, 18,  127, 249,
                                          19,  231, 165, 195, 243, 164, 205, 38,  213, 181, 219,
                                          73,  230, 65,  36,  152, 127, 40,  251, 148, 195};

// A keyed hasher prepared once per key: blake3_hasher_init_keyed derives the key words each time, so keep one
// initialised copy and clone it (a 1.9 KiB memcpy) per message.
class KeyedHasher {
 public:
  explicit KeyedHasher(const uint8_t key[32]) { blake3_hasher_init_keyed(&proto_, key); }
  blake3_hasher Start() const { return proto_; }

 private:
  blake3_hasher proto_{};
};

const KeyedHasher& DataHasher() {
  static const KeyedHasher h(kDataKey);
  return h;
}
const KeyedHasher& NodeHasher() {
  static const KeyedHasher h(kInternalNodeKey);
  return h;
}
const KeyedHasher& VerificationHasher() {
  static const KeyedHasher h(kVerificationKey);
  return h;
}

Hash Finish(blake3_hasher& h) {
  Hash out;
  blake3_hasher_finalize(&h, out.bytes.data(), 32);
  return out;
}

// Length of the first group of `n` remaining nodes (protocol §2.3, next_merge_cut).
size_t NextMergeCut(std::span<const HashedChunk> r) {
  const size_t n = r.size();
  if (n <= 2) return n;
  const size_t end = std::min<size_t>(9, n);
  for (size_t i = 2; i < end; ++i) {
    if (r[i].hash.mod(4) == 0) return i + 1;
  }
  return end;
}

}  // namespace

ChunkHash ChunkHashOf(std::span<const uint8_t> data) {
  blake3_hasher h = DataHasher().Start();
  blake3_hasher_update(&h, data.data(), data.size());
  return Finish(h);
}

Hash KeyedHash(const Hash& key, std::span<const uint8_t> data) {
  blake3_hasher h;
  blake3_hasher_init_keyed(&h, key.bytes.data());
  blake3_hasher_update(&h, data.data(), data.size());
  return Finish(h);
}

Hash InternalNodeHash(std::span<const HashedChunk> children) {
  // At most 9 children per node: each line is 64 + 3 + up to 20 digits + 1 bytes.
  char buf[9 * 96];
  blake3_hasher h = NodeHasher().Start();
  size_t len = 0;
  for (const HashedChunk& c : children) {
    if (len + 96 > sizeof buf) {
      blake3_hasher_update(&h, buf, len);
      len = 0;
    }
    c.hash.write_hex(buf + len);
    len += 64;
    buf[len++] = ' ';
    buf[len++] = ':';
    buf[len++] = ' ';
    len = static_cast<size_t>(std::to_chars(buf + len, buf + sizeof buf, c.size).ptr - buf);
    buf[len++] = '\n';
  }
  blake3_hasher_update(&h, buf, len);
  return Finish(h);
}

Hash AggregateHash(std::span<const HashedChunk> leaves) {
  if (leaves.empty()) return Hash{};
  if (leaves.size() == 1) return leaves[0].hash;
  std::vector<HashedChunk> level(leaves.begin(), leaves.end());
  while (level.size() > 1) {
    size_t out = 0;
    std::span<const HashedChunk> rest(level);
    while (!rest.empty()) {
      const size_t cut = NextMergeCut(rest);
      const auto group = rest.first(cut);
      uint64_t size = 0;
      for (const auto& c : group) size += c.size;
      // Writing in place is safe: `out` never overtakes the group being read (each group has >= 1 node).
      const Hash node = InternalNodeHash(group);
      level[out++] = HashedChunk{node, size};
      rest = rest.subspan(cut);
    }
    level.resize(out);
  }
  return level[0].hash;
}

FileHash FileHashOf(std::span<const HashedChunk> chunks, const Hash& salt) {
  if (chunks.empty()) return Hash{};
  const Hash root = AggregateHash(chunks);
  return KeyedHash(salt, root.bytes);
}

RangeHash RangeHashOf(std::span<const ChunkHash> chunk_hashes) {
  blake3_hasher h = VerificationHasher().Start();
  blake3_hasher_update(&h, chunk_hashes.data(), chunk_hashes.size() * sizeof(ChunkHash));
  return Finish(h);
}

RangeHash RangeHashOf(std::span<const HashedChunk> chunks) {
  blake3_hasher h = VerificationHasher().Start();
  for (const auto& c : chunks) blake3_hasher_update(&h, c.hash.bytes.data(), 32);
  return Finish(h);
}

ChunkHash HmacChunkHash(const HmacKey& key, const ChunkHash& chunk) {
  return ChunkHashKeyer(key)(chunk);
}

ChunkHashKeyer::ChunkHashKeyer(const HmacKey& key) : identity_(key.is_zero()), key_words_{} {
  for (size_t i = 0; i < 8; ++i) {
    const uint8_t* b = key.bytes.data() + 4 * i;
    key_words_[i] = uint32_t{b[0]} | uint32_t{b[1]} << 8 | uint32_t{b[2]} << 16 | uint32_t{b[3]} << 24;
  }
}

ChunkHash ChunkHashKeyer::operator()(const ChunkHash& chunk) const {
  if (identity_) return chunk;
  // BLAKE3 flags: CHUNK_START | CHUNK_END | ROOT | KEYED_HASH.
  constexpr uint8_t kFlags = 1 | 2 | 8 | 16;
  uint8_t block[64] = {};
  std::memcpy(block, chunk.bytes.data(), 32);
  uint32_t cv[8];
  std::memcpy(cv, key_words_, sizeof(cv));
  blake3_compress_in_place(cv, block, 32, 0, kFlags);
  ChunkHash out;
  for (size_t i = 0; i < 8; ++i) {
    for (size_t b = 0; b < 4; ++b) out.bytes[4 * i + b] = static_cast<uint8_t>(cv[i] >> (8 * b));
  }
  return out;
}

}  // namespace cairn::xet
