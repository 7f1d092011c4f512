// `cairn serve`: the storage server.
#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <condition_variable>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <map>
#include <mutex>
#include <thread>
#include <utility>

#include "api/cas_routes.h"
#include "api/file_routes.h"
#include "api/git_routes.h"
#include "api/hub_routes.h"
#include "api/lfs_routes.h"
#include "api/ops_routes.h"
#include "api/person_tokens.h"
#include "cas/service.h"
#include "cli/backend.h"
#include "cli/commands.h"
#include "common/allocator.h"
#include "common/clock.h"
#include "common/periodic.h"
#include "common/worker_pool.h"
#include "config/config.h"
#include "config/secrets.h"
#include "gc/scheduler.h"
#include "http/server.h"
#include "mirror/mirror_service.h"
#include "oidc/issuer_keys.h"
#include "oidc/relying_party.h"
#include "oidc/single_sign_on.h"
#include "people/directory.h"
#include "people/sign_in.h"
#include "publish/exchange.h"
#include "quota/quota_service.h"
#include "store/blob_store.h"
#include "web/page_routes.h"
#include "xet/hashing.h"

namespace cairn::cli {
namespace {

// Raises the soft open-file limit to the hard one, and returns how many of `wanted` connections it leaves
// room for beside the files the server itself holds open (stored blobs being served, the index, the logs): a
// connection the kernel cannot give a descriptor to would fail to be accepted at all.
size_t ConnectionsTheFileLimitAllows(size_t wanted) {
  constexpr rlim_t kReserved = 512;
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) != 0) return wanted;
  if (lim.rlim_cur < lim.rlim_max) {
    rlimit raised = lim;
    raised.rlim_cur = lim.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) lim = raised;
  }
  if (lim.rlim_cur == RLIM_INFINITY || lim.rlim_cur >= wanted + kReserved) return wanted;
  const size_t allowed = lim.rlim_cur > kReserved + 16 ? static_cast<size_t>(lim.rlim_cur - kReserved) : 16;
  spdlog::warn("max_connections {} lowered to {}: the open-file limit is {} (raise it, e.g. LimitNOFILE=)",
               wanted, allowed, lim.rlim_cur);
  return allowed;
}

// The storage behind the routes; lives as long as the server runs.
struct Backend {
  std::unique_ptr<store::BlobStore> store;
  std::unique_ptr<index::Index> index;
  std::unique_ptr<quota::QuotaService> quota;
  std::unique_ptr<WorkerPool> pool;
  std::unique_ptr<cas::CasService> service;
  std::unique_ptr<files::FileService> files;
  std::unique_ptr<hub::HubService> hub;
  std::unique_ptr<hub::BucketService> buckets;
  std::unique_ptr<lfs::LfsService> lfs;
  std::unique_ptr<mirror::MirrorService> mirror;
  std::unique_ptr<cas::Relay> relay;  // the mirror's, for the CAS routes (made before it)
  std::unique_ptr<people::Directory> people;
  std::unique_ptr<people::PeopleService> people_service;  // people's own changes through the API
  std::unique_ptr<people::SignInService> sign_in;         // passwords and browser sessions (the pages)
  std::unique_ptr<people::DeviceFlow> device;             // hf auth login (the API and the pages)
  // Trusted publishers: the issuers' documents, their keys, and the exchange that reads them.
  std::unique_ptr<oidc::DocumentSource> documents;
  std::unique_ptr<oidc::IssuerKeys> issuer_keys;
  std::unique_ptr<publish::Exchanger> exchanger;
  // Company sign-in through the pages (when oidc_issuer is set): the provider, and people signed in by it.
  std::unique_ptr<oidc::RelyingParty> relying_party;
  std::unique_ptr<oidc::SingleSignOn> sso;
};

// Transfer URLs the store signs itself (transfer_mode = presigned): reconstructions send clients straight to
// it. Refused for a store that cannot presign.
http::Status UsePresignedUrls(store::BlobStore& store, cas::ServiceOptions& so) {
  const Clock* clock = so.clock;  // the service's: a URL's signing time and its expiry read one clock
  const auto now = [clock] { return static_cast<uint64_t>(clock->UnixSeconds()); };
  const auto sample = store.PresignedUrl(store::BlobKind::kXorb, xet::Hash{}, now(), now() + 1,
                                         "18446744073709551615-18446744073709551615");
  if (sample.empty())
    return IoError("transfer_mode = presigned needs a store that presigns URLs (s3://), not " +
                   store.Describe());
  store::BlobStore* st = &store;
  so.presigner.url = [st, now](std::string_view xorb_hex, const cas::ByteRange& r, uint64_t expiry) {
    const auto hash = xet::Hash::FromHex(xorb_hex);
    const std::string tag = std::to_string(r.start) + "-" + std::to_string(r.end);
    return hash ? st->PresignedUrl(store::BlobKind::kXorb, *hash, now(), expiry, tag) : std::string();
  };
  // A presigned URL's length varies only with the numbers in it: the longest sample, and room for the
  // expiry.
  so.presigner.max_size = sample.size() + 32;
  return http::Ok{};
}

http::Result<cas::ServiceOptions> CasOptionsOf(const config::Config& cfg, const config::Secrets& secrets,
                                               store::BlobStore& store) {
  cas::ServiceOptions so;
  so.public_url = cfg.public_url;
  so.url_keys = UrlKeysFrom(secrets.url);
  so.transfer_url_ttl_seconds = static_cast<uint64_t>(cfg.transfer_url_ttl.count());
  so.dedup_key_expiry_seconds = static_cast<uint64_t>(cfg.dedup_key_expiry.count());
  so.dedup_across_scopes = cfg.dedup_across_scopes;
  so.dedup_answer_max_bytes = cfg.dedup_answer_max_bytes;
  so.upload_buffers_kept = cfg.upload_buffers_kept;
  if (cfg.transfer_mode == "presigned") {
    if (auto st = UsePresignedUrls(store, so); !st) return st.error();
  }
  return so;
}

// The mirror is made after the CAS routes (it needs the Hub); a reconstruction of a file it is fetching
// waits for it.
std::unique_ptr<cas::Relay> RelayToMirror(Backend* backend) {
  return std::make_unique<cas::FunctionRelay>(
      [backend](const xet::FileHash& file, const std::string& scope, std::optional<cas::ByteRange> range) {
        return backend->mirror ? backend->mirror->RelayPlan(file, scope, range) : std::nullopt;
      },
      [backend](const xet::XorbHash& xorb, uint64_t first, uint64_t last) {
        return backend->mirror ? backend->mirror->RelayOpen(xorb, first, last) : nullptr;
      });
}

void ServeCas(http::Server& server, const config::Config& cfg, Backend& b,
              const std::shared_ptr<http::AdmissionGate>& uploads) {
  Backend* backend = &b;
  api::RegisterCasRoutes(server, *b.service,
                         {.max_concurrent_uploads = cfg.max_concurrent_uploads,
                          .uploads = uploads,
                          .quota = b.quota.get(),
                          .await_file =
                              [backend](const xet::FileHash& file) {
                                return backend->mirror != nullptr && backend->mirror->Await(file);
                              },
                          .relay = b.relay.get()});
}

// Plain downloads: defaults per store from the read-ahead benchmark (BENCHMARKS.md): a local disk keeps up
// with little read-ahead, a remote store needs requests in flight to hide their latency.
void ServeFiles(http::Server& server, const config::Config& cfg, const cas::UrlKeys& url_keys, Backend& b) {
  const bool local = b.store->local();
  files::FileServiceOptions fo;
  fo.read_ahead.depth = cfg.readahead_depth != 0 ? cfg.readahead_depth : (local ? 2 : 8);
  fo.read_ahead.unit_bytes = cfg.readahead_unit;
  fo.read_ahead.stream_bytes = cfg.readahead_stream_bytes;
  fo.total_read_ahead_bytes = cfg.readahead_total_bytes;
  fo.fetch_threads = cfg.readahead_threads != 0 ? cfg.readahead_threads : (local ? 4 : 32);
  fo.url_keys = url_keys;
  fo.max_link_ttl_seconds = static_cast<uint64_t>(cfg.max_link_ttl.count());
  fo.log = [](const std::string& message) { spdlog::error("serving a file: {}", message); };
  b.files = std::make_unique<files::FileService>(*b.service, *b.index, fo);
  api::RegisterFileRoutes(server, *b.files, *b.index, {.public_url = cfg.public_url});
}

// The Hub API (huggingface_hub, the hf CLI): repositories over the same index and files.
void ServeHub(http::Server& server, const config::Config& cfg, Backend& b) {
  b.hub = std::make_unique<hub::HubService>(*b.index, *b.files, hub::HubOptions{.quota = b.quota.get()});
  b.buckets = std::make_unique<hub::BucketService>(*b.index, *b.files, Clock::System(), b.quota.get());
  if (!cfg.mirror_upstream.empty()) {
    // A pull-through mirror of cfg.mirror_upstream (docs/mirror.md).
    b.mirror = std::make_unique<mirror::MirrorService>(*b.index, *b.index, *b.hub, *b.files, *b.service,
                                                       MirrorOptionsOf(cfg));
    spdlog::info("mirroring {}{}", cfg.mirror_upstream, cfg.mirror_offline ? " (offline)" : "");
  }
  api::HubRouteOptions ho;
  ho.people = b.people.get();
  ho.people_service = b.people_service.get();
  ho.audit = b.index.get();
  ho.exchanger = b.exchanger.get();
  ho.device = b.device.get();
  ho.public_url = cfg.public_url;
  ho.content_url = cfg.content_url;
  ho.quota = b.quota.get();
  ho.mirror = b.mirror.get();
  api::RegisterHubRoutes(server, *b.hub, *b.buckets, *b.files, ho);
}

// Company sign-in (oidc_issuer set): the relying party of the provider and what maps its people to users.
http::Status UseSso(const config::Config& cfg, Backend& b) {
  if (cfg.oidc_issuer.empty()) return Ok{};
  oidc::SsoSettings s;
  s.display_name = cfg.oidc_name;
  s.username_claim = cfg.oidc_username_claim;
  s.groups_claim = cfg.oidc_groups_claim;
  s.create_users = cfg.oidc_create_users;
  s.session_life = cfg.oidc_session;
  for (const auto& text : cfg.oidc_groups) {
    auto g = oidc::ParseGroupRole(text);
    if (!g) return Error{ErrorCode::kMalformed, "oidc_groups: " + g.error().message};
    s.groups.push_back(std::move(*g));
  }
  std::string base = cfg.public_url;
  while (base.ends_with('/')) base.pop_back();
  b.relying_party =
      std::make_unique<oidc::RelyingParty>(oidc::ProviderConfig{.issuer = cfg.oidc_issuer,
                                                                .client_id = cfg.oidc_client_id,
                                                                .client_secret = cfg.oidc_client_secret,
                                                                .redirect_uri = base + "/login/oidc/callback",
                                                                .scopes = cfg.oidc_scopes},
                                           *b.issuer_keys, *b.documents, Clock::System());
  b.sso = std::make_unique<oidc::SingleSignOn>(std::move(s), *b.relying_party, *b.people_service, *b.sign_in,
                                               Clock::System());
  return Ok{};
}

// The web pages (docs/web.md), after every API route: the router takes the first route that matches.
void ServePages(http::Server& server, const config::Config& cfg, Backend& b) {
  web::PageOptions po;
  po.public_url = cfg.public_url;
  po.content_url = cfg.content_url;
  po.sign_in = b.sign_in.get();
  po.device = b.device.get();
  po.people = b.people_service.get();
  po.sso = b.sso.get();
  po.index = b.index.get();
  po.buckets = b.buckets.get();
  if (auto* m = b.mirror.get()) {
    po.mirror_open = [m](const hub::Caller& caller, const hub::RepoId& id) { return m->Open(caller, id); };
    po.mirror_resolve = [m](const hub::Repo& repo, std::string_view rev) { return m->Resolve(repo, rev); };
  }
  po.health = {{"index", [ix = b.index.get()] { return ix->Ping(); }},
               {"store", [st = b.store.get()] { return st->Ping(); }}};
  if (b.mirror) {
    po.mirror_counters = [m = b.mirror.get()] {
      const auto c = m->counters();
      return std::vector<std::pair<std::string, uint64_t>>{
          {"repositories copied", c.repos_fetched},
          {"large files fetched (misses)", c.files_fetched},
          {"large files already held (hits)", c.file_hits},
          {"bytes from upstream", c.upstream_bytes},
          {"of those, bytes stored (the rest deduplicated)", c.new_bytes}};
    };
  }
  web::RegisterPageRoutes(server, *b.hub, *b.files, std::move(po));
}

// git-lfs uploads (and huggingface_hub's without Xet), chunked into xorbs here; parts wait in the data dir.
void ServeLfs(http::Server& server, const config::Config& cfg, const cas::UrlKeys& url_keys, Backend& b,
              const std::shared_ptr<http::AdmissionGate>& uploads) {
  lfs::LfsOptions lo;
  lo.public_url = cfg.public_url;
  lo.url_keys = url_keys;
  lo.staging_dir = std::filesystem::path(cfg.data_dir) / "lfs-parts";
  b.lfs = std::make_unique<lfs::LfsService>(*b.service, *b.index, lo);
  api::RegisterLfsRoutes(server, *b.lfs, {.quota = b.quota.get(), .uploads = uploads});
}

// git clone and fetch of the same repositories (docs/git.md).
void ServeGit(http::Server& server, const config::Config& cfg, Backend& b) {
  api::GitRouteOptions go;
  go.public_url = cfg.public_url;
  go.lfs = b.lfs.get();
  go.mirror = b.mirror.get();
  go.spool_dir = (std::filesystem::path(cfg.data_dir) / "git-push").string();
  go.max_concurrent_pushes = cfg.max_concurrent_pushes;
  go.max_concurrent_fetches = cfg.max_concurrent_fetches;
  api::RegisterGitRoutes(server, *b.hub, *b.files, *b.index, go);
}

void RegisterBackendMetrics(http::Server& server, Backend& b) {
  api::RegisterIndexMetrics(server, *b.index);
  api::RegisterQuotaMetrics(server, *b.index);
  if (b.mirror) api::RegisterMirrorMetrics(server, *b.mirror);
  api::RegisterReadiness(server, {{"index", [ix = b.index.get()] { return ix->Ping(); }},
                                  {"store", [st = b.store.get()] { return st->Ping(); }}});
}

http::Result<std::unique_ptr<Backend>> RegisterRoutes(http::Server& server, const config::Config& cfg,
                                                      const config::Secrets& secrets,
                                                      std::unique_ptr<index::Index> index,
                                                      std::unique_ptr<store::BlobStore> blobs) {
  auto b = std::make_unique<Backend>();
  b->store = std::move(blobs);
  b->index = std::move(index);
  b->quota = std::make_unique<quota::QuotaService>(*b->index, Clock::System());
  b->people = std::make_unique<people::Directory>(*b->index, Clock::System());
  b->people_service = std::make_unique<people::PeopleService>(*b->index, Clock::System(), b->people.get());
  b->sign_in = std::make_unique<people::SignInService>(*b->index, *b->people, Clock::System());
  b->device =
      std::make_unique<people::DeviceFlow>(*b->index, *b->people_service, *b->sign_in, Clock::System());
  if (auto st = b->people->Refresh(); !st) return Error{st.error().code, "people: " + st.error().message};
  b->documents = oidc::HttpDocumentSource();
  b->issuer_keys = std::make_unique<oidc::IssuerKeys>(*b->documents, Clock::System());
  b->exchanger = std::make_unique<publish::Exchanger>(*b->people, *b->issuer_keys, Clock::System());
  if (auto st = UseSso(cfg, *b); !st) return st.error();
  // Validation of one xorb spreads over the worker threads; the caller's thread takes part too.
  b->pool = std::make_unique<WorkerPool>(cfg.worker_threads > 1 ? cfg.worker_threads - 1 : 0);
  auto so = CasOptionsOf(cfg, secrets, *b->store);
  if (!so) return so.error();
  b->service = std::make_unique<cas::CasService>(*b->index, *b->store, *b->pool, *so);
  b->relay = RelayToMirror(b.get());
  // Xorbs, shards and git-lfs's uploads enter one gate: what bounds the memory uploads take.
  const auto uploads = std::make_shared<http::AdmissionGate>(cfg.max_concurrent_uploads);
  ServeCas(server, cfg, *b, uploads);
  ServeFiles(server, cfg, so->url_keys, *b);
  ServeHub(server, cfg, *b);
  ServeLfs(server, cfg, so->url_keys, *b, uploads);
  ServeGit(server, cfg, *b);
  RegisterBackendMetrics(server, *b);
  ServePages(server, cfg, *b);
  return b;
}

// Keeps the node's people current (people/directory.h): reads what changed every people_refresh, which bounds
// how long a token revoked or a user disabled on another node still works here, and records the tokens'
// last uses it noted.
std::unique_ptr<Periodic> RefreshPeople(std::chrono::seconds every, people::Directory& directory,
                                        index::PeopleIndex& index) {
  return std::make_unique<Periodic>(every, [&directory, &index](bool) {
    if (auto st = directory.Refresh(); !st) spdlog::warn("people: refresh failed: {}", st.error().message);
    if (auto st = index.NoteTokenUses(directory.TakeUses()); !st) {
      spdlog::warn("people: recording tokens' last uses failed: {}", st.error().message);
    }
  });
}

// Drops the audit log's events older than audit_retention, hourly (none: kept for ever). Every node may: a
// prune is one DELETE, and two at once delete the same rows.
std::unique_ptr<Periodic> PruneAudit(std::chrono::seconds retention, index::AuditIndex& index) {
  if (retention.count() == 0) return nullptr;
  return std::make_unique<Periodic>(std::chrono::hours(1), [retention, &index](bool) {
    auto pruned = index.PruneAudit(Clock::System().UnixSeconds() - retention.count());
    if (!pruned) {
      spdlog::warn("audit: pruning failed: {}", pruned.error().message);
    } else if (*pruned > 0) {
      spdlog::info("audit: {} events older than audit_retention dropped", *pruned);
    }
  });
}

// Expired browser sessions deleted hourly (they are refused at once; this keeps the table small).
std::unique_ptr<Periodic> PruneSessions(index::SignInIndex& index) {
  return std::make_unique<Periodic>(std::chrono::hours(1), [&index](bool) {
    if (auto pruned = index.PruneSessions(Clock::System().UnixSeconds()); !pruned) {
      spdlog::warn("sessions: pruning failed: {}", pruned.error().message);
    }
  });
}

// Which keys sign and which verify, by id (never the secrets), for the log.
std::string Describe(const config::SecretKeys& keys) {
  std::string out = "current " + keys.current().id;
  std::string others;
  for (const auto& k : keys.keys()) {
    if (k.id == keys.current().id) continue;
    others += (others.empty() ? "" : ",") + k.id;
  }
  return others.empty() ? out : out + ", also accepted " + others;
}

// Re-reads the signing keys every key_refresh, and at once after Wake() (SIGHUP), and hands changed ones to
// `apply`. While the index does not answer it keeps the keys it has. Stops and joins when destroyed.
class KeyRefresher {
 public:
  KeyRefresher(const config::Config& cfg, index::Index& index, config::Secrets current,
               std::function<void(const config::Secrets&)> apply)
      : cfg_(cfg),
        index_(index),
        current_(std::move(current)),
        apply_(std::move(apply)),
        task_(cfg.key_refresh, [this](bool woken) { Refresh(woken); }) {}

  void Wake() { task_.Wake(); }

 private:
  void Refresh(bool woken) {
    auto next = LoadConfiguredSecrets(cfg_, index_);
    if (!next) {
      spdlog::warn("signing keys: cannot re-read them, keeping the ones in use: {}", next.error().message);
    } else if (!(next->jwt == current_.jwt) || !(next->url == current_.url)) {
      current_ = std::move(*next);
      apply_(current_);
      spdlog::info("signing keys changed: tokens {}; URLs {}", Describe(current_.jwt),
                   Describe(current_.url));
    } else if (woken) {
      spdlog::info("signing keys re-read (SIGHUP): unchanged");
    }
  }

  const config::Config& cfg_;
  index::Index& index_;
  config::Secrets current_;  // the refresher thread's alone
  std::function<void(const config::Secrets&)> apply_;
  Periodic task_;  // last: starts once the members above exist
};

// What the scheduled collector did, on /metrics.
void RegisterGcMetrics(http::Server& server, const gc::Scheduler& gc) {
  auto& m = server.metrics();
  const auto last = [&gc](uint64_t gc::GcReport::*field) {
    return [&gc, field] {
      auto r = gc.last();
      return r ? static_cast<double>((*r).*field) : 0.0;
    };
  };
  m.Gauge("cairn_gc_runs", "Garbage-collector runs this process made (failed ones included)",
          [&gc] { return static_cast<double>(gc.runs()); });
  m.Gauge("cairn_gc_failures", "Garbage-collector runs that failed (the next run resumes them)",
          [&gc] { return static_cast<double>(gc.failures()); });
  m.Gauge("cairn_gc_reclaimed_bytes", "Bytes the garbage collector freed, over this process's runs",
          [&gc] { return static_cast<double>(gc.reclaimed_bytes()); });
  m.Gauge("cairn_gc_last_run_timestamp_seconds", "When the last finished run started (unix seconds)", [&gc] {
    auto r = gc.last();
    return r ? static_cast<double>(r->started_at) : 0.0;
  });
  m.Gauge("cairn_gc_last_run_duration_seconds", "How long the last finished run took", [&gc] {
    auto r = gc.last();
    return r ? r->seconds : 0.0;
  });
  m.Gauge("cairn_gc_quarantined_bytes", "Bytes of unreferenced xorbs waiting out the grace, at the last run",
          last(&gc::GcReport::quarantined_bytes));
  m.Gauge("cairn_gc_quarantined_objects",
          "Unreferenced files and xorbs waiting out the grace, at the last run", [&gc] {
            auto r = gc.last();
            return r ? static_cast<double>(r->quarantined_files + r->quarantined_xorbs) : 0.0;
          });
  m.Gauge("cairn_gc_reclaimable_bytes", "Bytes past the grace at the last run (what it freed)",
          last(&gc::GcReport::reclaimable_bytes));
}

// Why `cairn serve` could not start, and its exit status: 2 for the settings, 1 for what they name.
struct StartFailure {
  int status;
  std::string message;
};
template <typename T>
using Started = BasicResult<T, StartFailure>;

int Exit(const StartFailure& failure) {
  std::cerr << "cairn serve: " << failure.message << "\n";
  return failure.status;
}

// The data directory, and the scheduled collector's grace against the expiries it must outlast.
Started<http::Ok> PrepareDataDir(const config::Config& cfg) {
  std::error_code ec;
  std::filesystem::create_directories(cfg.data_dir, ec);
  if (ec) return StartFailure{1, "cannot create " + cfg.data_dir + ": " + ec.message()};
  if (cfg.gc_interval.count() > 0) {
    if (auto ok = gc::CheckGrace("gc_grace", static_cast<uint64_t>(cfg.gc_grace.count()),
                                 static_cast<uint64_t>(cfg.dedup_key_expiry.count()),
                                 static_cast<uint64_t>(cfg.transfer_url_ttl.count()));
        !ok)
      return StartFailure{2, ok.error().message};
  }
  return http::Ok{};
}

// The index, the blob store and the signing keys (kept in the index), opened in that order.
struct Storage {
  std::unique_ptr<index::Index> index;
  std::unique_ptr<store::BlobStore> blobs;
  config::Secrets secrets;
};

Started<Storage> OpenStorage(const config::Config& cfg) {
  auto index = OpenConfiguredIndex(cfg);
  if (!index) return StartFailure{1, index.error().message};
  auto blobs = OpenConfiguredStore(cfg);
  if (!blobs) return StartFailure{1, blobs.error().message};
  auto secrets = LoadConfiguredSecrets(cfg, **index);
  if (!secrets) return StartFailure{1, secrets.error().message};
  return Storage{std::move(*index), std::move(*blobs), std::move(*secrets)};
}

Started<http::ServerOptions> ServerOptionsOf(const config::Config& cfg) {
  http::ServerOptions so;
  so.host = cfg.host();
  so.port = cfg.port();
  so.io_threads = cfg.io_threads;
  so.worker_threads = cfg.request_threads;  // the routes offload blocking steps to these
  so.shutdown_grace = std::chrono::duration_cast<std::chrono::milliseconds>(cfg.shutdown_grace);
  so.max_connections = cfg.max_connections;
  so.max_connections_per_client = cfg.max_connections_per_client;
  auto proxies = http::AddressSet::Parse(cfg.trusted_proxies);
  if (!proxies) return StartFailure{2, "trusted_proxies: " + proxies.error().message};
  so.trusted_proxies = std::move(*proxies);
  so.tls_cert = cfg.tls_cert;
  so.tls_key = cfg.tls_key;
  if (!cfg.content_url.empty()) so.content_host = config::HostOf(cfg.content_url);
  so.max_connections = ConnectionsTheFileLimitAllows(so.max_connections);
  return so;
}

// The host as it goes in a URL (an IPv6 address in brackets).
std::string UrlHost(const std::string& host) {
  return host.find(':') != std::string::npos ? "[" + host + "]" : host;
}

// The default public URL names the configured port; with an ephemeral one (0) it names the real one.
void PublishListeningPort(config::Config& cfg, const http::ServerOptions& so, const std::string& host,
                          uint16_t port) {
  const std::string scheme = cfg.scheme();
  if (so.port == 0 && cfg.public_url == scheme + "://" + cfg.listen)
    cfg.public_url = scheme + "://" + host + ":" + std::to_string(port);
}

// Changed signing keys reach every part that signs or checks with them.
std::function<void(const config::Secrets&)> ApplyKeys(std::shared_ptr<http::Authenticator> auth,
                                                      Backend* services) {
  return [auth = std::move(auth), services](const config::Secrets& keys) {
    auth->SetKeys(keys.jwt);
    const cas::UrlKeys url = UrlKeysFrom(keys.url);
    services->service->SetUrlKeys(url);
    services->files->SetUrlKeys(url);
    services->lfs->SetUrlKeys(url);
  };
}

// The collector on a schedule, when configured; its metrics on the server.
std::unique_ptr<gc::Scheduler> ScheduleCollector(const config::Config& cfg, Backend& services,
                                                 http::Server& server) {
  if (cfg.gc_interval.count() <= 0) return nullptr;
  gc::GcOptions go;
  go.grace_seconds = static_cast<uint64_t>(cfg.gc_grace.count());
  go.mark_share_percent = static_cast<unsigned>(cfg.gc_mark_share);
  go.quota = services.quota.get();
  go.audit = services.index.get();
  go.actor = CommandActor("serve");
  auto collector = std::make_unique<gc::Scheduler>(*services.index, *services.index, *services.index,
                                                   *services.store, go, cfg.gc_interval);
  RegisterGcMetrics(server, *collector);
  return collector;
}

// SIGHUP re-reads the signing keys, and the TLS certificate when serving TLS.
void ReloadOnSighup(http::Server& server, KeyRefresher& refresher, const std::string& cert_file) {
  http::Server* srv = &server;
  server.ReloadOnSignal([&refresher, srv, cert = cert_file] {
    refresher.Wake();
    if (!srv->tls()) return;
    // A certificate renewed in place (certbot, cert-manager): new connections get it, open ones keep theirs.
    if (auto st = srv->ReloadTls(); !st)
      spdlog::error("SIGHUP: keeping the current certificate: {}", st.error().message);
    else
      spdlog::info("SIGHUP: reloaded the TLS certificate {}", cert);
  });
}

}  // namespace

int RunServe(const ServeOptions& opts) {
  auto cfg = config::LoadCommandConfig(opts.config_file, opts.flags);
  if (!cfg) {
    std::cerr << "cairn serve: " << cfg.error().message << "\n";
    return 2;
  }
  spdlog::set_level(spdlog::level::from_str(cfg->log_level));
  RetainFreedMemory();
  if (auto ready = PrepareDataDir(*cfg); !ready) return Exit(ready.error());
  auto storage = OpenStorage(*cfg);
  if (!storage) return Exit(storage.error());
  auto so = ServerOptionsOf(*cfg);
  if (!so) return Exit(so.error());
  const config::Secrets& secrets = storage->secrets;
  auto auth = std::make_shared<http::Authenticator>(secrets.jwt);
  auto server = std::make_unique<http::Server>(*so, auth);
  if (auto st = server->Listen(); !st) return Exit({1, st.error().message});
  const std::string host = UrlHost(so->host);
  PublishListeningPort(*cfg, *so, host, server->port());
  const std::string index_name = storage->index->description();
  const std::string store_name = storage->blobs->Describe();
  auto backend = RegisterRoutes(*server, *cfg, secrets, std::move(storage->index), std::move(storage->blobs));
  if (!backend) return Exit({1, backend.error().message});
  std::cout << "cairn: listening on " << cfg->scheme() << "://" << host << ":" << server->port()
            << " (public URL " << cfg->public_url << ", data " << cfg->data_dir << ", index " << index_name
            << ", store " << store_name << ")" << std::endl;
  spdlog::info("signing keys: tokens {}; URLs {}", Describe(secrets.jwt), Describe(secrets.url));
  Backend* services = backend->get();
  KeyRefresher refresher(*cfg, *services->index, secrets, ApplyKeys(auth, services));
  auth->SetVerifier(std::make_shared<api::PersonTokens>(*services->people));
  const auto people = RefreshPeople(cfg->people_refresh, *services->people, *services->index);
  const auto pruner = PruneAudit(cfg->audit_retention, *services->index);
  const auto session_pruner = PruneSessions(*services->index);
  // The collector stops (cut short at its next step) before the backend.
  std::unique_ptr<gc::Scheduler> collector = ScheduleCollector(*cfg, *services, *server);
  server->StopOnSignals();
  ReloadOnSighup(*server, refresher, cfg->tls_cert);
  server->Start();
  server->Wait();
  // The server goes first: connections still open when the grace ran out hold readers of the backend's
  // services, which must outlive them; its metrics read the collector, which goes next.
  server.reset();
  collector.reset();
  spdlog::info("stopped");
  return 0;
}

}  // namespace cairn::cli
