// Signing people in through the pages (src/web/): a password per user, kept as its Argon2id hash (libsodium's
// crypto_pwhash_str: memory-hard, salted, its parameters in the text), and browser sessions kept by the index
// (SignInIndex), so that a sign-out, a password change or a disabled user ends them on every node.
//
// A session's cookie is "<id>.<secret>": 32 hex digits naming the row, 64 hex digits of which the index
// keeps the SHA-256 only. The form token that guards a session's forms (CSRF) is an HMAC of the secret: the
// pages show it, the cookie is HttpOnly, and nothing else can compute it.
//
// Failed attempts are bounded per user and client address (kMaxFailures in kFailureWindow, on this node),
// and no more than kConcurrentHashes hashes run at once (each takes kHashMemory bytes), so a flood of
// sign-ins costs bounded memory. An unknown user costs the same hash as a known one.
//
// Thread-safety: every method may be called concurrently. Ownership: borrows the index, the directory and
// the clock, which outlive the service. Failures: kUnauthorized for a wrong name or password (one message
// for both) or a session that is unknown, expired, ended or whose user is disabled; kDenied past the failed
// attempts' bound; kMalformed for a password outside the bounds; the index's own failures as they are.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <semaphore>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "common/error.h"
#include "index/index.h"
#include "people/directory.h"
#include "people/people_service.h"

namespace cairn::people {

// A session just started: its cookie's text (which nothing keeps) and when it expires.
struct NewSession {
  std::string cookie;
  std::string id;
  int64_t expires = 0;
};

// Who a session's cookie speaks for, now.
struct SignedIn {
  Person person;
  std::string session_id;
  std::string csrf;  // the form token of the session (CsrfToken)
};

class SignInService {
 public:
  static constexpr size_t kMinPassword = 10;
  static constexpr size_t kMaxPassword = 1024;
  static constexpr std::chrono::seconds kSessionLife{14LL * 24 * 3600};
  static constexpr int kMaxFailures = 5;
  static constexpr std::chrono::seconds kFailureWindow{15 * 60};
  static constexpr size_t kHashMemory = 64 << 20;  // Argon2id's memory (libsodium's interactive limit)
  static constexpr int kConcurrentHashes = 2;

  SignInService(index::Index& index, Directory& directory, const Clock& clock);

  // Sets user `name`'s password (and ends every session of theirs); recorded as `by`'s.
  Status SetPassword(const Actor& by, std::string_view name, std::string_view password);
  // Removes it: the user signs in no more with a password (and their sessions end).
  Status RemovePassword(const Actor& by, std::string_view name);
  // A new session for user `name` when `password` is theirs, they are enabled and the failures from `client`
  // are within bounds.
  Result<NewSession> WithPassword(std::string_view name, std::string_view password, std::string_view client);
  // A new session for user `user_id`, signed in by `method` ("oidc") from `client`, expiring at `expires`
  // (default: kSessionLife from now). A session of method kDeviceMethod is a device's refresh grant
  // (device_flow.h), which Resolve refuses: it opens no page.
  static constexpr std::string_view kDeviceMethod = "device";
  Result<NewSession> Start(int64_t user_id, std::string_view method, std::string_view client,
                           std::optional<int64_t> expires = std::nullopt);
  // The stored session the cookie's text names, when its secret matches, it is of `method` and unexpired.
  Result<index::SessionRecord> Find(std::string_view cookie, std::string_view method);
  // Ends session `id` without a record: true exactly once (a refresh grant is used once).
  Result<bool> End(std::string_view id);
  // Who the cookie's session speaks for now.
  Result<SignedIn> Resolve(std::string_view cookie);
  // Ends the cookie's session (a sign-out), recorded as its user's; nothing when it is unknown.
  Status SignOut(std::string_view cookie, std::string_view client);
  // Company sign-in (OpenID Connect, src/oidc/): the user a provider's subject is linked to (nullopt: none);
  // links one to user `name` (kConflict when linked already, kNotFound when `name` is no user); unlinks one
  // (false when it was not); the subjects linked to user `name`. Links and unlinks are recorded as `by`'s.
  Result<std::optional<int64_t>> LinkedUser(std::string_view issuer, std::string_view subject);
  Status Link(const Actor& by, std::string_view name, std::string_view issuer, std::string_view subject);
  Result<bool> Unlink(const Actor& by, std::string_view issuer, std::string_view subject);
  Result<std::vector<index::IdentityRecord>> Identities(std::string_view name);
  static constexpr size_t kMaxSubject = 255;  // OpenID Connect Core §2: at most 255 ASCII characters

  // The form token of the session whose cookie holds `cookie`; empty for a cookie of no session's form.
  static std::string CsrfToken(std::string_view cookie);
  // Whether `token` is the form token of `cookie`'s session, in time that does not depend on where it
  // differs.
  static bool CsrfMatches(std::string_view cookie, std::string_view token);

 private:
  struct Failures {
    int count = 0;
    int64_t since = 0;
  };
  // Whether `key` may try now; NoteFailure counts one more, a success forgets it.
  bool MayTry(const std::string& key, int64_t now);
  void NoteFailure(const std::string& key, int64_t now);
  void Forget(const std::string& key);
  // crypto_pwhash_str and its verification, at most kConcurrentHashes at once.
  Result<std::string> Hash(std::string_view password);
  bool Verify(const std::string& hash, std::string_view password);

  index::Index& index_;
  Directory& directory_;
  const Clock& clock_;
  std::string dummy_hash_;  // verified for unknown users, so that they cost what known ones do
  std::counting_semaphore<kConcurrentHashes> hashing_{kConcurrentHashes};
  std::mutex failures_mu_;
  std::map<std::string, Failures> failures_;  // "user\nclient" -> failures in the current window
};

}  // namespace cairn::people
