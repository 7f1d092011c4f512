#include "cas/transfer_url.h"

#include <blake3.h>

#include <algorithm>
#include <charconv>
#include <cstring>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "common/hex.h"

namespace cairn::cas {
namespace {

constexpr size_t kMacBytes = 16;

// MAC over "<xorb>|<ranges>|<expiry>" (the ranges exactly as they appear in the URL), streamed into a keyed
// BLAKE3 hasher.
void ComputeMac(const xet::Hash& key, std::string_view xorb_hex, std::string_view ranges,
                std::string_view expiry, uint8_t mac[kMacBytes]) {
  blake3_hasher h;
  blake3_hasher_init_keyed(&h, key.bytes.data());
  blake3_hasher_update(&h, xorb_hex.data(), xorb_hex.size());
  blake3_hasher_update(&h, "|", 1);
  blake3_hasher_update(&h, ranges.data(), ranges.size());
  blake3_hasher_update(&h, "|", 1);
  blake3_hasher_update(&h, expiry.data(), expiry.size());
  blake3_hasher_finalize(&h, mac, kMacBytes);
}

void AppendMac(std::string& out, const xet::Hash& key, std::string_view xorb_hex, std::string_view ranges,
               std::string_view expiry) {
  uint8_t mac[kMacBytes];
  ComputeMac(key, xorb_hex, ranges, expiry, mac);
  char hex[2 * kMacBytes];
  HexEncodeTo(mac, hex);
  out.append(hex, sizeof hex);
}

// ---- The signer's BLAKE3 fast path. A MAC'd message is "<64 hex digits>|<ranges>|<expiry>": its first block
// is the xorb's hex form, compressed once per xorb, and the rest (under 960 bytes, so the message stays one
// BLAKE3 chunk) takes one more compression per 64 bytes. This computes exactly what the keyed hasher below
// computes; the verifier keeps using the library hasher.

constexpr uint32_t kIv[8] = {0x6A09E667, 0xBB67AE85, 0x3C6EF372, 0xA54FF53A,
                             0x510E527F, 0x9B05688C, 0x1F83D9AB, 0x5BE0CD19};
constexpr uint8_t kSchedule[7][16] = {
    {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
    {2, 6, 3, 10, 7, 0, 4, 13, 1, 11, 12, 5, 9, 14, 15, 8},
    {3, 4, 10, 12, 13, 2, 7, 14, 6, 5, 9, 0, 11, 15, 8, 1},
    {10, 7, 12, 9, 14, 3, 13, 15, 4, 0, 11, 2, 5, 8, 1, 6},
    {12, 13, 9, 11, 15, 10, 14, 8, 7, 2, 5, 3, 0, 1, 6, 4},
    {9, 14, 11, 5, 8, 12, 15, 1, 13, 3, 0, 10, 2, 6, 4, 7},
    {11, 15, 5, 0, 1, 9, 8, 6, 14, 10, 2, 12, 3, 4, 7, 13},
};
constexpr uint32_t kChunkStart = 1;
constexpr uint32_t kChunkEnd = 2;
constexpr uint32_t kRoot = 8;
constexpr uint32_t kKeyedHash = 16;
constexpr size_t kBlock = 64;
constexpr size_t kMaxFastTail = 1024 - kBlock;  // the rest of the first chunk

inline uint32_t Load32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 | static_cast<uint32_t>(p[2]) << 16 |
         static_cast<uint32_t>(p[3]) << 24;
}

inline uint32_t Rotr(uint32_t w, int c) {
  return (w >> c) | (w << (32 - c));
}

#define CAIRN_ALWAYS_INLINE [[gnu::always_inline]] inline

CAIRN_ALWAYS_INLINE void G(uint32_t* v, int a, int b, int c, int d, uint32_t x, uint32_t y) {
  v[a] = v[a] + v[b] + x;
  v[d] = Rotr(v[d] ^ v[a], 16);
  v[c] = v[c] + v[d];
  v[b] = Rotr(v[b] ^ v[c], 12);
  v[a] = v[a] + v[b] + y;
  v[d] = Rotr(v[d] ^ v[a], 8);
  v[c] = v[c] + v[d];
  v[b] = Rotr(v[b] ^ v[c], 7);
}

// Round R, with the message schedule resolved at compile time so that the state stays in registers.
template <int R>
CAIRN_ALWAYS_INLINE void Round(uint32_t* v, const uint32_t* m) {
  constexpr const uint8_t* s = kSchedule[R];
  G(v, 0, 4, 8, 12, m[s[0]], m[s[1]]);
  G(v, 1, 5, 9, 13, m[s[2]], m[s[3]]);
  G(v, 2, 6, 10, 14, m[s[4]], m[s[5]]);
  G(v, 3, 7, 11, 15, m[s[6]], m[s[7]]);
  G(v, 0, 5, 10, 15, m[s[8]], m[s[9]]);
  G(v, 1, 6, 11, 12, m[s[10]], m[s[11]]);
  G(v, 2, 7, 8, 13, m[s[12]], m[s[13]]);
  G(v, 3, 4, 9, 14, m[s[14]], m[s[15]]);
}

// One BLAKE3 compression of a block of the first chunk (counter 0); leaves the new chaining value in `cv`.
void Compress(uint32_t cv[8], const uint8_t block[kBlock], uint32_t block_len, uint32_t flags) {
  uint32_t m[16];
  for (int i = 0; i < 16; ++i) m[i] = Load32(block + 4 * i);
  uint32_t v[16] = {cv[0],  cv[1],  cv[2],  cv[3],  cv[4], cv[5], cv[6],     cv[7],
                    kIv[0], kIv[1], kIv[2], kIv[3], 0,     0,     block_len, flags};
  Round<0>(v, m);
  Round<1>(v, m);
  Round<2>(v, m);
  Round<3>(v, m);
  Round<4>(v, m);
  Round<5>(v, m);
  Round<6>(v, m);
  for (int i = 0; i < 8; ++i) cv[i] = v[i] ^ v[i + 8];
}

// The MAC of a prepared xorb's message whose bytes after the first block are `tail` (1 to kMaxFastTail bytes,
// zero-padded to a whole block).
void MacTail(const XorbSigningState& xorb, const uint8_t* tail, size_t n, uint8_t mac[kMacBytes]) {
  uint32_t cv[8];
  std::memcpy(cv, xorb.cv, sizeof cv);
  for (; n > kBlock; tail += kBlock, n -= kBlock) Compress(cv, tail, kBlock, kKeyedHash);
  Compress(cv, tail, static_cast<uint32_t>(n), kKeyedHash | kChunkEnd | kRoot);
  for (size_t i = 0; i < kMacBytes; ++i) mac[i] = static_cast<uint8_t>(cv[i / 4] >> (8 * (i % 4)));
}

char* WriteU64(char* p, uint64_t v) {
  return WriteDecimal(p, v);
}

// Writes the MAC's 32 hex digits.
char* WriteMacHex(char* p, const uint8_t mac[kMacBytes]) {
#ifdef __SSE2__
  // Nibbles to '0'-'9' / 'a'-'f': add '0', and 'a' - '0' - 10 more where the nibble is above 9.
  const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(mac));
  const __m128i low_mask = _mm_set1_epi8(0x0f);
  const __m128i hi = _mm_and_si128(_mm_srli_epi16(bytes, 4), low_mask);
  const __m128i lo = _mm_and_si128(bytes, low_mask);
  const auto to_hex = [](__m128i n) {
    const __m128i letters = _mm_cmpgt_epi8(n, _mm_set1_epi8(9));
    return _mm_add_epi8(_mm_add_epi8(n, _mm_set1_epi8('0')),
                        _mm_and_si128(letters, _mm_set1_epi8('a' - '0' - 10)));
  };
  const __m128i h = to_hex(hi);
  const __m128i l = to_hex(lo);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm_unpacklo_epi8(h, l));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p + 16), _mm_unpackhi_epi8(h, l));
#else
  HexEncodeTo({mac, kMacBytes}, p);
#endif
  return p + 2 * kMacBytes;
}

char* Put(char* p, std::string_view s) {
  std::memcpy(p, s.data(), s.size());
  return p + s.size();
}

bool ParseU64(std::string_view s, uint64_t* v) {
  if (s.empty()) return false;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), *v);
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
}

// "a-b,c-d" (inclusive ends) → ranges; false on any malformed element or an inverted range.
bool ParseRangeList(std::string_view s, std::vector<ByteRange>* out) {
  out->clear();
  while (!s.empty()) {
    const size_t comma = std::min(s.find(','), s.size());
    const std::string_view item = s.substr(0, comma);
    const size_t dash = item.find('-');
    ByteRange r;
    if (dash == std::string_view::npos || !ParseU64(item.substr(0, dash), &r.start) ||
        !ParseU64(item.substr(dash + 1), &r.end) || r.end < r.start) {
      return false;
    }
    out->push_back(r);
    s.remove_prefix(std::min(comma + 1, s.size()));
  }
  return !out->empty();
}

}  // namespace

bool ConstantTimeEqual(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned>(a[i] ^ b[i]);
  return diff == 0;
}

TransferUrlSigner::TransferUrlSigner(std::string base, const UrlKeys::Key& key, Presigner presigner)
    : base_(std::move(base)),
      secret_(key.material),
      key_param_(key.named() ? "&k=" + key.id : std::string()),
      presigner_(std::move(presigner)) {
  while (!base_.empty() && base_.back() == '/') base_.pop_back();
  for (size_t i = 0; i < 8; ++i) key_words_[i] = Load32(secret_.bytes.data() + 4 * i);
}

void TransferUrlSigner::PrepareXorb(const char* xorb_hex, XorbSigningState* state) const {
  std::memcpy(state->hex, xorb_hex, sizeof state->hex);
  std::memcpy(state->cv, key_words_, sizeof state->cv);
  Compress(state->cv, reinterpret_cast<const uint8_t*>(xorb_hex), kBlock, kKeyedHash | kChunkStart);
}

char* TransferUrlSigner::WriteUrl(char* out, const XorbSigningState& xorb, const ByteRange* ranges,
                                  size_t count, uint64_t expiry_unix) const {
  if (presigner_.url) {
    // One range per presigned URL (presigned() tells the writers so).
    const std::string url =
        count == 0 ? std::string() : presigner_.url({xorb.hex, sizeof xorb.hex}, ranges[0], expiry_unix);
    return url.size() <= presigner_.max_size ? Put(out, url) : out;
  }
  char* p = Put(out, base_);
  p = Put(p, "/v1/transfer/");
  p = Put(p, {xorb.hex, sizeof xorb.hex});
  p = Put(p, "?r=");
  char* const ranges_at = p;
  for (size_t i = 0; i < count; ++i) {
    if (i) *p++ = ',';
    p = WriteU64(p, ranges[i].start);
    *p++ = '-';
    p = WriteU64(p, ranges[i].end);
  }
  const std::string_view ranges_text(ranges_at, static_cast<size_t>(p - ranges_at));
  p = Put(p, "&x=");
  char* const expiry_at = p;
  p = WriteU64(p, expiry_unix);
  const std::string_view expiry_text(expiry_at, static_cast<size_t>(p - expiry_at));
  p = Put(p, key_param_);
  p = Put(p, "&s=");
  uint8_t mac[kMacBytes];
  const size_t tail_len = ranges_text.size() + expiry_text.size() + 2;
  if (tail_len <= kMaxFastTail) {
    alignas(16) uint8_t tail[kMaxFastTail];
    std::memset(tail + (tail_len - 1) / kBlock * kBlock, 0, kBlock);  // the last block's padding
    tail[0] = '|';
    std::memcpy(tail + 1, ranges_text.data(), ranges_text.size());
    tail[1 + ranges_text.size()] = '|';
    std::memcpy(tail + 2 + ranges_text.size(), expiry_text.data(), expiry_text.size());
    MacTail(xorb, tail, tail_len, mac);
  } else {
    ComputeMac(secret_, {xorb.hex, sizeof xorb.hex}, ranges_text, expiry_text, mac);
  }
  return WriteMacHex(p, mac);
}

void TransferUrlSigner::AppendUrl(std::string& out, std::string_view xorb_hex, const ByteRange* ranges,
                                  size_t count, uint64_t expiry_unix) const {
  XorbSigningState xorb;
  PrepareXorb(xorb_hex.data(), &xorb);
  const size_t at = out.size();
  out.resize(at + MaxUrlSize(count));
  char* end = WriteUrl(out.data() + at, xorb, ranges, count, expiry_unix);
  out.resize(static_cast<size_t>(end - out.data()));
}

std::string TransferUrlSigner::Url(const xet::XorbHash& xorb, const std::vector<ByteRange>& ranges,
                                   uint64_t expiry_unix) const {
  std::string out;
  AppendUrl(out, xorb.hex(), ranges.data(), ranges.size(), expiry_unix);
  return out;
}

bool TransferUrlVerifier::Verify(std::string_view xorb_hex, std::string_view query, uint64_t now,
                                 TransferGrant* grant, TransferError* error) const {
  std::string_view r;
  std::string_view x;
  std::string_view s;
  std::string_view k;
  while (!query.empty()) {
    const size_t amp = std::min(query.find('&'), query.size());
    const std::string_view kv = query.substr(0, amp);
    if (kv.starts_with("r=")) r = kv.substr(2);
    if (kv.starts_with("x=")) x = kv.substr(2);
    if (kv.starts_with("k=")) k = kv.substr(2);
    if (kv.starts_with("s=")) s = kv.substr(2);
    query.remove_prefix(std::min(amp + 1, query.size()));
  }
  const auto hash = xet::Hash::FromHex(xorb_hex);
  if (!hash || r.empty() || x.empty() || s.size() != 2 * kMacBytes || !ParseRangeList(r, &grant->ranges) ||
      !ParseU64(x, &grant->expiry_unix)) {
    *error = {TransferRefusal::kMalformed, "malformed transfer URL"};
    return false;
  }
  const UrlKeys::Key* key = keys_.Find(k);
  if (key == nullptr) {
    *error = {TransferRefusal::kBadSignature, "transfer URL signed with an unknown or retired key"};
    return false;
  }
  std::string expected;
  AppendMac(expected, key->material, xorb_hex, r, x);
  if (!ConstantTimeEqual(expected, s)) {
    *error = {TransferRefusal::kBadSignature, "transfer URL signature does not match"};
    return false;
  }
  if (grant->expiry_unix < now) {
    *error = {TransferRefusal::kExpired, "transfer URL expired; request a fresh reconstruction"};
    return false;
  }
  grant->xorb = *hash;
  return true;
}

bool ParseRangeHeader(std::string_view header, uint64_t size, std::vector<ByteRange>* out) {
  out->clear();
  if (!header.starts_with("bytes=") || size == 0) return false;
  header.remove_prefix(6);
  while (!header.empty()) {
    const size_t comma = std::min(header.find(','), header.size());
    std::string_view item = header.substr(0, comma);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    const size_t dash = item.find('-');
    if (dash == std::string_view::npos) return false;
    ByteRange r;
    uint64_t a = 0;
    uint64_t b = 0;
    if (dash == 0) {  // suffix: the last b bytes
      if (!ParseU64(item.substr(1), &b) || b == 0) return false;
      r = {b >= size ? 0 : size - b, size - 1};
    } else {
      if (!ParseU64(item.substr(0, dash), &a) || a >= size) return false;
      if (dash + 1 == item.size()) {
        r = {a, size - 1};
      } else {
        if (!ParseU64(item.substr(dash + 1), &b) || b < a) return false;
        r = {a, std::min(b, size - 1)};
      }
    }
    out->push_back(r);
    header.remove_prefix(std::min(comma + 1, header.size()));
  }
  return !out->empty();
}

bool RangesGranted(const std::vector<ByteRange>& requested, const std::vector<ByteRange>& granted) {
  return std::all_of(requested.begin(), requested.end(), [&](const ByteRange& q) {
    return std::any_of(granted.begin(), granted.end(),
                       [&](const ByteRange& g) { return g.start <= q.start && q.end <= g.end; });
  });
}

}  // namespace cairn::cas
