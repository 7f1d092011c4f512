// Fuzzes the transfer-URL verifier (cas::TransferUrlVerifier::Verify, which every GET /v1/transfer/<xorb>
// goes through before a byte is read) and the Range header parser of that route (cas::ParseRangeHeader,
// RangesGranted). Three uses of one input:
//   - as text: "<xorb hex>?<query>", verified as a request would be (a MAC is never guessed, so it must fail
//     unless the text is a URL the signer wrote);
//   - as numbers: a xorb hash, an expiry and 1 to 64 ranges, which the signer (cas::TransferUrlSigner, with
//     its own BLAKE3 code) signs and the verifier (the library's BLAKE3) must accept as exactly that grant,
//     and refuse once expired or altered;
//   - as a Range header against a xorb of a size taken from the input, checked against the granted ranges.
#include <algorithm>
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "cas/transfer_url.h"
#include "common/fuzz_check.h"

namespace {

using cairn::cas::ByteRange;

const cairn::xet::Hash& Secret() {
  static const cairn::xet::Hash secret = [] {
    cairn::xet::Hash h;
    for (size_t i = 0; i < h.bytes.size(); ++i) h.bytes[i] = static_cast<uint8_t>(7 * i + 1);
    return h;
  }();
  return secret;
}

// Reads little-endian numbers off the input, zeros past its end.
class Numbers {
 public:
  Numbers(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  uint64_t Next(size_t bytes) {
    uint64_t v = 0;
    for (size_t i = 0; i < bytes; ++i, ++pos_)
      v |= uint64_t{pos_ < size_ ? data_[pos_] : uint8_t{0}} << (8 * i);
    return v;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

void RoundTrip(const uint8_t* data, size_t size) {
  Numbers in(data, size);
  cairn::xet::XorbHash xorb;
  for (auto& b : xorb.bytes) b = static_cast<uint8_t>(in.Next(1));
  const uint64_t expiry = in.Next(1) % 2 ? in.Next(8) : in.Next(4);
  std::vector<ByteRange> ranges(in.Next(1) % 64 + 1);
  for (auto& r : ranges) {
    const uint64_t wide = in.Next(1);
    r.start = in.Next(wide % 2 ? 8 : 4);
    r.end = r.start + std::min(in.Next(wide % 4 < 2 ? 8 : 3), UINT64_MAX - r.start);
  }
  const cairn::cas::TransferUrlSigner signer("http://cairn.test", Secret());
  const std::string url = signer.Url(xorb, ranges, expiry);
  const size_t path = url.find("/v1/transfer/");
  const size_t q = url.find('?');
  FUZZ_CHECK(path != std::string::npos && q != std::string::npos &&
             url.size() <= signer.MaxUrlSize(ranges.size()));
  const std::string_view hex = std::string_view(url).substr(path + 13, q - path - 13);
  const std::string_view query = std::string_view(url).substr(q + 1);

  const cairn::cas::TransferUrlVerifier verifier(Secret());
  cairn::cas::TransferGrant grant;
  cairn::cas::TransferError error;
  FUZZ_CHECK(verifier.Verify(hex, query, expiry, &grant, &error));
  FUZZ_CHECK(grant.xorb == xorb && grant.expiry_unix == expiry && grant.ranges == ranges);
  if (expiry < UINT64_MAX) {
    FUZZ_CHECK(!verifier.Verify(hex, query, expiry + 1, &grant, &error));
    FUZZ_CHECK(error.reason == cairn::cas::TransferRefusal::kExpired);
  }
  // One digit of the ranges changed: refused.
  std::string altered(query);
  const size_t digit = 2 + in.Next(2) % (altered.find('&') - 2);
  altered[digit] = altered[digit] == '9' ? '8' : '9';
  if (altered[digit] != query[digit] && std::isdigit(static_cast<unsigned char>(query[digit])))
    FUZZ_CHECK(!verifier.Verify(hex, altered, 0, &grant, &error));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const size_t q = text.find('?');
  const cairn::cas::TransferUrlVerifier verifier(Secret());
  cairn::cas::TransferGrant grant;
  cairn::cas::TransferError error;
  if (q != std::string_view::npos &&
      verifier.Verify(text.substr(0, q), text.substr(q + 1), 0, &grant, &error)) {
    FUZZ_CHECK(!grant.ranges.empty());
    for (const auto& r : grant.ranges) FUZZ_CHECK(r.start <= r.end);
  }

  RoundTrip(data, size);

  // The input as a Range header for a xorb of up to 16 MiB.
  Numbers in(data, size);
  const uint64_t xorb_size = in.Next(3);
  std::vector<ByteRange> requested;
  if (cairn::cas::ParseRangeHeader(text, xorb_size, &requested)) {
    FUZZ_CHECK(!requested.empty());
    for (const auto& r : requested) FUZZ_CHECK(r.start <= r.end && r.end < xorb_size);
    FUZZ_CHECK(cairn::cas::RangesGranted(requested, requested));
    FUZZ_CHECK(cairn::cas::RangesGranted(requested, {{0, xorb_size - 1}}));
  }
  return 0;
}
