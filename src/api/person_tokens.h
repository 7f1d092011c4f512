// A person's tokens (people/directory.h) as the server's authenticator takes them (http::TokenVerifier): a
// user's token speaks for the user's namespace, its scope, with write when its role is write. A
// fine-grained token is refused (401) until the routes read its grants: it must never be taken for more than
// it grants. Organizations' repositories are read through the user's roles by the routes, not by the scope.
// Thread-safety: any thread (the directory's). Ownership: borrows the directory, which outlives it.
#pragma once

#include <string_view>

#include "http/auth.h"
#include "people/directory.h"

namespace cairn::api {

class PersonTokens final : public http::TokenVerifier {
 public:
  explicit PersonTokens(people::Directory& directory) : directory_(directory) {}
  bool Claims(std::string_view token) const override;
  Result<http::Principal> Verify(std::string_view token) const override;

 private:
  people::Directory& directory_;
};

}  // namespace cairn::api
