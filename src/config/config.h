// The server's configuration, from (lowest to highest precedence): built-in defaults, an optional TOML file,
// CAIRN_* environment variables, command-line flags.
//
// Every setting has one name used everywhere: the TOML key (`data_dir = "/srv/cairn"`), the environment
// variable (CAIRN_DATA_DIR) and the flag map key ("data_dir"). Values given as strings are parsed the same
// way whatever their source; TOML may also give integers and booleans. Unknown TOML keys are errors (typos
// must not pass silently). Durations are integer seconds or a number with a unit: "90s", "30m", "12h", "7d";
// byte sizes are integer bytes or a number with a unit: "512KiB", "16MiB", "1GiB"; booleans are true or
// false.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"

namespace cairn::config {

// A signing key given in the configuration: "id:secret".
struct NamedSecret {
  std::string id;
  std::string secret;
};

// "scheme://host[:port]" of a URL (what follows is dropped).
std::string OriginOf(std::string_view url);
// The host of a URL as a browser's Host header names it: "host[:port]", without its scheme's own port.
std::string HostOf(std::string_view url);

struct Config {
  std::string listen = "127.0.0.1:8080";  // HOST:PORT ([v6]:PORT for IPv6)
  std::string data_dir = "./cairn-data";
  std::string public_url;  // base of URLs handed to clients; default http://<listen> (https:// with TLS)
  // The user-content origin: another host name (scheme://host[:port], no path) pointed at this server, from
  // which browsers get stored files (docs/web.md). Empty: files are served sandboxed on public_url's origin.
  std::string content_url;
  // HTTPS: a PEM certificate chain (the server's certificate first) and its PEM private key, both or neither;
  // re-read on SIGHUP.
  std::string tls_cert;
  std::string tls_key;
  // sqlite:PATH or postgres://USER[:PASS]@HOST[:PORT]/DB[?...]; default sqlite:<data_dir>/index.db
  std::string index;
  size_t index_pool_size = 8;  // PostgreSQL connections for reads
  // file:PATH or s3://BUCKET[/PREFIX]; default file:<data_dir>/blobs
  std::string store;
  std::string s3_endpoint;  // scheme://host[:port]; default https://s3.<region>.amazonaws.com
  std::string s3_region = "us-east-1";
  // Where clients reach the store, for presigned URLs, when it differs from s3_endpoint (an internal
  // address).
  std::string s3_public_endpoint;
  bool s3_path_style = false;  // endpoint/bucket/key (SeaweedFS, MinIO, Ceph) instead of bucket.endpoint/key
  // Credentials; when unset, AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN.
  std::string s3_access_key_id;
  std::string s3_secret_access_key;
  std::string s3_session_token;
  size_t s3_max_connections = 64;  // connections to the store (requests in flight) per node
  // `cairn backup s3://…` into a store other than the one s3_endpoint names: when backup_s3_endpoint is set,
  // these describe it (else the backup uses the s3_* settings).
  std::string backup_s3_endpoint;
  std::string backup_s3_region = "us-east-1";
  bool backup_s3_path_style = false;
  std::string backup_s3_access_key_id;
  std::string backup_s3_secret_access_key;
  // Blobs up to this size are one PUT (every xorb and shard, by default); larger ones multipart uploads of
  // parts this large, sent as the bytes arrive (16MiB suits a distant store: the upload to it overlaps the
  // client's).
  size_t s3_part_size = 128ULL << 20;
  // How reconstruction answers send clients to the bytes on S3: "proxy" (signed URLs of this node, which
  // reads from the store) or "presigned" (presigned S3 URLs: bytes go from the store to the client directly).
  std::string transfer_mode = "proxy";
  size_t io_threads = 0;      // 0 before Load: filled with a default from the CPU count
  size_t worker_threads = 0;  // CPU-heavy work (xorb validation, large answers)
  // Threads running requests' blocking steps (index reads and writes, store I/O): more than the CPUs, so that
  // requests waiting on a disk read or a database round trip do not hold up the ones that could run.
  size_t request_threads = 0;
  // Signing keys (config/secrets.h). Set, a kind's keys come from here instead of the index: *_secret is the
  // legacy key (signs without a key id), *_keys more keys with ids, *_key_id the one that signs (default: the
  // last of *_keys, else the legacy key).
  std::optional<std::string> jwt_secret;
  std::optional<std::string> url_secret;
  std::vector<NamedSecret> jwt_keys;
  std::vector<NamedSecret> url_keys;
  std::string jwt_key_id;
  std::string url_key_id;
  // How often a node re-reads the keys kept in the index (SIGHUP: at once); a key rotated in becomes current
  // twice this long after.
  std::chrono::seconds key_refresh{60};
  // How often a node reads what changed of people (tokens revoked, users disabled, memberships): the bound on
  // how long a revoked token still works on a node that did not revoke it.
  std::chrono::seconds people_refresh{5};
  // How long the audit log keeps an event (0: for ever); older ones are dropped hourly by `cairn serve`.
  std::chrono::seconds audit_retention{365LL * 24 * 3600};
  std::chrono::seconds transfer_url_ttl{3600};
  std::chrono::seconds dedup_key_expiry{7 * 24 * 3600};
  // The garbage collector inside `cairn serve`: how often it runs (0, unset: never; `cairn gc` runs it by
  // hand), and how long an object stays unreferenced before it is freed (docs/operations.md).
  std::chrono::seconds gc_interval{0};
  std::chrono::seconds gc_grace{30 * 24 * 3600};
  size_t gc_mark_share = 25;  // percent of the time the mark may spend reading the index (gc/collector.h)
  bool dedup_across_scopes = false;             // dedup answers may offer other scopes' chunks
  size_t dedup_answer_max_bytes = 16ULL << 20;  // cap of one dedup answer (a shard)
  std::string log_level = "info";               // trace, debug, info, warn, error, critical, off
  size_t max_concurrent_uploads = 64;
  size_t max_concurrent_pushes = 8;    // git pushes received at once (each spooled to DATA_DIR/git-push)
  size_t max_concurrent_fetches = 32;  // git fetch requests at once (bodies up to 16 MiB held in memory)
  // Connections open at once in total and from one client address (0: no per-address cap), and the reverse
  // proxies whose X-Forwarded-For names the client (addresses or CIDR ranges, comma-separated in a string).
  size_t max_connections = 8192;
  size_t max_connections_per_client = 1024;
  std::vector<std::string> trusted_proxies;
  size_t upload_buffers_kept = 2;  // 64 MiB upload buffers kept mapped between uploads
  std::chrono::seconds shutdown_grace{30};
  // Plain downloads (GET /v1/files): fetch units read ahead of the one being sent (0: the store's default, 2
  // on local disk and 8 on S3), the stored bytes of one unit, what one download and all of them together hold
  // ahead, the threads that fetch (0: 4 on local disk, 32 on S3), and how long a download link may live.
  size_t readahead_depth = 0;
  size_t readahead_unit = 4ULL << 20;
  size_t readahead_stream_bytes = 64ULL << 20;
  size_t readahead_total_bytes = 1ULL << 30;
  size_t readahead_threads = 0;
  std::chrono::seconds max_link_ttl{30 * 24 * 3600};

  // The pull-through mirror (docs/mirror.md), on when mirror_upstream is set: the upstream Hub's URL, the
  // token the mirror reads it with (never logged, never sent to clients), which repositories are mirrored
  // ("ns", "ns/name", "datasets/ns/name"; empty: every one this server does not hold), who may read them
  // ("anyone" or "token": any valid token of this server), how long a branch or tag name is trusted before
  // upstream is asked again, offline mode (upstream never asked), and the most bytes of large files mirrored
  // repositories may hold ("500GiB"; 0: no limit), past which the least recently read are evicted, and the
  // URL the other nodes sharing the index reach this one at (a node waiting on another's transfer of a file
  // relays it from there as it arrives; unset: it waits for the file). TOML may give them as a [mirror] table
  // (upstream = ..., token = ...).
  std::string mirror_upstream;
  std::string mirror_token;
  std::vector<std::string> mirror_repos;
  std::string mirror_read = "anyone";
  std::chrono::seconds mirror_revision_ttl{60};
  bool mirror_offline = false;
  size_t mirror_max_bytes = 0;
  std::string mirror_node_url;
  // Company sign-in through the pages (docs/web.md), on when oidc_issuer is set: the OpenID Connect
  // provider's issuer URL, cairn's client there (its secret never logged; empty: a public client, PKCE
  // alone), what the sign-in button says, the scopes asked for, the claim a new user is named by, whether a
  // subject seen for the first time gets a user (off: an operator links each one, `cairn user link`), how
  // long a session lasts, and the claim listing a person's groups with the roles they give in organizations
  // ("group=org:role"). The redirect URI to register at the provider is public_url + /login/oidc/callback.
  // TOML may give them as an [oidc] table (issuer = ..., client_id = ...).
  std::string oidc_issuer;
  std::string oidc_client_id;
  std::string oidc_client_secret;
  std::string oidc_name = "single sign-on";
  std::string oidc_scopes = "openid profile email";
  std::string oidc_username_claim = "preferred_username";
  bool oidc_create_users = true;
  std::chrono::seconds oidc_session{12 * 3600};
  std::string oidc_groups_claim;
  std::vector<std::string> oidc_groups;
  // Derived from listen.
  std::string host() const;
  uint16_t port() const;
  // "https" when TLS is configured, else "http".
  std::string scheme() const { return tls_cert.empty() ? "http" : "https"; }
};

struct ConfigSources {
  std::optional<std::string> file;  // TOML file; when empty, CAIRN_CONFIG from `env` if set
  // The TOML document itself, read in place of a file (tests, the fuzz target); `file`, if set, then only
  // names it in error messages.
  std::optional<std::string> toml;
  std::map<std::string, std::string> env;    // environment (CAIRN_* keys, and AWS_* credentials)
  std::map<std::string, std::string> flags;  // setting name → value, from the command line
};

// Loads and validates. Errors name the source and the setting ("CAIRN_IO_THREADS: not a number: x").
Result<Config> LoadConfig(const ConfigSources& sources);

// The process environment's CAIRN_* and AWS_* variables.
std::map<std::string, std::string> CairnEnvironment();

// A command's configuration: `config_file` (empty: CAIRN_CONFIG, if set), this process's CAIRN_* environment,
// then `flags` (TOML key → value).
Result<Config> LoadCommandConfig(const std::string& config_file, std::map<std::string, std::string> flags);

// "4096", "512KiB", "16MiB", "1GiB" → bytes.
Result<uint64_t> ParseByteSize(std::string_view text);

// "3600", "90s", "30m", "12h", "7d" → seconds; must be positive.
Result<std::chrono::seconds> ParseDuration(std::string_view text, bool allow_zero = false);

struct HostPort {
  std::string host;
  uint16_t port = 0;
};
// "127.0.0.1:8080", "[::1]:8080", "localhost:0".
Result<HostPort> ParseListen(std::string_view text);

}  // namespace cairn::config
