// Compaction throughput, on SQLite + local disk and on PostgreSQL + S3 (SeaweedFS, started here): an upload
// of $CAIRN_BENCH_COMPACT_MIB MiB (default 256) of 64 KiB files packed into 64 MiB xorbs, three of every four
// files removed and swept by the collector, then one timed compaction run (read the live chunks, validate and
// store the new xorbs, write the shards, re-point the files). Against it, in the same run, a plain copy of
// the same live bytes through the same store (the same ranged reads, one put per old xorb): the ratio
// says what validation and the index cost over moving the bytes. Local disk under $CAIRN_BENCH_DIR, else ".".
//
//   build/release/src/compact/compact_bench [--benchmark_filter=Disk]
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <random>
#include <vector>

#include "cas/service.h"
#include "common/clock.h"
#include "common/worker_pool.h"
#include "compact/compactor.h"
#include "gc/collector.h"
#include "gc/test_bench_deployment.h"
#include "index/open_index.h"
#include "ingest/upload_builder.h"

namespace cairn::compact {
namespace {

namespace fs = std::filesystem;

using gc::testing::FreshDeployment;
using gc::testing::OrDie;

size_t BenchMib() {
  const char* env = std::getenv("CAIRN_BENCH_COMPACT_MIB");  // NOLINT(concurrency-mt-unsafe): no threads yet
  return env != nullptr ? std::strtoul(env, nullptr, 10) : 256;
}

void Compact(benchmark::State& state, bool s3) {
  static int run = 0;
  ++run;
  const fs::path dir = gc::testing::BenchDir("cairn-compact-bench") / std::to_string(run);
  auto deployment = FreshDeployment(s3, dir, (s3 ? "cs" : "cd") + std::to_string(run));
  const std::string url = deployment.url;
  std::unique_ptr<store::BlobStore> store = std::move(deployment.store);
  TestClock clock;
  clock.Set(1'800'000'000);
  index::OpenIndexOptions io;
  io.clock = &clock;
  auto index = OrDie(index::OpenIndex(url, io), "index");
  WorkerPool pool(1);
  cas::ServiceOptions so;
  so.clock = &clock;
  cas::CasService cas(*index, *store, pool, so);

  // The upload, then three of every four files removed and swept.
  const size_t files = BenchMib() * 16;
  std::mt19937_64 rng(11);
  std::vector<std::vector<uint8_t>> data(files, std::vector<uint8_t>(64 << 10));
  for (auto& f : data) {
    for (auto& b : f) b = static_cast<uint8_t>(rng());
  }
  std::vector<std::span<const uint8_t>> spans(data.begin(), data.end());
  auto up = ingest::BuildUpload(spans, {});
  data.clear();
  for (const auto& x : up.xorbs) OrDie(cas.PutXorb(x.hash, x.body), "put xorb");
  OrDie(cas.PutShard(up.shard_bytes, "bench"), "put shard");
  for (size_t i = 0; i < files; ++i) {
    if (i % 4 != 0) OrDie(cas.Unregister(up.file_hashes[i], "bench"), "unregister");
  }
  up.xorbs.clear();
  gc::GcOptions go;
  go.clock = &clock;
  gc::Collector collector(*index, *index, *index, *store, go);
  OrDie(collector.Run(), "collect");
  clock.Advance(static_cast<int64_t>(gc::kDefaultGraceSeconds) + 1);
  OrDie(collector.Run(), "collect");

  // A plain copy of the live bytes: the chunks the kept files use, each run of them read once, one put per
  // old xorb's live bytes.
  std::map<xet::XorbHash, std::vector<bool>> live_chunks;
  for (size_t i = 0; i < files; i += 4) {
    auto entry = OrDie(index->GetFile(up.file_hashes[i]), "file");
    for (size_t t = 0; t < entry->term_count; ++t) {
      const index::Term term = entry->term(t);
      auto& live = live_chunks[term.xorb];
      if (live.size() < term.chunk_end) live.resize(term.chunk_end, false);
      std::fill(live.begin() + term.chunk_start, live.begin() + term.chunk_end, true);
    }
  }
  const auto copy_start = std::chrono::steady_clock::now();
  uint64_t copied = 0;
  for (const auto& [x, flags] : live_chunks) {
    auto layout = OrDie(cas.Layout(x), "layout");
    std::vector<uint8_t> live;
    for (size_t c = 0; c < flags.size();) {
      if (!flags[c]) {
        ++c;
        continue;
      }
      size_t end = c;
      while (end < flags.size() && flags[end]) ++end;
      const uint32_t begin = layout->begin_offset(c);
      const size_t at = live.size();
      live.resize(at + (layout->chunks[end - 1].end_offset - begin));
      OrDie(cas.ReadXorb(x, begin, std::span(live).subspan(at)), "read");
      c = end;
    }
    xet::Hash name;
    for (auto& b : name.bytes) b = static_cast<uint8_t>(rng());
    OrDie(store->Put(store::BlobKind::kXorb, name, live), "put");
    copied += live.size();
  }
  const double copy_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - copy_start).count();

  CompactReport report;
  for (auto _ : state) {
    CompactOptions co;
    co.clock = &clock;
    Compactor compactor(*index, *index, cas, co);
    report = OrDie(compactor.Run(), "compact");
  }
  if (report.files_moved != (files + 3) / 4) state.SkipWithError("not every live file was moved");
  const double mib = 1 << 20;
  state.counters["replaced_MiB_per_s"] = static_cast<double>(report.replaced_bytes) / mib / report.seconds;
  state.counters["written_MiB_per_s"] = static_cast<double>(report.written_bytes) / mib / report.seconds;
  state.counters["copy_MiB_per_s"] = static_cast<double>(copied) / mib / copy_seconds;
  state.counters["vs_copy"] = (static_cast<double>(report.written_bytes) / report.seconds) /
                              (static_cast<double>(copied) / copy_seconds);
  state.counters["files_per_s"] = static_cast<double>(report.files_moved) / report.seconds;
  index.reset();
  store.reset();
  std::error_code ec;
  fs::remove_all(dir, ec);
  fs::remove(dir.parent_path(), ec);  // once the program's last run is gone
}

void BM_CompactDisk(benchmark::State& state) {
  Compact(state, false);
}
void BM_CompactS3(benchmark::State& state) {
  Compact(state, true);
}

BENCHMARK(BM_CompactDisk)->Iterations(1)->Unit(benchmark::kSecond)->UseRealTime();
BENCHMARK(BM_CompactS3)->Iterations(1)->Unit(benchmark::kSecond)->UseRealTime();

}  // namespace
}  // namespace cairn::compact
