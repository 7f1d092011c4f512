// What a quota's exact measure costs (QuotaService::Measure: every committed file's terms, the chunks'
// sizes), which a commit pays only near the namespace's limit or on a stale record, and every collector run
// that sweeps something pays once per namespace with a quota. A namespace of N files of 16 terms each over
// 4,096 xorbs of 64 chunks, committed to one repository, on each index backend (SQLite in $CAIRN_BENCH_DIR,
// else the current directory; PostgreSQL in a private server). Args: backend (0 SQLite, 1 PostgreSQL), N.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <random>

#include "index/open_index.h"
#include "index/testing/postgres_cluster.h"
#include "index/testing/test_support.h"
#include "quota/quota_service.h"

namespace cairn::quota {
namespace {

namespace fs = std::filesystem;

[[noreturn]] void Die(const std::string& what) {
  std::cerr << what << "\n";
  std::abort();
}

constexpr uint32_t kChunks = 64;
constexpr size_t kXorbs = 4096;
constexpr size_t kTerms = 16;

struct Namespace {
  fs::path dir;
  std::unique_ptr<index::testing::PostgresCluster> cluster;
  std::unique_ptr<index::Index> index;
  std::unique_ptr<QuotaService> quota;

  Namespace(bool postgres, size_t files) {
    const char* env = std::getenv("CAIRN_BENCH_DIR");  // NOLINT(concurrency-mt-unsafe): before threads start
    dir = fs::path(env ? env : ".") / ("cairn-quota-bench-" + std::to_string(::getpid()) + "-" +
                                       std::to_string(files) + (postgres ? "-pg" : ""));
    fs::create_directories(dir);
    std::string url = "sqlite:" + (dir / "index.db").string();
    if (postgres) {
      auto c = index::testing::PostgresCluster::Start("quota-bench-" + std::to_string(files));
      if (!c.ok()) Die("postgres: " + c.error().message);
      cluster = std::move(*c);
      url = cluster->uri();
    }
    auto ix = index::OpenIndex(url);
    if (!ix.ok()) Die(ix.error().message);
    index = std::move(*ix);
    std::mt19937_64 rng(files);
    std::map<xet::XorbHash, xet::XorbLayout> layouts;
    std::vector<xet::XorbHash> xorbs;
    for (size_t x = 0; x < kXorbs; ++x) {
      xet::XorbLayout layout;
      uint32_t end = 0;
      for (uint32_t c = 0; c < kChunks; ++c) {
        end += 40000;
        layout.chunks.push_back({index::fixtures::RandomHash(rng), 65536, end});
      }
      const xet::XorbHash h = index::fixtures::RandomHash(rng);
      if (auto put = index->PutXorb(h, layout); !put.ok()) Die(put.error().message);
      layouts.emplace(h, std::move(layout));
      xorbs.push_back(h);
    }
    index::NewRepo r;
    r.ns = "alice";
    r.name = "model";
    r.created_at = 1700000000;
    r.scope = "hub:bench";
    r.read_scope = "hub:bench#read";
    if (auto made = index->CreateRepo(r); !made.ok()) Die(made.error().message);
    std::vector<index::FileCommit> batch;
    std::vector<xet::FileHash> hashes;
    const auto flush = [&] {
      if (batch.empty()) return;
      auto out = index->CommitShard({.shard = index::fixtures::RandomHash(rng),
                                     .shard_size = 1,
                                     .files = std::move(batch),
                                     .dedup = {},
                                     .scope = r.read_scope,
                                     .xorbs = {}});
      if (!out.ok()) Die(out.error().message);
      batch.clear();
    };
    for (size_t f = 0; f < files; ++f) {
      xet::FileRecord rec;
      rec.hash = index::fixtures::RandomHash(rng);
      for (size_t t = 0; t < kTerms; ++t) {
        const uint32_t start = static_cast<uint32_t>(rng() % (kChunks - 8));
        rec.terms.push_back({.xorb = xorbs[rng() % kXorbs],
                             .xorb_flags = 0,
                             .unpacked_bytes = 8 * 65536,
                             .chunk_start = start,
                             .chunk_end = start + 8});
      }
      auto made = index::MakeFileCommit(rec, [&](const xet::XorbHash& h) { return &layouts.at(h); });
      if (!made.ok()) Die(made.error().message);
      batch.push_back(std::move(*made));
      if (batch.size() == 1000) flush();
    }
    flush();
    quota = std::make_unique<QuotaService>(*index, Clock::System());
  }
  ~Namespace() {
    quota.reset();
    index.reset();
    cluster.reset();
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};

void BM_Measure(benchmark::State& state) {
  const bool postgres = state.range(0) != 0;
  const auto files = static_cast<size_t>(state.range(1));
  Namespace ns(postgres, files);
  uint64_t used = 0;
  for (auto _ : state) {
    auto usage = ns.quota->Measure("alice");
    if (!usage.ok()) Die(usage.error().message);
    if (usage->files != files) Die("measured " + std::to_string(usage->files) + " files");
    used = usage->used;
  }
  state.counters["files_per_s"] =
      benchmark::Counter(static_cast<double>(files), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["used_GiB"] = static_cast<double>(used) / (1 << 30);
  state.SetLabel(postgres ? "postgres" : "sqlite");
}

BENCHMARK(BM_Measure)
    ->Args({0, 10000})
    ->Args({1, 10000})
    ->Args({0, 100000})
    ->Args({1, 100000})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace cairn::quota
