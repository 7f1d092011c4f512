// The server's signing keys: token keys (kind jwt) and URL keys (kind url: transfer URLs and download links),
// kept apart so that one can be rotated without the other. Each kind has one or more keys with ids
// (common/key_set.h): the current one signs, every one verifies.
//
// A kind's keys come from the configuration when it names any (jwt_secret and/or jwt_keys, jwt_key_id; the
// same for url), else from the index's `secrets` table, shared by every node on the index:
//  - row "<kind>" is the legacy key (id "legacy"; it signs without naming itself). The first process to
//    need a key when the table has none of its kind stores one atomically: the value of a data directory's
//    <data_dir>/secrets/<kind>.key from before keys lived in the index, else 32 bytes from OpenSSL's
//    RAND_bytes as 64 hex characters (the key is that text, so a value copied into the configuration signs
//    identically);
//  - row "<kind>:<id>" is key <id>, added by RotateKey; RetireKey deletes a row.
// The current key is the newest one added at least 2 × key_refresh ago (every node re-reads the table that
// often, so none signs with a key another node does not know yet), or, while none is that old, the oldest.
//
// Secrets are never part of an error message or of what ListKeys returns.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/key_set.h"
#include "config/config.h"

namespace cairn::config {

enum class KeyKind { kJwt, kUrl };
std::string_view KeyKindName(KeyKind kind);  // "jwt", "url"

// One kind's keys; the material is the secret's text.
using SecretKeys = KeySet<std::string>;

struct Secrets {
  SecretKeys jwt;
  SecretKeys url;
};

// A row of the index's secrets table.
struct StoredSecret {
  std::string name;
  std::string value;
  int64_t created_at = 0;  // unix seconds
};

// The index's secrets table, as far as keys need it (the cli adapts index::Index to it).
class SecretTable {
 public:
  virtual ~SecretTable() = default;
  // Every row.
  virtual Result<std::vector<StoredSecret>> List() = 0;
  // The value of `name`, storing `candidate` first when there is none (atomically: one value wins for all).
  virtual Result<std::string> Shared(std::string_view name, std::string_view candidate) = 0;
  // Stores a new row stamped `now`; false (and nothing changed) when `name` exists.
  virtual Result<bool> Add(std::string_view name, std::string_view value) = 0;
  // Deletes the row; false when there was none.
  virtual Result<bool> Remove(std::string_view name) = 0;
};

// The keys for `config` at time `now` (unix seconds), creating the legacy ones in `table` if it has none.
Result<Secrets> LoadSecrets(const Config& config, SecretTable& table, int64_t now);
// One kind's keys; `table` may be null when the configuration supplies them (KeysConfigured).
Result<SecretKeys> LoadKeys(const Config& config, SecretTable* table, KeyKind kind, int64_t now);
bool KeysConfigured(const Config& config, KeyKind kind);

// What an operator sees of a key: never its secret.
struct KeyInfo {
  enum class State { kCurrent, kAccepted, kPending };  // pending: accepted, current once active_from passes
  KeyKind kind = KeyKind::kJwt;
  std::string id;
  State state = State::kAccepted;
  bool configured = false;  // from the configuration (then created_at and active_from are 0)
  int64_t created_at = 0;
  int64_t active_from = 0;  // when it may become current
};
std::string_view KeyStateName(KeyInfo::State state);  // "current", "accepted", "pending"

// Every key of both kinds, current first within a kind, then newest first.
Result<std::vector<KeyInfo>> ListKeys(const Config& config, SecretTable& table, int64_t now);

// Adds a new key of `kind` to the index (id `id`, or a generated one when empty); it becomes current at
// 2 × key_refresh from now, and the keys before stay accepted until retired. kMalformed when the
// configuration supplies that kind's keys or `id` is not a key id, kConflict when the id exists.
Result<KeyInfo> RotateKey(const Config& config, SecretTable& table, KeyKind kind, std::string id,
                          int64_t now);

// Deletes key `id` of `kind` from the index: what it signed is refused from then on (by each node at its next
// refresh). kNotFound for an unknown id, kInconsistent for the kind's last key, kMalformed when the
// configuration supplies that kind's keys.
Status RetireKey(const Config& config, SecretTable& table, KeyKind kind, std::string_view id, int64_t now);

// 32 random bytes as 64 hex characters.
Result<std::string> NewSecret();

// Where a data directory from before kept each key (read once, when the index has none yet).
std::filesystem::path LegacyKeyPath(const Config& config, std::string_view name);

}  // namespace cairn::config
