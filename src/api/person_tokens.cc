#include "api/person_tokens.h"

#include "people/reach.h"
#include "people/token_text.h"
#include "publish/exchange.h"

namespace cairn::api {

bool PersonTokens::Claims(std::string_view token) const {
  return token.starts_with(people::kTokenPrefix);
}

Result<http::Principal> PersonTokens::Verify(std::string_view token) const {
  auto person = directory_.Verify(token);
  if (!person) return person.error();
  std::vector<ScopeAccess> reach = people::ReachOf(*person);
  bool writes = false;
  for (const ScopeAccess& s : reach) writes = writes || s.access >= Access::kWrite;
  return http::Principal{.scope = person->user,
                         .perm = writes ? http::Permission::kWrite : http::Permission::kRead,
                         .kind = person->role == people::TokenRole::kFineGrained
                                     ? http::TokenKind::kFineGrained
                                     : http::TokenKind::kAccess,
                         .expires = person->expires,
                         .verified_at = 0,
                         .user = person->user,
                         .token_id = person->token_id,
                         .reach = std::move(reach)};
}

bool PersonTokens::Admits(const http::Principal& who) const {
  const auto policy = publish::PolicyOfHolder(who.user);
  return policy && directory_.PublisherLive(*policy);
}

hub::Caller CallerFrom(const http::Principal& who) {
  return hub::Caller{.scope = who.scope,
                     .write = who.perm == http::Permission::kWrite,
                     .expires = who.expires,
                     .user = who.user,
                     .reach = who.reach,
                     .token_id = who.token_id};
}

}  // namespace cairn::api
