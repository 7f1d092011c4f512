// What checking a token costs a request, in one run: a scope token (a JWT the authenticator verified once and
// remembers) against a person's token (people/directory.h, through api::PersonTokens: the secret's SHA-256
// compared with the directory's, the owner and the organizations looked up) with 10,000 live and 1,000
// revoked tokens known to the node, both through http::Authenticator::Authenticate as every route calls it;
// and the same two tokens over a whole request (issue 48's figure: at most 1.05x per request): the model's
// info (GET /api/models/user0/m, a private repository of the person) from a real server in process over
// loopback, with keep-alive. The people and the repository live in a real SQLite index.
//
// Run: cmake --build --preset release --target token_bench && build/release/src/api/token_bench
#include <benchmark/benchmark.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "api/hub_routes.h"
#include "api/person_tokens.h"
#include "cas/service.h"
#include "common/worker_pool.h"
#include "files/file_service.h"
#include "http/auth.h"
#include "http/server.h"
#include "http/test_util.h"
#include "hub/bucket_service.h"
#include "hub/hub_service.h"
#include "index/open_index.h"
#include "people/directory.h"
#include "people/people_service.h"
#include "store/local_disk_store.h"

namespace cairn::api {
namespace {

namespace fs = std::filesystem;

// Who the bench's changes are by, as the audit log records them.
const people::Actor kBy{.actor = "cli:bench", .token_id = "", .client = ""};

constexpr int kLive = 10'000;
constexpr int kRevoked = 1'000;

// One index with kLive + kRevoked tokens of 100 users in 10 organizations, a directory that read them, and an
// authenticator that hands person tokens to it. Built once for the program.
struct World {
  World() {
    dir = fs::temp_directory_path() / ("cairn-token-bench-" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    auto opened = index::OpenIndex("sqlite:" + (dir / "index.db").string());
    if (!opened) throw std::runtime_error(opened.error().message);
    index = std::move(*opened);
    people::PeopleService service(*index, Clock::System());
    for (int o = 0; o < 10; ++o) Check(service.CreateOrg(kBy, "org" + std::to_string(o), ""));
    for (int u = 0; u < 100; ++u) {
      const std::string name = "user" + std::to_string(u);
      Check(service.CreateUser(kBy, name, "", false));
      Check(service.SetRole(kBy, "org" + std::to_string(u % 10), name, people::OrgRole::kWrite));
    }
    for (int t = 0; t < kLive + kRevoked; ++t) {
      auto made = service.CreateToken(kBy, "user" + std::to_string(t % 100), "t", people::TokenRole::kWrite,
                                      {}, std::chrono::hours(24));
      Check(made);
      if (t >= kLive) Check(service.Revoke(kBy, made->record.id));
      if (t == kLive / 2) person_token = made->text;
    }
    directory = std::make_unique<people::Directory>(*index, Clock::System());
    Check(directory->Refresh());
    auth = std::make_unique<http::Authenticator>(std::string(64, 'k'));
    auth->SetVerifier(std::make_shared<PersonTokens>(*directory));
    auto jwt =
        http::MintToken(std::string(64, 'k'), {"user0", http::Permission::kWrite}, std::chrono::hours(24));
    Check(jwt);
    scope_token = *jwt;
    Serve();
  }
  // A server of the Hub's routes on this index, with user0's private model user0/m (the person token is
  // user0's).
  void Serve() {
    spdlog::set_level(spdlog::level::warn);  // a log line a request would be most of what is measured
    auto opened = store::LocalDiskStore::Open(dir / "blobs");
    Check(opened);
    store = std::move(*opened);
    cas = std::make_unique<cas::CasService>(*index, *store, pool, cas::ServiceOptions());
    files = std::make_unique<files::FileService>(*cas, *index, files::FileServiceOptions());
    hub = std::make_unique<hub::HubService>(*index, *files, hub::HubOptions());
    buckets = std::make_unique<hub::BucketService>(*index, *files, Clock::System());
    Check(hub->CreateRepo({"user0", true}, {hub::RepoType::kModel, "user0", "m"}, true));
    http::ServerOptions so;
    so.host = "127.0.0.1";
    so.port = 0;
    auto verifier = std::make_shared<http::Authenticator>(std::string(64, 'k'));
    verifier->SetVerifier(std::make_shared<PersonTokens>(*directory));
    server = std::make_unique<http::Server>(so, verifier);
    Check(server->Listen());
    HubRouteOptions hro;
    hro.people = directory.get();
    RegisterHubRoutes(*server, *hub, *buckets, *files, hro);
    server->Start();
  }
  ~World() {
    if (server) server->Stop(std::chrono::milliseconds(0));
    server.reset();
    buckets.reset();
    hub.reset();
    files.reset();
    cas.reset();
    store.reset();
    auth.reset();
    directory.reset();
    index.reset();
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  World(const World&) = delete;
  World& operator=(const World&) = delete;

  template <typename R>
  static void Check(const R& r) {
    if (!r) throw std::runtime_error(r.error().message);
  }

  fs::path dir;
  std::unique_ptr<index::Index> index;
  std::unique_ptr<people::Directory> directory;
  std::unique_ptr<http::Authenticator> auth;
  std::string scope_token;
  std::string person_token;
  WorkerPool pool{2};
  std::unique_ptr<store::LocalDiskStore> store;
  std::unique_ptr<cas::CasService> cas;
  std::unique_ptr<files::FileService> files;
  std::unique_ptr<hub::HubService> hub;
  std::unique_ptr<hub::BucketService> buckets;
  std::unique_ptr<http::Server> server;
};

World& TheWorld() {
  static World world;
  return world;
}

void Authenticate(benchmark::State& state, const std::string& token) {
  World& w = TheWorld();
  const std::string header = "Bearer " + token;
  for (auto _ : state) {
    auto who = w.auth->Authenticate(header, http::Permission::kWrite);
    if (!who) {
      state.SkipWithError(who.error().message.c_str());
      break;
    }
    benchmark::DoNotOptimize(who);
  }
}

void BM_ScopeToken(benchmark::State& state) {
  Authenticate(state, TheWorld().scope_token);
}
void BM_PersonToken(benchmark::State& state) {
  Authenticate(state, TheWorld().person_token);
}
BENCHMARK(BM_ScopeToken);
BENCHMARK(BM_PersonToken);

// The model's info, as huggingface_hub's model_info asks it, with `token`; the answer must be the model's.
void Request(benchmark::State& state, const std::string& token) {
  World& w = TheWorld();
  http::testing::Client client(w.server->port());
  for (auto _ : state) {
    auto r = client.Get("/api/models/user0/m", "Bearer " + token);
    if (r.result_int() != 200) {
      state.SkipWithError(r.body().c_str());
      break;
    }
    benchmark::DoNotOptimize(r);
  }
}

void BM_RequestScopeToken(benchmark::State& state) {
  Request(state, TheWorld().scope_token);
}
void BM_RequestPersonToken(benchmark::State& state) {
  Request(state, TheWorld().person_token);
}
BENCHMARK(BM_RequestScopeToken)->UseRealTime();
BENCHMARK(BM_RequestPersonToken)->UseRealTime();

}  // namespace
}  // namespace cairn::api

BENCHMARK_MAIN();
