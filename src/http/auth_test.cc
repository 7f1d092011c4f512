#include "http/auth.h"

#include <gtest/gtest.h>

#include "http/test_util.h"

namespace cairn::http {
namespace {

using testing::MakeJwt;

const std::string kKey(64, 'k');

std::string Claims(int64_t exp, const std::string& perm = "write", const std::string& extra = "") {
  return R"({"scope":"org/repo","perm":")" + perm + R"(","exp":)" + std::to_string(exp) + extra + "}";
}

TEST(Auth, MintedTokensVerify) {
  Authenticator auth(kKey);
  auto read = MintToken(kKey, {"org/repo", Permission::kRead}, std::chrono::hours(1));
  ASSERT_TRUE(read.ok());
  auto who = auth.Authenticate("Bearer " + *read, Permission::kRead);
  ASSERT_TRUE(who.ok()) << who.error().message;
  EXPECT_EQ(who->scope, "org/repo");
  EXPECT_EQ(who->perm, Permission::kRead);

  auto write = MintToken(kKey, {"org/repo", Permission::kWrite}, std::chrono::hours(1));
  ASSERT_TRUE(write.ok());
  who = auth.Authenticate("bearer " + *write, Permission::kWrite);  // scheme is case-insensitive
  ASSERT_TRUE(who.ok()) << who.error().message;
  EXPECT_EQ(who->perm, Permission::kWrite);
  EXPECT_TRUE(auth.Authenticate("Bearer " + *write, Permission::kRead).ok());  // write includes read
}

// Tokens are checked against the authenticator's clock, remembered ones too: moving a test clock past a
// token's expiry expires it, with no sleeping; the principal says when it was checked.
TEST(Auth, TheAuthenticatorsClockDecides) {
  TestClock clock(1'900'000'000);
  Authenticator auth(kKey, &clock);
  EXPECT_EQ(auth.now(), 1'900'000'000);
  auto token = MintToken(kKey, {"s", Permission::kRead}, std::chrono::hours(1), auth.now());
  ASSERT_TRUE(token.ok());
  auto who = auth.Authenticate("Bearer " + *token, Permission::kRead);
  ASSERT_TRUE(who.ok()) << who.error().message;
  EXPECT_EQ(who->expires, 1'900'003'600);
  EXPECT_EQ(who->verified_at, 1'900'000'000);
  clock.Advance(3599);
  who = auth.Authenticate("Bearer " + *token, Permission::kRead);
  ASSERT_TRUE(who.ok());
  EXPECT_EQ(who->expires - who->verified_at, 1) << "one second of life left, by the same clock";
  clock.Advance(1);
  auto late = auth.Authenticate("Bearer " + *token, Permission::kRead);
  ASSERT_FALSE(late.ok());
  EXPECT_EQ(HttpStatusOf(late.error().code), 401u);
  EXPECT_NE(late.error().message.find("expired"), std::string::npos);
}

TEST(Auth, ReadTokenOnWriteCallIs403) {
  Authenticator auth(kKey);
  auto read = MintToken(kKey, {"s", Permission::kRead}, std::chrono::hours(1));
  auto r = auth.Authenticate("Bearer " + *read, Permission::kWrite);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(HttpStatusOf(r.error().code), 403u);
}

TEST(Auth, MissingAndMalformedAre401) {
  Authenticator auth(kKey);
  for (const char* header : {"", "Bearer", "Bearer ", "Basic dXNlcjpwYXNz", "Bearer abc", "Bearer a.b.c",
                             "Bearer ....", "Token xyz"}) {
    auto r = auth.Authenticate(header, Permission::kRead);
    ASSERT_FALSE(r.ok()) << header;
    EXPECT_EQ(HttpStatusOf(r.error().code), 401u) << header;
  }
}

TEST(Auth, ExpiredIs401) {
  Authenticator auth(kKey);
  const int64_t now = UnixNow();
  auto token = MintToken(kKey, {"s", Permission::kRead}, std::chrono::hours(1), now - 7200);
  auto r = auth.Authenticate("Bearer " + *token, Permission::kRead);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(HttpStatusOf(r.error().code), 401u);
  EXPECT_NE(r.error().message.find("expired"), std::string::npos);
  // exp is exclusive: at exp the token is dead.
  const std::string t = MakeJwt(JWT_ALG_HS256, kKey, Claims(now));
  EXPECT_FALSE(auth.Authenticate("Bearer " + t, Permission::kRead, now).ok());
  EXPECT_TRUE(auth.Authenticate("Bearer " + t, Permission::kRead, now - 1).ok());
}

TEST(Auth, RememberedTokensAreStillCheckedForTimeAndForm) {
  Authenticator auth(kKey);
  const int64_t now = UnixNow();
  const std::string t =
      MakeJwt(JWT_ALG_HS256, kKey, Claims(now + 60, "read", R"(,"nbf":)" + std::to_string(now)));
  ASSERT_TRUE(auth.Authenticate("Bearer " + t, Permission::kRead, now).ok());  // verified and remembered
  EXPECT_TRUE(auth.Authenticate("Bearer " + t, Permission::kRead, now + 59).ok());
  auto late = auth.Authenticate("Bearer " + t, Permission::kRead, now + 60);
  ASSERT_FALSE(late.ok());
  EXPECT_NE(late.error().message.find("expired"), std::string::npos);
  EXPECT_FALSE(auth.Authenticate("Bearer " + t, Permission::kRead, now - 1).ok());  // before nbf
  EXPECT_EQ(HttpStatusOf(auth.Authenticate("Bearer " + t, Permission::kWrite, now).error().code), 403u);

  // Remembering one token says nothing of another with the same claims and a changed signature.
  std::string tampered = t;
  const size_t sig = tampered.rfind('.') + 5;
  tampered[sig] = tampered[sig] == 'A' ? 'B' : 'A';
  EXPECT_FALSE(auth.Authenticate("Bearer " + tampered, Permission::kRead, now).ok());

  // More distinct tokens than are remembered: each still verifies (the memory is bounded, not the tokens).
  for (size_t i = 0; i <= Authenticator::kCachedTokens; ++i) {
    const std::string other = MakeJwt(JWT_ALG_HS256, kKey, Claims(now + 60 + static_cast<int64_t>(i)));
    ASSERT_TRUE(auth.Authenticate("Bearer " + other, Permission::kRead, now).ok()) << i;
  }
  EXPECT_TRUE(auth.Authenticate("Bearer " + t, Permission::kRead, now).ok());
}

TEST(Auth, NotBeforeInTheFutureIs401) {
  Authenticator auth(kKey);
  const int64_t now = UnixNow();
  const std::string t =
      MakeJwt(JWT_ALG_HS256, kKey, Claims(now + 7200, "read", R"(,"nbf":)" + std::to_string(now + 3600)));
  auto r = auth.Authenticate("Bearer " + t, Permission::kRead);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(HttpStatusOf(r.error().code), 401u);
  EXPECT_NE(r.error().message.find("nbf"), std::string::npos);
  EXPECT_TRUE(auth.Authenticate("Bearer " + t, Permission::kRead, now + 3600).ok());
}

TEST(Auth, OtherAlgorithmsWithTheSameKeyAre401) {
  Authenticator auth(kKey);
  const int64_t exp = UnixNow() + 3600;
  for (jwt_alg_t alg : {JWT_ALG_HS384, JWT_ALG_HS512}) {
    const std::string t = MakeJwt(alg, kKey, Claims(exp));
    ASSERT_FALSE(t.empty());
    auto r = auth.Authenticate("Bearer " + t, Permission::kRead);
    ASSERT_FALSE(r.ok()) << jwt_alg_str(alg);
    EXPECT_EQ(HttpStatusOf(r.error().code), 401u);
  }
}

TEST(Auth, AlgNoneIs401) {
  Authenticator auth(kKey);
  const std::string t = MakeJwt(JWT_ALG_NONE, "", Claims(UnixNow() + 3600));
  ASSERT_FALSE(t.empty());
  auto r = auth.Authenticate("Bearer " + t, Permission::kRead);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(HttpStatusOf(r.error().code), 401u);
  // And with a signature-shaped tail appended.
  r = auth.Authenticate("Bearer " + t + "c2lnbmF0dXJl", Permission::kRead);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(HttpStatusOf(r.error().code), 401u);
}

TEST(Auth, BadSignatureIs401) {
  Authenticator auth(kKey);
  const int64_t exp = UnixNow() + 3600;
  const std::string other_key = MakeJwt(JWT_ALG_HS256, std::string(64, 'x'), Claims(exp));
  auto r = auth.Authenticate("Bearer " + other_key, Permission::kRead);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(HttpStatusOf(r.error().code), 401u);

  std::string tampered = MakeJwt(JWT_ALG_HS256, kKey, Claims(exp));
  const size_t sig = tampered.rfind('.') + 5;
  tampered[sig] = tampered[sig] == 'A' ? 'B' : 'A';
  EXPECT_FALSE(auth.Authenticate("Bearer " + tampered, Permission::kRead).ok());

  // A changed payload under the original signature.
  const std::string good = MakeJwt(JWT_ALG_HS256, kKey, Claims(exp, "read"));
  const std::string forged_payload = MakeJwt(JWT_ALG_HS256, std::string(64, 'x'), Claims(exp, "write"));
  const std::string forged =
      forged_payload.substr(0, forged_payload.rfind('.')) + good.substr(good.rfind('.'));
  EXPECT_FALSE(auth.Authenticate("Bearer " + forged, Permission::kRead).ok());
}

TEST(Auth, ClaimsAreRequiredAndTyped) {
  Authenticator auth(kKey);
  const int64_t exp = UnixNow() + 3600;
  const std::vector<std::string> bad = {
      R"({"scope":"s","perm":"read"})",                                       // no exp
      R"({"scope":"s","perm":"read","exp":")" + std::to_string(exp) + "\"}",  // exp as string
      R"({"perm":"read","exp":)" + std::to_string(exp) + "}",                 // no scope
      R"({"scope":"","perm":"read","exp":)" + std::to_string(exp) + "}",      // empty scope
      R"({"scope":"s","exp":)" + std::to_string(exp) + "}",                   // no perm
      R"({"scope":"s","perm":"admin","exp":)" + std::to_string(exp) + "}",    // unknown perm
  };
  for (const auto& claims : bad) {
    auto r = auth.Authenticate("Bearer " + MakeJwt(JWT_ALG_HS256, kKey, claims), Permission::kRead);
    ASSERT_FALSE(r.ok()) << claims;
    EXPECT_EQ(HttpStatusOf(r.error().code), 401u) << claims;
  }
}

TEST(Auth, MintRejectsBadInput) {
  EXPECT_FALSE(MintToken(kKey, {"", Permission::kRead}, std::chrono::hours(1)).ok());
  EXPECT_FALSE(MintToken(kKey, {"s", Permission::kRead}, std::chrono::seconds(0)).ok());
  EXPECT_FALSE(MintToken("", {"s", Permission::kRead}, std::chrono::hours(1)).ok());
}

// Found by auth_fuzz (tests/fuzz/regressions/auth_fuzz/): a NUL in the scope cut it short in the token, which
// then granted the shorter scope ("a\0b" minted a token for "a").
TEST(Auth, MintRefusesScopesWithNul) {
  auto token = MintToken(kKey, {std::string("a\0b", 3), Permission::kWrite}, std::chrono::hours(1));
  ASSERT_FALSE(token.ok());
  EXPECT_EQ(HttpStatusOf(token.error().code), 400u);
}

// The JSON of a token's header.
std::string HeaderOf(const std::string& token) {
  const std::string b64 = token.substr(0, token.find('.'));
  std::string out;
  uint32_t bits = 0;
  int have = 0;
  for (char c : b64) {
    const auto at =
        std::string_view("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_").find(c);
    bits = (bits << 6) | static_cast<uint32_t>(at);
    have += 6;
    if (have >= 8) {
      have -= 8;
      out += static_cast<char>((bits >> have) & 0xff);
    }
  }
  return out;
}

TokenKeys Keys(std::vector<TokenKeys::Key> keys, std::string_view current) {
  return *TokenKeys::Make(std::move(keys), current);
}

const TokenKeys::Key kLegacy{"legacy", std::string(64, 'l')};
const TokenKeys::Key kOld{"k1", std::string(64, 'o')};
const TokenKeys::Key kNew{"k2", std::string(64, 'n')};

// Tokens name their key in the header's kid; the legacy key's name none, as before key ids.
TEST(AuthKeys, TokensCarryTheirKeyId) {
  const Principal who{"s", Permission::kRead};
  const int64_t now = UnixNow();
  auto named = MintToken(kNew, who, std::chrono::hours(1), now);
  ASSERT_TRUE(named.ok()) << named.error().message;
  EXPECT_NE(HeaderOf(*named).find("\"kid\":\"k2\""), std::string::npos) << HeaderOf(*named);
  auto legacy = MintToken(kLegacy, who, std::chrono::hours(1), now);
  EXPECT_EQ(HeaderOf(*legacy).find("kid"), std::string::npos) << HeaderOf(*legacy);
  EXPECT_EQ(*legacy, *MintToken(kLegacy.material, who, std::chrono::hours(1), now));  // as before key ids

  Authenticator auth(Keys({kLegacy, kOld, kNew}, "k2"));
  auto minted = auth.Mint(who, std::chrono::hours(1), now);
  EXPECT_NE(HeaderOf(*minted).find("\"kid\":\"k2\""), std::string::npos);
}

// Every accepted key verifies what it signed; a token without kid is checked with the legacy key; a kid
// the server lacks is 401.
TEST(AuthKeys, AcceptedKeysVerifyAndUnknownKidsAre401) {
  const Principal who{"s", Permission::kRead};
  const int64_t now = UnixNow();
  Authenticator auth(Keys({kLegacy, kOld, kNew}, "k2"));
  for (const auto& key : {kLegacy, kOld, kNew}) {
    auto token = MintToken(key, who, std::chrono::hours(1), now);
    EXPECT_TRUE(auth.Verify(*token, now).ok()) << key.id;
  }
  EXPECT_TRUE(auth.Verify(*MintToken(kLegacy.material, who, std::chrono::hours(1), now), now).ok());

  auto unknown = MintToken(TokenKeys::Key{"k9", kNew.material}, who, std::chrono::hours(1), now);
  auto r = auth.Verify(*unknown, now);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(HttpStatusOf(r.error().code), 401u);
  EXPECT_NE(r.error().message.find("unknown or retired key"), std::string::npos);
  // A kid naming one key over another key's signature: that key's check fails.
  auto swapped = MintToken(TokenKeys::Key{"k1", kNew.material}, who, std::chrono::hours(1), now);
  EXPECT_EQ(HttpStatusOf(auth.Verify(*swapped, now).error().code), 401u);
  // A token without kid made by another implementation (libjwt directly): the legacy key checks it.
  const std::string plain = testing::MakeJwt(JWT_ALG_HS256, kLegacy.material, Claims(now + 60));
  EXPECT_TRUE(auth.Verify(plain, now).ok());
  EXPECT_EQ(
      HttpStatusOf(
          auth.Verify(testing::MakeJwt(JWT_ALG_HS256, kNew.material, Claims(now + 60)), now).error().code),
      401u);
}

// Without a legacy key, a token naming none is refused; a retired key's tokens stop working at once, even
// those verified (and remembered) before.
TEST(AuthKeys, RetiredKeysStopVerifyingAtOnce) {
  const Principal who{"s", Permission::kWrite};
  const int64_t now = UnixNow();
  Authenticator auth(Keys({kLegacy, kOld, kNew}, "k2"));
  const std::string old_token = *MintToken(kOld, who, std::chrono::hours(1), now);
  const std::string legacy_token = *MintToken(kLegacy, who, std::chrono::hours(1), now);
  const std::string new_token = *MintToken(kNew, who, std::chrono::hours(1), now);
  ASSERT_TRUE(auth.Verify(old_token, now).ok());
  ASSERT_TRUE(auth.Verify(legacy_token, now).ok());

  auth.SetKeys(Keys({kNew}, "k2"));
  EXPECT_EQ(HttpStatusOf(auth.Verify(old_token, now).error().code), 401u);
  EXPECT_EQ(HttpStatusOf(auth.Verify(legacy_token, now).error().code), 401u);
  EXPECT_TRUE(auth.Verify(new_token, now).ok());
  EXPECT_EQ(auth.keys().keys().size(), 1u);
}

// ---- Credential kinds (issue 45): a token is accepted only where its kind is meant. A CAS token (the Hub's
// xet-read-token, handed to anonymous callers of public repositories) was taken by the Hub API, git and the
// mirror's read policy as a caller of its own.

TEST(AuthKinds, MintedTokensCarryTheirKind) {
  Authenticator auth(kKey);
  const int64_t now = UnixNow();
  const std::string access = *MintToken(kKey, {"alice", Permission::kRead}, std::chrono::hours(1), now);
  const std::string cas =
      *MintToken(kKey, {"hub:0123", Permission::kRead, TokenKind::kCas}, std::chrono::hours(1), now);
  auto who = auth.Verify(access, now);
  ASSERT_TRUE(who.ok()) << who.error().message;
  EXPECT_EQ(who->kind, TokenKind::kAccess);
  who = auth.Verify(access, now, kCasRouteTokens);
  ASSERT_TRUE(who.ok());
  EXPECT_EQ(who->kind, TokenKind::kAccess);
  who = auth.Verify(cas, now, kCasRouteTokens);
  ASSERT_TRUE(who.ok()) << who.error().message;
  EXPECT_EQ(who->kind, TokenKind::kCas);
  EXPECT_EQ(who->scope, "hub:0123");
  // Where access tokens alone are meant, a CAS token is refused as an invalid one: 401, never anonymous.
  auto refused = auth.Verify(cas, now);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(HttpStatusOf(refused.error().code), 401u);
  refused = auth.Authenticate("Bearer " + cas, Permission::kRead, now);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(HttpStatusOf(refused.error().code), 401u);
  EXPECT_TRUE(auth.Authenticate("Bearer " + cas, Permission::kRead, now, kCasRouteTokens).ok());
  // Remembered as verified, it is still refused where it is not meant.
  EXPECT_EQ(HttpStatusOf(auth.Authenticate("Bearer " + cas, Permission::kRead, now).error().code), 401u);
  // A kind is not a permission: a CAS read token is refused a write with 403 where CAS tokens are accepted.
  EXPECT_EQ(
      HttpStatusOf(auth.Authenticate("Bearer " + cas, Permission::kWrite, now, kCasRouteTokens).error().code),
      403u);
  // The claim is what the token says it is for.
  const std::string claims = HeaderOf(cas.substr(cas.find('.') + 1));  // the payload, decoded as a header is
  EXPECT_NE(claims.find(R"("kind":"cas")"), std::string::npos) << claims;
  EXPECT_NE(HeaderOf(access.substr(access.find('.') + 1)).find(R"("kind":"access")"), std::string::npos);
}

// Tokens signed before tokens carried a kind: a repository's CAS scope ("hub:…", "mirror:…", the read scopes
// "hub:…" and "hub:…:read") was only ever in the Hub's CAS tokens, so such a token is a CAS token; any other
// scope (a namespace, a repository, a plain CAS scope) is an access token, as `cairn token` minted it.
TEST(AuthKinds, TokensWithoutAKindAreClassifiedByTheirScope) {
  Authenticator auth(kKey);
  const int64_t now = UnixNow();
  const auto legacy = [&](const std::string& scope) {
    return testing::MakeJwt(
        JWT_ALG_HS256, kKey,
        R"({"scope":")" + scope + R"(","perm":"read","exp":)" + std::to_string(now + 60) + "}");
  };
  for (const std::string scope :
       {"hub:00112233445566778899aabbccddeeff", "mirror:00112233445566778899aabbccddeeff",
        "hub:00112233445566778899aabbccddeeff:read"}) {
    EXPECT_EQ(KindOfLegacyScope(scope), TokenKind::kCas) << scope;
    const std::string token = legacy(scope);
    EXPECT_EQ(HttpStatusOf(auth.Verify(token, now).error().code), 401u) << scope;
    auto who = auth.Verify(token, now, kCasRouteTokens);
    ASSERT_TRUE(who.ok()) << scope;
    EXPECT_EQ(who->kind, TokenKind::kCas) << scope;
  }
  for (const std::string scope : {"alice", "alice/model", "datasets/alice/data", "dev", "team-a", "hubs"}) {
    EXPECT_EQ(KindOfLegacyScope(scope), TokenKind::kAccess) << scope;
    auto who = auth.Verify(legacy(scope), now);
    ASSERT_TRUE(who.ok()) << scope;
    EXPECT_EQ(who->kind, TokenKind::kAccess) << scope;
    EXPECT_TRUE(auth.Verify(legacy(scope), now, kCasRouteTokens).ok()) << scope;
  }
}

// An explicit kind wins over the scope's form, and only "access" and "cas" are kinds.
TEST(AuthKinds, TheKindClaimIsCheckedAndTyped) {
  Authenticator auth(kKey);
  const int64_t now = UnixNow();
  const auto with_kind = [&](const std::string& scope, const std::string& kind) {
    return testing::MakeJwt(JWT_ALG_HS256, kKey,
                            R"({"scope":")" + scope + R"(","perm":"read","kind":)" + kind + R"(,"exp":)" +
                                std::to_string(now + 60) + "}");
  };
  auto who = auth.Verify(with_kind("hub:abc", R"("access")"), now);
  ASSERT_TRUE(who.ok());
  EXPECT_EQ(who->kind, TokenKind::kAccess);
  EXPECT_EQ(HttpStatusOf(auth.Verify(with_kind("alice", R"("cas")"), now).error().code), 401u);
  for (const std::string bad : {R"("admin")", R"("")", R"("CAS")", "1", "null", R"(["cas"])"}) {
    auto r = auth.Verify(with_kind("alice", bad), now, kCasRouteTokens);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(HttpStatusOf(r.error().code), 401u) << bad;
  }
}

// Tokens the server does not sign go to the verifier that claims them, whose answer is taken as it is: an
// access or fine-grained token (never a CAS one), never cached, refused where its kind is not accepted; the
// others are still the server's JWTs.
class PrefixVerifier final : public TokenVerifier {
 public:
  bool Claims(std::string_view token) const override { return token.starts_with("person_"); }
  Result<Principal> Verify(std::string_view token) const override {
    ++calls;
    TokenKind kind = TokenKind::kAccess;
    if (token == "person_fine") {
      kind = TokenKind::kFineGrained;
    } else if (token == "person_cas") {
      kind = TokenKind::kCas;
    } else if (token != "person_ok") {
      return Unauthorized("refused by the verifier");
    }
    return Principal{.scope = "alice",
                     .perm = Permission::kWrite,
                     .kind = kind,
                     .expires = 2'000'000'000,
                     .verified_at = 0,
                     .user = "alice",
                     .token_id = "t1",
                     .reach = {{"alice", Access::kAdmin}}};
  }
  bool Admits(const Principal& who) const override { return who.user == admitted; }
  mutable int calls = 0;
  std::string admitted = "publisher:tp_1";
};

TEST(AuthVerifier, ClaimedTokensAreVerifiedByTheirKeeper) {
  TestClock clock(1'900'000'000);
  Authenticator auth(std::string(32, 'k'), &clock);
  auto verifier = std::make_shared<PrefixVerifier>();
  EXPECT_EQ(HttpStatusOf(auth.Authenticate("Bearer person_ok", Permission::kRead).error().code), 401u)
      << "no verifier yet: not a token of this server";
  auth.SetVerifier(verifier);
  auto who = auth.Authenticate("Bearer person_ok", Permission::kWrite);
  ASSERT_TRUE(who.ok()) << who.error().message;
  EXPECT_EQ(who->user, "alice");
  EXPECT_EQ(who->token_id, "t1");
  EXPECT_EQ(who->kind, TokenKind::kAccess);
  EXPECT_EQ(who->reach, (std::vector<ScopeAccess>{{"alice", Access::kAdmin}}));
  EXPECT_EQ(who->verified_at, 1'900'000'000);
  EXPECT_FALSE(auth.Authenticate("Bearer person_cas", Permission::kRead, kCasRouteTokens).ok())
      << "a person's token is never a CAS token";
  EXPECT_TRUE(auth.Authenticate("Bearer person_fine", Permission::kWrite).ok());
  EXPECT_EQ(
      HttpStatusOf(auth.Authenticate("Bearer person_fine", Permission::kRead, kCasRouteTokens).error().code),
      401u)
      << "a fine-grained token reaches no single scope the CAS routes could serve";
  EXPECT_FALSE(MintToken(std::string(32, 'k'), *who, std::chrono::hours(1), clock.UnixSeconds()).ok())
      << "a reach cannot be signed into a token";
  ASSERT_TRUE(auth.Authenticate("Bearer person_ok", Permission::kRead).ok());
  EXPECT_EQ(verifier->calls, 5) << "never cached here: a revocation is the verifier's to see";
  EXPECT_EQ(HttpStatusOf(auth.Authenticate("Bearer person_no", Permission::kRead).error().code), 401u);
  EXPECT_EQ(HttpStatusOf(auth.Authenticate("Bearer person_ok", Permission::kRead,
                                           TokenKinds{.access = false, .cas = true})
                             .error()
                             .code),
            401u);
  auto jwt =
      MintToken(std::string(32, 'k'), {"bob", Permission::kRead}, std::chrono::hours(1), clock.UnixSeconds());
  ASSERT_TRUE(jwt.ok());
  auto bob = auth.Authenticate("Bearer " + *jwt, Permission::kRead);
  ASSERT_TRUE(bob.ok()) << bob.error().message;
  EXPECT_TRUE(bob->user.empty());
  auth.SetVerifier(nullptr);
  EXPECT_FALSE(auth.Authenticate("Bearer person_ok", Permission::kRead).ok());
}

// The one fine-grained token the server signs (a trusted publisher's exchange): its holder and id travel in
// it, it reaches its scope alone at its perm, and it is accepted only while the verifier admits its holder.
TEST(AuthVerifier, ASignedFineGrainedTokenStandsWhileItsGrantDoes) {
  TestClock clock(1'900'000'000);
  Authenticator auth(std::string(32, 'k'), &clock);
  const Principal grant{.scope = "acme/model",
                        .perm = Permission::kWrite,
                        .kind = TokenKind::kFineGrained,
                        .expires = 0,
                        .verified_at = 0,
                        .user = "publisher:tp_1",
                        .token_id = "tx_1",
                        .reach = {}};
  auto jwt = auth.Mint(grant, std::chrono::minutes(10), clock.UnixSeconds());
  ASSERT_TRUE(jwt.ok()) << jwt.error().message;
  EXPECT_FALSE(auth.Authenticate("Bearer " + *jwt, Permission::kRead).ok()) << "no verifier: no grant stands";
  auto verifier = std::make_shared<PrefixVerifier>();
  auth.SetVerifier(verifier);
  auto who = auth.Authenticate("Bearer " + *jwt, Permission::kWrite);
  ASSERT_TRUE(who.ok()) << who.error().message;
  EXPECT_EQ(who->kind, TokenKind::kFineGrained);
  EXPECT_EQ(who->user, "publisher:tp_1");
  EXPECT_EQ(who->token_id, "tx_1");
  EXPECT_EQ(who->reach, (std::vector<ScopeAccess>{{"acme/model", Access::kWrite}})) << "never admin";
  EXPECT_FALSE(auth.Authenticate("Bearer " + *jwt, Permission::kRead, kCasRouteTokens).ok());
  verifier->admitted = "";  // the policy revoked
  EXPECT_EQ(HttpStatusOf(auth.Authenticate("Bearer " + *jwt, Permission::kRead).error().code), 401u)
      << "asked on every use, though the signature check is remembered";
  auto no_holder = grant;
  no_holder.user.clear();
  EXPECT_FALSE(auth.Mint(no_holder, std::chrono::minutes(10), clock.UnixSeconds()).ok());
  auto wide = grant;
  wide.reach = {{"acme", Access::kWrite}};
  EXPECT_FALSE(auth.Mint(wide, std::chrono::minutes(10), clock.UnixSeconds()).ok()) << "its scope alone";
}

}  // namespace
}  // namespace cairn::http
