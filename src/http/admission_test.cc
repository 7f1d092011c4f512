#include "http/admission.h"

#include <gtest/gtest.h>

#include <numeric>
#include <string_view>
#include <thread>
#include <vector>

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

// Tickets of one tenant, each saying how it is preempted (counted in `preempted[i]`).
struct Holders {
  std::vector<std::shared_ptr<AdmissionGate::Ticket>> tickets;
  std::vector<int> preempted;

  bool Enter(AdmissionGate& gate, std::string_view tenant) {
    auto t = gate.TryEnter(tenant);
    if (!t) return false;
    preempted.push_back(0);
    t->OnPreempt([this, i = preempted.size() - 1] { ++preempted[i]; });
    tickets.push_back(std::move(t));
    return true;
  }
  int total() const { return std::accumulate(preempted.begin(), preempted.end(), 0); }
};

TEST(AdmissionGate, ALoneTenantMayFillTheGate) {
  auto gate = std::make_shared<AdmissionGate>(4, 10s);
  Holders a;
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(a.Enter(*gate, "a"));
  EXPECT_FALSE(a.Enter(*gate, "a"));  // its own tickets do not give way to it
  EXPECT_EQ(a.total(), 0);
  EXPECT_EQ(gate->fair_preempted(), 0u);
}

TEST(AdmissionGate, ANewTenantAtAFullGateTakesTheHogsNewestIncompleteTicket) {
  auto gate = std::make_shared<AdmissionGate>(4, 10s);
  Holders a, b;
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(a.Enter(*gate, "a"));
  a.tickets[3]->BodyComplete();  // the newest has its body: it no longer gives way
  ASSERT_TRUE(b.Enter(*gate, "b"));
  EXPECT_EQ(a.preempted, (std::vector<int>{0, 0, 1, 0}));
  EXPECT_EQ(gate->fair_preempted(), 1u);
  EXPECT_EQ(gate->preempted(), 0u);
  EXPECT_EQ(gate->in_flight(), 5u);  // until the preempted request ends
  // Shares are 2 each: b (1) still gets one more from a (3 not preempted), then neither gets more.
  ASSERT_TRUE(b.Enter(*gate, "b"));
  EXPECT_EQ(a.preempted, (std::vector<int>{0, 1, 1, 0}));
  EXPECT_FALSE(b.Enter(*gate, "b"));
  EXPECT_FALSE(a.Enter(*gate, "a"));
  EXPECT_EQ(gate->fair_preempted(), 2u);
  // The preempted requests end: their slots are free again, and count for nobody.
  a.tickets[1].reset();
  a.tickets[2].reset();
  EXPECT_EQ(gate->in_flight(), 4u);
  EXPECT_FALSE(b.Enter(*gate, "b"));
  a.tickets[0].reset();
  EXPECT_TRUE(b.Enter(*gate, "b"));  // a free slot: anyone enters, past its share
}

TEST(AdmissionGate, ATenantAtItsFairShareCannotPreempt) {
  auto gate = std::make_shared<AdmissionGate>(4, 10s);
  Holders a, b;
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(a.Enter(*gate, "a"));
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(b.Enter(*gate, "b"));
  EXPECT_FALSE(b.Enter(*gate, "b"));
  EXPECT_FALSE(a.Enter(*gate, "a"));
  // A third tenant's share is 4 / 3 = 1, and each of the others holds 2: one gives way, then no more.
  Holders c;
  EXPECT_TRUE(c.Enter(*gate, "c"));
  EXPECT_EQ(a.total() + b.total(), 1);
  EXPECT_FALSE(c.Enter(*gate, "c"));
  EXPECT_EQ(gate->fair_preempted(), 1u);
}

TEST(AdmissionGate, CompleteBodiesAndTicketsWithoutAWayToEndThemAreNeverPreempted) {
  auto gate = std::make_shared<AdmissionGate>(3, 10s);
  Holders a;
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(a.Enter(*gate, "a"));
  for (auto& t : a.tickets) t->BodyComplete();
  auto unstoppable = gate->TryEnter("a");  // no OnPreempt: the server did not say how to end it
  ASSERT_NE(unstoppable, nullptr);
  EXPECT_EQ(gate->TryEnter("b"), nullptr);
  EXPECT_EQ(a.total(), 0);
  EXPECT_EQ(gate->fair_preempted(), 0u);
}

TEST(AdmissionGate, ThreeTenantsShareTheGateInThirds) {
  auto gate = std::make_shared<AdmissionGate>(6, 10s);
  Holders a, b, c;
  for (int i = 0; i < 6; ++i) ASSERT_TRUE(a.Enter(*gate, "a"));
  // b's share is 3 while two tenants hold tickets, then 2 once c holds one too.
  ASSERT_TRUE(b.Enter(*gate, "b"));
  ASSERT_TRUE(c.Enter(*gate, "c"));
  ASSERT_TRUE(b.Enter(*gate, "b"));
  ASSERT_TRUE(c.Enter(*gate, "c"));
  EXPECT_FALSE(b.Enter(*gate, "b"));
  EXPECT_FALSE(c.Enter(*gate, "c"));
  EXPECT_FALSE(a.Enter(*gate, "a"));
  // a gave up its four newest tickets and keeps its share, the two oldest.
  EXPECT_EQ(a.preempted, (std::vector<int>{0, 0, 1, 1, 1, 1}));
  EXPECT_EQ(gate->fair_preempted(), 4u);
  EXPECT_EQ(b.total() + c.total(), 0);
}

TEST(AdmissionGate, SlowBodiesStillGiveWayToATenantAtItsShare) {
  auto gate = std::make_shared<AdmissionGate>(2, 50ms, 1000);
  Holders a, b;
  ASSERT_TRUE(a.Enter(*gate, "a"));
  ASSERT_TRUE(b.Enter(*gate, "b"));
  a.tickets[0]->AddBodyBytes(1 << 20);
  b.tickets[0]->AddBodyBytes(10);
  EXPECT_FALSE(a.Enter(*gate, "a"));  // at its share (1), and nobody slow enough yet
  std::this_thread::sleep_for(100ms);
  EXPECT_TRUE(a.Enter(*gate, "a"));  // b's body is the slow one, whoever it belongs to
  EXPECT_EQ(b.preempted, std::vector<int>{1});
  EXPECT_EQ(a.preempted, (std::vector<int>{0, 0}));
  EXPECT_EQ(gate->preempted(), 1u);
  EXPECT_EQ(gate->fair_preempted(), 0u);
}

}  // namespace
}  // namespace cairn::http
