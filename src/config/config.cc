#include "config/config.h"

#include <toml++/toml.h>

#include <cctype>
#include <charconv>
#include <filesystem>
#include <functional>
#include <iterator>
#include <thread>
#include <vector>

#include "common/key_set.h"

extern char** environ;  // NOLINT(readability-redundant-declaration): POSIX, not declared by <unistd.h> in C++

namespace cairn::config {
namespace {

using Setter = std::function<Status(Config&, std::string_view)>;

Error Bad(std::string_view where, std::string_view what) {
  return Malformed(std::string(where) + ": " + std::string(what));
}

Result<uint64_t> ParseCount(std::string_view text, uint64_t min, uint64_t max) {
  uint64_t v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || p != text.data() + text.size())
    return Malformed("not a number: \"" + std::string(text) + "\"");
  if (v < min || v > max)
    return Malformed(std::to_string(v) + " is out of range [" + std::to_string(min) + ", " +
                     std::to_string(max) + "]");
  return v;
}

struct Field {
  const char* name;
  Setter set;
  bool list = false;  // TOML may give an array of strings (joined with commas)
};

// A setter for a count setting in [min, max].
Setter CountSetter(size_t Config::*member, uint64_t min, uint64_t max) {
  return [member, min, max](Config& c, std::string_view v) -> Status {
    auto n = ParseCount(v, min, max);
    if (!n) return n.error();
    c.*member = *n;
    return Ok{};
  };
}

// A setter for a byte size in [min, max] ("16MiB").
Setter ByteSizeSetter(size_t Config::*member, uint64_t min, uint64_t max) {
  return [member, min, max](Config& c, std::string_view v) -> Status {
    auto n = ParseByteSize(v);
    if (!n) return n.error();
    if (*n < min || *n > max)
      return Malformed(std::to_string(*n) + " bytes is out of range [" + std::to_string(min) + ", " +
                       std::to_string(max) + "]");
    c.*member = *n;
    return Ok{};
  };
}

// A setter for a positive duration ("90s", "12h", "7d").
Setter DurationSetter(std::chrono::seconds Config::*member) {
  return [member](Config& c, std::string_view v) -> Status {
    auto d = ParseDuration(v);
    if (!d) return d.error();
    c.*member = *d;
    return Ok{};
  };
}

// A setter for a duration that may be zero ("0": none, as a setting documents it).
Setter DurationOrZeroSetter(std::chrono::seconds Config::*member) {
  return [member](Config& c, std::string_view v) -> Status {
    auto d = ParseDuration(v, true);
    if (!d) return d.error();
    c.*member = *d;
    return Ok{};
  };
}

// An http:// or https:// URL naming a host, kept without trailing slashes.
Setter UrlSetter(std::string Config::*member) {
  return [member](Config& c, std::string_view v) -> Status {
    if (!v.starts_with("http://") && !v.starts_with("https://"))
      return Malformed("must start with http:// or https://");
    std::string url(v);
    const size_t host = url.find("://") + 3;
    while (url.size() > host && url.back() == '/') url.pop_back();
    // "http://" alone would become "http:" above, and every URL built on it would name no server.
    if (url.size() == host || url[host] == '/')
      return Malformed("must name a host: http://HOST[:PORT][/PATH]");
    c.*member = url;
    return Ok{};
  };
}

// A comma-separated list; blanks around entries and empty entries are dropped.
Setter ListSetter(std::vector<std::string> Config::*member) {
  return [member](Config& c, std::string_view v) -> Status {
    (c.*member).clear();
    while (!v.empty()) {
      const size_t comma = v.find(',');
      std::string_view entry = v.substr(0, comma);
      while (!entry.empty() && entry.front() == ' ') entry.remove_prefix(1);
      while (!entry.empty() && entry.back() == ' ') entry.remove_suffix(1);
      if (!entry.empty()) (c.*member).emplace_back(entry);
      v = comma == std::string_view::npos ? std::string_view() : v.substr(comma + 1);
    }
    return Ok{};
  };
}

// A non-empty string.
Setter StringSetter(std::string Config::*member) {
  return [member](Config& c, std::string_view v) -> Status {
    if (v.empty()) return Malformed("must not be empty");
    c.*member = std::string(v);
    return Ok{};
  };
}

Setter BoolSetter(bool Config::*member) {
  return [member](Config& c, std::string_view v) -> Status {
    if (v == "true" || v == "1") {
      c.*member = true;
    } else if (v == "false" || v == "0") {
      c.*member = false;
    } else {
      return Malformed("must be true or false");
    }
    return Ok{};
  };
}

// A setter for a list of signing keys: "id:secret[,id:secret...]". Errors never quote a secret.
Setter KeysSetter(std::vector<NamedSecret> Config::*member) {
  return [member](Config& c, std::string_view v) -> Status {
    std::vector<NamedSecret> keys;
    size_t n = 0;
    while (!v.empty()) {
      ++n;
      const size_t comma = std::min(v.find(','), v.size());
      std::string_view item = v.substr(0, comma);
      v.remove_prefix(std::min(comma + 1, v.size()));
      while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
      while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
      const size_t colon = item.find(':');
      const std::string where = "key " + std::to_string(n);
      if (colon == std::string_view::npos) return Malformed(where + " is not ID:SECRET");
      NamedSecret k{std::string(item.substr(0, colon)), std::string(item.substr(colon + 1))};
      if (!ValidKeyId(k.id)) return Malformed(where + ": the id must be 1 to 64 of A-Z a-z 0-9 . _ -");
      if (k.id == kLegacyKeyId)
        return Malformed(where + ": the id \"legacy\" is the key of jwt_secret / url_secret");
      if (k.secret.size() < 32)
        return Malformed(where + " (" + k.id + "): secret shorter than 32 characters");
      for (const auto& other : keys)
        if (other.id == k.id) return Malformed(where + ": id " + k.id + " given twice");
      keys.push_back(std::move(k));
    }
    c.*member = std::move(keys);
    return Ok{};
  };
}

Setter KeyIdSetter(std::string Config::*member) {
  return [member](Config& c, std::string_view v) -> Status {
    if (!ValidKeyId(v)) return Malformed("must be 1 to 64 of A-Z a-z 0-9 . _ -");
    c.*member = std::string(v);
    return Ok{};
  };
}

// A configured key id must name a configured key of its kind.
Status CheckKeyId(std::string_view setting, const std::string& id, const std::optional<std::string>& legacy,
                  const std::vector<NamedSecret>& keys) {
  if (id.empty()) return Ok{};
  if (id == kLegacyKeyId && legacy) return Ok{};
  for (const auto& k : keys)
    if (k.id == id) return Ok{};
  return Malformed(std::string(setting) + ": " + id + " is not a key of the configuration (" +
                   (id == kLegacyKeyId ? "legacy is the key of the *_secret setting" : "list it in *_keys") +
                   ")");
}

// Where the server listens, what it calls itself, and where it keeps its data.
std::vector<Field> ServerFields() {
  return {
      {"listen",
       [](Config& c, std::string_view v) -> Status {
         auto hp = ParseListen(v);
         if (!hp) return hp.error();
         c.listen = std::string(v);
         return Ok{};
       }},
      {"data_dir",
       [](Config& c, std::string_view v) -> Status {
         if (v.empty()) return Malformed("must not be empty");
         c.data_dir = std::string(v);
         return Ok{};
       }},
      {"public_url", UrlSetter(&Config::public_url)},  // clients append "/v1/..."
      {"content_url", UrlSetter(&Config::content_url)},
      {"tls_cert", StringSetter(&Config::tls_cert)},
      {"tls_key", StringSetter(&Config::tls_key)},
  };
}

// The index and the blob store (and the backups' store), and how clients reach the stored bytes.
std::vector<Field> StorageFields() {
  return {
      {"index",
       [](Config& c, std::string_view v) -> Status {
         // Checked in full when opened (index/open_index.h); here only which kind it is.
         if (!v.starts_with("sqlite:") && !v.starts_with("postgres://") && !v.starts_with("postgresql://"))
           return Malformed("must be sqlite:PATH or postgres://USER@HOST[:PORT]/DB");
         c.index = std::string(v);
         return Ok{};
       }},
      {"index_pool_size", CountSetter(&Config::index_pool_size, 1, 1024)},
      {"store",
       [](Config& c, std::string_view v) -> Status {
         // Checked in full when opened (store/open_store.h); here only which kind it is.
         if (!(v.starts_with("file:") && v.size() > 5) && !(v.starts_with("s3://") && v.size() > 5))
           return Malformed("must be file:PATH or s3://BUCKET[/PREFIX]");
         c.store = std::string(v);
         return Ok{};
       }},
      {"s3_endpoint", UrlSetter(&Config::s3_endpoint)},
      {"s3_public_endpoint", UrlSetter(&Config::s3_public_endpoint)},
      {"s3_region", StringSetter(&Config::s3_region)},
      {"s3_path_style", BoolSetter(&Config::s3_path_style)},
      {"s3_access_key_id", StringSetter(&Config::s3_access_key_id)},
      {"s3_secret_access_key", StringSetter(&Config::s3_secret_access_key)},
      {"s3_session_token", StringSetter(&Config::s3_session_token)},
      {"s3_max_connections", CountSetter(&Config::s3_max_connections, 1, 4096)},
      {"s3_part_size", ByteSizeSetter(&Config::s3_part_size, 5ULL << 20, 5ULL << 30)},
      {"backup_s3_endpoint", UrlSetter(&Config::backup_s3_endpoint)},
      {"backup_s3_region", StringSetter(&Config::backup_s3_region)},
      {"backup_s3_path_style", BoolSetter(&Config::backup_s3_path_style)},
      {"backup_s3_access_key_id", StringSetter(&Config::backup_s3_access_key_id)},
      {"backup_s3_secret_access_key", StringSetter(&Config::backup_s3_secret_access_key)},
      {"transfer_mode",
       [](Config& c, std::string_view v) -> Status {
         if (v != "proxy" && v != "presigned") return Malformed("must be proxy or presigned");
         c.transfer_mode = std::string(v);
         return Ok{};
       }},
  };
}

// The server's threads.
std::vector<Field> ThreadFields() {
  return {
      {"io_threads", CountSetter(&Config::io_threads, 1, 1024)},
      {"worker_threads", CountSetter(&Config::worker_threads, 1, 1024)},
      {"request_threads", CountSetter(&Config::request_threads, 1, 4096)},
  };
}

// The keys that sign tokens and transfer URLs.
std::vector<Field> KeyFields() {
  return {
      {"jwt_secret",
       [](Config& c, std::string_view v) -> Status {
         if (v.size() < 32) return Malformed("must be at least 32 characters");
         c.jwt_secret = std::string(v);
         return Ok{};
       }},
      {"url_secret",
       [](Config& c, std::string_view v) -> Status {
         if (v.size() < 32) return Malformed("must be at least 32 characters");
         c.url_secret = std::string(v);
         return Ok{};
       }},
      {"jwt_keys", KeysSetter(&Config::jwt_keys), true},
      {"url_keys", KeysSetter(&Config::url_keys), true},
      {"jwt_key_id", KeyIdSetter(&Config::jwt_key_id)},
      {"url_key_id", KeyIdSetter(&Config::url_key_id)},
      {"key_refresh", DurationSetter(&Config::key_refresh)},
      {"people_refresh", DurationSetter(&Config::people_refresh)},
      {"audit_retention", DurationOrZeroSetter(&Config::audit_retention)},
  };
}

// How long what clients hold stays valid, the scheduled collector, and dedup answers.
std::vector<Field> ExpiryAndCollectorFields() {
  return {
      {"transfer_url_ttl", DurationSetter(&Config::transfer_url_ttl)},
      {"dedup_key_expiry", DurationSetter(&Config::dedup_key_expiry)},
      {"gc_interval", DurationSetter(&Config::gc_interval)},
      {"gc_grace", DurationSetter(&Config::gc_grace)},
      {"gc_mark_share", CountSetter(&Config::gc_mark_share, 1, 100)},
      {"dedup_across_scopes", BoolSetter(&Config::dedup_across_scopes)},
      // At least one xorb's listing (8,193 entries of 48 bytes); at most what a stock client accepts.
      {"dedup_answer_max_bytes", ByteSizeSetter(&Config::dedup_answer_max_bytes, 512ULL << 10, 64ULL << 20)},
  };
}

// The log, and the limits on what clients may hold of the server at once.
std::vector<Field> LogAndLimitFields() {
  return {
      {"log_level",
       [](Config& c, std::string_view v) -> Status {
         static constexpr std::string_view kLevels[] = {"trace", "debug",    "info", "warn",
                                                        "error", "critical", "off"};
         for (auto l : kLevels) {
           if (v == l) {
             c.log_level = std::string(v);
             return Ok{};
           }
         }
         return Malformed("must be one of trace, debug, info, warn, error, critical, off");
       }},
      {"max_concurrent_uploads", CountSetter(&Config::max_concurrent_uploads, 1, 1'000'000)},
      {"max_concurrent_pushes", CountSetter(&Config::max_concurrent_pushes, 1, 100'000)},
      {"max_concurrent_fetches", CountSetter(&Config::max_concurrent_fetches, 1, 100'000)},
      {"max_connections", CountSetter(&Config::max_connections, 16, 1'000'000)},
      {"max_connections_per_client", CountSetter(&Config::max_connections_per_client, 0, 1'000'000)},
      {"trusted_proxies",
       ListSetter(&Config::trusted_proxies)},  // checked as addresses when the server starts
      {"upload_buffers_kept", CountSetter(&Config::upload_buffers_kept, 0, 1024)},
  };
}

// Serving files (read-ahead, links), and how long a stopping server waits for its connections.
std::vector<Field> DownloadFields() {
  return {
      {"readahead_depth", CountSetter(&Config::readahead_depth, 0, 256)},
      {"readahead_unit", ByteSizeSetter(&Config::readahead_unit, 64ULL << 10, 64ULL << 20)},
      {"readahead_stream_bytes", ByteSizeSetter(&Config::readahead_stream_bytes, 1ULL << 20, 16ULL << 30)},
      {"readahead_total_bytes", ByteSizeSetter(&Config::readahead_total_bytes, 1ULL << 20, 1ULL << 40)},
      {"readahead_threads", CountSetter(&Config::readahead_threads, 0, 1024)},
      {"max_link_ttl", DurationSetter(&Config::max_link_ttl)},
      {"shutdown_grace", DurationSetter(&Config::shutdown_grace)},
  };
}

// The pull-through mirror (docs/mirror.md).
std::vector<Field> MirrorFields() {
  return {
      {"mirror_upstream", UrlSetter(&Config::mirror_upstream)},
      {"mirror_token", StringSetter(&Config::mirror_token)},
      {"mirror_repos", ListSetter(&Config::mirror_repos), true},
      {"mirror_read",
       [](Config& c, std::string_view v) -> Status {
         if (v != "anyone" && v != "token") return Malformed("must be anyone or token");
         c.mirror_read = std::string(v);
         return Ok{};
       }},
      {"mirror_revision_ttl", DurationSetter(&Config::mirror_revision_ttl)},
      {"mirror_node_url",
       [](Config& c, std::string_view v) -> Status {
         // Other nodes read it from a lease's holder (at most 256 bytes with the node's random name).
         if (v.size() > 200) return Malformed("must be at most 200 bytes");
         return UrlSetter(&Config::mirror_node_url)(c, v);
       }},
      {"mirror_offline", BoolSetter(&Config::mirror_offline)},
      {"mirror_max_bytes", ByteSizeSetter(&Config::mirror_max_bytes, 0, 1ULL << 60)},
  };
}

// Company sign-in (docs/web.md).
std::vector<Field> OidcFields() {
  return {
      {"oidc_issuer", UrlSetter(&Config::oidc_issuer)},
      {"oidc_client_id", StringSetter(&Config::oidc_client_id)},
      {"oidc_client_secret", StringSetter(&Config::oidc_client_secret)},
      {"oidc_name", StringSetter(&Config::oidc_name)},
      {"oidc_scopes", StringSetter(&Config::oidc_scopes)},
      {"oidc_username_claim", StringSetter(&Config::oidc_username_claim)},
      {"oidc_create_users", BoolSetter(&Config::oidc_create_users)},
      {"oidc_session", DurationSetter(&Config::oidc_session)},
      {"oidc_groups_claim", StringSetter(&Config::oidc_groups_claim)},
      {"oidc_groups", ListSetter(&Config::oidc_groups), true},
  };
}

// Every setting, in groups.
const std::vector<Field>& Fields() {
  static const std::vector<Field> fields = [] {
    std::vector<Field> all;
    for (const auto& group : {ServerFields, StorageFields, ThreadFields, KeyFields, ExpiryAndCollectorFields,
                              LogAndLimitFields, DownloadFields, MirrorFields, OidcFields}) {
      std::vector<Field> some = group();
      all.insert(all.end(), std::make_move_iterator(some.begin()), std::make_move_iterator(some.end()));
    }
    return all;
  }();
  return fields;
}

const Field* FindField(std::string_view name) {
  for (const auto& f : Fields())
    if (name == f.name) return &f;
  return nullptr;
}

std::string EnvName(std::string_view field) {
  std::string out = "CAIRN_";
  for (char c : field) out += static_cast<char>(c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c);
  return out;
}

// Applies the TOML file at `path`, or the document `doc` (named `path` in errors) when there is one.
Status ApplyToml(Config& c, const std::string& path, const std::optional<std::string>& doc) {
  toml::table table;
  try {
    table = doc ? toml::parse(*doc, path) : toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    const auto& where = e.source().begin;
    return Malformed(path + ":" + std::to_string(where.line) + ":" + std::to_string(where.column) + ": " +
                     std::string(e.description()));
  }
  // A [mirror] table's keys are the mirror_* settings, an [oidc] table's the oidc_* ones.
  std::vector<std::pair<std::string, const toml::node*>> settings;
  for (const auto& [key, node] : table) {
    if (const auto* sub = node.as_table(); sub != nullptr && (key.str() == "mirror" || key.str() == "oidc")) {
      for (const auto& [k, n] : *sub)
        settings.emplace_back(std::string(key.str()) + "_" + std::string(k.str()), &n);
    } else {
      settings.emplace_back(std::string(key.str()), &node);
    }
  }
  for (const auto& [name, node_ptr] : settings) {
    const toml::node& node = *node_ptr;
    std::string where = path;
    where.append(": ").append(name);
    const Field* f = FindField(name);
    if (f == nullptr) return Bad(where, "unknown setting");
    std::string text;
    if (auto s = node.value<std::string>(); s && node.is_string()) {
      text = *s;
    } else if (node.is_integer()) {
      text = std::to_string(*node.value<int64_t>());
    } else if (node.is_boolean()) {
      text = *node.value<bool>() ? "true" : "false";
    } else if (const auto* array = node.as_array(); array != nullptr && f->list) {
      for (const auto& item : *array) {
        if (!item.is_string()) return Bad(where, "must be an array of strings");
        if (!text.empty()) text += ',';
        text += *item.value<std::string>();
      }
    } else {
      return Bad(where, "must be a string, an integer or a boolean");
    }
    if (auto st = f->set(c, text); !st) return Bad(where, st.error().message);
  }
  return Ok{};
}

}  // namespace

std::string Config::host() const {
  auto hp = ParseListen(listen);
  return hp ? hp->host : std::string();
}

uint16_t Config::port() const {
  auto hp = ParseListen(listen);
  return hp ? hp->port : 0;
}

Result<uint64_t> ParseByteSize(std::string_view text) {
  static constexpr std::pair<std::string_view, uint64_t> kUnits[] = {
      {"KiB", 1ULL << 10}, {"MiB", 1ULL << 20}, {"GiB", 1ULL << 30}, {"TiB", 1ULL << 40}, {"B", 1}};
  uint64_t unit = 1;
  std::string_view digits = text;
  for (const auto& [suffix, factor] : kUnits) {
    if (digits.ends_with(suffix)) {
      digits.remove_suffix(suffix.size());
      unit = factor;
      break;
    }
  }
  auto n = ParseCount(digits, 0, UINT64_MAX / unit);
  if (!n)
    return Malformed("not a byte size (4096, 512KiB, 16MiB, 1GiB, 2TiB): \"" + std::string(text) + "\"");
  return *n * unit;
}

Result<std::chrono::seconds> ParseDuration(std::string_view text, bool allow_zero) {
  if (text.empty()) return Malformed("empty duration");
  uint64_t unit = 1;
  std::string_view digits = text;
  switch (text.back()) {
    case 's':
      unit = 1;
      break;
    case 'm':
      unit = 60;
      break;
    case 'h':
      unit = 3600;
      break;
    case 'd':
      unit = 86400;
      break;
    default:
      unit = 0;
  }
  if (unit != 0) {
    digits.remove_suffix(1);
  } else {
    unit = 1;
  }
  uint64_t n = 0;
  auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
  if (digits.empty() || ec != std::errc() || p != digits.data() + digits.size())
    return Malformed("not a duration: \"" + std::string(text) + "\" (use 3600, 90s, 30m, 12h or 7d)");
  if (n == 0 && !allow_zero) return Malformed("duration must be positive");
  if (n > (uint64_t{1} << 40) / unit) return Malformed("duration too long: " + std::string(text));
  return std::chrono::seconds(static_cast<int64_t>(n * unit));
}

Result<HostPort> ParseListen(std::string_view text) {
  HostPort hp;
  size_t colon = 0;
  if (!text.empty() && text.front() == '[') {
    const size_t close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':')
      return Malformed("expected [IPV6]:PORT, got \"" + std::string(text) + "\"");
    hp.host = std::string(text.substr(1, close - 1));
    colon = close + 1;
  } else {
    colon = text.rfind(':');
    if (colon == std::string_view::npos || colon == 0)
      return Malformed("expected HOST:PORT, got \"" + std::string(text) + "\"");
    hp.host = std::string(text.substr(0, colon));
    if (hp.host.find(':') != std::string::npos)
      return Malformed("IPv6 addresses need brackets: [" + hp.host + "]:PORT");
  }
  if (hp.host.empty()) return Malformed("empty host in \"" + std::string(text) + "\"");
  auto port = ParseCount(text.substr(colon + 1), 0, 65535);
  if (!port) return Malformed("bad port in \"" + std::string(text) + "\": " + port.error().message);
  hp.port = static_cast<uint16_t>(*port);
  return hp;
}

std::map<std::string, std::string> CairnEnvironment() {
  std::map<std::string, std::string> out;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string_view kv(*e);
    if (kv.substr(0, 6) != "CAIRN_" && kv.substr(0, 4) != "AWS_") continue;
    const size_t eq = kv.find('=');
    if (eq == std::string_view::npos) continue;
    out.emplace(std::string(kv.substr(0, eq)), std::string(kv.substr(eq + 1)));
  }
  return out;
}

Result<Config> LoadCommandConfig(const std::string& config_file, std::map<std::string, std::string> flags) {
  ConfigSources sources;
  if (!config_file.empty()) sources.file = config_file;
  sources.env = CairnEnvironment();
  sources.flags = std::move(flags);
  return LoadConfig(sources);
}

Result<Config> LoadConfig(const ConfigSources& sources) {
  Config c;
  const unsigned cpus = std::max(1u, std::thread::hardware_concurrency());
  c.io_threads = std::max(2u, cpus / 2);
  c.worker_threads = cpus;
  c.request_threads = std::max(16u, 4 * cpus);

  std::optional<std::string> file = sources.file;
  if (!file) {
    if (auto it = sources.env.find("CAIRN_CONFIG"); it != sources.env.end() && !it->second.empty())
      file = it->second;
  }
  if (sources.toml) {
    if (auto st = ApplyToml(c, file.value_or("<config>"), sources.toml); !st) return st.error();
  } else if (file) {
    if (auto st = ApplyToml(c, *file, std::nullopt); !st) return st.error();
  }
  for (const auto& [key, value] : sources.env) {
    if (key == "CAIRN_CONFIG" || key.substr(0, 6) != "CAIRN_") continue;
    const Field* found = nullptr;
    for (const auto& f : Fields())
      if (EnvName(f.name) == key) found = &f;
    if (found == nullptr) continue;  // other CAIRN_* variables (tests, tools) are not ours to judge
    if (auto st = found->set(c, value); !st) return Bad(key, st.error().message);
  }
  for (const auto& [key, value] : sources.flags) {
    const Field* f = FindField(key);
    if (f == nullptr) return Bad("--" + key, "unknown setting");
    if (auto st = f->set(c, value); !st) {
      std::string flag = key;
      for (char& ch : flag)
        if (ch == '_') ch = '-';
      return Bad("--" + flag, st.error().message);
    }
  }
  if (auto st = CheckKeyId("jwt_key_id", c.jwt_key_id, c.jwt_secret, c.jwt_keys); !st) return st.error();
  if (auto st = CheckKeyId("url_key_id", c.url_key_id, c.url_secret, c.url_keys); !st) return st.error();
  if (c.tls_cert.empty() != c.tls_key.empty())
    return Bad(c.tls_cert.empty() ? "tls_cert" : "tls_key",
               "HTTPS needs both tls_cert and tls_key (a certificate chain and its private key)");
  if (c.public_url.empty()) c.public_url = c.scheme() + "://" + c.listen;
  if (!c.content_url.empty() && OriginOf(c.content_url) != c.content_url)
    return Bad("content_url", "is an origin: scheme://host[:port], without a path");
  // Cookies are kept by host name, whatever the port: another port of the same name would get the session's.
  const auto host_name = [](std::string host) {
    const size_t colon = host.rfind(':');
    if (colon != std::string::npos && host.find(']', colon) == std::string::npos) host.resize(colon);
    return host;
  };
  if (!c.content_url.empty() && host_name(HostOf(c.content_url)) == host_name(HostOf(c.public_url)))
    return Bad("content_url",
               "must name another host than public_url (a port of the same host shares its cookies)");
  if (!c.oidc_issuer.empty() && c.oidc_client_id.empty())
    return Bad("oidc_client_id", "company sign-in (oidc_issuer) needs cairn's client id at the provider");
  if (c.index.empty()) c.index = "sqlite:" + (std::filesystem::path(c.data_dir) / "index.db").string();
  if (c.store.empty()) c.store = "file:" + (std::filesystem::path(c.data_dir) / "blobs").string();
  // The standard AWS variables, where no setting of ours names the credentials.
  const auto aws = [&](const char* name, std::string& into) {
    if (auto it = sources.env.find(name); into.empty() && it != sources.env.end()) into = it->second;
  };
  aws("AWS_ACCESS_KEY_ID", c.s3_access_key_id);
  aws("AWS_SECRET_ACCESS_KEY", c.s3_secret_access_key);
  aws("AWS_SESSION_TOKEN", c.s3_session_token);
  return c;
}

std::string OriginOf(std::string_view url) {
  const size_t scheme = url.find("://");
  const size_t host = scheme == std::string_view::npos ? 0 : scheme + 3;
  return std::string(url.substr(0, url.find('/', host)));
}

std::string HostOf(std::string_view url) {
  const size_t scheme = url.find("://");
  const std::string_view rest = url.substr(scheme == std::string_view::npos ? 0 : scheme + 3);
  std::string host(rest.substr(0, rest.find('/')));
  for (char& ch : host) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  // A browser names no port that is its scheme's own: "https://files.example:443" is Host "files.example".
  const std::string_view default_port = url.starts_with("https://") ? ":443" : ":80";
  if (host.ends_with(default_port)) host.resize(host.size() - default_port.size());
  return host;
}

}  // namespace cairn::config
