#include "http/client_limits.h"

#include <gtest/gtest.h>

namespace cairn::http {
namespace {

boost::asio::ip::address A(const char* s) {
  return boost::asio::ip::make_address(s);
}

TEST(AddressSet, MatchesAddressesAndRangesOfBothFamilies) {
  auto set = AddressSet::Parse({"10.0.0.0/8", "192.168.1.7", " fd00::/8 ", "::1", ""});
  ASSERT_TRUE(set.ok()) << set.error().message;
  EXPECT_TRUE(set->Contains(A("10.200.3.4")));
  EXPECT_FALSE(set->Contains(A("11.0.0.1")));
  EXPECT_TRUE(set->Contains(A("192.168.1.7")));
  EXPECT_FALSE(set->Contains(A("192.168.1.8")));
  EXPECT_TRUE(set->Contains(A("fd12::1")));
  EXPECT_TRUE(set->Contains(A("::1")));
  EXPECT_FALSE(set->Contains(A("::2")));
  EXPECT_TRUE(set->Contains(A("::ffff:10.1.1.1")));  // IPv4-mapped: the IPv4 range holds
  EXPECT_TRUE(AddressSet::Parse({"0.0.0.0/0"})->Contains(A("8.8.8.8")));
  EXPECT_TRUE(AddressSet::Parse({"10.1.2.3/31"})->Contains(A("10.1.2.2")));
  EXPECT_FALSE(AddressSet::Parse({"10.1.2.3/31"})->Contains(A("10.1.2.4")));
  for (const char* bad : {"proxy.local", "10.0.0.0/33", "10.0.0.0/", "10.0.0.0/x", "::/129", "1.2.3.4/0001"})
    EXPECT_FALSE(AddressSet::Parse({bad}).ok()) << bad;
}

TEST(ClientAddress, OnlyTrustedPeersNameTheirClient) {
  auto proxies = *AddressSet::Parse({"10.0.0.1", "10.0.0.2"});
  // From anyone else the header is ignored.
  EXPECT_EQ(ClientAddress(A("203.0.113.9"), "1.1.1.1", proxies), "203.0.113.9");
  // Through one proxy; through two; the client's own claims left of the first untrusted hop are ignored.
  EXPECT_EQ(ClientAddress(A("10.0.0.1"), "198.51.100.4", proxies), "198.51.100.4");
  EXPECT_EQ(ClientAddress(A("10.0.0.1"), "198.51.100.4, 10.0.0.2", proxies), "198.51.100.4");
  EXPECT_EQ(ClientAddress(A("10.0.0.1"), "6.6.6.6, 198.51.100.4", proxies), "198.51.100.4");
  EXPECT_EQ(ClientAddress(A("10.0.0.1"), "[2001:db8::5]:4711", proxies), "2001:db8::5");
  EXPECT_EQ(ClientAddress(A("10.0.0.1"), "198.51.100.4:999", proxies), "198.51.100.4");
  // No header, or garbage where the proxy should have written an address: the proxy itself.
  EXPECT_EQ(ClientAddress(A("10.0.0.1"), "", proxies), "10.0.0.1");
  EXPECT_EQ(ClientAddress(A("10.0.0.1"), "198.51.100.4, unknown", proxies), "10.0.0.1");
  // Every hop trusted: the leftmost one.
  EXPECT_EQ(ClientAddress(A("10.0.0.1"), "10.0.0.2", proxies), "10.0.0.2");
  EXPECT_EQ(ClientAddress(A("10.0.0.1"), "1.1.1.1", AddressSet()), "10.0.0.1");
}

TEST(PerKeyLimiter, CapsEachKeyOnItsOwn) {
  PerKeyLimiter l(2);
  EXPECT_TRUE(l.TryAcquire("a"));
  EXPECT_TRUE(l.TryAcquire("a"));
  EXPECT_FALSE(l.TryAcquire("a"));
  EXPECT_TRUE(l.TryAcquire("b"));
  l.Release("a");
  EXPECT_EQ(l.held("a"), 1u);
  EXPECT_TRUE(l.TryAcquire("a"));
  l.Release("a");
  l.Release("a");
  l.Release("a");  // more releases than holds change nothing
  EXPECT_EQ(l.held("a"), 0u);
  PerKeyLimiter unlimited(0);
  for (int i = 0; i < 1000; ++i) EXPECT_TRUE(unlimited.TryAcquire("a"));
}

}  // namespace
}  // namespace cairn::http
