// What the commands run on, opened from their configuration the same way by every command (`serve`,
// `token`, `index …`): the index named by the `index` setting, and the signing secrets kept in it.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "cas/transfer_url.h"
#include "config/config.h"
#include "config/secrets.h"
#include "index/index.h"
#include "mirror/mirror_service.h"
#include "store/blob_store.h"
#include "store/open_store.h"

namespace cairn::cli {

// The configuration of a command that works on the index and the store, with its --data, --index and --store
// flags (empty: not given) over the file's settings.
Result<config::Config> LoadBackendConfig(const std::string& config_file, const std::string& data_dir,
                                         const std::string& index, const std::string& store);

// Opens (creating and migrating as needed) the configured index. Errors name the setting and where it
// points, without a password.
Result<std::unique_ptr<index::Index>> OpenConfiguredIndex(const config::Config& cfg);

// A command on the index alone (quota, keys, user, org, token): its configuration and the index it names.
// On failure `status` is the exit status (2: the configuration, 1: the index) and stderr said why after
// `who`.
struct CommandIndex {
  std::optional<config::Config> cfg;
  std::unique_ptr<index::Index> index;
  int status = 0;
};
CommandIndex OpenCommandIndex(const std::string& who, const std::string& config_file,
                              const std::string& data_dir, const std::string& index);

// "2026-12-07T06:45:00Z": a time as the commands print it.
std::string Utc(int64_t unix_seconds);

// Who runs a command, as the audit log records it: "cli:<the system account>" (no token, no address);
// `kind` "serve" for what the server does of its own accord (its scheduled collector).
index::AuditActor CommandActor(std::string_view kind = "cli");

// Records in `log` that this command ran, when it ends: for the operations that span
// many transactions (compaction, backups, restores, imports). A log that cannot take it is warned about on
// stderr; the command's work stands.
void RecordCommand(index::AuditIndex& log, std::string action, std::string ns, std::string target,
                   std::string detail);

// The s3_* settings, for a store (or a backup) at an s3:// URL.
store::OpenStoreOptions StoreOptionsOf(const config::Config& cfg);

// Opens the configured blob store (`store`, with the s3_* settings for s3://). Errors name the setting.
Result<std::unique_ptr<store::BlobStore>> OpenConfiguredStore(const config::Config& cfg);

// What most commands work on: the configured index and store, opened (errors as the two functions above).
struct ConfiguredBackend {
  std::unique_ptr<index::Index> index;
  std::unique_ptr<store::BlobStore> store;
};
Result<ConfiguredBackend> OpenConfiguredBackend(const config::Config& cfg);

// A command's configuration (its --config, --data, --index and --store over the file's settings) and backend,
// opened; prints why not after `who` and sets *status (2 for the configuration, 1 for the backend).
struct OpenedBackend {
  config::Config cfg;
  ConfiguredBackend backend;
};
std::optional<OpenedBackend> OpenCommandBackend(const std::string& who, const std::string& config_file,
                                                const std::string& data_dir, const std::string& index,
                                                const std::string& store, int* status);

// The mirror_* settings as the mirror takes them (upstream, token, repositories, read policy, TTL, offline).
mirror::MirrorOptions MirrorOptionsOf(const config::Config& cfg);

// A repository named on the command line: "[models/|datasets/|spaces/]NS/NAME[@REVISION]" (the revision only
// `with_revision`); nullopt for anything else.
struct RepoArg {
  hub::RepoId id;
  std::string revision;
};
std::optional<RepoArg> ParseRepoArg(std::string text, bool with_revision);

// The index's secrets table as config/secrets.h uses it.
std::unique_ptr<config::SecretTable> SecretsOf(index::SecretIndex& index);

// The signing keys: configured ones, else those stored in `index` (created there by the first process).
Result<config::Secrets> LoadConfiguredSecrets(const config::Config& cfg, index::SecretIndex& index);

// The URL keys (32 bytes each, what the server signs transfer URLs and links with) the URL secrets give.
cas::UrlKeys UrlKeysFrom(const config::SecretKeys& secrets);

}  // namespace cairn::cli
