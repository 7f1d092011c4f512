#include "people/sign_in.h"

#include <openssl/crypto.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <sodium.h>

#include <array>
#include <utility>

#include "common/hex.h"
#include "people/names.h"
#include "people/publishers.h"

namespace cairn::people {

namespace {

constexpr size_t kIdBytes = 16;
constexpr size_t kSecretBytes = 32;
constexpr size_t kMaxFailureKeys = 100'000;  // forgotten all at once past this: memory stays bounded
const char kWrongCredentials[] = "wrong user name or password";

Result<std::string> RandomHex(size_t bytes) {
  std::vector<uint8_t> raw(bytes);
  if (RAND_bytes(raw.data(), static_cast<int>(raw.size())) != 1) return IoError("RAND_bytes failed");
  return HexEncode(raw);
}

struct Cookie {
  std::string_view id;
  std::string_view secret;
};

bool IsLowerHex(std::string_view s) {
  for (const char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

std::optional<Cookie> ParseCookie(std::string_view text) {
  if (text.size() != kIdBytes * 2 + 1 + kSecretBytes * 2 || text[kIdBytes * 2] != '.') return std::nullopt;
  Cookie c{text.substr(0, kIdBytes * 2), text.substr(kIdBytes * 2 + 1)};
  if (!IsLowerHex(c.id) || !IsLowerHex(c.secret)) return std::nullopt;
  return c;
}

Status CheckPassword(std::string_view password) {
  if (password.size() < SignInService::kMinPassword || password.size() > SignInService::kMaxPassword) {
    return Malformed("a password has " + std::to_string(SignInService::kMinPassword) + " to " +
                     std::to_string(SignInService::kMaxPassword) + " bytes");
  }
  return Ok{};
}

void InitSodium() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (sodium_init() < 0) std::abort();  // no random source: nothing here could be safe
  });
}

}  // namespace

SignInService::SignInService(index::Index& index, Directory& directory, const Clock& clock)
    : index_(index), directory_(directory), clock_(clock) {
  InitSodium();
  auto dummy = Hash("a password nobody has, for unknown users");
  if (dummy.ok()) dummy_hash_ = std::move(*dummy);
}

Result<std::string> SignInService::Hash(std::string_view password) {
  std::array<char, crypto_pwhash_STRBYTES> out{};
  hashing_.acquire();
  const int rc = crypto_pwhash_str(out.data(), password.data(), password.size(),
                                   crypto_pwhash_OPSLIMIT_INTERACTIVE, kHashMemory);
  hashing_.release();
  if (rc != 0) return IoError("hashing a password failed (out of memory)");
  return std::string(out.data());
}

bool SignInService::Verify(const std::string& hash, std::string_view password) {
  if (hash.empty()) return false;
  hashing_.acquire();
  const bool ok = crypto_pwhash_str_verify(hash.c_str(), password.data(), password.size()) == 0;
  hashing_.release();
  return ok;
}

Status SignInService::SetPassword(const Actor& by, std::string_view name, std::string_view password) {
  if (auto st = CheckPassword(password); !st) return st;
  auto user = index_.FindAccount(name);
  if (!user) return user.error();
  if (user->kind != AccountKind::kUser) return Malformed(std::string(name) + " is an organization");
  auto hash = Hash(password);
  if (!hash) return hash.error();
  const auto event = by.Event(clock_.UnixSeconds(), "password.set", user->name, "user " + user->name);
  return index_.SetPassword(user->id, std::move(*hash), &event);
}

Status SignInService::RemovePassword(const Actor& by, std::string_view name) {
  auto user = index_.FindAccount(name);
  if (!user) return user.error();
  const auto event = by.Event(clock_.UnixSeconds(), "password.remove", user->name, "user " + user->name);
  return index_.SetPassword(user->id, std::nullopt, &event);
}

bool SignInService::MayTry(const std::string& key, int64_t now) {
  std::lock_guard lock(failures_mu_);
  auto it = failures_.find(key);
  if (it == failures_.end()) return true;
  if (now - it->second.since >= kFailureWindow.count()) {
    failures_.erase(it);
    return true;
  }
  return it->second.count < kMaxFailures;
}

void SignInService::NoteFailure(const std::string& key, int64_t now) {
  std::lock_guard lock(failures_mu_);
  if (failures_.size() >= kMaxFailureKeys && !failures_.contains(key)) failures_.clear();
  auto [it, fresh] = failures_.try_emplace(key, Failures{.count = 0, .since = now});
  ++it->second.count;
}

void SignInService::Forget(const std::string& key) {
  std::lock_guard lock(failures_mu_);
  failures_.erase(key);
}

Result<NewSession> SignInService::WithPassword(std::string_view name, std::string_view password,
                                               std::string_view client) {
  const int64_t now = clock_.UnixSeconds();
  const std::string key = index::FoldedName(name) + "\n" + std::string(client);
  if (!MayTry(key, now)) {
    return Error{ErrorCode::kDenied, "too many failed sign-ins: try again in " +
                                         std::to_string(kFailureWindow.count() / 60) + " minutes"};
  }
  std::optional<index::AccountRecord> user;
  std::string hash;
  if (password.size() <= kMaxPassword) {
    if (auto found = index_.FindAccount(name);
        found && found->kind == AccountKind::kUser && !found->disabled) {
      auto stored = index_.GetPassword(found->id);
      if (!stored) return stored.error();
      if (*stored) {
        user = std::move(*found);
        hash = std::move(**stored);
      }
    } else if (!found && found.error().code != ErrorCode::kNotFound) {
      return found.error();
    }
  }
  const bool ok = Verify(user ? hash : dummy_hash_, password) && user.has_value();
  if (!ok) {
    NoteFailure(key, now);
    return Error{ErrorCode::kUnauthorized, kWrongCredentials};
  }
  Forget(key);
  return Start(user->id, "password", client);
}

Result<NewSession> SignInService::Start(int64_t user_id, std::string_view method, std::string_view client,
                                        std::optional<int64_t> expires) {
  auto id = RandomHex(kIdBytes);
  auto secret = RandomHex(kSecretBytes);
  if (!id) return id.error();
  if (!secret) return secret.error();
  const int64_t now = clock_.UnixSeconds();
  index::SessionRecord record{.id = *id,
                              .secret_hash = SecretHash(*secret),
                              .user = user_id,
                              .created_at = now,
                              .expires_at = expires.value_or(now + kSessionLife.count()),
                              .method = std::string(method),
                              .client = std::string(client)};
  const std::string name = "session " + record.id.substr(0, 8);
  auto person = directory_.SessionPerson(user_id, record.expires_at, name);
  if (!person) {
    // A user made or enabled a moment ago (on another node): the directory reads what changed, then knows.
    directory_.RefreshForUnknown();
    person = directory_.SessionPerson(user_id, record.expires_at, name);
  }
  if (!person) return Error{ErrorCode::kUnauthorized, kWrongCredentials};
  const Actor actor{.actor = person->user, .token_id = person->token_id, .client = std::string(client)};
  const auto event = actor.Event(now, "session.create", person->user, "user " + person->user, record.method);
  if (auto st = index_.CreateSession(record, &event); !st) return st.error();
  return NewSession{.cookie = *id + "." + *secret, .id = *id, .expires = record.expires_at};
}

Result<index::SessionRecord> SignInService::Find(std::string_view cookie, std::string_view method) {
  const auto parsed = ParseCookie(cookie);
  if (!parsed) return Error{ErrorCode::kUnauthorized, "not a session"};
  auto found = index_.FindSession(parsed->id);
  if (!found) return found.error();
  if (!*found || !SameHash(SecretHash(parsed->secret), (*found)->secret_hash) ||
      ((*found)->method == kDeviceMethod) != (method == kDeviceMethod)) {
    return Error{ErrorCode::kUnauthorized, "no such session"};
  }
  if ((*found)->expires_at <= clock_.UnixSeconds())
    return Error{ErrorCode::kUnauthorized, "the session expired"};
  return std::move(**found);
}

Result<bool> SignInService::End(std::string_view id) {
  return index_.DeleteSession(id, nullptr);
}

Result<SignedIn> SignInService::Resolve(std::string_view cookie) {
  auto found = Find(cookie, "browser");
  if (!found) return found.error();
  auto person = directory_.SessionPerson(found->user, found->expires_at, "session " + found->id.substr(0, 8));
  if (!person) return person.error();
  return SignedIn{.person = std::move(*person), .session_id = found->id, .csrf = CsrfToken(cookie)};
}

Status SignInService::SignOut(std::string_view cookie, std::string_view client) {
  auto who = Resolve(cookie);
  if (!who) return Ok{};
  const Actor actor{
      .actor = who->person.user, .token_id = who->person.token_id, .client = std::string(client)};
  const auto event =
      actor.Event(clock_.UnixSeconds(), "session.end", who->person.user, "user " + who->person.user);
  auto gone = index_.DeleteSession(who->session_id, &event);
  if (!gone) return gone.error();
  return Ok{};
}

std::string SignInService::CsrfToken(std::string_view cookie) {
  const auto parsed = ParseCookie(cookie);
  if (!parsed) return {};
  std::array<uint8_t, EVP_MAX_MD_SIZE> mac{};
  unsigned int length = 0;
  static constexpr std::string_view kPurpose = "cairn form token";
  HMAC(EVP_sha256(), parsed->secret.data(), static_cast<int>(parsed->secret.size()),
       reinterpret_cast<const uint8_t*>(kPurpose.data()), kPurpose.size(), mac.data(), &length);
  return HexEncode(std::span<const uint8_t>(mac.data(), length));
}

bool SignInService::CsrfMatches(std::string_view cookie, std::string_view token) {
  const std::string expected = CsrfToken(cookie);
  return !expected.empty() && expected.size() == token.size() &&
         CRYPTO_memcmp(expected.data(), token.data(), token.size()) == 0;
}

Result<std::optional<int64_t>> SignInService::LinkedUser(std::string_view issuer, std::string_view subject) {
  return index_.FindIdentity(issuer, subject);
}

Status SignInService::Link(const Actor& by, std::string_view name, std::string_view issuer,
                           std::string_view subject) {
  if (subject.empty() || subject.size() > kMaxSubject || !ValidIssuer(issuer))
    return Malformed("an issuer is an https URL and a subject 1 to 255 bytes");
  auto user = index_.FindAccount(name);
  if (!user) return user.error();
  const int64_t now = clock_.UnixSeconds();
  const auto event = by.Event(now, "identity.link", user->name, "user " + user->name,
                              std::string(issuer) + "#" + std::string(subject));
  return index_.LinkIdentity(
      {.issuer = std::string(issuer), .subject = std::string(subject), .user = user->id, .created_at = now},
      &event);
}

Result<bool> SignInService::Unlink(const Actor& by, std::string_view issuer, std::string_view subject) {
  auto user_id = index_.FindIdentity(issuer, subject);
  if (!user_id) return user_id.error();
  if (!*user_id) return false;
  const int64_t id = **user_id;
  auto users = index_.GetAccounts(std::span<const int64_t>(&id, 1));
  const std::string name = users && !users->empty() ? users->front().name : std::string();
  const auto event = by.Event(clock_.UnixSeconds(), "identity.unlink", name, "user " + name,
                              std::string(issuer) + "#" + std::string(subject));
  return index_.UnlinkIdentity(issuer, subject, &event);
}

Result<std::vector<index::IdentityRecord>> SignInService::Identities(std::string_view name) {
  auto user = index_.FindAccount(name);
  if (!user) return user.error();
  return index_.IdentitiesOf(user->id);
}

}  // namespace cairn::people
