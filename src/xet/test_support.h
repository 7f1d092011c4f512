// Helpers shared by the protocol tests and benchmarks (library cairn_xet_testing).
#pragma once

#include <boost/json.hpp>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace cairn::xet::testing {

// The SplitMix64 byte stream of protocol §1.4: each output appended as 8 little-endian bytes, truncated to n.
std::vector<uint8_t> SplitMix64Bytes(uint64_t seed, size_t n);

// Text-like bytes (words from a small vocabulary with punctuation), deterministic from `seed`: compresses
// with LZ4 roughly as source code or JSON does.
std::vector<uint8_t> TextLikeBytes(uint64_t seed, size_t n);

// Little-endian fields of a serialized object, read and patched in place (tests that build or damage xorbs
// and shards byte by byte). `off` must lie inside `b`.
inline uint32_t GetU32(const std::vector<uint8_t>& b, size_t off) {
  uint32_t v;
  std::memcpy(&v, b.data() + off, 4);
  return v;
}
inline uint64_t GetU64(const std::vector<uint8_t>& b, size_t off) {
  uint64_t v;
  std::memcpy(&v, b.data() + off, 8);
  return v;
}
inline void SetU32(std::vector<uint8_t>& b, size_t off, uint32_t v) {
  std::memcpy(b.data() + off, &v, 4);
}
inline void SetU64(std::vector<uint8_t>& b, size_t off, uint64_t v) {
  std::memcpy(b.data() + off, &v, 8);
}

inline bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// Whole file contents; aborts the test binary if unreadable.
std::string ReadFileOrDie(const std::string& path);

// XORs the byte at `offset` of the file at `path` with `mask` (a test's damage to a stored object); false
// when the file cannot be opened or is shorter.
bool FlipByte(const std::string& path, uint64_t offset, uint8_t mask = 0x01);

// tests/vectors/xet-vectors.json, parsed: the protocol's test vectors, checked against the stock
// implementations by tests/oracle/test_vectors.py (where each value comes from: tests/vectors/README.md).
const boost::json::value& Vectors();

}  // namespace cairn::xet::testing
