#include "api/person_tokens.h"

#include "people/token_text.h"

namespace cairn::api {

bool PersonTokens::Claims(std::string_view token) const {
  return token.starts_with(people::kTokenPrefix);
}

Result<http::Principal> PersonTokens::Verify(std::string_view token) const {
  auto person = directory_.Verify(token);
  if (!person) return person.error();
  if (person->role == people::TokenRole::kFineGrained) {
    return Unauthorized("token " + person->token_id +
                        ": fine-grained tokens are not accepted by this server yet");
  }
  return http::Principal{
      .scope = person->user,
      .perm = person->role == people::TokenRole::kWrite ? http::Permission::kWrite : http::Permission::kRead,
      .kind = http::TokenKind::kAccess,
      .expires = person->expires,
      .verified_at = 0,
      .user = person->user,
      .token_id = person->token_id};
}

}  // namespace cairn::api
