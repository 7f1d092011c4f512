#include "cli/backend.h"

#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <map>
#include <vector>

#include "http/auth.h"
#include "index/open_index.h"
#include "index/postgres/pg.h"
#include "store/open_store.h"
#include "xet/hashing.h"

namespace cairn::cli {

Result<config::Config> LoadBackendConfig(const std::string& config_file, const std::string& data_dir,
                                         const std::string& index, const std::string& store) {
  std::map<std::string, std::string> flags;
  if (!data_dir.empty()) flags["data_dir"] = data_dir;
  if (!index.empty()) flags["index"] = index;
  if (!store.empty()) flags["store"] = store;
  return config::LoadCommandConfig(config_file, std::move(flags));
}

CommandIndex OpenCommandIndex(const std::string& who, const std::string& config_file,
                              const std::string& data_dir, const std::string& index) {
  CommandIndex out;
  auto cfg = LoadBackendConfig(config_file, data_dir, index, "");
  if (!cfg) {
    std::cerr << who << cfg.error().message << "\n";
    out.status = 2;
    return out;
  }
  auto opened = OpenConfiguredIndex(*cfg);
  if (!opened) {
    std::cerr << who << opened.error().message << "\n";
    out.status = 1;
    return out;
  }
  out.cfg = std::move(*cfg);
  out.index = std::move(*opened);
  return out;
}

std::string Utc(int64_t unix_seconds) {
  const std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm utc{};
  gmtime_r(&t, &utc);
  char out[32];
  const size_t n = std::strftime(out, sizeof out, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return std::string(out, n);
}

index::AuditActor CommandActor(std::string_view kind) {
  std::string account = "unknown";
  // The account the process runs as (not $USER, which anyone can set): who ran it, as the system knows it.
  std::vector<char> buf(16384);
  passwd pw{};
  passwd* found = nullptr;
  if (getpwuid_r(geteuid(), &pw, buf.data(), buf.size(), &found) == 0 && found != nullptr) {
    account = found->pw_name;
  }
  return index::AuditActor{.actor = std::string(kind) + ":" + account, .token_id = "", .client = ""};
}

void RecordCommand(index::AuditIndex& log, std::string action, std::string ns, std::string target,
                   std::string detail) {
  const auto event = CommandActor().Event(Clock::System().UnixSeconds(), std::move(action), std::move(ns),
                                          std::move(target), std::move(detail));
  if (auto st = log.AppendAudit(event); !st.ok()) {
    std::cerr << "warning: the run was not recorded in the audit log: " << st.error().message << "\n";
  }
}

Result<std::unique_ptr<index::Index>> OpenConfiguredIndex(const config::Config& cfg) {
  index::OpenIndexOptions options;
  options.pool_size = cfg.index_pool_size;
  auto where = index::ParseIndexUrl(cfg.index);
  if (where.ok() && where->kind == index::IndexLocation::Kind::kSqlite) {
    std::error_code ec;
    const auto dir = std::filesystem::path(where->target).parent_path();
    if (!dir.empty()) std::filesystem::create_directories(dir, ec);
    if (ec) return IoError("index " + cfg.index + ": cannot create " + dir.string() + ": " + ec.message());
  }
  auto ix = index::OpenIndex(cfg.index, options);
  if (!ix.ok()) {
    return Error{ix.error().code, "index " + index::pg::RedactedUri(cfg.index) +
                                      " (setting `index`, --index, " + "CAIRN_INDEX): " + ix.error().message};
  }
  return ix;
}

store::OpenStoreOptions StoreOptionsOf(const config::Config& cfg) {
  store::OpenStoreOptions options;
  options.s3.endpoint = cfg.s3_endpoint;
  options.s3.region = cfg.s3_region;
  options.s3.path_style = cfg.s3_path_style;
  options.s3.access_key = cfg.s3_access_key_id;
  options.s3.secret_key = cfg.s3_secret_access_key;
  options.s3.session_token = cfg.s3_session_token;
  options.s3.max_connections = cfg.s3_max_connections;
  options.s3_part_bytes = cfg.s3_part_size;
  options.s3_public_endpoint = cfg.s3_public_endpoint;
  return options;
}

Result<std::unique_ptr<store::BlobStore>> OpenConfiguredStore(const config::Config& cfg) {
  auto st = store::OpenStore(cfg.store, StoreOptionsOf(cfg));
  if (!st) {
    return Error{st.error().code,
                 "store " + cfg.store + " (setting `store`, --store, CAIRN_STORE): " + st.error().message};
  }
  return st;
}

Result<ConfiguredBackend> OpenConfiguredBackend(const config::Config& cfg) {
  auto index = OpenConfiguredIndex(cfg);
  if (!index) return index.error();
  auto store = OpenConfiguredStore(cfg);
  if (!store) return store.error();
  return ConfiguredBackend{std::move(*index), std::move(*store)};
}

namespace {

class IndexSecrets final : public config::SecretTable {
 public:
  explicit IndexSecrets(index::SecretIndex& index) : index_(index) {}
  Result<std::vector<config::StoredSecret>> List() override {
    auto rows = index_.ListSecrets();
    if (!rows.ok()) return rows.error();
    std::vector<config::StoredSecret> out;
    out.reserve(rows->size());
    for (auto& r : *rows) out.push_back({std::move(r.name), std::move(r.value), r.created_at});
    return out;
  }
  Result<std::string> Shared(std::string_view name, std::string_view candidate) override {
    return index_.SharedSecret(name, candidate);
  }
  Result<bool> Add(std::string_view name, std::string_view value) override {
    return index_.AddSecret(name, value);
  }
  Result<bool> Remove(std::string_view name) override { return index_.DeleteSecret(name); }

 private:
  index::SecretIndex& index_;
};

}  // namespace

mirror::MirrorOptions MirrorOptionsOf(const config::Config& cfg) {
  mirror::MirrorOptions mo;
  mo.upstream.url = cfg.mirror_upstream;
  mo.upstream.token = cfg.mirror_token;
  mo.repos = cfg.mirror_repos;
  mo.token_to_read = cfg.mirror_read == "token";
  mo.revision_ttl = cfg.mirror_revision_ttl;
  mo.offline = cfg.mirror_offline;
  mo.max_bytes = cfg.mirror_max_bytes;
  mo.node_url = cfg.mirror_node_url;
  mo.spool_dir = std::filesystem::path(cfg.data_dir) / "mirror-spool";
  return mo;
}

std::unique_ptr<config::SecretTable> SecretsOf(index::SecretIndex& index) {
  return std::make_unique<IndexSecrets>(index);
}

Result<config::Secrets> LoadConfiguredSecrets(const config::Config& cfg, index::SecretIndex& index) {
  IndexSecrets table(index);
  return config::LoadSecrets(cfg, table, http::UnixNow());
}

cas::UrlKeys UrlKeysFrom(const config::SecretKeys& secrets) {
  return secrets.Map([](const std::string& secret) {
    return xet::KeyedHash(xet::Hash{}, {reinterpret_cast<const uint8_t*>(secret.data()), secret.size()});
  });
}

std::optional<RepoArg> ParseRepoArg(std::string text, bool with_revision) {
  RepoArg out;
  if (const size_t at = text.find('@'); at != std::string::npos) {
    if (!with_revision) return std::nullopt;
    out.revision = text.substr(at + 1);
    text.resize(at);
    if (out.revision.empty()) return std::nullopt;
  }
  std::string_view rest = text;
  for (const auto type : {hub::RepoType::kModel, hub::RepoType::kDataset, hub::RepoType::kSpace}) {
    const std::string prefix = std::string(hub::Plural(type)) + "/";
    if (rest.starts_with(prefix) && std::count(rest.begin(), rest.end(), '/') == 2) {
      out.id.type = type;
      rest.remove_prefix(prefix.size());
    }
  }
  const size_t slash = rest.find('/');
  if (slash == std::string_view::npos) return std::nullopt;
  out.id.ns = std::string(rest.substr(0, slash));
  out.id.name = std::string(rest.substr(slash + 1));
  if (!hub::ValidName(out.id.ns) || !hub::ValidName(out.id.name)) return std::nullopt;
  return out;
}

std::optional<OpenedBackend> OpenCommandBackend(const std::string& who, const std::string& config_file,
                                                const std::string& data_dir, const std::string& index,
                                                const std::string& store, int* status) {
  auto cfg = LoadBackendConfig(config_file, data_dir, index, store);
  if (!cfg) {
    std::cerr << who << cfg.error().message << "\n";
    *status = 2;
    return std::nullopt;
  }
  auto backend = OpenConfiguredBackend(*cfg);
  if (!backend) {
    std::cerr << who << backend.error().message << "\n";
    *status = 1;
    return std::nullopt;
  }
  return OpenedBackend{std::move(*cfg), std::move(*backend)};
}

}  // namespace cairn::cli
