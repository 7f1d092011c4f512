// A person's tokens (people/directory.h) as the server's authenticator takes them (http::TokenVerifier): the
// principal's scope is the user's namespace and its reach what the token reaches now (people/reach.h): the
// user's namespace, their organizations by role, or a fine-grained token's list (of kind kFineGrained, which
// the CAS routes refuse: they serve one scope and read no reach). Its perm is write when it may write
// anywhere; the Hub checks each repository against the reach.
// Thread-safety: any thread (the directory's). Ownership: borrows the directory, which outlives it.
#pragma once

#include <string_view>

#include "http/auth.h"
#include "hub/hub_service.h"
#include "people/directory.h"

namespace cairn::api {

class PersonTokens final : public http::TokenVerifier {
 public:
  explicit PersonTokens(people::Directory& directory) : directory_(directory) {}
  bool Claims(std::string_view token) const override;
  Result<http::Principal> Verify(std::string_view token) const override;
  // A trusted publisher's exchanged token stands while its policy does (publish/exchange.h).
  bool Admits(const http::Principal& who) const override;

 private:
  people::Directory& directory_;
};

// The caller a verified token speaks for (a scope, or a person and their reach), as the Hub takes it.
hub::Caller CallerFrom(const http::Principal& who);

}  // namespace cairn::api
