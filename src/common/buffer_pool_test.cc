#include "common/buffer_pool.h"

#include <gtest/gtest.h>

#include <cstring>
#include <set>

namespace cairn {
namespace {

TEST(BufferPool, BuffersAreWritableWholeAndHugePageAligned) {
  BufferPool pool(3 << 20, 1);
  auto b = pool.Take();
  ASSERT_NE(b, nullptr);
  ASSERT_EQ(b->bytes().size(), size_t{3} << 20);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b->data()) % (2 << 20), 0U);
  std::memset(b->data(), 0xab, b->bytes().size());  // every byte is mapped (ASan would also catch overruns)
  EXPECT_EQ(b->bytes().back(), 0xab);
}

TEST(BufferPool, KeepsAtMostKeepBuffersForReuse) {
  BufferPool pool(1 << 20, 2);
  std::set<uint8_t*> first;
  {
    auto a = pool.Take();
    auto b = pool.Take();
    auto c = pool.Take();
    ASSERT_TRUE(a && b && c);
    EXPECT_EQ(pool.kept(), 0U);
    first = {a->data(), b->data(), c->data()};
    EXPECT_EQ(first.size(), 3U);  // distinct while in use
    a->data()[0] = 42;
  }
  EXPECT_EQ(pool.kept(), 2U);  // the third was unmapped
  auto again1 = pool.Take();
  auto again2 = pool.Take();
  EXPECT_EQ(pool.kept(), 0U);
  EXPECT_TRUE(first.contains(again1->data()));
  EXPECT_TRUE(first.contains(again2->data()));
  EXPECT_NE(again1->data(), again2->data());
}

TEST(BufferPool, KeepZeroUnmapsEveryBuffer) {
  BufferPool pool(1 << 20, 0);
  { auto a = pool.Take(); }
  EXPECT_EQ(pool.kept(), 0U);
}

}  // namespace
}  // namespace cairn
