// Backup and restore throughput against a plain copy of the same bytes, in one run: SQLite + local disk
// backed up into a directory, PostgreSQL + S3 (SeaweedFS, started here) into a directory, and PostgreSQL +
// S3 into another prefix of the bucket. A deployment is filled with $CAIRN_BENCH_BACKUP_MIB MiB (default
// 1024) of random files uploaded as hf_xet uploads them (64 MiB xorbs); each repetition then
//  - copies every stored xorb and shard plainly (with the same 4 threads, each object read whole and put as
//    it is, through the same store code as the backup: no hashing, no index) into a fresh directory or
//    another prefix of the bucket,
//  - takes a backup there (cairn backup: the index snapshot, every object verified at the source),
//  - restores it into a fresh deployment of the same kind (objects verified, then the index), against the
//    plain copy put back (the same way) into a fresh store,
// each phase after a sync() and with the page cache dropped (as root; the `cold` counter says whether it
// was), and reports MiB/s of object bytes for each and the ratios to the plain copies.
// Directories go under $CAIRN_BENCH_DIR, else the current directory.
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
#include <optional>
#include <random>

#include "backup/backup.h"
#include "cas/service.h"
#include "common/unique_fd.h"
#include "common/worker_pool.h"
#include "gc/test_bench_deployment.h"
#include "index/open_index.h"
#include "ingest/upload_builder.h"
#include "store/local_disk_store.h"

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

// The blob read whole into this thread's buffer (reused, as a copying tool reuses its buffer).
std::span<const uint8_t> ReadBlob(store::BlobStore& from, store::BlobKind kind, const xet::Hash& hash) {
  thread_local std::vector<uint8_t> buf;
  const auto stat = OrDie(from.Stat(kind, hash), "stat");
  if (buf.size() < stat.size) buf.resize(stat.size);
  Check(from.ReadRange(kind, hash, 0, std::span(buf.data(), stat.size)), "read");
  return {buf.data(), stat.size};
}

// Every xorb and shard of `from` put into `to` as it is (read whole, Put), with 4 threads: the plain copy
// between stores (and back).
uint64_t PlainStoreCopy(store::BlobStore& from, store::BlobStore& to,
                        std::vector<std::pair<store::BlobKind, xet::Hash>>& all) {
  if (all.empty()) {
    for (auto kind : {store::BlobKind::kXorb, store::BlobKind::kShard}) {
      Check(from.List(kind, [&](const xet::Hash& h) { all.emplace_back(kind, h); }), "list");
    }
  }
  std::atomic<uint64_t> bytes{0};
  WorkerPool pool(3);
  pool.ParallelFor(all.size(), [&](size_t i) {
    const auto data = ReadBlob(from, all[i].first, all[i].second);
    Check(to.Put(all[i].first, all[i].second, data), "put");
    bytes += data.size();
  });
  return bytes;
}

// Every blob of `from` read once and dropped: on a virtual machine the host caches the guest's disk, which
// the guest's drop_caches cannot drop, so whichever phase read the source first would read it from slower
// media than the one after it. Reading it once before either makes the two alike.
void ReadEverything(store::BlobStore& from) {
  std::vector<std::pair<store::BlobKind, xet::Hash>> all;
  for (auto kind : {store::BlobKind::kXorb, store::BlobKind::kShard}) {
    Check(from.List(kind, [&](const xet::Hash& h) { all.emplace_back(kind, h); }), "list");
  }
  WorkerPool pool(3);
  pool.ParallelFor(all.size(), [&](size_t i) { ReadBlob(from, all[i].first, all[i].second); });
}

// Writes back what is dirty and, where the process may (root), drops the page cache: each phase reads its
// source from the disk, as a backup of data written long ago does, not from what the phase before it read.
bool Cold() {
  ::sync();
  UniqueFd fd(::open("/proc/sys/vm/drop_caches", O_WRONLY | O_CLOEXEC));
  return fd.valid() && ::write(fd.get(), "3\n", 2) == 2;
}

double MiBPerS(uint64_t bytes, Clock::duration d) {
  return static_cast<double>(bytes) / (1 << 20) / std::chrono::duration<double>(d).count();
}

enum class Dest { kDirectory, kBucket };

void Run(benchmark::State& state, bool s3, Dest where) {
  const char* env = std::getenv("CAIRN_BENCH_BACKUP_MIB");  // NOLINT(concurrency-mt-unsafe): no threads yet
  const uint64_t mib = env != nullptr ? std::strtoull(env, nullptr, 10) : 1024;
  const bool bucket = where == Dest::kBucket;
  const fs::path dir = gc::testing::BenchDir("cairn-backup-bench") / (s3 ? "s3" : "disk");
  fs::create_directories(dir);
  static int schemas = 0;
  static int repetition = 0;  // each repetition fills a deployment of its own
  const std::string tag = std::string(s3 ? "s3" : "disk") + (bucket ? "b" : "") + std::to_string(::getpid()) +
                          "r" + std::to_string(++repetition);
  BenchDeployment source = FreshDeployment(s3, dir, "source" + tag);
  const uint64_t stored = Fill(source, mib);
  ReadEverything(*source.store);
  // CAIRN_BENCH_BACKUP_ORDER=cairn-first starts a process's first repetition with cairn's phases (an S3 run
  // fills SeaweedFS, so each order gets a process of its own there).
  const char* order =
      std::getenv("CAIRN_BENCH_BACKUP_ORDER");  // NOLINT(concurrency-mt-unsafe): no threads yet
  const bool plain_first =
      (repetition % 2 == 1) != (order != nullptr && std::string_view(order) == "cairn-first");
  double plain = 0, plain_back = 0, backup = 0, restore = 0;
  bool cold = false;
  double restore_index_s = 0;
  for (auto _ : state) {
    const std::string id = tag + "_" + std::to_string(++schemas);
    std::error_code ec;
    cold = true;
    const auto plain_phases = [&] {
      std::vector<std::pair<store::BlobKind, xet::Hash>> all;
      BenchDeployment back = FreshDeployment(s3, dir, "plain" + id);
      std::unique_ptr<store::BlobStore> copy =
          bucket ? FreshDeployment(true, dir, "copy" + id).store
                 : OrDie(store::LocalDiskStore::Open(dir / "plain"), "plain");
      cold = Cold() && cold;
      auto t0 = Clock::now();
      const uint64_t copied = PlainStoreCopy(*source.store, *copy, all);
      plain = MiBPerS(copied, Clock::now() - t0);
      cold = Cold() && cold;
      t0 = Clock::now();
      const uint64_t put = PlainStoreCopy(*copy, *back.store, all);
      plain_back = MiBPerS(put, Clock::now() - t0);
      fs::remove_all(dir / "plain", ec);
    };
    const auto cairn_phases = [&] {
      BackupOptions bo;
      bo.threads = 4;
      SpaceOptions so;
      so.create = true;
      std::string at = (dir / "backup").string();
      if (bucket) {
        so.s3.s3 = gc::testing::SharedServers().Seaweed().Options("lifecycle-bench");
        at = "s3://lifecycle-bench/backup" + id;
      }
      auto space = OrDie(OpenBackupSpace(at, so), "backup space");
      cold = Cold() && cold;
      auto t0 = Clock::now();
      auto b = OrDie(TakeBackup(source.url, *source.store, *space, bo), "backup");
      backup = MiBPerS(b.xorbs.bytes_copied + b.shards.bytes_copied, Clock::now() - t0);

      BenchDeployment target = FreshDeployment(s3, dir, "target" + id);
      RestoreOptions ro;
      ro.threads = 4;
      // When the objects are done (the index's first table is being copied): the rest is the index's time.
      std::optional<Clock::time_point> index_began;
      ro.progress = [&](std::string_view, uint64_t, uint64_t total) {
        if (total == 0 && !index_began) index_began = Clock::now();
      };
      cold = Cold() && cold;
      t0 = Clock::now();
      auto r = OrDie(Restore(*space, target.url, *target.store, ro), "restore");
      const auto t1 = Clock::now();
      restore = MiBPerS(r.xorbs.bytes_copied + r.shards.bytes_copied, t1 - t0);
      restore_index_s = std::chrono::duration<double>(t1 - index_began.value_or(t1)).count();
      fs::remove_all(dir / "backup", ec);
    };
    // The order alternates between repetitions: a shared guest's disk slows as it fills (and may spend
    // burst credits), and the host's cache holds what the phase before read, which would favour one order.
    if (plain_first) {
      plain_phases();
      cairn_phases();
    } else {
      cairn_phases();
      plain_phases();
    }
  }
  state.counters["stored_MiB"] = static_cast<double>(stored) / (1 << 20);
  state.counters["cold"] = cold ? 1 : 0;  // every phase began with the page cache dropped
  state.counters["plain_first"] = plain_first ? 1 : 0;
  state.counters["restore_index_s"] = restore_index_s;
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
  Run(state, false, Dest::kDirectory);
}
void BM_BackupS3(benchmark::State& state) {
  Run(state, true, Dest::kDirectory);
}
void BM_BackupS3ToBucket(benchmark::State& state) {
  Run(state, true, Dest::kBucket);
}

BENCHMARK(BM_BackupDisk)->Iterations(1)->Unit(benchmark::kSecond)->UseRealTime();
BENCHMARK(BM_BackupS3)->Iterations(1)->Unit(benchmark::kSecond)->UseRealTime();
BENCHMARK(BM_BackupS3ToBucket)->Iterations(1)->Unit(benchmark::kSecond)->UseRealTime();

}  // namespace
}  // namespace cairn::backup
