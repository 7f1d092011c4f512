// The request helpers that have no fuzz target of their own: a renamed repository's redirect target.
#include "api/requests.h"

#include <gtest/gtest.h>

namespace cairn::api {
namespace {

TEST(RenamedTarget, PutsTheNewNameWhereTheOldOneWas) {
  const hub::RepoId from{hub::RepoType::kModel, "alice", "old"};
  const hub::RepoId to{hub::RepoType::kModel, "bob", "new"};
  EXPECT_EQ(RenamedTarget("/api/models/alice/old/revision/main", from, to),
            "/api/models/bob/new/revision/main");
  EXPECT_EQ(RenamedTarget("/api/models/alice/old", from, to), "/api/models/bob/new");
  EXPECT_EQ(RenamedTarget("/api/models/alice/old?expand=sha", from, to), "/api/models/bob/new?expand=sha");
  EXPECT_EQ(RenamedTarget("/alice/old/resolve/main/old/w.bin", from, to), "/bob/new/resolve/main/old/w.bin");
  EXPECT_EQ(RenamedTarget("/datasets/alice/old/resolve/v1/x", from, to), "/datasets/bob/new/resolve/v1/x");
  EXPECT_EQ(RenamedTarget("/alice/old.git/info/refs?service=git-upload-pack", from, to),
            "/bob/new.git/info/refs?service=git-upload-pack");
  // Another repository whose name starts the same is not it.
  EXPECT_EQ(RenamedTarget("/api/models/alice/older/revision/main", from, to), std::nullopt);
  EXPECT_EQ(RenamedTarget("/api/models/carol/m", from, to), std::nullopt);
  // Names are matched as the target encodes them.
  const hub::RepoId dotted{hub::RepoType::kModel, "alice", "m.v1"};
  EXPECT_EQ(RenamedTarget("/alice/m.v1/resolve/main/a", dotted, to), "/bob/new/resolve/main/a");
}

// A new token's body: a name and a role, optionally a lifetime and a fine-grained token's scopes; anything
// else is refused with the form in the message.
TEST(TokenBody, NameRoleLifetimeAndScopes) {
  auto plain = ParseTokenBody(R"({"name": "laptop", "role": "write"})");
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->name, "laptop");
  EXPECT_EQ(plain->role, people::TokenRole::kWrite);
  EXPECT_FALSE(plain->expires_in.has_value());
  auto fine = ParseTokenBody(
      R"({"name": "ci", "role": "fineGrained", "expiresIn": 3600,
          "scoped": [{"scope": "acme/m", "permission": "write"}, {"scope": "acme", "permission": "read"}]})");
  ASSERT_TRUE(fine);
  EXPECT_EQ(fine->expires_in, 3600);
  EXPECT_EQ(fine->grants, (std::vector<people::Grant>{{"acme/m", true}, {"acme", false}}));
  for (const char* bad :
       {"", "[]", R"({"name": "x"})", R"({"role": "read"})", R"({"name": 1, "role": "read"})",
        R"({"name": "x", "role": "admin"})", R"({"name": "x", "role": "read", "expiresIn": 1.5})",
        R"({"name": "x", "role": "read", "expiresIn": "1"})",
        R"({"name": "x", "role": "read", "scoped": {}})",
        R"({"name": "x", "role": "read", "scoped": [{"scope": "a"}]})",
        R"({"name": "x", "role": "read", "scoped": [{"scope": "a", "permission": "admin"}]})"}) {
    auto r = ParseTokenBody(bad);
    ASSERT_FALSE(r) << bad;
    const std::string& m = r.error().message;
    EXPECT_TRUE(m.find("the body is") != std::string::npos || m.find("expiresIn is") != std::string::npos)
        << m;
  }
  std::string many = R"({"name": "x", "role": "fineGrained", "scoped": [)";
  for (size_t i = 0; i <= people::PeopleService::kMaxGrants; ++i) {
    many += std::string(i ? "," : "") + R"({"scope": "a", "permission": "read"})";
  }
  EXPECT_FALSE(ParseTokenBody(many + "]}"));
}

// A token exchange as huggingface_hub sends it (JSON) and as RFC 6749 has it (a form, '+' a space, each
// field once); a field missing or empty is refused.
TEST(TokenExchangeBody, JsonOrAForm) {
  auto json_body = ParseTokenExchangeBody(
      R"({"grant_type": "g", "subject_token_type": "t", "subject_token": "a.b.c", "resource": "acme/m"})",
      false);
  ASSERT_TRUE(json_body);
  EXPECT_EQ(json_body->subject_token, "a.b.c");
  EXPECT_EQ(json_body->resource, "acme/m");
  auto form = ParseTokenExchangeBody(
      "grant_type=urn%3Aietf%3Ax&subject_token_type=t&subject_token=a.b.c&resource=datasets%2Facme%2Fd+x",
      true);
  ASSERT_TRUE(form);
  EXPECT_EQ(form->grant_type, "urn:ietf:x");
  EXPECT_EQ(form->resource, "datasets/acme/d x");
  EXPECT_FALSE(
      ParseTokenExchangeBody("grant_type=g&subject_token_type=t&subject_token=a&resource=r&resource=s", true))
      << "a field given twice";
  for (const char* bad :
       {"", "[]", R"({"grant_type": "g"})",
        R"({"grant_type": "g", "subject_token_type": "t", "subject_token": "", "resource": "r"})",
        R"({"grant_type": 1, "subject_token_type": "t", "subject_token": "s", "resource": "r"})"}) {
    EXPECT_FALSE(ParseTokenExchangeBody(bad, false)) << bad;
  }
}

// A trust policy's body: issuer, audience and claims (strings), optionally a repository and a role.
TEST(PublisherBody, FieldsAndRefusals) {
  auto p = ParsePublisherBody(R"({"issuer": "https://i", "audience": "a", "claims": {"repository": "acme/ci"},
                                  "repo": "acme/m", "role": "read"})",
                              "acme");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->ns, "acme");
  EXPECT_EQ(p->repo, "acme/m");
  EXPECT_EQ(p->role, people::TokenRole::kRead);
  EXPECT_EQ(p->claims, (std::vector<people::Claim>{{"repository", "acme/ci"}}));
  EXPECT_EQ(ParsePublisherBody(R"({"issuer": "i", "audience": "a", "claims": {}})", "acme")->role,
            people::TokenRole::kWrite);
  for (const char* bad : {"", R"({"issuer": "i", "audience": "a"})", R"({"issuer": "i", "claims": {}})",
                          R"({"issuer": "i", "audience": "a", "claims": {"x": 1}})",
                          R"({"issuer": "i", "audience": "a", "claims": {}, "role": "admin"})"}) {
    EXPECT_FALSE(ParsePublisherBody(bad, "acme")) << bad;
  }
}

}  // namespace
}  // namespace cairn::api
