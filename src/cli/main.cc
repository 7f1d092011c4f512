// cairn: a self-hosted storage server for the Xet protocol. One binary, many subcommands; this file is the
// whole command line, the commands themselves are in cmd_*.cc.
#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>
#include <string>

#include "cli/commands.h"

namespace cairn::cli {
namespace {

// Runs `run(*opts)` when `cmd` is selected; a non-zero status becomes the process's exit status.
template <typename Options, typename Run>
void OnSelected(CLI::App* cmd, std::shared_ptr<Options> opts, Run run) {
  cmd->callback([opts = std::move(opts), run] {
    if (int rc = run(*opts); rc != 0) throw CLI::RuntimeError(rc);
  });
}

void AddHash(CLI::App& app) {
  auto opts = std::make_shared<HashOptions>();
  auto* cmd = app.add_subcommand("hash", "Chunk files as the stock client does; print their Xet hashes");
  cmd->add_option("files", opts->files, "Files to hash")->required();
  cmd->add_flag("--json", opts->json, "One JSON object per file: chunks, xorb, file and verification hashes");
  OnSelected(cmd, opts, RunHash);
}

void AddXorb(CLI::App& app) {
  auto opts = std::make_shared<XorbOptions>();
  auto* xorb = app.add_subcommand("xorb", "Inspect xorb objects")->require_subcommand(1);
  auto* verify =
      xorb->add_subcommand("verify", "Decode and hash every chunk; check the xorb hash and any footer");
  verify->add_option("file", opts->file, "Xorb object (footer-less upload or stored with a footer)")
      ->required();
  verify->add_option("--hash", opts->hash, "Expected xorb hash (64 hex digits)");
  verify->add_flag("--json", opts->json, "Print the layout as JSON");
  OnSelected(verify, opts, RunXorbVerify);
}

void AddShard(CLI::App& app) {
  auto opts = std::make_shared<ShardOptions>();
  auto* shard = app.add_subcommand("shard", "Inspect shards")->require_subcommand(1);
  auto* verify = shard->add_subcommand("verify", "Parse a shard and verify its files against stored xorbs");
  verify->add_option("file", opts->file, "Shard file")->required();
  verify->add_option("--xorb-dir", opts->xorb_dir, "Directory holding the xorbs, named by hash")->required();
  verify->add_flag("--json", opts->json, "Print files and xorbs as JSON");
  OnSelected(verify, opts, RunShardVerify);
  auto* dump = shard->add_subcommand("dump", "Parse a shard and print its contents as JSON");
  dump->add_option("file", opts->file, "Shard file")->required();
  OnSelected(dump, opts, RunShardDump);
}

void AddServe(CLI::App& app) {
  auto opts = std::make_shared<ServeOptions>();
  auto* cmd = app.add_subcommand("serve", "Run the Xet storage server");
  cmd->add_option("--config", opts->config_file, "TOML configuration file (also CAIRN_CONFIG)");
  struct Flag {
    const char* flag;
    const char* setting;
    const char* help;
  };
  static constexpr Flag kFlags[] = {
      {"--listen", "listen", "HOST:PORT to listen on (default 127.0.0.1:8080)"},
      {"--data", "data_dir", "Data directory (default ./cairn-data)"},
      {"--index", "index", "Index: sqlite:PATH (default sqlite:<data>/index.db) or postgres://USER@HOST/DB"},
      {"--store", "store", "Blob store: file:PATH (default file:<data>/blobs) or s3://BUCKET[/PREFIX]"},
      {"--transfer-mode", "transfer_mode", "S3: proxy (this node serves the bytes) or presigned URLs"},
      {"--public-url", "public_url", "Base URL clients reach this server at (default http(s)://<listen>)"},
      {"--content-url", "content_url",
       "Origin of another host name for this server, from which browsers get stored files (docs/web.md)"},
      {"--tls-cert", "tls_cert",
       "HTTPS: PEM certificate chain, the server's certificate first (with --tls-key)"},
      {"--tls-key", "tls_key", "HTTPS: PEM private key of the certificate (re-read with it on SIGHUP)"},
      {"--io-threads", "io_threads", "Network threads"},
      {"--worker-threads", "worker_threads", "Worker threads for CPU-heavy work"},
      {"--request-threads", "request_threads", "Threads for requests' index and store I/O"},
      {"--log-level", "log_level", "trace, debug, info, warn, error, critical, off"},
  };
  for (const Flag& f : kFlags) {
    cmd->add_option_function<std::string>(
        f.flag, [opts, setting = std::string(f.setting)](const std::string& v) { opts->flags[setting] = v; },
        f.help);
  }
  OnSelected(cmd, opts, RunServe);
}

// The flags of a command on the index alone: where the data, the index (`what` it holds) and the
// configuration are.
void IndexFlags(CLI::App* cmd, std::string& data_dir, std::string& index, std::string& config_file,
                const std::string& what) {
  cmd->add_option("--data", data_dir, "Data directory (default ./cairn-data)");
  cmd->add_option("--index", index, "Index holding " + what + " (default sqlite:<data>/index.db)");
  cmd->add_option("--config", config_file, "TOML configuration file (also CAIRN_CONFIG)");
}

// The index-side flags of the people commands.
void PeopleFlags(CLI::App* cmd, PeopleOptions& o) {
  IndexFlags(cmd, o.data_dir, o.index, o.config_file, "the people");
}

// A people command `name` under `parent`, running `run`; `setup` adds its own arguments.
template <typename Setup>
void AddPeopleCommand(CLI::App* parent, const char* name, const char* help, int (*run)(const PeopleOptions&),
                      Setup setup) {
  auto opts = std::make_shared<PeopleOptions>();
  auto* cmd = parent->add_subcommand(name, help);
  PeopleFlags(cmd, *opts);
  setup(cmd, *opts);
  OnSelected(cmd, opts, run);
}

void AddToken(CLI::App& app) {
  auto opts = std::make_shared<TokenOptions>();
  auto* cmd = app.add_subcommand(
      "token",
      "A person's token (create, ls, revoke), or with --scope a bearer token (HS256 JWT) for a scope");
  IndexFlags(cmd, opts->data_dir, opts->index, opts->config_file, "the signing key");
  cmd->add_option("--scope", opts->scope, "Scope the token grants, e.g. a repository name");
  cmd->add_flag("--write", opts->write, "Grant write (and read) instead of read only");
  cmd->add_option("--ttl", opts->ttl, "Lifetime: seconds, or 30m, 12h, 7d (default 1h)");
  cmd->callback([cmd, opts] {
    if (!cmd->get_subcommands().empty()) return;  // create, ls or revoke ran
    if (int rc = RunToken(*opts); rc != 0) throw CLI::RuntimeError(rc);
  });
  AddPeopleCommand(cmd, "create", "Create a token for a user; its text is printed once", RunTokenCreate,
                   [](CLI::App* c, PeopleOptions& o) {
                     c->add_option("--user", o.user, "The user who holds it")->required();
                     c->add_option("--name", o.token_name, "What the user calls it (laptop, ci)")->required();
                     c->add_option("--role", o.role, "read, write or fineGrained")->required();
                     c->add_option(
                         "--grant", o.grants,
                         "fineGrained: \"r SCOPE\" or \"w SCOPE\", a namespace or repository; repeat");
                     c->add_option("--ttl", o.ttl, "Lifetime: 30m, 12h, 90d (default 90d, at most 366d)");
                   });
  AddPeopleCommand(cmd, "ls", "List tokens (their ids, never their text)", RunTokenList,
                   [](CLI::App* c, PeopleOptions& o) {
                     c->add_option("--user", o.user, "One user's tokens");
                     c->add_flag("--json", o.json, "One JSON object per token, one per line");
                   });
  AddPeopleCommand(
      cmd, "revoke", "Revoke a token: every node refuses it within the refresh interval", RunTokenRevoke,
      [](CLI::App* c, PeopleOptions& o) { c->add_option("ID", o.id, "The token's id")->required(); });
}

void AddPeople(CLI::App& app) {
  auto* user =
      app.add_subcommand("user", "Users: create, ls, show, disable, enable, operator, password, link")
          ->require_subcommand(1);
  const auto name = [](const char* help) {
    return [help](CLI::App* c, PeopleOptions& o) { c->add_option("NAME", o.name, help)->required(); };
  };
  AddPeopleCommand(user, "create", "Create a user (their name is their namespace)", RunUserCreate,
                   [](CLI::App* c, PeopleOptions& o) {
                     c->add_option("NAME", o.name, "The user's name")->required();
                     c->add_option("--full-name", o.full_name, "Shown beside the name");
                     c->add_flag("--operator", o.is_operator, "The user runs the site");
                   });
  AddPeopleCommand(user, "ls", "List users", RunUserList, [](CLI::App* c, PeopleOptions& o) {
    c->add_flag("--json", o.json, "JSON, one per line");
  });
  AddPeopleCommand(user, "show", "A user and their organizations", RunUserShow,
                   [](CLI::App* c, PeopleOptions& o) {
                     c->add_option("NAME", o.name, "The user")->required();
                     c->add_flag("--json", o.json, "JSON, one per line");
                   });
  AddPeopleCommand(user, "disable", "Refuse every token of a user", RunUserDisable, name("The user"));
  AddPeopleCommand(user, "enable", "Accept a disabled user's tokens again", RunUserEnable, name("The user"));
  AddPeopleCommand(user, "operator", "Make a user an operator of the site (--off: no more)", RunUserOperator,
                   [](CLI::App* c, PeopleOptions& o) {
                     c->add_option("NAME", o.name, "The user")->required();
                     c->add_flag("--off", o.off, "Take the operator's rights away");
                   });
  AddPeopleCommand(
      user, "password",
      "Set the password a user signs in to the pages with, read from standard input (--off: remove it)",
      RunUserPassword, [](CLI::App* c, PeopleOptions& o) {
        c->add_option("NAME", o.name, "The user")->required();
        c->add_flag("--off", o.off, "Remove the password: the user signs in with a password no more");
      });
  AddPeopleCommand(user, "link",
                   "Link a subject of the company's OpenID Connect provider to a user (without --subject: "
                   "list them; --off: "
                   "unlink it)",
                   RunUserLink, [](CLI::App* c, PeopleOptions& o) {
                     c->add_option("NAME", o.name, "The user")->required();
                     c->add_option("--issuer", o.issuer, "The provider's issuer URL (oidc_issuer)");
                     c->add_option("--subject", o.subject, "The person's subject there (the id token's sub)");
                     c->add_flag("--off", o.off, "Unlink the subject");
                   });

  auto* org =
      app.add_subcommand("org", "Organizations: create, ls, show, add, remove, role")->require_subcommand(1);
  AddPeopleCommand(org, "create", "Create an organization (its name is its namespace)", RunOrgCreate,
                   [](CLI::App* c, PeopleOptions& o) {
                     c->add_option("NAME", o.name, "The organization's name")->required();
                     c->add_option("--full-name", o.full_name, "Shown beside the name");
                   });
  AddPeopleCommand(org, "ls", "List organizations", RunOrgList, [](CLI::App* c, PeopleOptions& o) {
    c->add_flag("--json", o.json, "JSON, one per line");
  });
  AddPeopleCommand(org, "show", "An organization and its members", RunOrgShow,
                   [](CLI::App* c, PeopleOptions& o) {
                     c->add_option("NAME", o.name, "The organization")->required();
                     c->add_flag("--json", o.json, "JSON, one per line");
                   });
  const auto member = [](bool with_role) {
    return [with_role](CLI::App* c, PeopleOptions& o) {
      c->add_option("ORG", o.name, "The organization")->required();
      c->add_option("USER", o.user, "The user")->required();
      if (with_role) c->add_option("ROLE", o.role, "read, write or admin")->required();
    };
  };
  AddPeopleCommand(org, "add", "Make a user a member with a role", RunOrgSetRole, member(true));
  AddPeopleCommand(org, "role", "Change a member's role", RunOrgSetRole, member(true));
  AddPeopleCommand(org, "remove", "Take a member out", RunOrgRemove, member(false));
}

void AddPublishers(CLI::App& app) {
  auto* cmd = app.add_subcommand("publisher",
                                 "Trusted publishers: CI jobs whose OpenID Connect id tokens "
                                 "are exchanged for short-lived tokens (create, ls, revoke)")
                  ->require_subcommand(1);
  AddPeopleCommand(
      cmd, "create", "Trust a CI provider's id tokens with these claims for a namespace", RunPublisherCreate,
      [](CLI::App* c, PeopleOptions& o) {
        c->add_option("NS", o.name, "The user or organization whose repositories it writes")->required();
        c->add_option("--repo", o.repo, "One repository (NS/NAME, datasets/NS/NAME); default all");
        c->add_option("--issuer", o.issuer, "The provider (https://token.actions.githubusercontent.com)")
            ->required();
        c->add_option("--audience", o.audience, "The aud the id tokens carry")->required();
        c->add_option("--claim", o.claims, "NAME=VALUE the id token must carry; repeat")->required();
        c->add_option("--role", o.role, "read or write (default write)");
      });
  AddPeopleCommand(cmd, "ls", "List trust policies", RunPublisherList, [](CLI::App* c, PeopleOptions& o) {
    c->add_option("NS", o.name, "One namespace's");
    c->add_flag("--json", o.json, "JSON, one per line");
  });
  AddPeopleCommand(
      cmd, "revoke", "Revoke a trust policy and every token exchanged under it", RunPublisherRevoke,
      [](CLI::App* c, PeopleOptions& o) { c->add_option("ID", o.id, "The policy's id")->required(); });
}

void AddAudit(CLI::App& app) {
  auto opts = std::make_shared<AuditOptions>();
  auto* cmd =
      app.add_subcommand("audit", "The audit log: who changed what, when and from where (newest first)");
  IndexFlags(cmd, opts->data_dir, opts->index, opts->config_file, "the audit log");
  cmd->add_option("--since", opts->since, "Only this far back: 30m, 24h, 7d");
  cmd->add_option("--user", opts->user, "Only this actor: a user, scope:<scope>, cli:<account>");
  cmd->add_option("--ns", opts->ns, "Only changes in this namespace");
  cmd->add_option("--repo", opts->repo, "Only changes of this repository (acme/model, datasets/acme/data)");
  cmd->add_option("--limit", opts->limit, "At most this many events (default 100)");
  cmd->add_flag("--json", opts->json, "One JSON object per event, one per line");
  OnSelected(cmd, opts, RunAudit);
}

void AddRemoteFlags(CLI::App* cmd, RemoteOptions& r) {
  cmd->add_option("--endpoint", r.endpoint,
                  "Server URL, e.g. http://127.0.0.1:8080 (default CAIRN_ENDPOINT)");
  cmd->add_option("--token", r.token, "Bearer token of the scope (default CAIRN_TOKEN)");
  cmd->add_option("--attempts", r.attempts,
                  "Tries per request on 408/429/5xx and connection errors (default 8)")
      ->check(CLI::Range(1, 100));
}

void AddClientCommands(CLI::App& app) {
  auto get = std::make_shared<GetOptions>();
  auto* g = app.add_subcommand("get", "Download a stored file (verified; an interrupted download resumes)");
  g->add_option("FILE_HASH", get->file, "The file's hash (64 hex digits)")->required();
  g->add_option("-o,--output", get->output, "Where to write it (default: the hash; - for stdout)");
  g->add_option("--range", get->range, "Only bytes A-B (inclusive), e.g. 0-1048575");
  g->add_option("--parallel", get->parallel, "Ranges fetched at once (default 8)")->check(CLI::Range(1, 256));
  g->add_flag("--json", get->json, "Print the outcome as JSON on stdout");
  AddRemoteFlags(g, get->remote);
  g->callback([get] {
    if (int rc = RunGet(*get); rc != 0) throw CLI::RuntimeError(rc);
  });
  auto put = std::make_shared<PutOptions>();
  auto* p = app.add_subcommand(
      "put", "Upload files and directories (chunked, deduplicated, as the stock client does)");
  p->add_option("PATH", put->paths, "Files, and directories (uploaded recursively)")->required();
  p->add_option("--parallel", put->parallel, "Xorb uploads at once (default 4)")->check(CLI::Range(1, 64));
  p->add_flag("--no-global-dedup", put->no_global_dedup, "Do not ask the server which chunks it has");
  p->add_flag("--json", put->json, "Print the outcome as JSON on stdout");
  AddRemoteFlags(p, put->remote);
  p->callback([put] {
    if (int rc = RunPut(*put); rc != 0) throw CLI::RuntimeError(rc);
  });
  auto ls = std::make_shared<LsOptions>();
  auto* l = app.add_subcommand("ls", "List the files the token's scope sees: hash, size, sha256, created");
  l->add_flag("--json", ls->json, "One JSON array of the files");
  AddRemoteFlags(l, ls->remote);
  l->callback([ls] {
    if (int rc = RunLs(*ls); rc != 0) throw CLI::RuntimeError(rc);
  });
  auto rm = std::make_shared<RmOptions>();
  auto* m = app.add_subcommand(
      "rm", "Take files out of the token's scope (a plain scope, not a repository's); the stored bytes stay");
  m->add_option("FILE_HASH", rm->files, "The files' hashes (64 hex digits)")->required();
  AddRemoteFlags(m, rm->remote);
  m->callback([rm] {
    if (int rc = RunRm(*rm); rc != 0) throw CLI::RuntimeError(rc);
  });
  auto stat = std::make_shared<StatOptions>();
  auto* s =
      app.add_subcommand("stat", "What the token's scope holds: files, bytes, the server's dedup ratio");
  s->add_flag("--json", stat->json, "Print JSON");
  AddRemoteFlags(s, stat->remote);
  s->callback([stat] {
    if (int rc = RunStat(*stat); rc != 0) throw CLI::RuntimeError(rc);
  });
}

void AddLink(CLI::App& app) {
  auto opts = std::make_shared<LinkOptions>();
  auto* cmd = app.add_subcommand("link", "Print a signed, expiring download link to a stored file");
  cmd->add_option("FILE", opts->file, "The file's hash (64 hex digits)")->required();
  cmd->add_option("--scope", opts->scope, "The scope that stored the file")->required();
  cmd->add_option("--name", opts->name, "File name for the browser to save it as (Content-Disposition)");
  cmd->add_option("--ttl", opts->ttl,
                  "Lifetime: seconds, or 30m, 12h, 7d (default 24h; at most max_link_ttl)");
  cmd->add_option("--public-url", opts->public_url,
                  "Base URL clients reach the server at (default public_url)");
  cmd->add_option("--data", opts->data_dir, "Data directory (default ./cairn-data)");
  cmd->add_option("--index", opts->index, "Index holding the signing key (default sqlite:<data>/index.db)");
  cmd->add_option("--config", opts->config_file, "TOML configuration file (also CAIRN_CONFIG)");
  OnSelected(cmd, opts, RunLink);
}

// The settings every command on the index and the store takes.
void AddBackendOptions(CLI::App* cmd, FsckCommandOptions& opts) {
  cmd->add_option("--config", opts.config_file, "TOML configuration file (also CAIRN_CONFIG)");
  cmd->add_option("--data", opts.data_dir, "Data directory (default ./cairn-data)");
  cmd->add_option("--index", opts.index, "sqlite:PATH or postgres://USER@HOST/DB");
  cmd->add_option("--store", opts.store, "file:PATH or s3://BUCKET[/PREFIX]");
  cmd->add_option("--threads", opts.threads, "Objects checked at once (default 4)");
  cmd->add_option(
      "--default-scope", opts.default_scope,
      "Register shards that have no recorded scope (stored before cairn kept grants) under this one");
  cmd->add_flag("--json", opts.json, "Print the report as JSON");
}

void AddFsck(CLI::App& app) {
  auto opts = std::make_shared<FsckCommandOptions>();
  auto* cmd = app.add_subcommand("fsck", "Check the index against the store; exit 1 on damage");
  AddBackendOptions(cmd, *opts);
  cmd->add_flag("--deep", opts->deep,
                "Also re-hash every stored xorb, shard and grant and check every file's terms");
  cmd->add_flag("--repair", opts->repair,
                "Index stored objects the index lacks, from their own verified bytes (nothing is deleted)");
  OnSelected(cmd, opts, RunFsck);
}

void AddGc(CLI::App& app) {
  auto opts = std::make_shared<GcCommandOptions>();
  auto* cmd = app.add_subcommand(
      "gc", "Free what no live file uses any more, once unreferenced for longer than the grace period");
  cmd->add_option("--config", opts->config_file, "TOML configuration file (also CAIRN_CONFIG)");
  cmd->add_option("--data", opts->data_dir, "Data directory (default ./cairn-data)");
  cmd->add_option("--index", opts->index, "sqlite:PATH or postgres://USER@HOST/DB");
  cmd->add_option("--store", opts->store, "file:PATH or s3://BUCKET[/PREFIX]");
  cmd->add_flag("--dry-run", opts->dry_run, "Mark and report what would be freed; change nothing");
  cmd->add_option("--grace", opts->grace,
                  "How long an object stays unreferenced before it is freed (default 30d; shorter than the "
                  "clients' caches needs --force; 0: everything unreferenced now, in one run)");
  cmd->add_flag("--force", opts->force, "Accept a grace shorter than the clients' caches");
  cmd->add_flag("--vacuum", opts->vacuum,
                "Then rewrite the index's database, so deleted history leaves its files at once (SQLite "
                "VACUUM; PostgreSQL VACUUM FULL, which locks the repository tables while it runs)");
  cmd->add_flag("--json", opts->json, "Print the report as JSON");
  OnSelected(cmd, opts, RunGc);
}

void AddCompact(CLI::App& app) {
  auto opts = std::make_shared<CompactCommandOptions>();
  auto* cmd = app.add_subcommand(
      "compact", "Rewrite xorbs that are mostly dead with their live chunks; `cairn gc` frees the old ones");
  cmd->add_option("--config", opts->config_file, "TOML configuration file (also CAIRN_CONFIG)");
  cmd->add_option("--data", opts->data_dir, "Data directory (default ./cairn-data)");
  cmd->add_option("--index", opts->index, "sqlite:PATH or postgres://USER@HOST/DB");
  cmd->add_option("--store", opts->store, "file:PATH or s3://BUCKET[/PREFIX]");
  cmd->add_option("--threshold", opts->threshold,
                  "Rewrite a xorb when less than this share of its bytes is live (default 0.5)");
  cmd->add_option("--max-new-xorbs", opts->max_new_xorbs, "Stop after writing this many (default: no limit)");
  cmd->add_flag("--dry-run", opts->dry_run, "Report what would be rewritten; change nothing");
  cmd->add_flag("--json", opts->json, "Print the report as JSON");
  OnSelected(cmd, opts, RunCompact);
}

// Where a command finds the deployment (as `cairn serve` would), and --json.
template <typename Options>
void AddBackendOptions(CLI::App* cmd, Options& opts) {
  cmd->add_option("--config", opts.config_file, "TOML configuration file (also CAIRN_CONFIG)");
  cmd->add_option("--data", opts.data_dir, "Data directory (default ./cairn-data)");
  cmd->add_option("--index", opts.index, "sqlite:PATH or postgres://USER@HOST/DB");
  cmd->add_option("--store", opts.store, "file:PATH or s3://BUCKET[/PREFIX]");
  cmd->add_flag("--json", opts.json, "Print the report as JSON");
}

template <typename Options>
void AddDeploymentOptions(CLI::App* cmd, Options& opts) {
  AddBackendOptions(cmd, opts);
  cmd->add_option("--threads", opts.threads, "Objects copied at once (default 4)");
}

void AddMirror(CLI::App& app) {
  auto* mirror =
      app.add_subcommand("mirror", "The pull-through mirror's repositories: ls, prefetch, evict, trim")
          ->require_subcommand(1);
  const auto common = [](CLI::App* cmd, MirrorCommandOptions& o) { AddBackendOptions(cmd, o); };
  auto ls_opts = std::make_shared<MirrorCommandOptions>();
  auto* ls = mirror->add_subcommand("ls", "Mirrored repositories, their refs and the large files fetched");
  common(ls, *ls_opts);
  OnSelected(ls, ls_opts, RunMirrorLs);
  auto pre_opts = std::make_shared<MirrorCommandOptions>();
  auto* pre = mirror->add_subcommand(
      "prefetch", "Copy a repository from upstream with every large file of a revision (default: main)");
  common(pre, *pre_opts);
  pre->add_option("REPO", pre_opts->repo, "[datasets/|spaces/]NS/NAME[@REVISION]")->required();
  OnSelected(pre, pre_opts, RunMirrorPrefetch);
  auto evict_opts = std::make_shared<MirrorCommandOptions>();
  auto* evict = mirror->add_subcommand(
      "evict",
      "Forget a mirrored repository (the collector frees its data past the grace; a read copies it again)");
  common(evict, *evict_opts);
  evict->add_option("REPO", evict_opts->repo, "[datasets/|spaces/]NS/NAME")->required();
  OnSelected(evict, evict_opts, RunMirrorEvict);
  auto trim_opts = std::make_shared<MirrorCommandOptions>();
  auto* trim = mirror->add_subcommand(
      "trim",
      "Evict the least recently read mirrored repositories until their large files fit the limit (what "
      "`cairn serve` does past mirror_max_bytes); without a limit, measure");
  common(trim, *trim_opts);
  trim->add_option("--max-bytes", trim_opts->max_bytes, "The limit (\"500GiB\"; default: mirror_max_bytes)");
  OnSelected(trim, trim_opts, RunMirrorTrim);
}

void AddBundle(CLI::App& app) {
  auto ex = std::make_shared<BundleCommandOptions>();
  auto* cmd = app.add_subcommand(
      "export",
      "Write a repository (every branch and tag, or one revision, with its history and large files) into a "
      "bundle directory that `cairn import` loads into another server");
  AddBackendOptions(cmd, *ex);
  cmd->add_option("REPO", ex->repo, "[datasets/|spaces/]NS/NAME[@REVISION]")->required();
  cmd->add_option("DEST", ex->path, "The bundle: a directory, created (or empty)")->required();
  OnSelected(cmd, ex, RunExport);
  auto im = std::make_shared<BundleCommandOptions>();
  auto* imp = app.add_subcommand(
      "import", "Load a bundle `cairn export` wrote as a new repository, checked before anything is stored");
  AddBackendOptions(imp, *im);
  imp->add_option("SRC", im->path, "The bundle's directory")->required();
  imp->add_option("--as", im->as,
                  "Import under this name: [datasets/|spaces/]NS/NAME (default: the bundle's)");
  OnSelected(imp, im, RunImport);
}

void AddBackup(CLI::App& app) {
  auto opts = std::make_shared<BackupCommandOptions>();
  auto* cmd = app.add_subcommand(
      "backup",
      "Back up the index at one moment and every object it names into a directory or an S3 bucket, while "
      "servers run (incremental: only new objects are copied)");
  AddDeploymentOptions(cmd, *opts);
  cmd->add_option("DEST", opts->dest,
                  "Where the backup is kept: a directory, or s3://BUCKET[/PREFIX] (with the s3_* settings)")
      ->required();
  cmd->add_flag(
      "--verify", opts->verify,
      "Re-hash what the backup at DEST holds (every snapshot's index and object); exit 1 on damage");
  cmd->add_option("--keep", opts->keep, "Snapshots kept (default 2); objects none of them names are deleted");
  OnSelected(cmd, opts, RunBackup);
  auto ropts = std::make_shared<RestoreCommandOptions>();
  auto* restore = app.add_subcommand(
      "restore", "Bring a backup up under this deployment's settings (an empty index and store)");
  AddDeploymentOptions(restore, *ropts);
  restore
      ->add_option("SRC", ropts->src,
                   "The backup: a directory, or s3://BUCKET[/PREFIX] (with the s3_* settings)")
      ->required();
  restore->add_option("--snapshot", ropts->snapshot, "Which snapshot (default: the latest)");
  restore->add_flag("--resume", ropts->resume, "Finish an interrupted restore of the same snapshot");
  OnSelected(restore, ropts, RunRestore);
}

void AddKeys(CLI::App& app) {
  auto* keys = app.add_subcommand("keys", "Signing keys kept in the index: list, rotate, retire")
                   ->require_subcommand(1);
  const auto common = [](CLI::App* cmd, KeysOptions& o) {
    cmd->add_option("--data", o.data_dir, "Data directory (default ./cairn-data)");
    cmd->add_option("--index", o.index, "Index holding the keys (default sqlite:<data>/index.db)");
    cmd->add_option("--config", o.config_file, "TOML configuration file (also CAIRN_CONFIG)");
  };
  auto list_opts = std::make_shared<KeysOptions>();
  auto* list = keys->add_subcommand("list", "Every key's kind, id, state and age (never the secrets)");
  common(list, *list_opts);
  OnSelected(list, list_opts, RunKeysList);
  auto rotate_opts = std::make_shared<KeysOptions>();
  auto* rotate = keys->add_subcommand(
      "rotate", "Add a key that signs from 2 x key_refresh on; the keys before stay accepted until retired");
  common(rotate, *rotate_opts);
  rotate->add_option("--kind", rotate_opts->kind, "jwt (tokens) or url (transfer URLs, download links)")
      ->required();
  rotate->add_option("--id", rotate_opts->id, "The new key's id (default: the date and random digits)");
  OnSelected(rotate, rotate_opts, RunKeysRotate);
  auto retire_opts = std::make_shared<KeysOptions>();
  auto* retire =
      keys->add_subcommand("retire", "Delete a key: what it signed is refused once the nodes refresh");
  common(retire, *retire_opts);
  retire->add_option("--kind", retire_opts->kind, "jwt or url")->required();
  retire->add_option("ID", retire_opts->id, "The key's id (cairn keys list)")->required();
  OnSelected(retire, retire_opts, RunKeysRetire);
}

void AddQuota(CLI::App& app) {
  auto* quota =
      app.add_subcommand("quota", "Storage quotas per namespace: set, show, rm")->require_subcommand(1);
  const auto common = [](CLI::App* cmd, QuotaOptions& o) {
    cmd->add_option("--data", o.data_dir, "Data directory (default ./cairn-data)");
    cmd->add_option("--index", o.index, "Index holding the quotas (default sqlite:<data>/index.db)");
    cmd->add_option("--config", o.config_file, "TOML configuration file (also CAIRN_CONFIG)");
  };
  auto set_opts = std::make_shared<QuotaOptions>();
  auto* set =
      quota->add_subcommand("set", "Set a namespace's quota (none: measure its usage, refuse nothing)");
  common(set, *set_opts);
  set->add_option("NAMESPACE", set_opts->ns, "A user or organization")->required();
  set->add_option("SIZE", set_opts->size, "Bytes, or a size with a unit (500MiB, 10GiB, 1TiB), or none")
      ->required();
  OnSelected(set, set_opts, RunQuotaSet);
  auto show_opts = std::make_shared<QuotaOptions>();
  auto* show = quota->add_subcommand(
      "show", "A namespace's usage, measured now (any namespace); without one, every quota as recorded");
  common(show, *show_opts);
  show->add_option("NAMESPACE", show_opts->ns, "A user or organization");
  show->add_flag("--json", show_opts->json, "One JSON object per namespace, one per line");
  OnSelected(show, show_opts, RunQuotaShow);
  auto rm_opts = std::make_shared<QuotaOptions>();
  auto* rm = quota->add_subcommand("rm", "Remove a namespace's quota");
  common(rm, *rm_opts);
  rm->add_option("NAMESPACE", rm_opts->ns, "A user or organization")->required();
  OnSelected(rm, rm_opts, RunQuotaRm);
}

void AddIndex(CLI::App& app) {
  auto opts = std::make_shared<IndexOptions>();
  auto* index = app.add_subcommand("index", "Manage the metadata index")->require_subcommand(1);
  auto* migrate = index->add_subcommand("migrate", "Apply pending schema migrations, then exit");
  migrate->add_option("--data", opts->data_dir, "Data directory (default ./cairn-data)");
  migrate->add_option("--index", opts->index, "sqlite:PATH or postgres://USER@HOST/DB");
  migrate->add_option("--config", opts->config_file, "TOML configuration file (also CAIRN_CONFIG)");
  OnSelected(migrate, opts, RunIndexMigrate);
  auto copy_opts = std::make_shared<IndexCopyOptions>();
  auto* copy = index->add_subcommand(
      "copy",
      "Copy a whole index to another database (SQLite <-> PostgreSQL); run again to resume; verified");
  copy->add_option("--from", copy_opts->from, "Source index: sqlite:PATH or postgres://USER@HOST/DB")
      ->required();
  copy->add_option("--to", copy_opts->to,
                   "Destination index (empty, or an interrupted copy of the same source)")
      ->required();
  OnSelected(copy, copy_opts, RunIndexCopy);
  auto rebuild_opts = std::make_shared<FsckCommandOptions>();
  auto* rebuild = index->add_subcommand(
      "rebuild", "Recreate a lost index from the stored xorbs, shards and grants (into an empty --index)");
  AddBackendOptions(rebuild, *rebuild_opts);
  OnSelected(rebuild, rebuild_opts, RunIndexRebuild);
}

void AddStore(CLI::App& app) {
  auto* store = app.add_subcommand("store", "Manage the blob store")->require_subcommand(1);
  auto opts = std::make_shared<StoreCopyOptions>();
  auto* copy = store->add_subcommand(
      "copy", "Copy every blob to another store (file: <-> s3://); run again to resume; every blob verified");
  copy->add_option("--from", opts->from, "Source store: file:PATH or s3://BUCKET[/PREFIX]")->required();
  copy->add_option("--to", opts->to, "Destination store (empty, or an interrupted copy)")->required();
  copy->add_option("--config", opts->config_file,
                   "TOML configuration with the s3_* settings (also CAIRN_CONFIG)");
  copy->add_option(
      "--from-config", opts->from_config,
      "TOML configuration of the source alone (another S3 endpoint or credentials than --config)");
  copy->add_option("--to-config", opts->to_config, "TOML configuration of the destination alone");
  copy->add_option("--threads", opts->threads, "Blobs copied at once (default 8)");
  OnSelected(copy, opts, RunStoreCopy);
}

}  // namespace
}  // namespace cairn::cli

int main(int argc, char** argv) {
  CLI::App app{"cairn: a self-hosted Xet storage server"};
  app.require_subcommand(1);
  app.add_subcommand("version", "Print the version")->callback([] {
    std::cout << "cairn " CAIRN_VERSION "\n";
  });
  cairn::cli::AddHash(app);
  cairn::cli::AddXorb(app);
  cairn::cli::AddShard(app);
  cairn::cli::AddServe(app);
  cairn::cli::AddToken(app);
  cairn::cli::AddPeople(app);
  cairn::cli::AddPublishers(app);
  cairn::cli::AddAudit(app);
  cairn::cli::AddLink(app);
  cairn::cli::AddClientCommands(app);
  cairn::cli::AddKeys(app);
  cairn::cli::AddQuota(app);
  cairn::cli::AddIndex(app);
  cairn::cli::AddFsck(app);
  cairn::cli::AddGc(app);
  cairn::cli::AddCompact(app);
  cairn::cli::AddBackup(app);
  cairn::cli::AddBundle(app);
  cairn::cli::AddMirror(app);
  cairn::cli::AddStore(app);
  CLI11_PARSE(app, argc, argv);
  return 0;
}
