// Shard registrations per second at 1 to 64 concurrent committers (4 files of one term each, one dedup
// entry per shard), durable, on each backend: SQLite in a file, and PostgreSQL 15 in a private server on
// this machine (its defaults: fsync and synchronous_commit on). The group-commit path end to end, fsyncs
// included. The SQLite file goes to $CAIRN_BENCH_DIR, else the current directory; the PostgreSQL cluster to
// the temporary directory (run both on disk: tmpfs would hide the fsync cost).
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <random>

#include "index/open_index.h"
#include "index/testing/postgres_cluster.h"
#include "index/testing/test_support.h"

namespace cairn::index {
namespace {

namespace fs = std::filesystem;

using fixtures::RandomHash;

struct Shared {
  fs::path dir;
  std::unique_ptr<testing::PostgresCluster> cluster;
  std::unique_ptr<Index> index;  // declared after dir and cluster: closed before they go
  XorbHash xorb;
  xet::XorbLayout layout;

  explicit Shared(bool postgres) {
    std::string url;
    if (postgres) {
      auto c = testing::PostgresCluster::Start("index-bench");
      if (!c.ok()) {
        std::cerr << "postgres: " << c.error().message << "\n";
        std::abort();
      }
      cluster = std::move(*c);
      url = cluster->uri();
    } else {
      const char* env =
          std::getenv("CAIRN_BENCH_DIR");  // NOLINT(concurrency-mt-unsafe): read before threads start
      dir = fs::path(env ? env : ".") / ("cairn-index-bench-" + std::to_string(::getpid()));
      fs::create_directories(dir);
      url = "sqlite:" + (dir / "index.db").string();
    }
    auto r = OpenIndex(url);
    if (!r.ok()) {
      std::cerr << "open: " << r.error().message << "\n";
      std::abort();
    }
    index = std::move(r).value();
    std::mt19937_64 rng(1);
    xorb = RandomHash(rng);
    uint32_t end = 0;
    for (int i = 0; i < 1024; ++i) {
      end += 40'000;
      layout.chunks.push_back({RandomHash(rng), 64 * 1024, end});
    }
    (void)index->PutXorb(xorb, layout);
  }
  ~Shared() {
    index.reset();
    cluster.reset();
    std::error_code ec;
    if (!dir.empty()) fs::remove_all(dir, ec);
  }
};

// Thread-safe initialization: every benchmark thread waits for the first.
Shared& Get(bool postgres) {
  if (postgres) {
    static Shared pg(true);
    return pg;
  }
  static Shared sqlite(false);
  return sqlite;
}

void ShardCommits(benchmark::State& state, bool postgres) {
  Shared& s = Get(postgres);
  std::mt19937_64 rng(std::random_device{}() ^ static_cast<uint64_t>(state.thread_index()));
  const auto before = s.index->write_stats();
  for (auto _ : state) {
    ShardCommit c{.shard = RandomHash(rng),
                  .shard_size = 4096,
                  .files = {},
                  .dedup = {},
                  .scope = "bench/repo",
                  .xorbs = {}};
    for (int f = 0; f < 4; ++f) {
      xet::FileRecord rec;
      rec.hash = RandomHash(rng);
      const auto first = static_cast<uint32_t>(rng() % 1000);
      rec.terms.push_back({.xorb = s.xorb,
                           .xorb_flags = 0,
                           .unpacked_bytes = 4 * 64 * 1024,
                           .chunk_start = first,
                           .chunk_end = first + 4});
      c.files.push_back(MakeFileCommit(rec));
    }
    c.dedup.push_back({s.layout.chunks[rng() % 1024].hash, s.xorb});
    auto r = s.index->CommitShard(c);
    if (!r.ok()) {
      state.SkipWithError(r.error().message.c_str());
      break;
    }
  }
  state.SetItemsProcessed(state.iterations());
  if (state.thread_index() == 0) {
    const auto after = s.index->write_stats();
    const double tx = static_cast<double>(after.transactions - before.transactions);
    state.counters["req_per_txn"] = tx > 0 ? static_cast<double>(after.requests - before.requests) / tx
                                           : 0.0;  // approximate: thread 0's window
  }
}
void BM_ShardCommitsSqlite(benchmark::State& state) {
  ShardCommits(state, false);
}
void BM_ShardCommitsPostgres(benchmark::State& state) {
  ShardCommits(state, true);
}
BENCHMARK(BM_ShardCommitsSqlite)
    ->Threads(1)
    ->Threads(4)
    ->Threads(16)
    ->Threads(32)
    ->Threads(64)
    ->UseRealTime()
    ->MinTime(2.0);
BENCHMARK(BM_ShardCommitsPostgres)
    ->Threads(1)
    ->Threads(4)
    ->Threads(16)
    ->Threads(32)
    ->Threads(64)
    ->UseRealTime()
    ->MinTime(2.0);

}  // namespace
}  // namespace cairn::index

BENCHMARK_MAIN();
