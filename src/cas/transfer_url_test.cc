#include "cas/transfer_url.h"

#include <gtest/gtest.h>

namespace cairn::cas {
namespace {

xet::Hash Secret(uint8_t b) {
  xet::Hash h;
  h.bytes.fill(b);
  return h;
}

const xet::XorbHash kXorb =
    *xet::Hash::FromHex("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef");

// Splits a signed URL into the xorb segment and the query, as the HTTP layer will.
void Split(const std::string& url, std::string* xorb, std::string* query) {
  const size_t path = url.find("/v1/transfer/") + 13;
  const size_t q = url.find('?');
  *xorb = url.substr(path, q - path);
  *query = url.substr(q + 1);
}

TEST(TransferUrl, SignedUrlVerifies) {
  TransferUrlSigner signer("http://cas.example:8080/", Secret(1));
  const std::string url = signer.Url(kXorb, {{0, 99}, {200, 299}}, 1000);
  EXPECT_TRUE(
      url.starts_with("http://cas.example:8080/v1/transfer/" + kXorb.hex() + "?r=0-99,200-299&x=1000&s="));
  std::string xorb, query;
  Split(url, &xorb, &query);
  TransferGrant grant;
  TransferError error;
  ASSERT_TRUE(TransferUrlVerifier(Secret(1)).Verify(xorb, query, 999, &grant, &error)) << error.message;
  EXPECT_EQ(grant.xorb, kXorb);
  EXPECT_EQ(grant.ranges, (std::vector<ByteRange>{{0, 99}, {200, 299}}));
}

TEST(TransferUrl, ExpiredUrlIsRefused) {
  TransferUrlSigner signer("http://h", Secret(1));
  std::string xorb, query;
  Split(signer.Url(kXorb, {{0, 9}}, 1000), &xorb, &query);
  TransferGrant grant;
  TransferError error;
  EXPECT_TRUE(TransferUrlVerifier(Secret(1)).Verify(xorb, query, 1000, &grant, &error));
  ASSERT_FALSE(TransferUrlVerifier(Secret(1)).Verify(xorb, query, 1001, &grant, &error));
  EXPECT_EQ(error.reason, TransferRefusal::kExpired);
}

TEST(TransferUrl, TamperedRangesExpiryXorbOrKeyAreRefused) {
  TransferUrlSigner signer("http://h", Secret(1));
  std::string xorb, query;
  Split(signer.Url(kXorb, {{0, 9}}, 1000), &xorb, &query);
  TransferGrant grant;
  TransferError error;
  const TransferUrlVerifier verifier(Secret(1));
  std::string wider = query;
  wider.replace(wider.find("0-9"), 3, "0-99");
  EXPECT_FALSE(verifier.Verify(xorb, wider, 0, &grant, &error));
  EXPECT_EQ(error.reason, TransferRefusal::kBadSignature);
  std::string later = query;
  later.replace(later.find("x=1000"), 6, "x=9000");
  EXPECT_FALSE(verifier.Verify(xorb, later, 0, &grant, &error));
  std::string other_xorb = xorb;
  other_xorb[0] = 'f';
  EXPECT_FALSE(verifier.Verify(other_xorb, query, 0, &grant, &error));
  EXPECT_FALSE(TransferUrlVerifier(Secret(2)).Verify(xorb, query, 0, &grant, &error));
  EXPECT_EQ(error.reason, TransferRefusal::kBadSignature);
}

TEST(TransferUrl, MalformedQueriesAreRefused) {
  TransferGrant grant;
  TransferError error;
  const TransferUrlVerifier verifier(Secret(1));
  const std::string hex = kXorb.hex();
  for (const char* q :
       {"", "r=0-9&x=5", "r=0-9&s=00000000000000000000000000000000", "r=9-0&x=5&s=00",
        "r=a-b&x=5&s=00000000000000000000000000000000", "x=5&s=00000000000000000000000000000000"}) {
    EXPECT_FALSE(verifier.Verify(hex, q, 0, &grant, &error)) << q;
    EXPECT_EQ(error.reason, TransferRefusal::kMalformed) << q;
  }
  EXPECT_FALSE(verifier.Verify("nothex", "r=0-9&x=5&s=00000000000000000000000000000000", 0, &grant, &error));
}

UrlKeys Keys(std::vector<UrlKeys::Key> keys, std::string_view current) {
  return *UrlKeys::Make(std::move(keys), current);
}

// A URL names the key that signed it (k), unless that is the legacy key: then it is what it was before key
// ids, and verifies with the legacy key.
TEST(TransferUrl, KeyIdsSelectTheVerifyingKey) {
  const UrlKeys::Key legacy{"legacy", Secret(1)};
  const UrlKeys::Key old_key{"k1", Secret(2)};
  const UrlKeys::Key new_key{"k2", Secret(3)};
  const TransferUrlVerifier verifier(Keys({legacy, old_key, new_key}, "k2"));
  TransferGrant grant;
  TransferError error;
  std::string xorb, query;

  const std::string before = TransferUrlSigner("http://h", Secret(1)).Url(kXorb, {{0, 9}}, 1000);
  EXPECT_EQ(TransferUrlSigner("http://h", legacy).Url(kXorb, {{0, 9}}, 1000), before);
  EXPECT_EQ(before.find("k="), std::string::npos);
  for (const auto& key : {legacy, old_key, new_key}) {
    const std::string url = TransferUrlSigner("http://h", key).Url(kXorb, {{0, 9}}, 1000);
    EXPECT_EQ(url.find("&k=" + key.id + "&s=") != std::string::npos, key.named()) << url;
    Split(url, &xorb, &query);
    EXPECT_TRUE(verifier.Verify(xorb, query, 999, &grant, &error)) << key.id << ": " << error.message;
    // MaxUrlSize leaves room for the key id.
    EXPECT_LE(url.size(), TransferUrlSigner("http://h", key).MaxUrlSize(1));
  }

  // Retired (or never known): refused as a bad signature, so that clients fetch fresh URLs.
  Split(TransferUrlSigner("http://h", old_key).Url(kXorb, {{0, 9}}, 1000), &xorb, &query);
  const TransferUrlVerifier rotated(Keys({new_key}, "k2"));
  EXPECT_FALSE(rotated.Verify(xorb, query, 999, &grant, &error));
  EXPECT_EQ(error.reason, TransferRefusal::kBadSignature);
  Split(before, &xorb, &query);
  EXPECT_FALSE(rotated.Verify(xorb, query, 999, &grant, &error));  // names no key: the legacy key is gone
  // A URL whose k names another key than the one that signed it fails that key's MAC.
  std::string url = TransferUrlSigner("http://h", old_key).Url(kXorb, {{0, 9}}, 1000);
  url.replace(url.find("&k=k1"), 5, "&k=k2");
  Split(url, &xorb, &query);
  EXPECT_FALSE(verifier.Verify(xorb, query, 999, &grant, &error));
  EXPECT_EQ(error.reason, TransferRefusal::kBadSignature);
}

TEST(RangeHeader, ParsesSingleMultiOpenAndSuffixForms) {
  std::vector<ByteRange> r;
  ASSERT_TRUE(ParseRangeHeader("bytes=0-99", 1000, &r));
  EXPECT_EQ(r, (std::vector<ByteRange>{{0, 99}}));
  ASSERT_TRUE(ParseRangeHeader("bytes=0-9, 20-29", 1000, &r));
  EXPECT_EQ(r, (std::vector<ByteRange>{{0, 9}, {20, 29}}));
  ASSERT_TRUE(ParseRangeHeader("bytes=990-", 1000, &r));
  EXPECT_EQ(r, (std::vector<ByteRange>{{990, 999}}));
  ASSERT_TRUE(ParseRangeHeader("bytes=-10", 1000, &r));
  EXPECT_EQ(r, (std::vector<ByteRange>{{990, 999}}));
  ASSERT_TRUE(ParseRangeHeader("bytes=500-5000", 1000, &r));
  EXPECT_EQ(r, (std::vector<ByteRange>{{500, 999}}));
}

TEST(RangeHeader, RejectsMalformedAndUnsatisfiable) {
  std::vector<ByteRange> r;
  for (const char* h :
       {"", "bytes=", "items=0-1", "bytes=5-1", "bytes=1000-1001", "bytes=x-1", "bytes=-0", "bytes=1"}) {
    EXPECT_FALSE(ParseRangeHeader(h, 1000, &r)) << h;
  }
}

TEST(RangeHeader, GrantedOnlyInsideOneSignedRange) {
  const std::vector<ByteRange> granted{{0, 99}, {200, 299}};
  EXPECT_TRUE(RangesGranted({{0, 99}}, granted));
  EXPECT_TRUE(RangesGranted({{10, 20}, {250, 299}}, granted));
  EXPECT_FALSE(RangesGranted({{50, 250}}, granted));
  EXPECT_FALSE(RangesGranted({{0, 100}}, granted));
  EXPECT_FALSE(RangesGranted({{300, 301}}, granted));
}

}  // namespace
}  // namespace cairn::cas
