// Backup and restore throughput against a plain copy of the same bytes, in one run: on SQLite + local disk
// and on PostgreSQL + S3 (SeaweedFS, started here). A deployment is filled with $CAIRN_BENCH_BACKUP_MIB MiB
// (default 1024) of random files uploaded as hf_xet uploads them (64 MiB xorbs); each repetition then
//  - copies every stored xorb and shard plainly into a fresh directory (read whole, written, fsynced: what
//    `cp` followed by `sync` does; from S3, a GET per object), with the same 4 threads,
//  - takes a backup into a fresh directory (cairn backup: the index snapshot, every object verified at the
//    source),
//  - restores it into a fresh deployment of the same kind (objects verified, then the index), against the
//    plain copy put back into a fresh store as it is,
// and reports MiB/s of object bytes for each and the ratios to the plain copies. Directories go under
// $CAIRN_BENCH_DIR, else the current directory.
//
//   CAIRN_BENCH_DIR=build build/release/src/backup/backup_bench --benchmark_counters_tabular=true
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <random>

#include "backup/backup.h"
#include "cas/service.h"
#include "common/posix_io.h"
#include "common/unique_fd.h"
#include "common/worker_pool.h"
#include "gc/test_bench_deployment.h"
#include "index/open_index.h"
#include "ingest/upload_builder.h"

namespace cairn::backup {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

using gc::testing::BenchDeployment;
using gc::testing::Check;
using gc::testing::FreshDeployment;
using gc::testing::OrDie;

// Fills `d` with `mib` MiB of random files of 256 MiB at most, uploaded through the CAS service.
uint64_t Fill(BenchDeployment& d, uint64_t mib) {
  auto index = OrDie(index::OpenIndex(d.url), "index");
  WorkerPool pool(2);
  cas::CasService cas(*index, *d.store, pool, {});
  std::mt19937_64 rng(11);
  uint64_t left = mib << 20, stored = 0;
  while (left > 0) {
    std::vector<uint8_t> data(std::min<uint64_t>(left, 256ULL << 20));
    for (size_t i = 0; i + 8 <= data.size(); i += 8) {
      const uint64_t v = rng();
      std::memcpy(&data[i], &v, 8);
    }
    left -= data.size();
    std::vector<std::span<const uint8_t>> files{data};
    auto up = ingest::BuildUpload(files, {});
    for (const auto& x : up.xorbs) {
      Check(cas.PutXorb(x.hash, x.body), "put xorb");
      stored += x.body.size();
    }
    Check(cas.PutShard(up.shard_bytes, "bench"), "put shard");
  }
  return stored;
}

// Every xorb and shard of `from`, read whole and written durably under `to`: the plain copy.
uint64_t PlainCopy(store::BlobStore& from, const fs::path& to,
                   std::vector<std::pair<store::BlobKind, xet::Hash>>& all) {
  for (auto kind : {store::BlobKind::kXorb, store::BlobKind::kShard}) {
    Check(from.List(kind, [&](const xet::Hash& h) { all.emplace_back(kind, h); }), "list");
  }
  fs::create_directories(to);
  std::atomic<uint64_t> bytes{0};
  WorkerPool pool(3);  // and this thread: 4, as the backup's
  pool.ParallelFor(all.size(), [&](size_t i) {
    auto data = OrDie(from.ReadWhole(all[i].first, all[i].second), "read");
    const fs::path p = to / all[i].second.hex();
    UniqueFd fd(::open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (!fd.valid() || WriteFull(fd.get(), data) != 0 || ::fsync(fd.get()) != 0) std::abort();
    bytes += data.size();
  });
  UniqueFd dir(::open(to.c_str(), O_RDONLY | O_CLOEXEC));
  if (!dir.valid() || ::fsync(dir.get()) != 0) std::abort();
  return bytes;
}

// The plain copy back: every file PlainCopy wrote, put into `to` as it is.
uint64_t PlainPut(const fs::path& from, const std::vector<std::pair<store::BlobKind, xet::Hash>>& all,
                  store::BlobStore& to) {
  std::atomic<uint64_t> bytes{0};
  WorkerPool pool(3);
  pool.ParallelFor(all.size(), [&](size_t i) {
    const fs::path p = from / all[i].second.hex();
    std::vector<uint8_t> data(fs::file_size(p));
    UniqueFd fd(::open(p.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd.valid() || PreadFull(fd.get(), 0, data) != 0) std::abort();
    Check(to.Put(all[i].first, all[i].second, data), "put");
    bytes += data.size();
  });
  return bytes;
}

double MiBPerS(uint64_t bytes, Clock::duration d) {
  return static_cast<double>(bytes) / (1 << 20) / std::chrono::duration<double>(d).count();
}

void Run(benchmark::State& state, bool s3) {
  const char* env = std::getenv("CAIRN_BENCH_BACKUP_MIB");  // NOLINT(concurrency-mt-unsafe): no threads yet
  const uint64_t mib = env != nullptr ? std::strtoull(env, nullptr, 10) : 1024;
  const fs::path dir = gc::testing::BenchDir("cairn-backup-bench") / (s3 ? "s3" : "disk");
  fs::create_directories(dir);
  static int schemas = 0;
  static int repetition = 0;  // each repetition fills a deployment of its own
  const std::string tag =
      std::string(s3 ? "s3" : "disk") + std::to_string(::getpid()) + "r" + std::to_string(++repetition);
  BenchDeployment source = FreshDeployment(s3, dir, "source" + tag);
  const uint64_t stored = Fill(source, mib);
  double plain = 0, plain_back = 0, backup = 0, restore = 0;
  for (auto _ : state) {
    const int n = ++schemas;
    std::error_code ec;
    fs::remove_all(dir / "plain", ec);
    fs::remove_all(dir / "backup", ec);
    std::vector<std::pair<store::BlobKind, xet::Hash>> all;
    auto t0 = Clock::now();
    const uint64_t copied = PlainCopy(*source.store, dir / "plain", all);
    plain = MiBPerS(copied, Clock::now() - t0);
    BenchDeployment back = FreshDeployment(s3, dir, "plain" + tag + "_" + std::to_string(n));
    t0 = Clock::now();
    const uint64_t put = PlainPut(dir / "plain", all, *back.store);
    plain_back = MiBPerS(put, Clock::now() - t0);
    fs::remove_all(dir / "plain", ec);

    BackupOptions bo;
    bo.threads = 4;
    t0 = Clock::now();
    SpaceOptions so;
    so.create = true;
    auto space = OrDie(OpenBackupSpace((dir / "backup").string(), so), "backup space");
    auto b = OrDie(TakeBackup(source.url, *source.store, *space, bo), "backup");
    backup = MiBPerS(b.xorbs.bytes_copied + b.shards.bytes_copied, Clock::now() - t0);

    BenchDeployment target = FreshDeployment(s3, dir, "target" + tag + "_" + std::to_string(n));
    RestoreOptions ro;
    ro.threads = 4;
    t0 = Clock::now();
    auto r = OrDie(Restore(*space, target.url, *target.store, ro), "restore");
    restore = MiBPerS(r.xorbs.bytes_copied + r.shards.bytes_copied, Clock::now() - t0);
  }
  state.counters["stored_MiB"] = static_cast<double>(stored) / (1 << 20);
  state.counters["plain_MiB_s"] = plain;
  state.counters["backup_MiB_s"] = backup;
  state.counters["restore_MiB_s"] = restore;
  state.counters["backup_ratio"] = backup / plain;
  state.counters["plain_back_MiB_s"] = plain_back;
  state.counters["restore_ratio"] = restore / plain_back;
  std::error_code ec;
  fs::remove_all(dir, ec);
}

void BM_BackupDisk(benchmark::State& state) {
  Run(state, false);
}
void BM_BackupS3(benchmark::State& state) {
  Run(state, true);
}

BENCHMARK(BM_BackupDisk)->Iterations(1)->Unit(benchmark::kSecond)->UseRealTime();
BENCHMARK(BM_BackupS3)->Iterations(1)->Unit(benchmark::kSecond)->UseRealTime();

}  // namespace
}  // namespace cairn::backup
