#include "xet/hash.h"

#include <gtest/gtest.h>

#include "xet/test_support.h"

namespace cairn::xet {
namespace {

std::string Str(const boost::json::value& v) {
  return std::string(v.as_string());
}

Hash Sequential() {
  Hash h;
  for (int i = 0; i < 32; ++i) h.bytes[static_cast<size_t>(i)] = static_cast<uint8_t>(i);
  return h;
}

TEST(HashHex, VectorRawBytesToXetHex) {
  const auto& v = testing::Vectors().at("hex_rule");
  EXPECT_EQ(Str(v.at("raw_bytes_hex")), "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f");
  EXPECT_EQ(Sequential().hex(), Str(v.at("xet_hex")));
}

TEST(HashHex, SecondUpstreamExample) {
  const uint8_t raw[32] = {22,  175, 58, 132, 4,   75,  131, 214, 190, 153, 138, 66,  226, 3,   153, 242,
                           204, 86,  80, 234, 249, 153, 80,  99,  159, 80,  65,  138, 236, 231, 149, 78};
  EXPECT_EQ(Hash::FromBytes(raw).hex(), "d6834b04843aaf16f29903e2428a99be635099f9ea5056cc4e95e7ec8a41509f");
}

TEST(HashHex, ParsesBackToTheSameBytes) {
  const auto parsed = Hash::FromHex(Str(testing::Vectors().at("hex_rule").at("xet_hex")));
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(*parsed, Sequential());
}

TEST(HashHex, AcceptsUpperCaseEmitsLowerCase) {
  const auto parsed = Hash::FromHex("07060504030201000F0E0D0C0B0A090817161514131211101F1E1D1C1B1A1918");
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(parsed->hex(), "07060504030201000f0e0d0c0b0a090817161514131211101f1e1d1c1b1a1918");
}

TEST(HashHex, RejectsWrongLength) {
  EXPECT_FALSE(Hash::FromHex("").has_value());
  EXPECT_FALSE(Hash::FromHex(std::string(63, '0')).has_value());
  EXPECT_FALSE(Hash::FromHex(std::string(65, '0')).has_value());
}

TEST(HashHex, RejectsNonHexDigits) {
  std::string s(64, '0');
  for (char bad : {'g', 'G', ' ', '-', 'x', '\0'}) {
    s[40] = bad;
    EXPECT_FALSE(Hash::FromHex(s).has_value()) << "digit " << static_cast<int>(bad);
  }
}

TEST(HashWords, ModuloUsesTheLastWord) {
  // The last 16 hex digits are word 3; `hash % n` is taken from it.
  const auto h = Hash::FromHex("000000000000000000000000000000000000000000000000000000000000040b");
  ASSERT_TRUE(h.has_value());
  EXPECT_EQ(h->word(3), 0x40bu);
  EXPECT_EQ(h->mod(1024), 0xbu);
  EXPECT_EQ(h->mod(4), 3u);
  EXPECT_EQ(h->truncated(), 0u);
}

TEST(HashWords, TruncatedIsTheFirstWord) {
  EXPECT_EQ(Sequential().truncated(), 0x0706050403020100u);
  EXPECT_TRUE(Hash{}.is_zero());
  EXPECT_FALSE(Sequential().is_zero());
}

}  // namespace
}  // namespace cairn::xet
