// Fuzzes the bearer-token check (http::Authenticator::Verify and Authenticate) with a fixed key. The input is
// token text. Forged signatures never verify, so to reach the claims checks behind the signature the target
// also signs what it is given: an input with exactly one '.' is taken as "<header>.<payload>" and an input
// with none as the payload's JSON, and either is completed with a valid HS256 signature under the key.
// Checks: what verifies names a scope and a permission; a minted token verifies to what it was minted for.
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/base64.h"
#include "common/fuzz_check.h"
#include "http/auth.h"
#include "http/status.h"

namespace {

constexpr std::string_view kKey = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
constexpr int64_t kNow = 1'800'000'000;

std::string Base64Url(std::string_view in) {
  return cairn::Base64Encode(in, /*url_safe=*/true);
}

std::string Signed(std::string_view signing_input) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), kKey.data(), static_cast<int>(kKey.size()),
       reinterpret_cast<const unsigned char*>(signing_input.data()), signing_input.size(), mac, &len);
  return std::string(signing_input) + "." +
         Base64Url(std::string_view(reinterpret_cast<const char*>(mac), len));
}

void Check(const cairn::http::Authenticator& auth, std::string_view token) {
  const auto who = auth.Verify(token, kNow);
  if (who) {
    FUZZ_CHECK(!who->scope.empty());
    FUZZ_CHECK(who->perm == cairn::http::Permission::kRead || who->perm == cairn::http::Permission::kWrite);
  } else {
    FUZZ_CHECK(cairn::http::HttpStatusOf(who.error().code) == 401);
  }
  const auto header =
      auth.Authenticate("Bearer " + std::string(token), cairn::http::Permission::kWrite, kNow);
  FUZZ_CHECK(header.ok() == (who.ok() && who->perm == cairn::http::Permission::kWrite));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const cairn::http::Authenticator auth{std::string(kKey)};
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  Check(auth, input);

  const auto dots = std::count(input.begin(), input.end(), '.');
  if (dots == 1) {
    Check(auth, Signed(input));
  } else if (dots == 0) {
    Check(auth, Signed(Base64Url(R"({"alg":"HS256","typ":"JWT"})") + "." + Base64Url(input)));
  }

  // The input as a scope: what is minted for it verifies to it.
  const cairn::http::Principal who{
      std::string(input), size % 2 ? cairn::http::Permission::kRead : cairn::http::Permission::kWrite};
  if (const auto token = cairn::http::MintToken(kKey, who, std::chrono::seconds(60), kNow)) {
    const auto back = auth.Verify(*token, kNow);
    FUZZ_CHECK(back && back->scope == who.scope && back->perm == who.perm);
  }
  return 0;
}
