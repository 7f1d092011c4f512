// People on an index (SQLite; the index suite holds both backends to the same contract): the names accounts
// may take, a token's text and what is kept of it, grants, roles, and the refusals of each.
#include "people/people_service.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <memory>

#include "common/hex.h"
#include "index/open_index.h"
#include "people/directory.h"
#include "people/names.h"
#include "people/people_check.h"
#include "people/reach.h"
#include "people/token_text.h"

namespace cairn::people {
namespace {

namespace fs = std::filesystem;

// Who the tests' changes are by, as the audit log records them.
const Actor kBy{.actor = "cli:test", .token_id = "", .client = ""};

TEST(Names, AccountsTakeHubNamesThatNoPageUses) {
  for (const char* good : {"alice", "Acme-Corp", "a.b_c", "x9"})
    EXPECT_TRUE(AccountNameAllowed(good)) << good;
  for (const char* bad : {"", "-a", "a-", "a--b", "a..b", "a/b", "a b", "models", "api", "settings",
                          "Settings", "OAUTH", "login", "organizations", "admin"}) {
    EXPECT_FALSE(AccountNameAllowed(bad)) << bad;
  }
  EXPECT_TRUE(ValidName("settings")) << "a repository may have a name no account may";
  EXPECT_FALSE(AccountNameAllowed(std::string(97, 'a')));
}

TEST(TokenTexts, AreParsedExactlyAndKeptAsAHash) {
  auto made = NewTokenText();
  ASSERT_TRUE(made.ok());
  const std::string text = made->text();
  EXPECT_EQ(text.size(), 6u + 16 + 1 + 64);
  auto parsed = ParseTokenText(text);
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(parsed->id, made->id);
  EXPECT_EQ(parsed->secret, made->secret);
  EXPECT_NE(NewTokenText()->id, made->id);
  for (const std::string& bad :
       {std::string(), text.substr(0, text.size() - 1), text + "0", "hf_" + text.substr(6),
        "Cairn_" + text.substr(6), text.substr(0, 22) + "-" + text.substr(23),
        text.substr(0, 30) + "G" + text.substr(31), std::string("eyJhbGciOiJIUzI1NiJ9.e30.x")}) {
    EXPECT_FALSE(ParseTokenText(bad).has_value()) << bad;
  }
  const auto hash = SecretHash(made->secret);
  EXPECT_EQ(hash.size(), 32u);
  EXPECT_TRUE(SameHash(hash, SecretHash(made->secret)));
  EXPECT_FALSE(SameHash(hash, SecretHash(NewTokenText()->secret)));
  EXPECT_EQ(HexEncode(SecretHash("abc")), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

// A token reaches the user's namespace and organizations, capped by its role; a fine-grained one only what
// it lists, and never beyond the user's own rights.
TEST(Reach, IsTheUsersRightsCappedByTheToken) {
  const auto org = [](std::string name, bool disabled = false) {
    AccountRecord a;
    a.kind = AccountKind::kOrg;
    a.name = std::move(name);
    a.disabled = disabled;
    return a;
  };
  Person p;
  p.user = "bob";
  p.role = TokenRole::kWrite;
  p.orgs = {
      {org("acme"), OrgRole::kWrite}, {org("labs"), OrgRole::kRead}, {org("gone", true), OrgRole::kAdmin}};
  using V = std::vector<ScopeAccess>;
  EXPECT_EQ(ReachOf(p), (V{{"bob", Access::kAdmin}, {"acme", Access::kWrite}, {"labs", Access::kRead}}));
  p.role = TokenRole::kRead;
  EXPECT_EQ(ReachOf(p), (V{{"bob", Access::kRead}, {"acme", Access::kRead}, {"labs", Access::kRead}}));
  p.role = TokenRole::kFineGrained;
  p.grants = {{"acme/model", true},      // written as far as bob may: write
              {"labs", true},            // bob only reads labs
              {"datasets/bob/d", true},  // bob's own: everything
              {"evil", true},            // not bob's at all
              {"gone/x", true},          // a disabled organization
              {"bob/readme", false}};    // read only
  EXPECT_EQ(ReachOf(p), (V{{"acme/model", Access::kWrite},
                           {"labs", Access::kRead},
                           {"datasets/bob/d", Access::kAdmin},
                           {"bob/readme", Access::kRead}}));
  EXPECT_EQ(AccessOfRole(OrgRole::kAdmin), Access::kAdmin);
}

TEST(Grants, RoundTripAndRefuseWhatIsNoScope) {
  const std::vector<Grant> grants = {{"alice/model", true}, {"acme", false}, {"datasets/acme/data", true}};
  const std::string text = FormatGrants(grants);
  EXPECT_EQ(text, "w alice/model\nr acme\nw datasets/acme/data");
  auto parsed = ParseGrants(text);
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  EXPECT_EQ(*parsed, grants);
  EXPECT_TRUE(ParseGrants("")->empty());
  for (const char* bad :
       {"x alice", "w  alice", "w", "r a/b/c", "r models/a/b", "r ../x", "r alice/", "w a\nq b"}) {
    EXPECT_EQ(ParseGrants(bad).error().code, ErrorCode::kMalformed) << bad;
  }
}

class PeopleServiceTest : public ::testing::Test {
 protected:
  PeopleServiceTest() {
    dir_ = fs::temp_directory_path() / ("cairn-people-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    auto opened = index::OpenIndex("sqlite:" + (dir_ / "index.db").string());
    EXPECT_TRUE(opened.ok());
    index_ = std::move(*opened);
    people_ = std::make_unique<PeopleService>(*index_, clock_);
  }
  ~PeopleServiceTest() override {
    people_.reset();
    index_.reset();
    fs::remove_all(dir_);
  }
  PeopleServiceTest(const PeopleServiceTest&) = delete;
  PeopleServiceTest& operator=(const PeopleServiceTest&) = delete;

  fs::path dir_;
  TestClock clock_{1'800'000'000};
  std::unique_ptr<index::Index> index_;
  std::unique_ptr<PeopleService> people_;
};

TEST_F(PeopleServiceTest, UsersOrganizationsAndRoles) {
  ASSERT_TRUE(people_->CreateUser(kBy, "alice", "Alice Ångström", true).ok());
  ASSERT_TRUE(people_->CreateUser(kBy, "bob", "", false).ok());
  ASSERT_TRUE(people_->CreateOrg(kBy, "acme", "ACME Inc.").ok());
  EXPECT_EQ(people_->CreateUser(kBy, "ACME", "", false).error().code, ErrorCode::kConflict);
  EXPECT_EQ(people_->CreateUser(kBy, "settings", "", false).error().code, ErrorCode::kMalformed);
  EXPECT_EQ(people_->CreateUser(kBy, "carol", "bad\x1b[31m", false).error().code, ErrorCode::kMalformed);
  EXPECT_EQ(people_->CreateUser(kBy, "carol", std::string(101, 'x'), false).error().code,
            ErrorCode::kMalformed);
  EXPECT_EQ(people_->Find("alice", std::nullopt)->created_at, 1'800'000'000);
  EXPECT_EQ(people_->Find("acme", AccountKind::kUser).error().code, ErrorCode::kNotFound);

  ASSERT_TRUE(people_->SetRole(kBy, "acme", "alice", OrgRole::kAdmin).ok());
  ASSERT_TRUE(people_->SetRole(kBy, "acme", "bob", OrgRole::kRead).ok());
  EXPECT_EQ(people_->SetRole(kBy, "alice", "bob", OrgRole::kRead).error().code, ErrorCode::kNotFound);
  EXPECT_EQ(people_->SetRole(kBy, "acme", "nobody", OrgRole::kRead).error().code, ErrorCode::kNotFound);
  auto members = people_->Members("acme");
  ASSERT_TRUE(members.ok()) << members.error().message;
  ASSERT_EQ(members->size(), 2u);
  EXPECT_EQ((*members)[0].account.name, "alice");
  EXPECT_EQ((*members)[0].role, OrgRole::kAdmin);
  auto orgs = people_->Organizations("bob");
  ASSERT_TRUE(orgs.ok());
  ASSERT_EQ(orgs->size(), 1u);
  EXPECT_EQ((*orgs)[0].account.name, "acme");
  EXPECT_EQ((*orgs)[0].role, OrgRole::kRead);
  ASSERT_TRUE(people_->SetRole(kBy, "acme", "bob", std::nullopt).ok());
  EXPECT_TRUE(people_->Organizations("bob")->empty());

  ASSERT_TRUE(people_->SetDisabled(kBy, "bob", true).ok());
  EXPECT_TRUE(people_->Find("bob", AccountKind::kUser)->disabled);
  EXPECT_EQ(people_->SetDisabled(kBy, "acme", true).error().code, ErrorCode::kNotFound);
  EXPECT_EQ(people_->List(AccountKind::kUser)->size(), 2u);
  EXPECT_EQ(people_->List(std::nullopt)->size(), 3u);
  for (const char* role : {"read", "write", "admin"}) EXPECT_EQ(OrgRoleName(*ParseOrgRole(role)), role);
  EXPECT_FALSE(ParseOrgRole("owner").has_value());
}

TEST_F(PeopleServiceTest, ATokenHasAnOwnerALifeAndIsKeptAsAHash) {
  ASSERT_TRUE(people_->CreateUser(kBy, "alice", "", false).ok());
  ASSERT_TRUE(people_->CreateOrg(kBy, "acme", "").ok());
  auto made = people_->CreateToken(kBy, "alice", "laptop", TokenRole::kWrite, {}, std::chrono::hours(24));
  ASSERT_TRUE(made.ok()) << made.error().message;
  auto parsed = ParseTokenText(made->text);
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(parsed->id, made->record.id);
  auto stored = index_->FindToken(made->record.id);
  ASSERT_TRUE(stored.ok());
  EXPECT_TRUE(SameHash(stored->secret_hash, SecretHash(parsed->secret)));
  EXPECT_EQ(HexEncode(stored->secret_hash).find(parsed->secret), std::string::npos);
  EXPECT_EQ(stored->expires_at, 1'800'000'000 + 24 * 3600);
  EXPECT_EQ(stored->name, "laptop");

  auto fine = people_->CreateToken(kBy, "alice", "ci", TokenRole::kFineGrained, {{"alice/model", true}},
                                   std::chrono::hours(1));
  ASSERT_TRUE(fine.ok()) << fine.error().message;
  EXPECT_EQ(index_->FindToken(fine->record.id)->grants, "w alice/model");

  const auto refused = [&](std::string_view owner, std::string_view name, TokenRole role,
                           const std::vector<Grant>& grants, std::chrono::seconds life) {
    auto r = people_->CreateToken(kBy, owner, name, role, grants, life);
    return r.ok() ? ErrorCode::kIo : r.error().code;  // kIo: it was made, which none of these may be
  };
  EXPECT_EQ(refused("acme", "x", TokenRole::kRead, {}, std::chrono::hours(1)), ErrorCode::kNotFound);
  EXPECT_EQ(refused("nobody", "x", TokenRole::kRead, {}, std::chrono::hours(1)), ErrorCode::kNotFound);
  EXPECT_EQ(refused("alice", "", TokenRole::kRead, {}, std::chrono::hours(1)), ErrorCode::kMalformed);
  EXPECT_EQ(refused("alice", "x", TokenRole::kRead, {}, std::chrono::seconds(0)), ErrorCode::kMalformed);
  EXPECT_EQ(
      refused("alice", "x", TokenRole::kRead, {}, PeopleService::kMaxTokenLife + std::chrono::seconds(1)),
      ErrorCode::kMalformed);
  EXPECT_EQ(refused("alice", "x", TokenRole::kFineGrained, {}, std::chrono::hours(1)), ErrorCode::kMalformed);
  EXPECT_EQ(refused("alice", "x", TokenRole::kWrite, {{"acme", false}}, std::chrono::hours(1)),
            ErrorCode::kMalformed);
  EXPECT_EQ(refused("alice", "x", TokenRole::kFineGrained, {{"a/b/c", false}}, std::chrono::hours(1)),
            ErrorCode::kMalformed);
  EXPECT_EQ(people_->Tokens("alice")->size(), 2u);

  clock_.Advance(10);
  auto revoked = people_->Revoke(kBy, made->record.id);
  ASSERT_TRUE(revoked.ok() && *revoked);
  EXPECT_EQ(index_->FindToken(made->record.id)->revoked_at, 1'800'000'010);
  EXPECT_FALSE(*people_->Revoke(kBy, made->record.id));
  EXPECT_EQ(people_->Revoke(kBy, "0000000000000000").error().code, ErrorCode::kNotFound);
}

// A node's directory: a person's token verifies to whom it speaks for; what another node changes (a
// revocation, a disabled user, a membership) reaches it at its next refresh, and a token made there at once.
// Given the node's directory, the service refreshes it after each change: a token made works on this node at
// once, a revoked one stops, a disabled user's session ends, without waiting for the periodic refresh.
TEST_F(PeopleServiceTest, AServiceGivenTheDirectoryMakesItSeeEachChangeAtOnce) {
  Directory directory(*index_, clock_);
  ASSERT_TRUE(directory.Refresh().ok());
  PeopleService service(*index_, clock_, &directory);
  auto alice = service.CreateUser(kBy, "alice", "", false);
  ASSERT_TRUE(alice.ok()) << alice.error().message;
  EXPECT_TRUE(directory.SessionPerson(alice->id, clock_.UnixSeconds() + 60, "s").ok()) << "a new user";
  auto made = service.CreateToken(kBy, "alice", "ci", TokenRole::kRead, {}, std::chrono::hours(1));
  ASSERT_TRUE(made.ok()) << made.error().message;
  ASSERT_TRUE(directory.HolderOf(made->text).has_value()) << "known without a refresh of its own";
  ASSERT_TRUE(service.Revoke(kBy, made->record.id).ok());
  EXPECT_FALSE(directory.Verify(made->text).ok()) << "revoked here at once";
  ASSERT_TRUE(service.SetDisabled(kBy, "alice", true).ok());
  EXPECT_EQ(directory.SessionPerson(alice->id, clock_.UnixSeconds() + 60, "s").error().code,
            ErrorCode::kUnauthorized);
}

TEST_F(PeopleServiceTest, TheDirectoryVerifiesTokensAndLearnsOfChangesAtItsRefresh) {
  ASSERT_TRUE(people_->CreateUser(kBy, "alice", "", false).ok());
  ASSERT_TRUE(people_->CreateOrg(kBy, "acme", "").ok());
  ASSERT_TRUE(people_->SetRole(kBy, "acme", "alice", OrgRole::kWrite).ok());
  auto token = people_->CreateToken(kBy, "alice", "laptop", TokenRole::kWrite, {}, std::chrono::hours(1));
  ASSERT_TRUE(token.ok());
  Directory directory(*index_, clock_);
  ASSERT_TRUE(directory.Refresh().ok());

  auto person = directory.Verify(token->text);
  ASSERT_TRUE(person.ok()) << person.error().message;
  EXPECT_EQ(person->user, "alice");
  EXPECT_EQ(person->token_id, token->record.id);
  EXPECT_EQ(person->role, TokenRole::kWrite);
  EXPECT_EQ(person->expires, 1'800'000'000 + 3600);
  ASSERT_EQ(person->orgs.size(), 1u);
  EXPECT_EQ(person->orgs[0].first.name, "acme");
  EXPECT_EQ(person->orgs[0].second, OrgRole::kWrite);

  std::string wrong = token->text;
  wrong.back() = wrong.back() == '0' ? '1' : '0';
  for (const std::string& bad :
       {wrong, std::string("cairn_"), std::string("eyJhbGciOiJIUzI1NiJ9.e30.x"), NewTokenText()->text()}) {
    auto refused = directory.Verify(bad);
    ASSERT_FALSE(refused.ok()) << bad;
    EXPECT_EQ(refused.error().code, ErrorCode::kUnauthorized);
    if (bad.size() > 23) {
      EXPECT_EQ(refused.error().message.find(bad.substr(23)), std::string::npos) << "no secret in the words";
    }
  }

  // Another node, on the same index, changes people; this one learns of it when it refreshes.
  auto other_index = index::OpenIndex("sqlite:" + (dir_ / "index.db").string());
  ASSERT_TRUE(other_index.ok());
  PeopleService other(**other_index, clock_);
  ASSERT_TRUE(other.SetRole(kBy, "acme", "alice", OrgRole::kAdmin).ok());
  ASSERT_TRUE(directory.Refresh().ok());
  EXPECT_EQ(directory.Verify(token->text)->orgs.at(0).second, OrgRole::kAdmin);
  ASSERT_TRUE(*other.Revoke(kBy, token->record.id));
  EXPECT_TRUE(directory.Verify(token->text).ok()) << "until the refresh (the documented bound)";
  ASSERT_TRUE(directory.Refresh().ok());
  EXPECT_EQ(directory.Verify(token->text).error().code, ErrorCode::kUnauthorized);

  // A token made on the other node is known at once; a disabled owner's tokens are refused after a refresh.
  clock_.Advance(1);
  auto fresh = other.CreateToken(kBy, "alice", "ci", TokenRole::kRead, {}, std::chrono::hours(1));
  ASSERT_TRUE(fresh.ok());
  ASSERT_TRUE(directory.Verify(fresh->text).ok());
  ASSERT_TRUE(other.SetDisabled(kBy, "alice", true).ok());
  ASSERT_TRUE(directory.Refresh().ok());
  EXPECT_EQ(directory.Verify(fresh->text).error().message,
            "token " + fresh->record.id + ": its owner is disabled");
  ASSERT_TRUE(other.SetDisabled(kBy, "alice", false).ok());
  ASSERT_TRUE(directory.Refresh().ok());
  EXPECT_TRUE(directory.Verify(fresh->text).ok());

  // Unknown tokens refresh the directory a bounded number of times a second: several tokens made elsewhere in
  // a row are each known at once, and past the bound a made-up token refreshes nothing until the next second.
  clock_.Advance(1);
  for (int i = 0; i < 3; ++i) {
    auto made = other.CreateToken(kBy, "alice", "row", TokenRole::kRead, {}, std::chrono::hours(1));
    ASSERT_TRUE(made.ok());
    EXPECT_TRUE(directory.Verify(made->text).ok()) << i;
  }
  const int64_t before = directory.generation();
  for (int i = 3; i < Directory::kUnknownRefreshesPerSecond; ++i) {
    EXPECT_FALSE(directory.Verify(NewTokenText()->text()).ok());
  }
  auto later = other.CreateToken(kBy, "alice", "later", TokenRole::kRead, {}, std::chrono::hours(1));
  ASSERT_TRUE(later.ok());
  EXPECT_FALSE(directory.Verify(later->text).ok()) << "no refresh past the bound within the second";
  EXPECT_EQ(directory.generation(), before);
  clock_.Advance(1);
  EXPECT_TRUE(directory.Verify(later->text).ok());

  // Expired: refused without any refresh.
  clock_.Advance(3600);
  EXPECT_EQ(directory.Verify(later->text).error().message, "token " + later->record.id + " has expired");
}

TEST_F(PeopleServiceTest, UsesAreNotedCoarsely) {
  ASSERT_TRUE(people_->CreateUser(kBy, "alice", "", false).ok());
  auto token = people_->CreateToken(kBy, "alice", "laptop", TokenRole::kRead, {}, std::chrono::hours(2));
  ASSERT_TRUE(token.ok());
  Directory directory(*index_, clock_);
  ASSERT_TRUE(directory.Refresh().ok());
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(directory.Verify(token->text).ok());
  auto uses = directory.TakeUses();
  ASSERT_EQ(uses.size(), 1u);
  EXPECT_EQ(uses[0], std::make_pair(token->record.id, int64_t{1'800'000'000}));
  EXPECT_TRUE(directory.TakeUses().empty());
  clock_.Advance(Directory::kUseResolution);
  ASSERT_TRUE(directory.Verify(token->text).ok());
  uses = directory.TakeUses();
  ASSERT_EQ(uses.size(), 1u);
  ASSERT_TRUE(index_->NoteTokenUses(uses).ok());
  EXPECT_EQ(index_->FindToken(token->record.id)->last_used_at, 1'800'000'000 + Directory::kUseResolution);
}

// fsck's people check: what cairn writes passes clean; rows written behind its back (the index's own calls,
// which check nothing of names, hashes, grants or claims) are each found, as damage or as a notice.
TEST_F(PeopleServiceTest, TheCheckFindsWhatCairnNeverWrites) {
  ASSERT_TRUE(people_->CreateUser(kBy, "ann", "", false).ok());
  ASSERT_TRUE(people_->CreateOrg(kBy, "acme", "").ok());
  ASSERT_TRUE(people_->SetRole(kBy, "acme", "ann", OrgRole::kAdmin).ok());
  ASSERT_TRUE(people_->CreateToken(kBy, "ann", "ci", TokenRole::kWrite, {}, std::chrono::hours(1)).ok());
  auto clean = CheckPeople(*index_);
  ASSERT_TRUE(clean.ok()) << clean.error().message;
  EXPECT_TRUE(clean->findings.empty());
  EXPECT_EQ(clean->accounts, 2u);
  EXPECT_EQ(clean->members, 1u);
  EXPECT_EQ(clean->tokens, 1u);

  const auto bad =
      index_->CreateAccount({.kind = index::AccountKind::kUser, .name = "bad name", .created_at = 1});
  const auto lonely =
      index_->CreateAccount({.kind = index::AccountKind::kOrg, .name = "lonely", .created_at = 1});
  ASSERT_TRUE(bad.ok() && lonely.ok());
  const index::TokenRecord bad_grants{.id = "00000000000000aa",
                                      .owner = bad->id,
                                      .name = "x",
                                      .role = TokenRole::kFineGrained,
                                      .grants = "z nothing",
                                      .secret_hash = std::vector<uint8_t>(32, 1),
                                      .created_at = 1,
                                      .expires_at = 2'000'000'000};
  ASSERT_TRUE(index_->CreateToken(bad_grants, nullptr).ok());
  const index::PublisherRecord loose{.id = "tp_00000000000000aa",
                                     .owner = lonely->id,
                                     .repo = "acme/model",
                                     .issuer = "http://ci.example",
                                     .audience = "cairn",
                                     .claims = "",
                                     .role = TokenRole::kWrite,
                                     .created_at = 1};
  ASSERT_TRUE(index_->CreatePublisher(loose, nullptr).ok());

  auto found = CheckPeople(*index_);
  ASSERT_TRUE(found.ok()) << found.error().message;
  EXPECT_TRUE(found->damaged());
  std::vector<std::string> seen;
  for (const auto& f : found->findings) {
    seen.push_back(f.what + " " + f.id + (f.damage ? "" : " (notice)") + ": " + f.detail.substr(0, 20));
  }
  EXPECT_EQ(seen, (std::vector<std::string>{
                      "account bad name: a name outside the H",
                      "account lonely (notice): an organization with",
                      "token 00000000000000aa: its grants do not pa",
                      "publisher tp_00000000000000aa: its repository acme/",
                      "publisher tp_00000000000000aa: its issuer is not ht",
                      "publisher tp_00000000000000aa: it requires no claim",
                  }));
}

}  // namespace
}  // namespace cairn::people
