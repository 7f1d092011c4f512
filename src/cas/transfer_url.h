// Transfer URLs: capability URLs for xorb bytes. The stock client sends no Authorization header to them, so a
// URL authorizes itself: it names one xorb, the exact byte ranges granted, and an expiry, under a MAC keyed
// with a server secret. Any single Range inside one granted range (what hf_xet sends) or a set of such ranges
// (what
// @huggingface/hub may send) is accepted; anything else is refused.
//
// Form: <public base>/v1/transfer/<xorb hex>?r=<s>-<e>[,<s>-<e>...]&x=<unix expiry>[&k=<key id>]&s=<mac hex>
// (byte ranges inclusive, as in HTTP). `k` names the URL key that signed it (UrlKeys, common/key_set.h),
// absent for the legacy key; it is not signed: a URL whose k names another key fails that key's MAC. The MAC
// is keyed BLAKE3 over "<xorb hex>|<ranges>|<expiry>", truncated to 128 bits. The message's first 64-byte
// block is always the xorb's hex form, so a signer compresses it once per xorb (PrepareXorb) and a typical
// URL then costs one BLAKE3 compression: cheap enough to sign 100,000 URLs per answer.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"
#include "common/key_set.h"
#include "xet/hash.h"

namespace cairn::cas {

// URL keys: the 32-byte BLAKE3 key each URL secret gives.
using UrlKeys = KeySet<xet::Hash>;

// Whether two MACs (or any secrets) are equal, in time that depends on their length only.
bool ConstantTimeEqual(std::string_view a, std::string_view b);

// The number of decimal digits of `v`.
inline size_t DecimalLength(uint64_t v) {
  static constexpr uint64_t kPow10[20] = {1,
                                          10,
                                          100,
                                          1000,
                                          10000,
                                          100000,
                                          1000000,
                                          10000000,
                                          100000000,
                                          1000000000,
                                          10000000000,
                                          100000000000,
                                          1000000000000,
                                          10000000000000,
                                          100000000000000,
                                          1000000000000000,
                                          10000000000000000,
                                          100000000000000000,
                                          1000000000000000000,
                                          10000000000000000000ULL};
  const size_t t = static_cast<size_t>(std::bit_width(v | 1)) * 1233 >> 12;  // floor(log10(v)) or one more
  return t + (v >= kPow10[t] ? 1 : 0) + (v == 0 ? 1 : 0);
}

// Writes `v` in decimal at `out` (room for 20 bytes) and returns the end: what std::to_chars writes, with a
// cheaper digit count. Answers format about a million numbers.
inline char* WriteDecimal(char* out, uint64_t v) {
  static constexpr char kPairs[] =
      "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
      "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
      "8081828384858687888990919293949596979899";
  if (v < 10) {
    *out = static_cast<char>('0' + v);
    return out + 1;
  }
  char* const end = out + DecimalLength(v);
  char* p = end;
  while (v >= 100) {
    p -= 2;
    std::memcpy(p, kPairs + 2 * (v % 100), 2);
    v /= 100;
  }
  if (v >= 10) {
    std::memcpy(p - 2, kPairs + 2 * v, 2);
  } else {
    p[-1] = static_cast<char>('0' + v);
  }
  return end;
}

// An inclusive byte range [start, end], as HTTP and the reconstruction JSON write them.
struct ByteRange {
  uint64_t start = 0;
  uint64_t end = 0;  // inclusive
  uint64_t length() const { return end - start + 1; }
  friend bool operator==(const ByteRange&, const ByteRange&) = default;
};

// The signing state for one xorb: its 64-digit hex form, and the keyed BLAKE3 chaining value after that
// first block of every message signed for it.
struct XorbSigningState {
  char hex[64];
  uint32_t cv[8];
};

// Presigned mode (transfer_mode = presigned): a URL of the object store that lets anyone GET the whole xorb
// until `expiry_unix` (S3 presigned URLs; bytes then go from the store to the client, not through a node).
// `range` is signed into the URL so that each range's URL differs (@huggingface/hub plans its downloads by
// URL). Thread-safe. `max_size` bounds the URLs it returns.
struct Presigner {
  std::function<std::string(std::string_view xorb_hex, const ByteRange& range, uint64_t expiry_unix)> url;
  size_t max_size = 0;
};

class TransferUrlSigner {
 public:
  // `base` is the configured public URL without a trailing slash; never derived from a request's Host header.
  // With a presigner, URLs are the store's instead (they grant the whole xorb: the ranges are the client's to
  // send as a Range header, one range per URL).
  TransferUrlSigner(std::string base, const UrlKeys::Key& key, Presigner presigner = {});
  // With a legacy key.
  TransferUrlSigner(std::string base, const xet::Hash& secret, Presigner presigner = {})
      : TransferUrlSigner(std::move(base), UrlKeys::Key{std::string(kLegacyKeyId), secret},
                          std::move(presigner)) {}

  // Prepares to sign URLs for the xorb whose 64-digit hex form is `xorb_hex`.
  void PrepareXorb(const char* xorb_hex, XorbSigningState* state) const;

  // The most bytes WriteUrl writes for `count` ranges.
  size_t MaxUrlSize(size_t count) const {
    if (presigner_.url) return presigner_.max_size;
    return base_.size() + key_param_.size() + kMaxUrlOverhead + count * kMaxRangeText;
  }
  // Whether URLs are presigned store URLs: then one URL carries one range (object stores answer a multi-range
  // request with the whole object).
  bool presigned() const { return static_cast<bool>(presigner_.url); }

  // Writes a signed URL for `ranges` of a prepared xorb at `out`, which has room for MaxUrlSize(count) bytes;
  // returns the end of what was written.
  char* WriteUrl(char* out, const XorbSigningState& xorb, const ByteRange* ranges, size_t count,
                 uint64_t expiry_unix) const;

  // Appends a signed URL for `ranges` of `xorb` (xorb_hex is its 64-digit form, precomputed by the caller).
  void AppendUrl(std::string& out, std::string_view xorb_hex, const ByteRange* ranges, size_t count,
                 uint64_t expiry_unix) const;
  std::string Url(const xet::XorbHash& xorb, const std::vector<ByteRange>& ranges,
                  uint64_t expiry_unix) const;

  const std::string& base() const { return base_; }

 private:
  static constexpr size_t kMaxRangeText = 2 * 20 + 2;  // "<s>-<e>," with 20-digit numbers
  static constexpr size_t kMaxUrlOverhead = 13 + 64 + 3 + 3 + 20 + 3 + 32;

  std::string base_;
  xet::Hash secret_;
  std::string key_param_;  // "&k=<id>", or empty for the legacy key
  uint32_t key_words_[8];
  Presigner presigner_;
};

// What a verified transfer URL grants.
struct TransferGrant {
  xet::XorbHash xorb;
  std::vector<ByteRange> ranges;
  uint64_t expiry_unix = 0;
};

enum class TransferRefusal { kMalformed, kExpired, kBadSignature };

struct TransferError {
  TransferRefusal reason;
  std::string message;
};

// Checks the path's xorb and the query (`r`, `x`, `k`, `s`) of a transfer URL at time `now`, with the key `k`
// names (the legacy key when there is no `k`).
class TransferUrlVerifier {
 public:
  explicit TransferUrlVerifier(UrlKeys keys) : keys_(std::move(keys)) {}
  explicit TransferUrlVerifier(const xet::Hash& secret) : keys_(UrlKeys::Single(secret)) {}
  // Returns the grant, or why the URL is refused (expired and tampered URLs answer 403 so clients refresh).
  bool Verify(std::string_view xorb_hex, std::string_view query, uint64_t now, TransferGrant* grant,
              TransferError* error) const;

 private:
  UrlKeys keys_;
};

// Parses a Range header ("bytes=a-b[,c-d...]"; also "a-" and "-n") against an object of `size` bytes.
// Returns false if the header is malformed or a range is unsatisfiable.
bool ParseRangeHeader(std::string_view header, uint64_t size, std::vector<ByteRange>* out);

// True if every requested range lies inside one granted range.
bool RangesGranted(const std::vector<ByteRange>& requested, const std::vector<ByteRange>& granted);

}  // namespace cairn::cas
