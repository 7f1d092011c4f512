// The Hub's own costs on each index backend (SQLite in a file, PostgreSQL 15 in a private server on this
// machine), without HTTP: a commit of one small file (the same path, new bytes) into a repository of 10,000
// files in 100 folders (a tree
// edit, the objects and a compare-and-swap of the branch, durable), a path's info at a commit, and a
// recursive listing of the 10,000 files from a cold cache (a fresh service each time) and a warm one; the
// commit again with the namespace under a storage quota (what the quota's admission adds to a commit), and a
// commit's index writes with and without their audit record. The
// SQLite file goes to $CAIRN_BENCH_DIR, else the current directory (run on disk: tmpfs would hide the fsync
// cost).
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <numeric>
#include <vector>

#include "cas/service.h"
#include "common/worker_pool.h"
#include "files/file_service.h"
#include "hub/hub_service.h"
#include "index/forwarding_index.h"
#include "index/open_index.h"
#include "index/testing/postgres_cluster.h"
#include "ingest/upload_builder.h"
#include "store/local_disk_store.h"
#include "xet/test_support.h"

namespace cairn::hub {
namespace {

namespace fs = std::filesystem;

constexpr int kFolders = 100;
constexpr int kFilesPerFolder = 100;

[[noreturn]] void Die(const std::string& what) {
  std::cerr << what << "\n";
  std::abort();
}

// The index without the audit event of a ref's update: the same commit, with nothing recorded.
class Unaudited final : public index::ForwardingIndex {
 public:
  using ForwardingIndex::ForwardingIndex;
  Status UpdateRef(int64_t repo, const index::RefUpdate& update) override {
    index::RefUpdate bare = update;
    bare.audit.reset();
    return ForwardingIndex::UpdateRef(repo, bare);
  }
};

struct Shared {
  fs::path dir;
  std::unique_ptr<index::testing::PostgresCluster> cluster;
  std::unique_ptr<index::Index> index;
  std::unique_ptr<store::LocalDiskStore> store;
  WorkerPool pool{1};
  std::unique_ptr<cas::CasService> cas;
  std::unique_ptr<files::FileService> files;
  std::unique_ptr<HubService> hub;
  std::unique_ptr<quota::QuotaService> quota;
  std::unique_ptr<HubService> hub_with_quota;  // the same, its commits admitted by `quota`
  std::unique_ptr<Unaudited> unaudited;
  std::unique_ptr<HubService> hub_unaudited;  // the same, its commits recording no audit event
  Repo repo;
  ObjectId head;
  std::optional<std::vector<uint8_t>> last_key;  // BM_CommitAuditRatio's branch "bench": its head (none yet)
  const Caller alice{"alice", true};

  explicit Shared(bool postgres) {
    const char* env = std::getenv("CAIRN_BENCH_DIR");  // NOLINT(concurrency-mt-unsafe): before threads start
    dir = fs::path(env ? env : ".") / ("cairn-hub-bench-" + std::to_string(::getpid()));
    fs::create_directories(dir);
    std::string url = "sqlite:" + (dir / "index.db").string();
    if (postgres) {
      auto c = index::testing::PostgresCluster::Start("hub-bench");
      if (!c.ok()) Die("postgres: " + c.error().message);
      cluster = std::move(*c);
      url = cluster->uri();
    }
    auto ix = index::OpenIndex(url);
    if (!ix.ok()) Die(ix.error().message);
    index = std::move(*ix);
    auto st = store::LocalDiskStore::Open(dir / "blobs");
    if (!st.ok()) Die(st.error().message);
    store = std::move(*st);
    cas = std::make_unique<cas::CasService>(*index, *store, pool, cas::ServiceOptions{});
    files = std::make_unique<files::FileService>(*cas, *index, files::FileServiceOptions{});
    hub = NewService();
    auto r = hub->CreateRepo(alice, {RepoType::kModel, "alice", "bench"}, false);
    if (!r.ok()) Die(r.error().message);
    repo = *r;
    for (int f = 0; f < kFolders; ++f) {
      CommitRequest c;
      c.summary = "folder " + std::to_string(f);
      for (int i = 0; i < kFilesPerFolder; ++i) {
        const std::string text = "file " + std::to_string(f) + "/" + std::to_string(i) + "\n";
        c.operations.emplace_back(AddInline{"d" + std::to_string(f) + "/f" + std::to_string(i) + ".txt",
                                            std::vector<uint8_t>(text.begin(), text.end())});
      }
      auto made = hub->CreateCommit(alice, repo, c);
      if (!made.ok()) Die(made.error().message);
      head = made->oid;
    }
    quota = std::make_unique<quota::QuotaService>(*index, Clock::System());
    if (auto set = quota->SetLimit(index::AuditActor{}, "alice", uint64_t{1} << 50); !set.ok())
      Die(set.error().message);
    if (auto m = quota->Measure("alice"); !m.ok()) Die(m.error().message);
    HubOptions with_quota;
    with_quota.quota = quota.get();
    hub_with_quota = std::make_unique<HubService>(*index, *files, with_quota);
    unaudited = std::make_unique<Unaudited>(*index);
    hub_unaudited = std::make_unique<HubService>(*unaudited, *files, HubOptions{});
  }
  ~Shared() {
    hub_unaudited.reset();
    unaudited.reset();
    hub_with_quota.reset();
    quota.reset();
    hub.reset();
    files.reset();
    cas.reset();
    index.reset();
    cluster.reset();
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  std::unique_ptr<HubService> NewService() const {
    return std::make_unique<HubService>(*index, *files, HubOptions{});
  }
};

Shared& Backend(bool postgres) {
  static Shared* sqlite = nullptr;
  static Shared* pg = nullptr;
  Shared*& s = postgres ? pg : sqlite;
  if (s == nullptr)
    s = new Shared(postgres);  // NOLINT(cppcoreguidelines-owning-memory): lives for the program
  return *s;
}

// Args: backend (0 SQLite, 1 PostgreSQL), quota (1: the namespace has one; each commit is admitted by it).
void BM_CommitOneFile(benchmark::State& state) {
  Shared& s = Backend(state.range(0) != 0);
  const bool with_quota = state.range(1) != 0;
  HubService& hub = with_quota ? *s.hub_with_quota : *s.hub;
  static int n = 0;
  for (auto _ : state) {
    CommitRequest c;
    c.summary = "one more";
    const std::string text = std::to_string(n);
    ++n;
    // The same path each time, new bytes: the tree keeps its size, so repetitions cost alike.
    c.operations.emplace_back(AddInline{"d7/new.txt", {text.begin(), text.end()}});
    auto made = hub.CreateCommit(s.alice, s.repo, c);
    if (!made.ok()) Die(made.error().message);
  }
  state.SetItemsProcessed(state.iterations());
  state.SetLabel(std::string(state.range(0) != 0 ? "postgres" : "sqlite") + (with_quota ? ", quota" : ""));
}

// Runs `plain` and `with` (each returning its own time in ms) alternately, which one first alternating too,
// and reports their means (plain_ms, <what>_ms) and their ratio as counters, and the medians of each
// (plain_median_ms, <what>_median_ms, median_ratio): a disk's occasional slow flush moves a mean by more than
// the difference measured, not the median.
template <typename Plain, typename With>
void Alternate(benchmark::State& state, Plain plain, With with, const std::string& what = "quota") {
  std::vector<double> plains;
  std::vector<double> withs;
  for (auto _ : state) {
    if (plains.size() % 2 == 0) {
      plains.push_back(plain());
      withs.push_back(with());
    } else {
      withs.push_back(with());
      plains.push_back(plain());
    }
  }
  const auto mean = [](const std::vector<double>& v) {
    return std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  };
  const auto median = [](std::vector<double> v) {
    std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
    return v[v.size() / 2];
  };
  state.counters["plain_ms"] = mean(plains);
  state.counters[what + "_ms"] = mean(withs);
  state.counters["ratio"] = mean(withs) / mean(plains);
  state.counters["plain_median_ms"] = median(plains);
  state.counters[what + "_median_ms"] = median(withs);
  state.counters["median_ratio"] = median(withs) / median(plains);
  state.SetLabel(state.range(0) != 0 ? "postgres" : "sqlite");
}

// What a quota's admission adds to a commit, as a ratio: commits with and without the quota alternate within
// one run (each timed alone), so that the drift of a long run (the history grows, PostgreSQL's updated rows
// bloat until vacuumed) falls on both alike. Counters: the mean of each, in ms, and quota / plain.
// One commit of a small file whose text changes each time, through `hub`, timed alone (ms).
double TimedCommit(Shared& s, HubService& hub) {
  static int n = 0;
  CommitRequest c;
  c.summary = "one more";
  const std::string text = std::to_string(n++);
  c.operations.emplace_back(AddInline{"d7/new.txt", {text.begin(), text.end()}});
  const auto t0 = std::chrono::steady_clock::now();
  auto made = hub.CreateCommit(s.alice, s.repo, c);
  if (!made.ok()) Die(made.error().message);
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

void BM_CommitQuotaRatio(benchmark::State& state) {
  Shared& s = Backend(state.range(0) != 0);
  Alternate(
      state, [&] { return TimedCommit(s, *s.hub); }, [&] { return TimedCommit(s, *s.hub_with_quota); });
}

// The same for a whole upload as the server sees one: a file of 16 MiB arrives as a xorb (validated, stored,
// durable; with a quota, the xorb route's room check first), a shard registering it, and the commit naming
// it. The client's chunking is not timed; every file is new (no dedup).
void BM_UploadQuotaRatio(benchmark::State& state) {
  Shared& s = Backend(state.range(0) != 0);
  static uint64_t seed = 1000;
  const auto upload = [&](HubService& hub, bool with_quota) {
    const auto data = xet::testing::SplitMix64Bytes(seed++, 16 << 20);
    const auto built = ingest::BuildUpload(std::vector<std::span<const uint8_t>>{data});
    CommitRequest c;
    c.summary = "a large file";
    c.operations.emplace_back(AddLfs{"big.bin", LfsPointer{built.shard.files[0].sha256->hex(), data.size()}});
    const auto t0 = std::chrono::steady_clock::now();
    for (const auto& x : built.xorbs) {
      if (with_quota) {
        if (auto st = s.quota->CheckRoomForScope(s.repo.record.scope); !st.ok()) Die(st.error().message);
      }
      if (auto st = s.cas->PutXorb(x.hash, x.body); !st.ok()) Die(st.error().message);
    }
    if (auto st = s.cas->PutShard(built.shard_bytes, s.repo.record.scope); !st.ok()) Die(st.error().message);
    auto made = hub.CreateCommit(s.alice, s.repo, c);
    if (!made.ok()) Die(made.error().message);
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  };
  Alternate(
      state, [&] { return upload(*s.hub, false); }, [&] { return upload(*s.hub_with_quota, true); });
}

// What a commit's audit record costs, as a ratio: the index writes a commit ends with (its commit object,
// then the compare-and-swap of the branch, each durable) with the event in the branch's transaction and
// without, alternating within one run. Only the index's part of a commit is timed (not the tree edit before
// it), so the ratio is an upper bound of what the record adds to a whole commit.
void BM_CommitAuditRatio(benchmark::State& state) {
  Shared& s = Backend(state.range(0) != 0);
  static int n = 0;
  const index::AuditActor who{.actor = "alice", .token_id = "0123456789abcdef", .client = "192.0.2.1:5000"};
  const auto commit = [&](bool audited) {
    const std::string body = "tree 4b825dc642cb6eb9a060e54bf8d69288fbee4904\n\ncommit " + std::to_string(n++);
    std::vector<uint8_t> key(20);
    for (size_t i = 0; i < key.size(); ++i) key[i] = static_cast<uint8_t>((n >> (8 * (i % 4))) + i);
    const auto t0 = std::chrono::steady_clock::now();
    if (auto st = s.index->PutRepoObjects(s.repo.record.id, {{key, 1, {body.begin(), body.end()}}}); !st.ok())
      Die(st.error().message);
    index::RefUpdate move{index::RefKind::kBranch, "bench", s.last_key, key};
    if (audited) move.audit = who.Event(1'800'000'000, "commit", "alice", "alice/bench", "bench a..b");
    if (auto st = s.index->UpdateRef(s.repo.record.id, move); !st.ok()) Die(st.error().message);
    s.last_key = key;
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  };
  Alternate(
      state, [&] { return commit(false); }, [&] { return commit(true); }, "audited");
}

// The same for a whole commit through the Hub service (its tree read and written, its objects, the branch's
// compare-and-swap): with its audit event, and with the index dropping it (Unaudited), alternating.
void BM_HubCommitAuditRatio(benchmark::State& state) {
  Shared& s = Backend(state.range(0) != 0);
  Alternate(
      state, [&] { return TimedCommit(s, *s.hub_unaudited); }, [&] { return TimedCommit(s, *s.hub); },
      "audited");
}

void BM_StatPath(benchmark::State& state) {
  Shared& s = Backend(state.range(0) != 0);
  for (auto _ : state) {
    auto info = s.hub->Stat(s.repo, s.head, "d42/f17.txt");
    if (!info.ok()) Die(info.error().message);
    benchmark::DoNotOptimize(info->size);
  }
  state.SetItemsProcessed(state.iterations());
  state.SetLabel(state.range(0) != 0 ? "postgres" : "sqlite");
}

void BM_ListRecursive(benchmark::State& state) {
  Shared& s = Backend(state.range(0) != 0);
  const bool cold = state.range(1) != 0;
  for (auto _ : state) {
    std::unique_ptr<HubService> fresh = cold ? s.NewService() : nullptr;
    HubService& hub = cold ? *fresh : *s.hub;
    auto all = hub.List(s.repo, s.head, "", true);
    if (!all.ok()) Die(all.error().message);
    benchmark::DoNotOptimize(all->size());
  }
  state.SetItemsProcessed(state.iterations() * kFolders * (kFilesPerFolder + 1));
  state.SetLabel(std::string(state.range(0) != 0 ? "postgres" : "sqlite") + (cold ? ", cold" : ", warm"));
}

BENCHMARK(BM_CommitOneFile)->Args({0, 0})->Args({1, 0})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_CommitQuotaRatio)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_UploadQuotaRatio)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(40);
BENCHMARK(BM_CommitAuditRatio)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(300);
BENCHMARK(BM_HubCommitAuditRatio)
    ->Arg(0)
    ->Arg(1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(300);
BENCHMARK(BM_StatPath)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_ListRecursive)
    ->Args({0, 1})
    ->Args({0, 0})
    ->Args({1, 1})
    ->Args({1, 0})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace cairn::hub

BENCHMARK_MAIN();
