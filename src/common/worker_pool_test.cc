#include "common/worker_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <set>
#include <thread>

namespace cairn {
namespace {

TEST(WorkerPool, RunsEveryTaskExactlyOnce) {
  WorkerPool pool(3);
  std::vector<std::atomic<int>> hits(1000);
  pool.ParallelFor(hits.size(), [&](size_t i) { hits[i]++; });
  for (const auto& h : hits) EXPECT_EQ(h.load(), 1);
}

TEST(WorkerPool, UsesSeveralThreads) {
  WorkerPool pool(2);
  std::mutex mu;
  std::set<std::thread::id> ids;
  pool.ParallelFor(64, [&](size_t) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    std::lock_guard lock(mu);
    ids.insert(std::this_thread::get_id());
  });
  EXPECT_GE(ids.size(), 2u);
}

TEST(WorkerPool, ConcurrentCallersAllComplete) {
  WorkerPool pool(2);
  std::atomic<int> total{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < 8; ++c) {
    callers.emplace_back([&] {
      for (int round = 0; round < 50; ++round) pool.ParallelFor(17, [&](size_t) { total++; });
    });
  }
  for (auto& t : callers) t.join();
  EXPECT_EQ(total.load(), 8 * 50 * 17);
}

TEST(WorkerPool, ZeroWorkersRunsOnTheCaller) {
  WorkerPool pool(0);
  int n = 0;
  pool.ParallelFor(5, [&](size_t) { ++n; });
  EXPECT_EQ(n, 5);
}

}  // namespace
}  // namespace cairn
