// The signing keys of OpenID Connect issuers, to check id tokens with: found through the issuer's discovery
// document (`{issuer}/.well-known/openid-configuration`, whose "issuer" must be the issuer itself) and its
// "jwks_uri" (a JSON Web Key Set, RFC 7517), kept for kKeysLife and fetched again sooner when a token names a
// key the set lacks (a rotation), at most once every kMinRefetch per issuer so that made-up key ids cannot
// make cairn hammer the issuer. Only RSA keys of at least 2048 bits are kept, and only RS256 signatures are
// accepted: the algorithm is pinned, whatever the token's header says ("none", HS256 with the public key as
// its secret, ES256 are all refused).
//
// Only issuers a trust policy names are ever asked for (the exchange looks for a policy first), so a token
// cannot make cairn fetch a URL of its choosing.
//
// Thread-safety: every method may be called from any thread; one fetch per issuer at a time (callers for the
// same issuer wait for it). Ownership: borrows the source and the clock, which must outlive it.
// Failures: Verify answers kUnauthorized for a token it refuses, kUnavailable when the issuer's keys could
// not be fetched (and none are cached).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "common/error.h"
#include "oidc/id_token.h"

typedef struct evp_pkey_st EVP_PKEY;  // NOLINT(modernize-use-using): OpenSSL's own declaration

namespace cairn::oidc {

// What a form posted to a provider (its token endpoint) answered: any status, and its body.
struct PostAnswer {
  long status = 0;
  std::string body;
};

// Where documents come from: an HTTP GET of `url` answering its 2xx body (at most kMaxDocumentBytes), or an
// error; and a form posted once (never retried: an authorization code is used once), whatever status it
// answers. Thread-safety: called from any thread.
class DocumentSource {
 public:
  static constexpr size_t kMaxDocumentBytes = 1 << 20;
  virtual ~DocumentSource() = default;
  virtual Result<std::string> Get(const std::string& url) = 0;
  // `headers` as "Name: value"; kUnavailable when nothing answered.
  virtual Result<PostAnswer> PostForm(const std::string& url, const std::vector<std::string>& headers,
                                      std::string_view form) = 0;
};

// DocumentSource over HTTPS (libcurl, net/http_client.h): short timeouts, two tries for a GET.
std::unique_ptr<DocumentSource> HttpDocumentSource();

// Where a provider signs people in, from its discovery document (OpenID Connect Discovery §3).
struct ProviderEndpoints {
  std::string authorization;
  std::string token;
};

// An RSA public key of a key set (shared: a refresh may replace the set while a check still holds its key).
using PublicKey = std::shared_ptr<EVP_PKEY>;
// The RSA signing keys of a JWKS document by their kid; kMalformed when it is no key set.
Result<std::map<std::string, PublicKey>> ParseJwks(std::string_view document);
// Whether `signature` is an RS256 signature of `input` by `key`.
bool VerifyRs256(const PublicKey& key, std::string_view input, const std::vector<uint8_t>& signature);

class IssuerKeys {
 public:
  static constexpr std::chrono::seconds kKeysLife{3600};
  static constexpr std::chrono::seconds kMinRefetch{30};

  IssuerKeys(DocumentSource& source, const Clock& clock) : source_(source), clock_(clock) {}

  // Checks that `token` is signed with RS256 by the key its kid names among `token.iss`'s.
  Status Verify(const IdToken& token);
  // Issuer `iss`'s authorization and token endpoints (fetched with its keys, and as often); kUnavailable
  // when its discovery document could not be fetched or names none.
  Result<ProviderEndpoints> Endpoints(const std::string& iss);

 private:
  struct Issuer {
    std::mutex mu;  // one fetch at a time
    std::map<std::string, PublicKey> keys;
    ProviderEndpoints endpoints;
    int64_t fetched_at = 0;  // 0: never
    int64_t tried_at = 0;
  };
  std::shared_ptr<Issuer> IssuerOf(const std::string& iss);
  // Fetches `iss`'s keys into `issuer` (its mutex held).
  Status Fetch(const std::string& iss, Issuer& issuer);
  // Fetches them when they are stale (or, `kid` given, lack it) and the last try is kMinRefetch ago.
  Status Refresh(const std::string& iss, Issuer& issuer, const std::string* kid);

  DocumentSource& source_;
  const Clock& clock_;
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<Issuer>> issuers_;
};

}  // namespace cairn::oidc
