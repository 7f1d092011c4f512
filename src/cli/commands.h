// Subcommands of the `cairn` binary: what each takes and runs. The command line itself (CLI11) is declared in
// main.cc alone, so that only one translation unit pays for parsing CLI11's headers.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace cairn::cli {

// Each Run* returns the process exit status and prints its own errors to stderr.

// `cairn hash`: chunk files as the stock client does and print their chunk, xorb, file and verification
// hashes.
struct HashOptions {
  std::vector<std::string> files;
  bool json = false;
};
int RunHash(const HashOptions& opts);

// `cairn xorb verify`: validate a xorb object (footer-less upload or stored with a footer).
struct XorbOptions {
  std::string file;
  std::string hash;  // expected, hex; empty: not checked
  bool json = false;
};
int RunXorbVerify(const XorbOptions& opts);

// `cairn shard verify|dump`: parse a shard; verify checks its files against a directory of xorbs.
struct ShardOptions {
  std::string file;
  std::string xorb_dir;
  bool json = false;
};
int RunShardVerify(const ShardOptions& opts);
int RunShardDump(const ShardOptions& opts);

// `cairn serve`: run the HTTP server (flags, CAIRN_* environment and TOML configuration).
struct ServeOptions {
  std::string config_file;
  std::map<std::string, std::string> flags;  // setting name → value, only for flags given
};
int RunServe(const ServeOptions& opts);

// `cairn token`: mint a bearer token with the server's signing key.
struct TokenOptions {
  std::string config_file;
  std::string data_dir;
  std::string index;
  std::string scope;
  bool write = false;
  std::string ttl = "1h";
};
int RunToken(const TokenOptions& opts);

// Where the client commands find the server: flags, else CAIRN_ENDPOINT / CAIRN_TOKEN.
struct RemoteOptions {
  std::string endpoint;
  std::string token;
  int attempts = 8;  // tries per request on transient failures
};

// `cairn get`: download a file (or a range of it), verified.
struct GetOptions {
  RemoteOptions remote;
  std::string file;
  std::string output;  // default: the file hash, in the current directory; "-": stdout
  std::string range;   // "A-B"
  size_t parallel = 8;
  bool json = false;
};
int RunGet(GetOptions& opts);

// `cairn put`: upload files and directories as the stock client does.
struct PutOptions {
  RemoteOptions remote;
  std::vector<std::string> paths;
  size_t parallel = 4;
  bool no_global_dedup = false;
  bool json = false;
};
int RunPut(PutOptions& opts);

// `cairn ls`: the files the token's scope sees.
struct LsOptions {
  RemoteOptions remote;
  bool json = false;
};
int RunLs(LsOptions& opts);

// `cairn rm`: take files out of the token's scope (DELETE /v1/files/{file}); the bytes they are stored in
// stay.
struct RmOptions {
  RemoteOptions remote;
  std::vector<std::string> files;
};
int RunRm(RmOptions& opts);

// `cairn stat`: what the token's scope holds.
struct StatOptions {
  RemoteOptions remote;
  bool json = false;
};
int RunStat(StatOptions& opts);

// `cairn link`: a signed, expiring download link to a stored file.
struct LinkOptions {
  std::string config_file;
  std::string data_dir;
  std::string index;
  std::string public_url;
  std::string file;
  std::string scope;
  std::string name;
  std::string ttl = "24h";
};
int RunLink(const LinkOptions& opts);

// `cairn keys list|rotate|retire`: the signing keys kept in the index (config/secrets.h).
struct KeysOptions {
  std::string config_file;
  std::string data_dir;
  std::string index;
  std::string kind;  // jwt or url (rotate, retire)
  std::string id;    // rotate: the new key's id (default: generated); retire: the key to retire
};
int RunKeysList(const KeysOptions& opts);
int RunKeysRotate(const KeysOptions& opts);
int RunKeysRetire(const KeysOptions& opts);

// `cairn index migrate`: bring the configured index's schema up to date (what `serve` does at start).
struct IndexOptions {
  std::string config_file;
  std::string data_dir;
  std::string index;
};
int RunIndexMigrate(const IndexOptions& opts);

// `cairn index copy --from URL --to URL`: copy a whole index to another database, resumable, then verified.
struct IndexCopyOptions {
  std::string from;
  std::string to;
};
int RunIndexCopy(const IndexCopyOptions& opts);

// `cairn store copy --from URL --to URL`: copy every blob to another store (file: <-> s3://), resumable,
// every blob verified at the destination. Both sides take the s3_* settings of the configuration.
struct StoreCopyOptions {
  std::string config_file;
  std::string from_config;  // the source's s3_* settings, when they are not config_file's (another endpoint)
  std::string to_config;    // the destination's
  std::string from;
  std::string to;
  size_t threads = 8;
};
int RunStoreCopy(const StoreCopyOptions& opts);

// `cairn fsck`: check the configured index against the configured store; `cairn index rebuild`: recreate a
// lost index (the configured one, which must be empty) from the store alone. Exit status 0: no damage
// (unindexed leftovers are reported, not damage), 1: damage remains, 2: the check could not run.
struct FsckCommandOptions {
  std::string config_file;
  std::string data_dir;
  std::string index;
  std::string store;
  bool deep = false;
  bool repair = false;
  std::string default_scope;
  size_t threads = 4;
  bool json = false;
};
int RunFsck(const FsckCommandOptions& opts);
int RunIndexRebuild(const FsckCommandOptions& opts);

// `cairn gc`: one run of the garbage collector on the configured index and store (docs/operations.md). Exit
// status 0: done (or reported, with --dry-run), 2: refused (a grace shorter than the clients' caches without
// --force) or failed.
struct GcCommandOptions {
  std::string config_file;
  std::string data_dir;
  std::string index;
  std::string store;
  bool dry_run = false;
  std::string grace;  // a duration ("30d"); empty: the default
  bool force = false;
  bool json = false;
  bool vacuum = false;  // rewrite the index's database after the sweep (gc::GcOptions::vacuum)
};
int RunGc(const GcCommandOptions& opts);

// `cairn compact`: rewrites xorbs less than `threshold` live (compact/compactor.h). Exit status 0: done, 1:
// the run failed, 2: bad arguments or configuration.
struct CompactCommandOptions {
  std::string config_file;
  std::string data_dir;
  std::string index;
  std::string store;
  double threshold = 0.5;
  size_t max_new_xorbs = 0;
  bool dry_run = false;
  bool json = false;
};
int RunCompact(const CompactCommandOptions& opts);

// `cairn quota set|show|rm`: storage quotas per namespace (quota/quota_service.h), kept in the index for
// every node. Exit status 0: done, 1: the index failed, 2: bad arguments.
struct QuotaOptions {
  std::string config_file;
  std::string data_dir;
  std::string index;
  std::string ns;    // set, rm: required; show: one namespace (measured now), or every one with a quota
  std::string size;  // set: "10GiB", "500MB"-style byte sizes, or "none" (measured, no limit)
  bool json = false;
};
int RunQuotaSet(const QuotaOptions& opts);
int RunQuotaShow(const QuotaOptions& opts);
int RunQuotaRm(const QuotaOptions& opts);

// `cairn user create|ls|show|disable|enable`, `cairn org create|ls|show|add|remove|role` and `cairn token
// create|ls|revoke` (docs/hub.md "People"): users, organizations, their members and the tokens users hold,
// kept in the index, so every node knows them.
struct PeopleOptions {
  std::string config_file;
  std::string data_dir;
  std::string index;
  std::string name;  // the user or organization (create, show, disable, enable; org add|remove|role: the org)
  std::string full_name;     // create
  bool is_operator = false;  // user create
  bool off = false;          // user operator: take the flag away; user password: remove it
  std::string user;          // org add|remove|role; token create|ls
  std::string role;          // org add|role: read, write, admin; token create: read, write, fineGrained
  std::string token_name;    // token create
  std::vector<std::string> grants;  // token create, fine-grained: "w alice/model", "r acme"
  std::string ttl = "90d";          // token create
  std::string id;                   // token revoke, publisher revoke
  bool json = false;                // ls, show
  // publisher create (name: the namespace; role: read or write, default write)
  std::string repo;
  std::string issuer;
  std::string audience;
  std::vector<std::string> claims;  // "name=value"
  std::string subject;              // user link: the provider's subject (with issuer)
};
int RunUserCreate(const PeopleOptions& opts);
int RunUserList(const PeopleOptions& opts);
int RunUserShow(const PeopleOptions& opts);
int RunUserLink(const PeopleOptions& opts);
int RunUserDisable(const PeopleOptions& opts);
int RunUserEnable(const PeopleOptions& opts);
int RunUserOperator(const PeopleOptions& opts);
// `cairn user password NAME`: the password (read from standard input, one line) the user signs in to the
// pages with; --off removes it. Either ends every session of theirs.
int RunUserPassword(const PeopleOptions& opts);
int RunOrgCreate(const PeopleOptions& opts);
int RunOrgList(const PeopleOptions& opts);
int RunOrgShow(const PeopleOptions& opts);
int RunOrgSetRole(const PeopleOptions& opts);  // add, role
int RunOrgRemove(const PeopleOptions& opts);
int RunTokenCreate(const PeopleOptions& opts);
int RunTokenList(const PeopleOptions& opts);
int RunTokenRevoke(const PeopleOptions& opts);
// `cairn publisher create|ls|revoke`: trusted publishers' trust policies (docs/hub.md "Trusted publishers").
int RunPublisherCreate(const PeopleOptions& opts);
int RunPublisherList(const PeopleOptions& opts);
int RunPublisherRevoke(const PeopleOptions& opts);

// `cairn audit` (docs/operations.md "Audit log"): the audit log, newest first.
struct AuditOptions {
  std::string config_file;
  std::string data_dir;
  std::string index;
  std::string since;  // a duration back from now ("24h", "7d"); empty: all
  std::string user;   // the actor: a user's name, "scope:<scope>", "cli:<account>"
  std::string ns;     // the namespace changed
  std::string repo;   // the repository changed: "acme/model", "datasets/acme/data"
  size_t limit = 100;
  bool json = false;
};
int RunAudit(const AuditOptions& opts);

// `cairn mirror ls|prefetch|evict` (docs/mirror.md): the pull-through mirror's repositories, on the index and
// store of the deployment (with its mirror_* settings).
struct MirrorCommandOptions {
  std::string config_file;
  std::string data_dir;
  std::string index;
  std::string store;
  std::string repo;       // prefetch: [models/|datasets/|spaces/]NS/NAME[@REVISION]; evict: without @
  std::string max_bytes;  // trim: the limit ("500GiB"); empty: mirror_max_bytes
  bool json = false;
};
int RunMirrorLs(const MirrorCommandOptions& opts);
int RunMirrorPrefetch(const MirrorCommandOptions& opts);
int RunMirrorEvict(const MirrorCommandOptions& opts);
int RunMirrorTrim(const MirrorCommandOptions& opts);

// `cairn export REPO[@REVISION] DEST` and `cairn import SRC` (bundle/bundle.h): a repository carried between
// servers as a directory.
struct BundleCommandOptions {
  std::string config_file;
  std::string data_dir;
  std::string index;
  std::string store;
  std::string repo;  // export: [datasets/|spaces/]NS/NAME[@REVISION]
  std::string path;  // export: DEST; import: SRC
  std::string as;    // import: [datasets/|spaces/]NS/NAME (default: the bundle's)
  bool json = false;
};
int RunExport(const BundleCommandOptions& opts);
int RunImport(const BundleCommandOptions& opts);

struct BackupCommandOptions {
  std::string config_file;
  std::string data_dir;
  std::string index;
  std::string store;
  std::string dest;     // the backup: a directory or s3://BUCKET[/PREFIX]
  bool verify = false;  // re-hash what the backup at `dest` holds instead of taking one
  size_t keep = 2;
  size_t threads = 4;
  bool json = false;
};
int RunBackup(const BackupCommandOptions& opts);

struct RestoreCommandOptions {
  std::string config_file;
  std::string data_dir;
  std::string index;
  std::string store;
  std::string src;       // the backup: a directory or s3://BUCKET[/PREFIX]
  std::string snapshot;  // empty: the latest
  bool resume = false;
  size_t threads = 4;
  bool json = false;
};
int RunRestore(const RestoreCommandOptions& opts);

}  // namespace cairn::cli
