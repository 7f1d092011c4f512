// Sweep throughput: how fast the collector frees unreferenced xorbs (objects and bytes per second), on SQLite
// + local disk and on PostgreSQL + S3 (SeaweedFS, started here). Each repetition stores N xorbs of 64 KiB
// that no file uses, lets a first run quarantine them, moves the clock past the grace, and times the run that
// frees them: claims in the index, DeleteMany on the store, the records dropped. The local disk goes under
// $CAIRN_BENCH_DIR, else the current directory.
//
// History walk: how fast a mark walks a repository's history (BM_MarkHistory*): a repository of F small files
// in 10 folders and C commits each changing one of them, marked by a dry run on SQLite and on PostgreSQL.
//
//   build/release/src/gc/gc_bench [--benchmark_filter=Disk]
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <random>
#include <thread>
#include <vector>

#include "cas/service.h"
#include "common/clock.h"
#include "common/worker_pool.h"
#include "files/file_service.h"
#include "gc/collector.h"
#include "gc/test_bench_deployment.h"
#include "hub/hub_service.h"
#include "index/open_index.h"
#include "index/testing/test_support.h"
#include "store/local_disk_store.h"

namespace cairn::gc {
namespace {

namespace fs = std::filesystem;

constexpr uint32_t kChunks = 8;
constexpr uint32_t kChunkBytes = 8192;  // 64 KiB a xorb

using testing::FreshDeployment;
using testing::FreshPostgres;
using testing::OrDie;

void Sweep(benchmark::State& state, bool s3) {
  const size_t n = static_cast<size_t>(state.range(0));
  static int run = 0;
  ++run;
  const fs::path dir = testing::BenchDir("cairn-gc-bench") / std::to_string(run);
  auto deployment = FreshDeployment(s3, dir, (s3 ? "gs" : "gd") + std::to_string(run));
  const std::string url = deployment.url;
  std::unique_ptr<store::BlobStore> store = std::move(deployment.store);
  TestClock clock;
  clock.Set(1'800'000'000);
  index::OpenIndexOptions io;
  io.clock = &clock;
  auto index = OrDie(index::OpenIndex(url, io), "index");

  // N xorbs of 64 KiB, stored and registered, used by no file (the store's content is not checked here).
  std::mt19937_64 rng(7);
  std::vector<xet::XorbHash> xorbs(n);
  for (auto& x : xorbs) x = index::fixtures::RandomHash(rng);
  xet::XorbLayout layout;
  for (uint32_t i = 0; i < kChunks; ++i)
    layout.chunks.push_back({index::fixtures::RandomHash(rng), kChunkBytes, (i + 1) * kChunkBytes});
  const std::vector<uint8_t> bytes(kChunks * kChunkBytes, 0x5a);
  std::atomic<size_t> next{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (size_t i = next++; i < n; i = next++) {
        if (!store->Put(store::BlobKind::kXorb, xorbs[i], bytes).ok() ||
            !index->PutXorb(xorbs[i], layout).ok())
          std::abort();
      }
    });
  }
  for (auto& t : threads) t.join();

  GcOptions o;
  o.clock = &clock;
  Collector collector(*index, *index, *index, *store, o);
  if (!collector.Run().ok()) std::abort();  // quarantines them
  clock.Advance(static_cast<int64_t>(kDefaultGraceSeconds) + 1);
  GcReport report;
  for (auto _ : state) {
    auto r = collector.Run();
    if (!r.ok()) {
      state.SkipWithError(r.error().message.c_str());
      break;
    }
    report = *r;
  }
  if (report.swept_xorbs != n) state.SkipWithError("not every xorb was freed");
  state.counters["objects_per_s"] =
      benchmark::Counter(static_cast<double>(report.swept_xorbs) / report.seconds);
  state.counters["MiB_per_s"] =
      benchmark::Counter(static_cast<double>(report.reclaimed_bytes) / (1 << 20) / report.seconds);
  index.reset();
  store.reset();
  std::error_code ec;
  fs::remove_all(dir, ec);
  fs::remove(dir.parent_path(), ec);  // once the program's last run is gone
}

void BM_SweepDisk(benchmark::State& state) {
  Sweep(state, false);
}
void BM_SweepS3(benchmark::State& state) {
  Sweep(state, true);
}

// Opens a fresh index: SQLite under `dir`, or a schema of its own on the benchmark's PostgreSQL.
std::unique_ptr<index::Index> FreshIndex(bool pg, const fs::path& dir, const Clock& clock, int run) {
  const std::string url =
      pg ? FreshPostgres("gh" + std::to_string(run)) : "sqlite:" + (dir / "index.db").string();
  index::OpenIndexOptions io;
  io.clock = &clock;
  return OrDie(index::OpenIndex(url, io), "index");
}

void MarkHistory(benchmark::State& state, bool pg) {
  const int files = static_cast<int>(state.range(0));
  const int commits = static_cast<int>(state.range(1));
  static int run = 0;
  ++run;
  const char* env = std::getenv("CAIRN_BENCH_DIR");  // NOLINT(concurrency-mt-unsafe): before threads start
  const fs::path dir = fs::path(env ? env : ".") /
                       ("cairn-gc-history-" + std::to_string(::getpid()) + "-" + std::to_string(run));
  fs::create_directories(dir);
  TestClock clock;
  clock.Set(1'800'000'000);
  auto index = FreshIndex(pg, dir, clock, run);
  auto store = OrDie(store::LocalDiskStore::Open(dir / "blobs"), "disk");
  WorkerPool pool(1);
  cas::CasService cas(*index, *store, pool, {});
  files::FileService file_service(cas, *index, {});
  hub::HubOptions ho;
  ho.clock = &clock;
  hub::HubService hub(*index, file_service, ho);
  const hub::Caller alice{"alice", true};
  auto repo = hub.CreateRepo(alice, {hub::RepoType::kModel, "alice", "m"}, false);
  if (!repo.ok()) std::abort();
  const auto content = [](int file, int version) {
    const std::string s = "file " + std::to_string(file) + " version " + std::to_string(version) + "\n";
    return std::vector<uint8_t>(s.begin(), s.end());
  };
  hub::CommitRequest first;
  first.summary = "all files";
  for (int f = 0; f < files; ++f)
    first.operations.push_back(
        hub::AddInline{"d" + std::to_string(f % 10) + "/f" + std::to_string(f), content(f, 0)});
  if (!hub.CreateCommit(alice, *repo, first).ok()) std::abort();
  std::mt19937 rng(3);
  for (int c = 1; c <= commits; ++c) {
    hub::CommitRequest edit;
    edit.summary = "edit " + std::to_string(c);
    const int f = static_cast<int>(rng() % static_cast<unsigned>(files));
    edit.operations.push_back(
        hub::AddInline{"d" + std::to_string(f % 10) + "/f" + std::to_string(f), content(f, c)});
    if (!hub.CreateCommit(alice, *repo, edit).ok()) std::abort();
  }
  GcOptions o;
  o.clock = &clock;
  o.dry_run = true;
  Collector collector(*index, *index, *index, *store, o);
  GcReport report;
  for (auto _ : state) {
    auto r = collector.Run();
    if (!r.ok()) {
      state.SkipWithError(r.error().message.c_str());
      break;
    }
    report = *r;
  }
  state.counters["objects"] = benchmark::Counter(static_cast<double>(report.repo_objects));
  state.counters["objects_per_s"] =
      benchmark::Counter(static_cast<double>(report.repo_objects) / report.seconds);
  index.reset();
  std::error_code ec;
  fs::remove_all(dir, ec);
}

void BM_MarkHistorySqlite(benchmark::State& state) {
  MarkHistory(state, false);
}
void BM_MarkHistoryPostgres(benchmark::State& state) {
  MarkHistory(state, true);
}

BENCHMARK(BM_MarkHistorySqlite)->Args({1000, 2000})->Iterations(3)->Unit(benchmark::kSecond)->UseRealTime();
BENCHMARK(BM_MarkHistoryPostgres)->Args({1000, 2000})->Iterations(3)->Unit(benchmark::kSecond)->UseRealTime();
BENCHMARK(BM_SweepDisk)->Arg(10000)->Iterations(1)->Unit(benchmark::kSecond)->UseRealTime();
BENCHMARK(BM_SweepS3)->Arg(10000)->Iterations(1)->Unit(benchmark::kSecond)->UseRealTime();

}  // namespace
}  // namespace cairn::gc
