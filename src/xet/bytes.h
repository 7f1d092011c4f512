// Little-endian field access for the binary formats. Callers check bounds first; these never read past the
// span they are given (asserted in debug builds).
#pragma once

#include <cassert>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

namespace cairn::xet {

inline uint32_t LoadU32(std::span<const uint8_t> b, size_t off) {
  assert(off + 4 <= b.size());
  uint32_t v;
  std::memcpy(&v, b.data() + off, 4);
  return v;
}
inline uint64_t LoadU64(std::span<const uint8_t> b, size_t off) {
  assert(off + 8 <= b.size());
  uint64_t v;
  std::memcpy(&v, b.data() + off, 8);
  return v;
}
inline uint32_t LoadU24(const uint8_t* p) {
  return p[0] | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16;
}

inline void StoreU24(uint8_t* p, uint32_t v) {
  p[0] = static_cast<uint8_t>(v);
  p[1] = static_cast<uint8_t>(v >> 8);
  p[2] = static_cast<uint8_t>(v >> 16);
}

inline void PutU32(std::vector<uint8_t>& out, uint32_t v) {
  const size_t n = out.size();
  out.resize(n + 4);
  std::memcpy(out.data() + n, &v, 4);
}
inline void PutU64(std::vector<uint8_t>& out, uint64_t v) {
  const size_t n = out.size();
  out.resize(n + 8);
  std::memcpy(out.data() + n, &v, 8);
}
inline void PutBytes(std::vector<uint8_t>& out, const void* p, size_t len) {
  const auto* b = static_cast<const uint8_t*>(p);
  out.insert(out.end(), b, b + len);
}
inline void PutZeros(std::vector<uint8_t>& out, size_t len) {
  out.resize(out.size() + len, 0);
}

}  // namespace cairn::xet
