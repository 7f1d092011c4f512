#include "config/secrets.h"

#include <fcntl.h>
#include <openssl/rand.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <system_error>

#include "common/hex.h"
#include "common/unique_fd.h"

namespace cairn::config {
namespace {

std::string Errno(const std::string& what, const std::filesystem::path& p) {
  return what + " " + p.string() + ": " + std::error_code(errno, std::generic_category()).message();
}

Result<std::string> ReadSecret(const std::filesystem::path& path) {
  const UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return NotFound(Errno("cannot open", path));
  std::string data;
  char buf[512];
  for (;;) {
    const ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Malformed(Errno("cannot read", path));
    if (n == 0) break;
    data.append(buf, static_cast<size_t>(n));
    if (data.size() > 4096) break;
  }
  while (!data.empty() && (data.back() == '\n' || data.back() == '\r' || data.back() == ' ')) data.pop_back();
  if (data.size() < 32) return Malformed(path.string() + ": secret shorter than 32 characters");
  return data;
}

}  // namespace

Result<std::string> NewSecret() {
  unsigned char raw[32];
  if (RAND_bytes(raw, sizeof raw) != 1) return IoError("RAND_bytes failed");
  return HexEncode(raw);
}

std::filesystem::path LegacyKeyPath(const Config& config, std::string_view name) {
  return std::filesystem::path(config.data_dir) / "secrets" / (std::string(name) + ".key");
}

std::string_view KeyKindName(KeyKind kind) {
  return kind == KeyKind::kJwt ? "jwt" : "url";
}

std::string_view KeyStateName(KeyInfo::State state) {
  switch (state) {
    case KeyInfo::State::kCurrent:
      return "current";
    case KeyInfo::State::kPending:
      return "pending";
    case KeyInfo::State::kAccepted:
      return "accepted";
  }
  return "accepted";
}

namespace {

struct KindSettings {
  const std::optional<std::string>& legacy;
  const std::vector<NamedSecret>& keys;
  const std::string& current;
  bool configured() const { return legacy.has_value() || !keys.empty(); }
};

KindSettings SettingsOf(const Config& c, KeyKind kind) {
  if (kind == KeyKind::kJwt) return {c.jwt_secret, c.jwt_keys, c.jwt_key_id};
  return {c.url_secret, c.url_keys, c.url_key_id};
}

// A key as the index holds it.
struct IndexKey {
  std::string id;
  std::string secret;
  int64_t created_at = 0;
};

// One kind's keys in the index, and which is current at `now`.
struct IndexKeys {
  std::vector<IndexKey> keys;  // oldest first
  size_t current = 0;
};

int64_t Activation(const Config& config) {
  return 2 * static_cast<int64_t>(config.key_refresh.count());
}

Result<IndexKeys> ReadIndexKeys(const Config& config, SecretTable& table, KeyKind kind, int64_t now) {
  auto rows = table.List();
  if (!rows.ok()) return rows.error();
  const std::string legacy_name(KeyKindName(kind));
  const std::string prefix = legacy_name + ":";
  IndexKeys out;
  for (auto& row : *rows) {
    std::string id;
    if (row.name == legacy_name) {
      id = std::string(kLegacyKeyId);
    } else if (row.name.starts_with(prefix)) {
      id = row.name.substr(prefix.size());
    } else {
      continue;
    }
    if (!ValidKeyId(id)) return Inconsistent("secret " + legacy_name + " key in the index has an invalid id");
    if (row.value.size() < 32)
      return Inconsistent("secret " + row.name + " in the index is shorter than 32 characters");
    out.keys.push_back({std::move(id), std::move(row.value), row.created_at});
  }
  // Oldest first; within one second the legacy key (every rotated key came after it), then by id, so that
  // every node orders alike.
  std::sort(out.keys.begin(), out.keys.end(), [](const IndexKey& a, const IndexKey& b) {
    const bool a_legacy = a.id == kLegacyKeyId;
    const bool b_legacy = b.id == kLegacyKeyId;
    if (a.created_at != b.created_at) return a.created_at < b.created_at;
    if (a_legacy != b_legacy) return a_legacy;
    return a.id < b.id;
  });
  // The newest key every node has had time to learn; while none has, the oldest.
  for (size_t i = out.keys.size(); i-- > 0;) {
    if (out.keys[i].created_at + Activation(config) <= now) {
      out.current = i;
      break;
    }
  }
  return out;
}

// The kind's index keys, storing the legacy key first when the index has none of that kind.
Result<IndexKeys> LoadIndexKeys(const Config& config, SecretTable& table, KeyKind kind, int64_t now) {
  auto keys = ReadIndexKeys(config, table, kind, now);
  if (!keys.ok() || !keys->keys.empty()) return keys;
  const std::string name(KeyKindName(kind));
  auto candidate = ReadSecret(LegacyKeyPath(config, name));
  if (!candidate.ok()) {
    if (candidate.error().code != ErrorCode::kNotFound) return candidate.error();
    candidate = NewSecret();
    if (!candidate.ok()) return candidate.error();
  }
  auto stored = table.Shared(name, *candidate);
  if (!stored.ok()) return Error{stored.error().code, "secret " + name + ": " + stored.error().message};
  return ReadIndexKeys(config, table, kind, now);
}

}  // namespace

bool KeysConfigured(const Config& config, KeyKind kind) {
  return SettingsOf(config, kind).configured();
}

Result<SecretKeys> LoadKeys(const Config& config, SecretTable* table, KeyKind kind, int64_t now) {
  const KindSettings set = SettingsOf(config, kind);
  std::vector<SecretKeys::Key> keys;
  std::string current;
  if (set.configured()) {
    if (set.legacy) keys.push_back({std::string(kLegacyKeyId), *set.legacy});
    for (const auto& k : set.keys) keys.push_back({k.id, k.secret});
    current = !set.current.empty() ? set.current : keys.back().id;
  } else {
    if (table == nullptr)
      return Malformed(std::string(KeyKindName(kind)) + " keys: no index to read them from");
    auto stored = LoadIndexKeys(config, *table, kind, now);
    if (!stored.ok()) return stored.error();
    for (auto& k : stored->keys) keys.push_back({k.id, std::move(k.secret)});
    current = keys[stored->current].id;
  }
  auto made = SecretKeys::Make(std::move(keys), current);
  if (!made) return Inconsistent(std::string(KeyKindName(kind)) + " keys: duplicate ids or no current key");
  return std::move(*made);
}

namespace {

Status ManagedInIndex(const Config& config, KeyKind kind) {
  if (!SettingsOf(config, kind).configured()) return Ok{};
  const std::string k(KeyKindName(kind));
  return Malformed("the " + k + " keys come from the configuration (" + k + "_secret / " + k + "_keys / " +
                   k + "_key_id): change them there and restart the nodes");
}

}  // namespace

Result<Secrets> LoadSecrets(const Config& config, SecretTable& table, int64_t now) {
  auto jwt = LoadKeys(config, &table, KeyKind::kJwt, now);
  if (!jwt.ok()) return jwt.error();
  auto url = LoadKeys(config, &table, KeyKind::kUrl, now);
  if (!url.ok()) return url.error();
  return Secrets{std::move(*jwt), std::move(*url)};
}

Result<std::vector<KeyInfo>> ListKeys(const Config& config, SecretTable& table, int64_t now) {
  std::vector<KeyInfo> out;
  for (const KeyKind kind : {KeyKind::kJwt, KeyKind::kUrl}) {
    const KindSettings set = SettingsOf(config, kind);
    std::vector<KeyInfo> infos;
    if (set.configured()) {
      auto keys = LoadKeys(config, &table, kind, now);
      if (!keys.ok()) return keys.error();
      for (const auto& k : keys->keys()) {
        KeyInfo info{.kind = kind, .id = k.id, .configured = true};
        if (k.id == keys->current().id) info.state = KeyInfo::State::kCurrent;
        infos.push_back(std::move(info));
      }
    } else {
      auto keys = ReadIndexKeys(config, table, kind, now);
      if (!keys.ok()) return keys.error();
      for (size_t i = 0; i < keys->keys.size(); ++i) {
        const IndexKey& k = keys->keys[i];
        KeyInfo info{.kind = kind,
                     .id = k.id,
                     .created_at = k.created_at,
                     .active_from = k.created_at + Activation(config)};
        if (i == keys->current) {
          info.state = KeyInfo::State::kCurrent;
        } else if (i > keys->current) {
          info.state = KeyInfo::State::kPending;
        }
        infos.push_back(std::move(info));
      }
      std::reverse(infos.begin(), infos.end());  // newest first
    }
    std::stable_partition(infos.begin(), infos.end(),
                          [](const KeyInfo& k) { return k.state == KeyInfo::State::kCurrent; });
    out.insert(out.end(), infos.begin(), infos.end());
  }
  return out;
}

Result<KeyInfo> RotateKey(const Config& config, SecretTable& table, KeyKind kind, std::string id,
                          int64_t now) {
  if (auto st = ManagedInIndex(config, kind); !st) return st.error();
  // The legacy key first, if this kind has none yet: a data directory's old key file must not be skipped.
  if (auto keys = LoadIndexKeys(config, table, kind, now); !keys.ok()) return keys.error();
  if (id.empty()) {
    auto random = NewSecret();
    if (!random.ok()) return random.error();
    const std::time_t t = static_cast<std::time_t>(now);
    std::tm utc{};
    gmtime_r(&t, &utc);
    char date[16];
    const size_t n = std::strftime(date, sizeof date, "%Y%m%d", &utc);
    id = std::string(date, n) + "-" + random->substr(0, 6);
  }
  if (!ValidKeyId(id) || id == kLegacyKeyId)
    return Malformed("key id must be 1 to 64 of A-Z a-z 0-9 . _ - (and not \"legacy\")");
  auto secret = NewSecret();
  if (!secret.ok()) return secret.error();
  const std::string name = std::string(KeyKindName(kind)) + ":" + id;
  auto added = table.Add(name, *secret);
  if (!added.ok()) return added.error();
  if (!*added) return Conflict(std::string(KeyKindName(kind)) + " key " + id + " exists");
  auto keys = ReadIndexKeys(config, table, kind, now);
  if (!keys.ok()) return keys.error();
  for (size_t i = 0; i < keys->keys.size(); ++i) {
    if (keys->keys[i].id != id) continue;
    const auto state = i == keys->current ? KeyInfo::State::kCurrent : KeyInfo::State::kPending;
    return KeyInfo{.kind = kind,
                   .id = id,
                   .state = state,
                   .created_at = keys->keys[i].created_at,
                   .active_from = keys->keys[i].created_at + Activation(config)};
  }
  return IoError(name + " vanished after it was stored");
}

Status RetireKey(const Config& config, SecretTable& table, KeyKind kind, std::string_view id, int64_t now) {
  if (auto st = ManagedInIndex(config, kind); !st) return st.error();
  const std::string k(KeyKindName(kind));
  auto keys = ReadIndexKeys(config, table, kind, now);
  if (!keys.ok()) return keys.error();
  const bool known =
      std::any_of(keys->keys.begin(), keys->keys.end(), [&](const IndexKey& key) { return key.id == id; });
  if (!known) return NotFound("no " + k + " key " + std::string(id) + " in the index");
  // With none left, the next start would make a fresh legacy key: every token or URL would stop working.
  if (keys->keys.size() == 1)
    return Inconsistent(k + " key " + std::string(id) + " is the only one: rotate first");
  auto removed = table.Remove(id == kLegacyKeyId ? k : k + ":" + std::string(id));
  if (!removed.ok()) return removed.error();
  if (!*removed) return NotFound("no " + k + " key " + std::string(id) + " in the index");
  return Ok{};
}

}  // namespace cairn::config
