// The people slice of the Index contract (index.h's PeopleIndex), run against every backend: one space of
// names for users and organizations, members and their roles, tokens kept by hash and revoked once, and the
// generations a node's refresh reads changes by, including from another node on the same database.
#include <gtest/gtest.h>

#include <atomic>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "index/failures.h"
#include "index/open_index.h"
#include "index/testing/backend_suite.h"

namespace cairn::index {
namespace {

using fixtures::Backend;
using fixtures::BackendName;
using fixtures::BackendTest;
using fixtures::Refused;

class PeopleTest : public BackendTest {
 protected:
  AccountRecord Make(AccountKind kind, const std::string& name) {
    auto made = index_->CreateAccount(
        {.kind = kind, .name = name, .full_name = "", .is_operator = false, .created_at = 1'700'000'000});
    EXPECT_TRUE(made.ok()) << made.error().message;
    return made.ok() ? *made : AccountRecord{};
  }
  AccountRecord User(const std::string& name) { return Make(AccountKind::kUser, name); }
  AccountRecord Org(const std::string& name) { return Make(AccountKind::kOrg, name); }

  static TokenRecord Token(const std::string& id, int64_t owner) {
    return TokenRecord{.id = id,
                       .owner = owner,
                       .name = "laptop",
                       .role = TokenRole::kWrite,
                       .grants = "",
                       .secret_hash = std::vector<uint8_t>(32, 7),
                       .created_at = 1'700'000'000,
                       .expires_at = 1'800'000'000};
  }
};

TEST_P(PeopleTest, UsersAndOrganizationsShareOneSpaceOfNamesWithoutCase) {
  Open();
  const AccountRecord alice = User("Alice");
  const AccountRecord acme = Org("acme");
  EXPECT_NE(alice.id, acme.id);
  EXPECT_GT(acme.changed, alice.changed);
  EXPECT_TRUE(Refused(index_->CreateAccount({.kind = AccountKind::kOrg, .name = "ALICE"}).error(),
                      AccountExists("ALICE")));
  EXPECT_TRUE(Refused(index_->CreateAccount({.kind = AccountKind::kUser, .name = "Acme"}).error(),
                      AccountExists("Acme")));
  auto found = index_->FindAccount("alice");
  ASSERT_TRUE(found.ok()) << found.error().message;
  EXPECT_EQ(found->id, alice.id);
  EXPECT_EQ(found->name, "Alice") << "a name is kept as it was given";
  EXPECT_EQ(found->kind, AccountKind::kUser);
  EXPECT_EQ(found->created_at, 1'700'000'000);
  EXPECT_TRUE(Refused(index_->FindAccount("bob").error(), AccountNotIndexed("bob")));

  for (const char* name : {"bob", "carol", "dave"}) User(name);
  auto users = index_->ListAccounts(AccountKind::kUser, std::nullopt, 2);
  ASSERT_TRUE(users.ok()) << users.error().message;
  ASSERT_EQ(users->size(), 2u);
  EXPECT_EQ((*users)[0].name, "Alice");
  EXPECT_EQ((*users)[1].name, "bob");
  users = index_->ListAccounts(AccountKind::kUser, std::string_view("bob"), 10);
  ASSERT_TRUE(users.ok());
  ASSERT_EQ(users->size(), 2u);
  EXPECT_EQ((*users)[0].name, "carol");
  auto orgs = index_->ListAccounts(AccountKind::kOrg, std::nullopt, 10);
  ASSERT_TRUE(orgs.ok());
  ASSERT_EQ(orgs->size(), 1u);
  EXPECT_EQ((*orgs)[0].name, "acme");
  EXPECT_EQ(index_->ListAccounts(std::nullopt, std::nullopt, 10)->size(), 5u);
  EXPECT_EQ(index_->ListAccounts(std::nullopt, std::nullopt, PeopleIndex::kMaxListed + 1).error().code,
            ErrorCode::kMalformed);
}

TEST_P(PeopleTest, AnAccountChangesOnlyWhatIsGiven) {
  Open();
  const AccountRecord alice = User("alice");
  ASSERT_TRUE(index_->UpdateAccount(alice.id, {.full_name = "Alice A.", .is_operator = true}).ok());
  ASSERT_TRUE(index_->UpdateAccount(alice.id, {.disabled = true}).ok());
  auto now = index_->FindAccount("alice");
  ASSERT_TRUE(now.ok());
  EXPECT_EQ(now->full_name, "Alice A.");
  EXPECT_TRUE(now->is_operator);
  EXPECT_TRUE(now->disabled);
  EXPECT_GT(now->changed, alice.changed);
  ASSERT_TRUE(index_->UpdateAccount(alice.id, {.disabled = false}).ok());
  EXPECT_FALSE(index_->FindAccount("alice")->disabled);
  EXPECT_TRUE(index_->FindAccount("alice")->is_operator);
  EXPECT_TRUE(Refused(index_->UpdateAccount(alice.id + 100, {.disabled = true}).error(),
                      AccountIdNotIndexed(alice.id + 100)));
}

TEST_P(PeopleTest, MembersJoinAnOrganizationWithARole) {
  Open();
  const AccountRecord alice = User("alice");
  const AccountRecord bob = User("bob");
  const AccountRecord acme = Org("acme");
  const AccountRecord umbrella = Org("umbrella");
  ASSERT_TRUE(index_->SetMember(acme.id, alice.id, OrgRole::kAdmin, nullptr).ok());
  ASSERT_TRUE(index_->SetMember(acme.id, bob.id, OrgRole::kRead, nullptr).ok());
  ASSERT_TRUE(index_->SetMember(umbrella.id, bob.id, OrgRole::kWrite, nullptr).ok());
  auto members = index_->ListMembers(AccountKind::kOrg, acme.id);
  ASSERT_TRUE(members.ok()) << members.error().message;
  ASSERT_EQ(members->size(), 2u);
  EXPECT_EQ((*members)[0].user, alice.id);
  EXPECT_EQ((*members)[0].role, OrgRole::kAdmin);
  EXPECT_EQ((*members)[1].role, OrgRole::kRead);
  auto of_bob = index_->ListMembers(AccountKind::kUser, bob.id);
  ASSERT_TRUE(of_bob.ok());
  ASSERT_EQ(of_bob->size(), 2u);
  EXPECT_EQ((*of_bob)[0].org, acme.id);
  EXPECT_EQ((*of_bob)[1].org, umbrella.id);

  ASSERT_TRUE(index_->SetMember(acme.id, bob.id, OrgRole::kWrite, nullptr).ok());  // a new role
  EXPECT_EQ(index_->ListMembers(AccountKind::kOrg, acme.id)->at(1).role, OrgRole::kWrite);
  ASSERT_TRUE(index_->SetMember(acme.id, bob.id, std::nullopt, nullptr).ok());  // removed
  EXPECT_EQ(index_->ListMembers(AccountKind::kOrg, acme.id)->size(), 1u);
  EXPECT_EQ(index_->ListMembers(AccountKind::kUser, bob.id)->size(), 1u);
  EXPECT_TRUE(index_->SetMember(acme.id, bob.id, std::nullopt, nullptr).ok())
      << "removing no member changes nothing";

  // Accounts by id: those that exist, a page at most.
  const std::vector<int64_t> ids{bob.id, 9999, acme.id};
  auto named = index_->GetAccounts(ids);
  ASSERT_TRUE(named.ok()) << named.error().message;
  std::set<std::string> names;
  for (const auto& a : *named) names.insert(a.name);
  EXPECT_EQ(names, (std::set<std::string>{"acme", "bob"}));
  EXPECT_EQ(index_->GetAccounts(std::vector<int64_t>(PeopleIndex::kMaxListed + 1, bob.id)).error().code,
            ErrorCode::kMalformed);

  // An organization joins no organization, a user has no members, and ids must name accounts.
  EXPECT_TRUE(
      Refused(index_->SetMember(acme.id, umbrella.id, OrgRole::kRead, nullptr).error(), NoSuchMembership()));
  EXPECT_TRUE(
      Refused(index_->SetMember(alice.id, bob.id, OrgRole::kRead, nullptr).error(), NoSuchMembership()));
  EXPECT_TRUE(Refused(index_->SetMember(acme.id, 9999, OrgRole::kRead, nullptr).error(), NoSuchMembership()));
  EXPECT_TRUE(
      Refused(index_->SetMember(9999, alice.id, OrgRole::kRead, nullptr).error(), NoSuchMembership()));
}

// The last admin stays: a change that would take an organization's only admin away is refused, decided in
// its transaction: two admins demoting each other at once, through two connections (two nodes), leave one.
TEST_P(PeopleTest, AnOrganizationKeepsItsLastAdmin) {
  Open();
  const AccountRecord alice = User("alice");
  const AccountRecord bob = User("bob");
  const AccountRecord acme = Org("acme");
  ASSERT_TRUE(index_->SetMember(acme.id, bob.id, OrgRole::kWrite, nullptr).ok()) << "it had no admin to keep";
  ASSERT_TRUE(index_->SetMember(acme.id, alice.id, OrgRole::kAdmin, nullptr).ok());
  EXPECT_TRUE(Refused(index_->SetMember(acme.id, alice.id, OrgRole::kWrite, nullptr).error(), LastAdmin()));
  EXPECT_TRUE(Refused(index_->SetMember(acme.id, alice.id, std::nullopt, nullptr).error(), LastAdmin()));
  ASSERT_TRUE(index_->SetMember(acme.id, bob.id, std::nullopt, nullptr).ok()) << "others come and go";
  ASSERT_TRUE(index_->SetMember(acme.id, alice.id, OrgRole::kAdmin, nullptr).ok()) << "no change";

  auto other = OpenIndex(url_);
  ASSERT_TRUE(other.ok()) << other.error().message;
  for (int round = 0; round < 10; ++round) {
    ASSERT_TRUE(index_->SetMember(acme.id, bob.id, OrgRole::kAdmin, nullptr).ok());
    Status first = Ok{}, second = Ok{};
    std::thread a([&] { first = index_->SetMember(acme.id, alice.id, OrgRole::kRead, nullptr); });
    std::thread b([&] { second = (*other)->SetMember(acme.id, bob.id, OrgRole::kRead, nullptr); });
    a.join();
    b.join();
    EXPECT_NE(first.ok(), second.ok()) << "round " << round << ": exactly one demotion stands";
    const Status& lost = first.ok() ? second : first;
    if (!lost.ok()) {
      EXPECT_TRUE(Refused(lost.error(), LastAdmin())) << lost.error().message;
    }
    auto members = index_->ListMembers(AccountKind::kOrg, acme.id);
    ASSERT_TRUE(members.ok());
    int admins = 0;
    for (const auto& m : *members) admins += m.role == OrgRole::kAdmin ? 1 : 0;
    ASSERT_EQ(admins, 1) << "round " << round;
    // The one demoted is admin again for the next round.
    const int64_t demoted = first.ok() ? alice.id : bob.id;
    ASSERT_TRUE(index_->SetMember(acme.id, demoted, OrgRole::kAdmin, nullptr).ok());
  }
}

TEST_P(PeopleTest, TokensAreKeptByHashListedAndRevokedOnce) {
  Open();
  const AccountRecord alice = User("alice");
  const AccountRecord bob = User("bob");
  const AccountRecord acme = Org("acme");
  ASSERT_TRUE(index_->CreateToken(Token("t1", alice.id), nullptr).ok());
  TokenRecord fine = Token("t2", alice.id);
  fine.role = TokenRole::kFineGrained;
  fine.grants = "w alice/model";
  ASSERT_TRUE(index_->CreateToken(fine, nullptr).ok());
  ASSERT_TRUE(index_->CreateToken(Token("t3", bob.id), nullptr).ok());
  EXPECT_TRUE(Refused(index_->CreateToken(Token("t1", bob.id), nullptr).error(), TokenExists("t1")));
  EXPECT_TRUE(
      Refused(index_->CreateToken(Token("t4", acme.id), nullptr).error(), TokenOwnerNotIndexed(acme.id)));
  EXPECT_TRUE(Refused(index_->CreateToken(Token("t4", 9999), nullptr).error(), TokenOwnerNotIndexed(9999)));
  TokenRecord short_hash = Token("t5", alice.id);
  short_hash.secret_hash.resize(31);
  EXPECT_EQ(index_->CreateToken(short_hash, nullptr).error().code, ErrorCode::kMalformed);

  auto t2 = index_->FindToken("t2");
  ASSERT_TRUE(t2.ok()) << t2.error().message;
  EXPECT_EQ(t2->owner, alice.id);
  EXPECT_EQ(t2->role, TokenRole::kFineGrained);
  EXPECT_EQ(t2->grants, "w alice/model");
  EXPECT_EQ(t2->secret_hash, std::vector<uint8_t>(32, 7));
  EXPECT_EQ(t2->expires_at, 1'800'000'000);
  EXPECT_EQ(t2->revoked_at, 0);
  EXPECT_TRUE(Refused(index_->FindToken("t9").error(), TokenNotIndexed("t9")));

  auto of_alice = index_->ListTokens(alice.id, std::nullopt, 10);
  ASSERT_TRUE(of_alice.ok()) << of_alice.error().message;
  ASSERT_EQ(of_alice->size(), 2u);
  EXPECT_EQ((*of_alice)[0].id, "t1");
  auto page = index_->ListTokens(std::nullopt, std::string_view("t1"), 1);
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->size(), 1u);
  EXPECT_EQ((*page)[0].id, "t2");
  EXPECT_EQ(index_->ListTokens(std::nullopt, std::nullopt, 10)->size(), 3u);

  auto revoked = index_->RevokeToken("t1", 1'750'000'000, nullptr);
  ASSERT_TRUE(revoked.ok() && *revoked);
  revoked = index_->RevokeToken("t1", 1'760'000'000, nullptr);
  ASSERT_TRUE(revoked.ok());
  EXPECT_FALSE(*revoked) << "a token is revoked once";
  EXPECT_EQ(index_->FindToken("t1")->revoked_at, 1'750'000'000);
  EXPECT_TRUE(Refused(index_->RevokeToken("t9", 1, nullptr).error(), TokenNotIndexed("t9")));

  // Uses keep the latest time, change no generation, and skip what is unknown.
  const int64_t before = index_->FindToken("t3")->changed;
  ASSERT_TRUE(index_->NoteTokenUses({{"t3", 1'700'000'500}, {"t9", 5}}).ok());
  ASSERT_TRUE(index_->NoteTokenUses({{"t3", 1'700'000'100}}).ok());
  EXPECT_EQ(index_->FindToken("t3")->last_used_at, 1'700'000'500);
  EXPECT_EQ(index_->FindToken("t3")->changed, before);
}

// Trust policies: kept as given for an account (a user or an organization), listed, revoked once (with their
// audit event only when that changes something), and read by a refresh like tokens.
TEST_P(PeopleTest, TrustPoliciesAreKeptListedRevokedOnceAndRefreshed) {
  Open();
  const AccountRecord acme = Org("acme");
  const AccountRecord alice = User("alice");
  const int64_t seen = index_->PeopleChangedSince(0)->generation;
  const PublisherRecord policy{.id = "tp_1",
                               .owner = acme.id,
                               .repo = "acme/model",
                               .issuer = "https://ci.example",
                               .audience = "hub",
                               .claims = "repository=acme/ci",
                               .role = TokenRole::kWrite,
                               .created_at = 1'700'000'000};
  const AuditActor by{.actor = "alice", .token_id = "", .client = ""};
  const AuditEvent made = by.Event(1'700'000'000, "publisher.create", "acme", "trust policy tp_1");
  ASSERT_TRUE(index_->CreatePublisher(policy, &made).ok());
  PublisherRecord mine = policy;
  mine.id = "tp_2";
  mine.owner = alice.id;
  mine.repo = "";
  mine.role = TokenRole::kRead;
  ASSERT_TRUE(index_->CreatePublisher(mine, nullptr).ok());
  EXPECT_TRUE(Refused(index_->CreatePublisher(policy, nullptr).error(), PublisherExists("tp_1")));
  mine.id = "tp_3";
  mine.owner = 999;
  EXPECT_TRUE(Refused(index_->CreatePublisher(mine, nullptr).error(), PublisherOwnerNotIndexed(999)));
  mine.owner = alice.id;
  mine.role = TokenRole::kFineGrained;
  EXPECT_EQ(index_->CreatePublisher(mine, nullptr).error().code, ErrorCode::kMalformed);
  auto found = index_->FindPublisher("tp_1");
  ASSERT_TRUE(found.ok()) << found.error().message;
  EXPECT_EQ(found->owner, acme.id);
  EXPECT_EQ(found->claims, "repository=acme/ci");
  EXPECT_TRUE(Refused(index_->FindPublisher("tp_3").error(), PublisherNotIndexed("tp_3")));

  auto of_acme = index_->ListPublishers(acme.id);
  ASSERT_TRUE(of_acme.ok());
  ASSERT_EQ(of_acme->size(), 1u);
  EXPECT_EQ((*of_acme)[0].claims, "repository=acme/ci");
  EXPECT_EQ((*of_acme)[0].repo, "acme/model");
  EXPECT_EQ(index_->ListPublishers(std::nullopt)->size(), 2u);
  auto changes = index_->PeopleChangedSince(seen);
  ASSERT_TRUE(changes.ok());
  ASSERT_EQ(changes->publishers.size(), 2u);
  EXPECT_EQ(changes->publishers[0].issuer, "https://ci.example");

  const AuditEvent gone = by.Event(1'700'000'100, "publisher.revoke", "acme", "trust policy tp_1");
  ASSERT_TRUE(*index_->RevokePublisher("tp_1", 1'700'000'100, &gone));
  EXPECT_FALSE(*index_->RevokePublisher("tp_1", 1'700'000'200, &gone)) << "revoked once";
  EXPECT_TRUE(Refused(index_->RevokePublisher("tp_9", 1, nullptr).error(), PublisherNotIndexed("tp_9")));
  auto later = index_->PeopleChangedSince(changes->generation);
  ASSERT_EQ(later->publishers.size(), 1u);
  EXPECT_EQ(later->publishers[0].revoked_at, 1'700'000'100);
  AuditFilter filter;
  filter.ns = "acme";
  auto events = index_->ListAudit(filter, std::nullopt, AuditIndex::kMaxListed);
  ASSERT_TRUE(events.ok());
  std::vector<std::string> actions;
  for (const auto& e : *events) actions.push_back(e.action);
  EXPECT_EQ(actions, (std::vector<std::string>{"publisher.revoke", "publisher.create"}));
}

TEST_P(PeopleTest, ARefreshReadsEachChangeOnce) {
  Open();
  auto none = index_->PeopleChangedSince(0);
  ASSERT_TRUE(none.ok()) << none.error().message;
  EXPECT_EQ(none->generation, 0);
  EXPECT_TRUE(none->accounts.empty());

  const AccountRecord alice = User("alice");
  const AccountRecord acme = Org("acme");
  ASSERT_TRUE(index_->SetMember(acme.id, alice.id, OrgRole::kWrite, nullptr).ok());
  ASSERT_TRUE(index_->CreateToken(Token("t1", alice.id), nullptr).ok());
  auto all = index_->PeopleChangedSince(0);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->accounts.size(), 2u);
  EXPECT_EQ(all->members.size(), 1u);
  EXPECT_EQ(all->tokens.size(), 1u);
  const int64_t seen = all->generation;
  EXPECT_GT(seen, 0);

  auto nothing = index_->PeopleChangedSince(seen);
  ASSERT_TRUE(nothing.ok());
  EXPECT_EQ(nothing->generation, seen);
  EXPECT_TRUE(nothing->accounts.empty() && nothing->members.empty() && nothing->tokens.empty());

  ASSERT_TRUE(index_->RevokeToken("t1", 1'750'000'000, nullptr).ok());
  ASSERT_TRUE(index_->SetMember(acme.id, alice.id, std::nullopt, nullptr).ok());
  ASSERT_TRUE(index_->UpdateAccount(alice.id, {.disabled = true}).ok());
  ASSERT_TRUE(index_->NoteTokenUses({{"t1", 1'750'000'001}}).ok());
  auto later = index_->PeopleChangedSince(seen);
  ASSERT_TRUE(later.ok());
  EXPECT_GT(later->generation, seen);
  ASSERT_EQ(later->tokens.size(), 1u);
  EXPECT_EQ(later->tokens[0].revoked_at, 1'750'000'000);
  ASSERT_EQ(later->members.size(), 1u);
  EXPECT_FALSE(later->members[0].role.has_value()) << "a removal reaches the reader";
  ASSERT_EQ(later->accounts.size(), 1u);
  EXPECT_TRUE(later->accounts[0].disabled);
}

// Two nodes on one database: what one changes, the other's refresh reads; changes made at once from both
// take distinct generations, and a reader that keeps up misses none of them.
TEST_P(PeopleTest, AnotherNodesChangesReachARefresh) {
  Open();
  auto other = OpenIndex(url_);
  ASSERT_TRUE(other.ok()) << other.error().message;
  const AccountRecord alice = User("alice");
  auto seen = (*other)->PeopleChangedSince(0);
  ASSERT_TRUE(seen.ok()) << seen.error().message;
  ASSERT_EQ(seen->accounts.size(), 1u);

  constexpr int kEach = 20;
  std::atomic<int> failures{0};
  std::set<std::string> read;
  int64_t generation = seen->generation;
  std::atomic<bool> done{false};
  std::thread reader([&] {
    while (true) {
      const bool last = done.load();
      auto changes = (*other)->PeopleChangedSince(generation);
      if (!changes.ok()) {
        ++failures;
        return;
      }
      for (const auto& a : changes->accounts) read.insert(a.name);
      generation = changes->generation;
      if (last) return;
    }
  });
  std::vector<std::thread> writers;
  for (int w = 0; w < 2; ++w) {
    writers.emplace_back([&, w] {
      Index& on = w == 0 ? *index_ : **other;
      for (int i = 0; i < kEach; ++i) {
        const std::string name = "u" + std::to_string(w) + "-" + std::to_string(i);
        if (!on.CreateAccount({.kind = AccountKind::kUser, .name = name}).ok()) ++failures;
      }
    });
  }
  for (auto& t : writers) t.join();
  done = true;
  reader.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(read.size(), 2u * kEach) << "every account made on either node was read once";
  auto all = index_->PeopleChangedSince(0);
  ASSERT_TRUE(all.ok());
  std::set<int64_t> generations;
  for (const auto& a : all->accounts) generations.insert(a.changed);
  EXPECT_EQ(generations.size(), all->accounts.size()) << "each change its own generation";
}

TEST_P(PeopleTest, PasswordsAndSessionsSignPeopleIn) {
  Open();
  const AccountRecord alice = User("alice");
  const AccountRecord acme = Org("acme");
  EXPECT_EQ(index_->GetPassword(alice.id).value(), std::nullopt);
  EXPECT_TRUE(
      Refused(index_->SetPassword(acme.id, "$argon2id$x", nullptr).error(), AccountIdNotIndexed(acme.id)))
      << "an organization signs nobody in";
  EXPECT_TRUE(Refused(index_->SetPassword(999, "$argon2id$x", nullptr).error(), AccountIdNotIndexed(999)));
  ASSERT_TRUE(index_->SetPassword(alice.id, "$argon2id$one", nullptr).ok());
  EXPECT_EQ(index_->GetPassword(alice.id).value(), std::optional<std::string>("$argon2id$one"));

  auto session = [&](const std::string& id, int64_t user, int64_t expires) {
    return SessionRecord{.id = id,
                         .secret_hash = std::vector<uint8_t>(32, 9),
                         .user = user,
                         .created_at = 1'700'000'000,
                         .expires_at = expires,
                         .method = "password",
                         .client = "10.0.0.1"};
  };
  AuditEvent signed_in;
  signed_in.at = 1'700'000'000, signed_in.actor = "alice", signed_in.action = "session.create";
  ASSERT_TRUE(index_->CreateSession(session("s1", alice.id, 1'800'000'000), &signed_in).ok());
  EXPECT_EQ(index_->CreateSession(session("s1", alice.id, 1'800'000'000), nullptr).error().code,
            ErrorCode::kConflict);
  EXPECT_TRUE(Refused(index_->CreateSession(session("s2", acme.id, 1'800'000'000), nullptr).error(),
                      AccountIdNotIndexed(acme.id)));
  SessionRecord unhashed = session("s3", alice.id, 1'800'000'000);
  unhashed.secret_hash.clear();
  EXPECT_EQ(index_->CreateSession(unhashed, nullptr).error().code, ErrorCode::kMalformed);
  auto found = index_->FindSession("s1");
  ASSERT_TRUE(found.ok() && found->has_value());
  EXPECT_EQ(**found, session("s1", alice.id, 1'800'000'000));
  EXPECT_EQ(index_->FindSession("nope").value(), std::nullopt);

  // A sign-out ends one session, with its event; a password change ends them all.
  ASSERT_TRUE(index_->CreateSession(session("s4", alice.id, 1'800'000'000), nullptr).ok());
  AuditEvent out = signed_in;
  out.action = "session.end";
  EXPECT_TRUE(index_->DeleteSession("s4", &out).value());
  EXPECT_FALSE(index_->DeleteSession("s4", &out).value());
  ASSERT_TRUE(index_->SetPassword(alice.id, "$argon2id$two", nullptr).ok());
  EXPECT_EQ(index_->FindSession("s1").value(), std::nullopt);
  auto events = index_->ListAudit({}, std::nullopt, 10);
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 2u) << "one event each: the sign-in and the one sign-out that ended something";
  EXPECT_EQ((*events)[0].action, "session.end");

  // Disabling the user ends their sessions; enabling them again revives none.
  ASSERT_TRUE(index_->CreateSession(session("d", alice.id, 1'800'000'000), nullptr).ok());
  AccountChange enable;
  enable.disabled = false;
  AccountChange disable;
  disable.disabled = true;
  ASSERT_TRUE(index_->UpdateAccount(alice.id, enable).ok());
  EXPECT_TRUE(index_->FindSession("d").value().has_value()) << "enabling ends nothing";
  ASSERT_TRUE(index_->UpdateAccount(alice.id, disable).ok());
  ASSERT_TRUE(index_->UpdateAccount(alice.id, enable).ok());
  EXPECT_EQ(index_->FindSession("d").value(), std::nullopt);

  // Ending a user's sessions; pruning the expired ones.
  for (const char* id : {"a", "b"})
    ASSERT_TRUE(index_->CreateSession(session(id, alice.id, 1'800'000'000), nullptr).ok());
  ASSERT_TRUE(index_->CreateSession(session("old", alice.id, 1'600'000'000), nullptr).ok());
  EXPECT_EQ(index_->PruneSessions(1'700'000'000).value(), 1u);
  EXPECT_EQ(index_->DeleteSessionsOf(alice.id, &out).value(), 2u);
  EXPECT_EQ(index_->DeleteSessionsOf(alice.id, &out).value(), 0u);
  ASSERT_TRUE(index_->SetPassword(alice.id, std::nullopt, nullptr).ok());
  EXPECT_EQ(index_->GetPassword(alice.id).value(), std::nullopt);
}

TEST_P(PeopleTest, DeviceGrantsAreDecidedOnceAndIssuedOnce) {
  Open();
  const AccountRecord alice = User("alice");
  const DeviceGrantRecord grant{.device_hash = std::vector<uint8_t>(32, 5),
                                .user_code = "BCDF-GHJK",
                                .client_id = "client",
                                .created_at = 1'700'000'000,
                                .expires_at = 1'700'000'900};
  ASSERT_TRUE(index_->CreateDeviceGrant(grant).ok());
  EXPECT_EQ(index_->CreateDeviceGrant(grant).error().code, ErrorCode::kConflict);
  DeviceGrantRecord same_code = grant;
  same_code.device_hash = std::vector<uint8_t>(32, 6);
  EXPECT_EQ(index_->CreateDeviceGrant(same_code).error().code, ErrorCode::kConflict)
      << "user codes are unique";
  EXPECT_EQ(index_->FindDeviceGrant("BCDF-GHJK").value(), std::optional<DeviceGrantRecord>(grant));
  EXPECT_EQ(index_->FindDeviceGrant("XXXX-XXXX").value(), std::nullopt);

  // Each poll answers the grant as it was and records its time.
  auto polled = index_->PollDeviceGrant(grant.device_hash, 1'700'000'010);
  ASSERT_TRUE(polled.ok() && polled->has_value());
  EXPECT_EQ((*polled)->polled_at, 0);
  polled = index_->PollDeviceGrant(grant.device_hash, 1'700'000'020);
  EXPECT_EQ((*polled)->polled_at, 1'700'000'010);
  EXPECT_EQ(index_->PollDeviceGrant(std::vector<uint8_t>(32, 9), 1'700'000'020).value(), std::nullopt);

  // Issued only once approved, and once.
  EXPECT_FALSE(index_->IssueDeviceGrant(grant.device_hash).value());
  EXPECT_FALSE(index_->DecideDeviceGrant("BCDF-GHJK", alice.id, true, 1'700'000'900, nullptr).value())
      << "an expired grant is decided no more";
  EXPECT_TRUE(index_->DecideDeviceGrant("BCDF-GHJK", alice.id, true, 1'700'000'030, nullptr).value());
  EXPECT_FALSE(index_->DecideDeviceGrant("BCDF-GHJK", alice.id, false, 1'700'000'031, nullptr).value());
  auto decided = index_->FindDeviceGrant("BCDF-GHJK").value();
  EXPECT_EQ(decided->state, DeviceGrantState::kApproved);
  EXPECT_EQ(decided->user, alice.id);
  EXPECT_TRUE(index_->IssueDeviceGrant(grant.device_hash).value());
  EXPECT_FALSE(index_->IssueDeviceGrant(grant.device_hash).value());
  EXPECT_EQ(index_->PruneSessions(1'700'000'901).value(), 1u);
  EXPECT_EQ(index_->FindDeviceGrant("BCDF-GHJK").value(), std::nullopt);
}

// A provider's subject is linked to one user at most; linking and unlinking write their events, a refused
// link writes none.
TEST_P(PeopleTest, SubjectsAreLinkedToOneUserAndUnlinkedOnce) {
  Open();
  const AccountRecord alice = User("alice");
  const AccountRecord acme = Org("acme");
  const std::string iss = "https://sso.example";
  EXPECT_EQ(index_->FindIdentity(iss, "a-1").value(), std::nullopt);
  AuditEvent linked;
  linked.action = "identity.link";
  ASSERT_TRUE(index_->LinkIdentity({iss, "a-1", alice.id, 1'700'000'000}, &linked).ok());
  EXPECT_EQ(index_->FindIdentity(iss, "a-1").value(), std::optional<int64_t>(alice.id));
  EXPECT_EQ(index_->FindIdentity("https://other.example", "a-1").value(), std::nullopt) << "per issuer";
  EXPECT_EQ(index_->LinkIdentity({iss, "a-1", alice.id, 1'700'000'001}, &linked).error().code,
            ErrorCode::kConflict);
  EXPECT_TRUE(
      Refused(index_->LinkIdentity({iss, "o-1", acme.id, 1}, &linked).error(), AccountIdNotIndexed(acme.id)))
      << "an organization signs nobody in";
  ASSERT_TRUE(index_->LinkIdentity({iss, "a-2", alice.id, 1'700'000'002}, nullptr).ok());
  auto all = index_->IdentitiesOf(alice.id).value();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0], (IdentityRecord{iss, "a-1", alice.id, 1'700'000'000}));
  EXPECT_EQ(all[1].subject, "a-2");
  AuditEvent unlinked;
  unlinked.action = "identity.unlink";
  EXPECT_TRUE(index_->UnlinkIdentity(iss, "a-1", &unlinked).value());
  EXPECT_FALSE(index_->UnlinkIdentity(iss, "a-1", &unlinked).value());
  EXPECT_EQ(index_->FindIdentity(iss, "a-1").value(), std::nullopt);
  AuditFilter filter;
  auto events = index_->ListAudit(filter, std::nullopt, 100).value();
  EXPECT_EQ(std::count_if(events.begin(), events.end(),
                          [](const AuditEvent& e) { return e.action == "identity.link"; }),
            1);
  EXPECT_EQ(std::count_if(events.begin(), events.end(),
                          [](const AuditEvent& e) { return e.action == "identity.unlink"; }),
            1);
}

INSTANTIATE_TEST_SUITE_P(Backends, PeopleTest, ::testing::Values(Backend::kSqlite, Backend::kPostgres),
                         BackendName);

}  // namespace
}  // namespace cairn::index
