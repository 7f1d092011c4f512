#include "people/device_flow.h"

#include <openssl/rand.h>

#include <array>
#include <utility>

#include "common/hex.h"
#include "people/token_text.h"

namespace cairn::people {

namespace {

// Letters a person reads and types without confusion (no vowels: no words; RFC 8628 §6.1).
constexpr std::string_view kUserCodeLetters = "BCDFGHJKLMNPQRSTVWXZ";

Error OAuth(ErrorCode code, std::string_view error, std::string message) {
  return Error{code, std::move(message), std::string(error)};
}

Result<std::string> NewUserCode() {
  std::array<uint8_t, 8> raw{};
  if (RAND_bytes(raw.data(), static_cast<int>(raw.size())) != 1) return IoError("RAND_bytes failed");
  std::string code;
  for (size_t i = 0; i < raw.size(); ++i) {
    if (i == 4) code.push_back('-');
    code.push_back(kUserCodeLetters[raw[i] % kUserCodeLetters.size()]);  // 256 % 20: a slight bias, 34 bits
  }
  return code;
}

}  // namespace

std::optional<std::string> DeviceFlow::NormalUserCode(std::string_view typed) {
  std::string letters;
  for (const char c : typed) {
    if (c == '-' || c == ' ') continue;
    const char upper = (c >= 'a' && c <= 'z') ? static_cast<char>(c - 'a' + 'A') : c;
    if (kUserCodeLetters.find(upper) == std::string_view::npos || letters.size() == 8) return std::nullopt;
    letters.push_back(upper);
  }
  if (letters.size() != 8) return std::nullopt;
  return letters.substr(0, 4) + "-" + letters.substr(4);
}

Result<DeviceFlow::Started> DeviceFlow::Start(std::string_view client_id) {
  if (client_id.empty() || client_id.size() > kMaxClientId) {
    return OAuth(ErrorCode::kMalformed, "invalid_request", "client_id is required (at most 128 bytes)");
  }
  for (int attempt = 0; attempt < 3; ++attempt) {
    auto device = NewTokenText();  // 32 random bytes, as a token's secret
    auto user_code = NewUserCode();
    if (!device) return device.error();
    if (!user_code) return user_code.error();
    const int64_t now = clock_.UnixSeconds();
    const index::DeviceGrantRecord grant{.device_hash = SecretHash(device->secret),
                                         .user_code = *user_code,
                                         .client_id = std::string(client_id),
                                         .created_at = now,
                                         .expires_at = now + kCodeLife.count()};
    auto st = index_.CreateDeviceGrant(grant);
    if (st) {
      return Started{.device_code = device->secret, .user_code = *user_code, .expires_in = kCodeLife.count()};
    }
    if (st.error().code != ErrorCode::kConflict) return st.error();  // else a user code taken: another
  }
  return IoError("no free user code");
}

Result<index::DeviceGrantRecord> DeviceFlow::Pending(std::string_view user_code) {
  const auto code = NormalUserCode(user_code);
  if (!code) return Error{ErrorCode::kNotFound, "no such code"};
  auto grant = index_.FindDeviceGrant(*code);
  if (!grant) return grant.error();
  if (!*grant || (*grant)->state != index::DeviceGrantState::kPending ||
      (*grant)->expires_at <= clock_.UnixSeconds()) {
    return Error{ErrorCode::kNotFound, "no pending sign-in has this code: it expired or was used"};
  }
  return std::move(**grant);
}

Status DeviceFlow::Decide(const Actor& who, int64_t user_id, std::string_view user_code, bool approve) {
  const auto code = NormalUserCode(user_code);
  if (!code) return Error{ErrorCode::kNotFound, "no such code"};
  const int64_t now = clock_.UnixSeconds();
  const auto event = who.Event(now, approve ? "device.approve" : "device.deny", who.actor, "device " + *code);
  auto decided = index_.DecideDeviceGrant(*code, user_id, approve, now, &event);
  if (!decided) return decided.error();
  if (!*decided)
    return Error{ErrorCode::kNotFound, "no pending sign-in has this code: it expired or was used"};
  return Ok{};
}

Result<DeviceFlow::Issued> DeviceFlow::Poll(std::string_view device_code, std::string_view client) {
  const int64_t now = clock_.UnixSeconds();
  auto grant = index_.PollDeviceGrant(SecretHash(device_code), now);
  if (!grant) return grant.error();
  if (!*grant) return OAuth(ErrorCode::kUnauthorized, "invalid_grant", "unknown device code");
  const index::DeviceGrantRecord& g = **grant;
  if (g.expires_at <= now) return OAuth(ErrorCode::kUnauthorized, "expired_token", "the device code expired");
  switch (g.state) {
    case index::DeviceGrantState::kPending:
      if (g.polled_at != 0 && now - g.polled_at < kInterval - 1) {
        return OAuth(ErrorCode::kUnauthorized, "slow_down", "polled again within the interval");
      }
      return OAuth(ErrorCode::kUnauthorized, "authorization_pending", "not approved yet");
    case index::DeviceGrantState::kDenied:
      return OAuth(ErrorCode::kUnauthorized, "access_denied", "the sign-in was denied");
    case index::DeviceGrantState::kIssued:
      return OAuth(ErrorCode::kUnauthorized, "invalid_grant", "a token was issued for this code already");
    case index::DeviceGrantState::kApproved:
      break;
  }
  auto issued = index_.IssueDeviceGrant(g.device_hash);
  if (!issued) return issued.error();
  if (!*issued)
    return OAuth(ErrorCode::kUnauthorized, "invalid_grant", "a token was issued for this code already");
  return IssueFor(g.user, now + kRefreshLife.count(), client);
}

Result<DeviceFlow::Issued> DeviceFlow::Refresh(std::string_view refresh_token, std::string_view client) {
  if (!refresh_token.starts_with(kRefreshPrefix))
    return OAuth(ErrorCode::kUnauthorized, "invalid_grant", "not a refresh token");
  auto grant = sign_in_.Find(refresh_token.substr(kRefreshPrefix.size()), SignInService::kDeviceMethod);
  if (!grant)
    return OAuth(ErrorCode::kUnauthorized, "invalid_grant", "the refresh token is unknown, used or expired");
  auto ended = sign_in_.End(grant->id);  // used once: of two refreshes with it, one wins
  if (!ended) return ended.error();
  if (!*ended) return OAuth(ErrorCode::kUnauthorized, "invalid_grant", "the refresh token was used");
  return IssueFor(grant->user, grant->expires_at, client);
}

Result<DeviceFlow::Issued> DeviceFlow::IssueFor(int64_t user, int64_t until, std::string_view client) {
  auto refresh = sign_in_.Start(user, SignInService::kDeviceMethod, client, until);
  if (!refresh) return OAuth(ErrorCode::kUnauthorized, "invalid_grant", refresh.error().message);
  auto accounts = index_.GetAccounts(std::span<const int64_t>(&user, 1));
  if (!accounts) return accounts.error();
  if (accounts->empty()) return OAuth(ErrorCode::kUnauthorized, "invalid_grant", "the user is gone");
  const std::string& name = accounts->front().name;
  const int64_t now = clock_.UnixSeconds();
  const auto life = std::chrono::seconds(std::min(kAccessLife.count(), until - now));
  const Actor actor{.actor = name, .token_id = "", .client = std::string(client)};
  auto token = people_.CreateToken(actor, name, "hf auth login", TokenRole::kWrite, {}, life);
  if (!token) return token.error();
  return Issued{.access_token = token->text,
                .refresh_token = std::string(kRefreshPrefix) + refresh->cookie,
                .expires_in = life.count()};
}

}  // namespace cairn::people
