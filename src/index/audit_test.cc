// The audit slice of the Index contract (index.h's AuditIndex), run against every backend: a change's event
// is written with the change and only when the change is made (a name taken, a compare-and-swap lost, a role
// it had, a token revoked already: no event), listed newest first with filters and pages, and pruned by age.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "index/failures.h"
#include "index/testing/backend_suite.h"

namespace cairn::index {
namespace {

using fixtures::Backend;
using fixtures::BackendName;
using fixtures::BackendTest;

const AuditActor kAlice{.actor = "alice", .token_id = "0123456789abcdef", .client = "192.0.2.1:5000"};

std::vector<uint8_t> Key(const std::string& s) {
  return {s.begin(), s.end()};
}

class AuditTest : public BackendTest {
 protected:
  std::vector<std::string> Actions(const AuditFilter& filter = {}) {
    auto events = index_->ListAudit(filter, std::nullopt, AuditIndex::kMaxListed);
    EXPECT_TRUE(events.ok()) << events.error().message;
    std::vector<std::string> out;
    for (const auto& e : events.ok() ? *events : std::vector<AuditEvent>{}) out.push_back(e.action);
    return out;
  }
  NewRepo Repo(const std::string& name, int64_t at) {
    NewRepo r;
    r.ns = "acme";
    r.name = name;
    r.created_at = at;
    r.scope = "hub:" + name;
    r.read_scope = "hub:" + name + "#read";
    r.objects = {{Key("c1"), 3, Key("first")}, {Key("c2"), 3, Key("second")}};
    r.refs = {{RefKind::kBranch, "main", Key("c1")}};
    r.audit = kAlice.Event(at, "repo.create", "acme", "acme/" + name, "private");
    return r;
  }
};

TEST_P(AuditTest, AChangesEventIsWrittenWithItAndOnlyWhenItIsMade) {
  Open();
  auto repo = index_->CreateRepo(Repo("m", 100));
  ASSERT_TRUE(repo.ok()) << repo.error().message;
  EXPECT_FALSE(index_->CreateRepo(Repo("m", 101)).ok()) << "the name is taken";

  RefUpdate move{.kind = RefKind::kBranch,
                 .name = "main",
                 .expected = Key("c1"),
                 .target = Key("c2"),
                 .audit = kAlice.Event(102, "commit", "acme", "acme/m", "main c1..c2")};
  ASSERT_TRUE(index_->UpdateRef(repo->id, move).ok());
  move.audit->at = 103;
  EXPECT_EQ(index_->UpdateRef(repo->id, move).error().code, ErrorCode::kConflict) << "the branch moved";
  RepoChange settings;
  settings.is_private = true;
  settings.audit = kAlice.Event(104, "repo.settings", "acme", "acme/m");
  ASSERT_TRUE(index_->UpdateRepo(repo->id, settings).ok());

  auto org = index_->CreateAccount({.kind = AccountKind::kOrg,
                                    .name = "acme",
                                    .created_at = 105,
                                    .audit = kAlice.Event(105, "org.create", "acme", "org acme")});
  auto bob = index_->CreateAccount({.kind = AccountKind::kUser,
                                    .name = "bob",
                                    .created_at = 106,
                                    .audit = kAlice.Event(106, "user.create", "bob", "user bob")});
  ASSERT_TRUE(org.ok() && bob.ok());
  const auto member = kAlice.Event(107, "member.set", "acme", "member bob", "write");
  ASSERT_TRUE(index_->SetMember(org->id, bob->id, OrgRole::kWrite, &member).ok());
  ASSERT_TRUE(index_->SetMember(org->id, bob->id, OrgRole::kWrite, &member).ok()) << "no change: no event";
  const TokenRecord token{.id = "fedcba9876543210",
                          .owner = bob->id,
                          .name = "ci",
                          .role = TokenRole::kRead,
                          .grants = "",
                          .secret_hash = std::vector<uint8_t>(32, 1),
                          .created_at = 108,
                          .expires_at = 1'000'000};
  const auto made = kAlice.Event(108, "token.create", "bob", "token fedcba9876543210");
  ASSERT_TRUE(index_->CreateToken(token, &made).ok());
  EXPECT_FALSE(index_->CreateToken(token, &made).ok()) << "the id exists";
  const auto revoke = kAlice.Event(109, "token.revoke", "", "token fedcba9876543210");
  ASSERT_TRUE(*index_->RevokeToken(token.id, 109, &revoke));
  ASSERT_FALSE(*index_->RevokeToken(token.id, 110, &revoke)) << "revoked already: no event";
  AccountChange disable{.disabled = true, .audit = kAlice.Event(111, "user.disable", "bob", "user bob")};
  ASSERT_TRUE(index_->UpdateAccount(bob->id, disable).ok());
  const auto gone = kAlice.Event(112, "repo.delete", "acme", "acme/m");
  ASSERT_TRUE(index_->DeleteRepo(repo->id, &gone).ok());
  EXPECT_FALSE(index_->DeleteRepo(repo->id, &gone).ok());
  ASSERT_TRUE(index_->AppendAudit(kAlice.Event(113, "gc.run", "", "")).ok());

  EXPECT_EQ(Actions(), (std::vector<std::string>{"gc.run", "repo.delete", "user.disable", "token.revoke",
                                                 "token.create", "member.set", "user.create", "org.create",
                                                 "repo.settings", "commit", "repo.create"}));
  auto newest = index_->ListAudit({}, std::nullopt, 1);
  ASSERT_TRUE(newest.ok());
  ASSERT_EQ(newest->size(), 1u);
  AuditEvent want = kAlice.Event(113, "gc.run", "", "");
  want.id = (*newest)[0].id;
  EXPECT_EQ((*newest)[0], want) << "every field kept";
}

// A bucket's batch and a quota's changes carry their events the same way: written with the change, and not
// for a repository that is not there or a quota that was not.
TEST_P(AuditTest, BucketBatchesAndQuotasAreRecordedWithTheirChanges) {
  Open();
  auto bucket = index_->CreateRepo(Repo("b", 200));
  ASSERT_TRUE(bucket.ok()) << bucket.error().message;
  const auto batch = kAlice.Event(201, "bucket.batch", "acme", "buckets/acme/b", "1 put, 0 deleted");
  const BucketFile f{"x.bin", xet::FileHash{}, 0, 0, std::nullopt, 201};
  ASSERT_TRUE(index_->ChangeBucket(bucket->id, {{"x.bin", f}}, &batch).ok());
  EXPECT_EQ(index_->ChangeBucket(999999, {{"x.bin", f}}, &batch).error().code, ErrorCode::kNotFound);
  const auto set = kAlice.Event(202, "quota.set", "acme", "quota acme", "limit 1000 bytes");
  ASSERT_TRUE(index_->SetQuotaLimit("acme", 1000, &set).ok());
  const auto removed = kAlice.Event(203, "quota.remove", "acme", "quota acme");
  ASSERT_TRUE(*index_->DeleteQuota("acme", &removed));
  EXPECT_FALSE(*index_->DeleteQuota("acme", &removed)) << "none left: no event";
  EXPECT_EQ(Actions({.since = 201}), (std::vector<std::string>{"quota.remove", "quota.set", "bucket.batch"}));
}

TEST_P(AuditTest, EventsAreFilteredPagedAndPruned) {
  Open();
  const AuditActor bob{.actor = "bob", .token_id = "", .client = ""};
  for (int i = 0; i < 10; ++i) {
    const AuditActor& who = i % 2 == 0 ? kAlice : bob;
    ASSERT_TRUE(index_
                    ->AppendAudit(who.Event(1000 + i, "commit", i < 5 ? "acme" : "labs",
                                            "acme/m" + std::to_string(i % 3)))
                    .ok());
  }
  EXPECT_EQ(Actions({.actor = "bob"}).size(), 5u);
  EXPECT_EQ(Actions({.ns = "labs"}).size(), 5u);
  EXPECT_EQ(Actions({.target = "acme/m0"}).size(), 4u);
  EXPECT_EQ(Actions({.since = 1007}).size(), 3u);
  EXPECT_EQ(Actions({.since = 1002, .actor = "alice", .ns = "acme"}).size(), 2u);

  // Pages: newest first, each older than the last one read.
  std::vector<int64_t> ats;
  std::optional<int64_t> before;
  for (;;) {
    auto page = index_->ListAudit({}, before, 3);
    ASSERT_TRUE(page.ok());
    for (const auto& e : *page) ats.push_back(e.at);
    if (page->size() < 3) break;
    before = page->back().id;
  }
  EXPECT_EQ(ats, (std::vector<int64_t>{1009, 1008, 1007, 1006, 1005, 1004, 1003, 1002, 1001, 1000}));
  EXPECT_EQ(index_->ListAudit({}, std::nullopt, AuditIndex::kMaxListed + 1).error().code,
            ErrorCode::kMalformed);

  auto pruned = index_->PruneAudit(1004);
  ASSERT_TRUE(pruned.ok());
  EXPECT_EQ(*pruned, 4u);
  EXPECT_EQ(Actions().size(), 6u);
  EXPECT_EQ(*index_->PruneAudit(1004), 0u);
}

// `since` over a long log (SQLite finds its bound by id: no index by time), an event a node with a clock a
// little behind wrote among later ones included; pruning keeps what is recent.
TEST_P(AuditTest, SinceAndPruningFindTheirBoundInALongLog) {
  Open();
  for (int i = 0; i < 1000; ++i) {
    ASSERT_TRUE(
        index_->AppendAudit(kAlice.Event(10'000 + int64_t{i} * 100, "commit", "acme", "acme/m")).ok());
    if (i == 600) {
      ASSERT_TRUE(index_->AppendAudit(kAlice.Event(69'950, "late", "acme", "acme/m")).ok());
    }
  }
  // Since 70,000: the events of i >= 600 (400), and the late one is not (69,950); since 69,900: one more
  // plus the late one.
  EXPECT_EQ(Actions({.since = 70'000}).size(), 400u);
  EXPECT_EQ(Actions({.since = 69'900}).size(), 402u);
  EXPECT_EQ(Actions({.since = 200'000}).size(), 0u);
  EXPECT_EQ(Actions({.since = 0}).size(), 1000u);  // at most a page: 1001 events
  auto pruned = index_->PruneAudit(60'000);        // i < 500
  ASSERT_TRUE(pruned.ok());
  EXPECT_EQ(*pruned, 500u);
  EXPECT_EQ(Actions({.since = 0}).size(), 501u);
}

INSTANTIATE_TEST_SUITE_P(Backends, AuditTest, ::testing::Values(Backend::kSqlite, Backend::kPostgres),
                         BackendName);

}  // namespace
}  // namespace cairn::index
