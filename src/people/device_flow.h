// `hf auth login` (RFC 8628's device authorization grant, as huggingface_hub 2.4.0 drives it): the CLI asks
// for a device code (Start), shows the person a URL and a short user code, and polls (Poll) while the person,
// signed in to the pages, approves or denies that code (Decide). Approved, the device gets an access token —
// one of the person's tokens (write, kAccessLife; listed and revocable like any) — and a refresh token that
// gets a new access token (Refresh) and is replaced by a new one each time (used twice, it fails).
//
// Lifetimes: a code lives kCodeLife; a refresh grant kRefreshLife from the approval, which its replacements
// keep (nothing minted outlives the approval's grant); an access token no longer than its refresh grant.
// A password change, disabling the user or revoking the access token ends what it should: the refresh grant
// is a session of kDeviceMethod (sign_in.h), ended with the user's sessions.
//
// Failures carry the OAuth error (RFC 8628 §3.5, RFC 6749 §5.2) as their reason: authorization_pending,
// slow_down (polled again within the interval), expired_token, access_denied, invalid_grant (an unknown code
// or refresh token), invalid_request. Thread-safety: every method may be called concurrently (the index
// decides who wins). Ownership: borrows the index, the services and the clock, which outlive it.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "common/clock.h"
#include "common/error.h"
#include "index/index.h"
#include "people/people_service.h"
#include "people/sign_in.h"

namespace cairn::people {

class DeviceFlow {
 public:
  static constexpr std::chrono::seconds kCodeLife{15 * 60};
  static constexpr int64_t kInterval = 5;  // seconds between polls, as RFC 8628 defaults
  static constexpr std::chrono::seconds kAccessLife{30LL * 24 * 3600};
  static constexpr std::chrono::seconds kRefreshLife{90LL * 24 * 3600};
  static constexpr size_t kMaxClientId = 128;
  static constexpr std::string_view kRefreshPrefix = "cairn_refresh_";

  DeviceFlow(index::Index& index, PeopleService& people, SignInService& sign_in, const Clock& clock)
      : index_(index), people_(people), sign_in_(sign_in), clock_(clock) {}

  struct Started {
    std::string device_code;  // 64 hex digits: only the device knows it
    std::string user_code;    // "BCDF-GHJK": 8 letters of 20 consonants, typed by a person
    int64_t expires_in = 0;
    int64_t interval = kInterval;
  };
  Result<Started> Start(std::string_view client_id);

  // The pending grant of a user code as a person types it (case and the dash aside); kNotFound when there is
  // none pending (unknown, decided, expired).
  Result<index::DeviceGrantRecord> Pending(std::string_view user_code);
  // Approves or denies it as `who`; kNotFound when it is no longer pending.
  Status Decide(const Actor& who, int64_t user_id, std::string_view user_code, bool approve);

  struct Issued {
    std::string access_token;
    std::string refresh_token;
    int64_t expires_in = 0;
  };
  Result<Issued> Poll(std::string_view device_code, std::string_view client);
  Result<Issued> Refresh(std::string_view refresh_token, std::string_view client);

  // "bcdf ghjk", "BCDFGHJK" → "BCDF-GHJK"; nullopt when it cannot be a user code.
  static std::optional<std::string> NormalUserCode(std::string_view typed);

 private:
  // An access token of user `user` expiring no later than `until`, and a refresh grant until `until`.
  Result<Issued> IssueFor(int64_t user, int64_t until, std::string_view client);

  index::Index& index_;
  PeopleService& people_;
  SignInService& sign_in_;
  const Clock& clock_;
};

}  // namespace cairn::people
