#include "http/admission.h"

#include <gtest/gtest.h>

#include <thread>

namespace cairn::http {
namespace {

using namespace std::chrono_literals;

TEST(AdmissionGate, AdmitsUpToItsLimitAndReleasesWithTheLastCopy) {
  auto gate = std::make_shared<AdmissionGate>(2);
  auto a = gate->TryEnter();
  auto b = gate->TryEnter();
  ASSERT_TRUE(a && b);
  EXPECT_EQ(gate->TryEnter(), nullptr);  // nobody can be preempted: no holder said how
  std::shared_ptr<void> copy = a;
  a.reset();
  EXPECT_EQ(gate->TryEnter(), nullptr);
  copy.reset();
  EXPECT_EQ(gate->in_flight(), 1u);
  EXPECT_NE(gate->TryEnter(), nullptr);
}

TEST(AdmissionGate, AFullGatePreemptsItsSlowestBodyForANewcomer) {
  auto gate = std::make_shared<AdmissionGate>(2, 50ms, 1000);
  int preempted_fast = 0, preempted_slow = 0, preempted_done = 0;
  auto fast = gate->TryEnter();
  fast->OnPreempt([&] { ++preempted_fast; });
  auto slow = gate->TryEnter();
  slow->OnPreempt([&] { ++preempted_slow; });
  fast->AddBodyBytes(1 << 20);
  slow->AddBodyBytes(10);
  // Too young to give way.
  EXPECT_EQ(gate->TryEnter(), nullptr);
  std::this_thread::sleep_for(100ms);
  auto newcomer = gate->TryEnter();
  ASSERT_NE(newcomer, nullptr);
  EXPECT_EQ(preempted_slow, 1);
  EXPECT_EQ(preempted_fast, 0);  // above the rate that gives way
  EXPECT_EQ(gate->preempted(), 1u);
  EXPECT_EQ(gate->in_flight(), 3u);  // until the preempted request ends
  // A preempted holder is not preempted twice, and a body that has arrived never gives way.
  newcomer->OnPreempt([&] { ++preempted_done; });
  newcomer->BodyComplete();
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(gate->TryEnter(), nullptr);
  EXPECT_EQ(preempted_slow, 1);
  EXPECT_EQ(preempted_done, 0);
  slow.reset();
  EXPECT_EQ(gate->in_flight(), 2u);
}

}  // namespace
}  // namespace cairn::http
