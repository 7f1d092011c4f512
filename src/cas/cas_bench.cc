// Service-layer benchmarks. The reconstruction fixture is the seed's (anchors.md §1.1): 100,000 terms over
// 1,000 xorbs of 1,024 chunks; "unmerged" gives every term its own fetch range (100,000 signed URLs in v1),
// "merged" makes each xorb's 100 terms adjacent (1,000 ranges). BM_Reconstruction times the answer alone,
// BM_ServiceReconstruction the whole service call on a SQLite index, BM_DedupAnswer the dedup answer.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <random>
#include <stdexcept>
#include <unordered_map>

#include "cas/reconstruction.h"
#include "cas/service.h"
#include "index/open_index.h"
#include "index/postgres/pg.h"
#include "index/testing/postgres_cluster.h"
#include "ingest/upload_builder.h"
#include "store/local_disk_store.h"
#include "store/memory_store.h"

namespace cairn::cas {
namespace {

namespace fs = std::filesystem;

constexpr uint32_t kXorbs = 1000;
constexpr uint32_t kChunks = 1024;
constexpr uint32_t kTerms = 100000;
constexpr uint32_t kChunkSize = 65536;
constexpr uint32_t kDedupXorb = 1;  // the xorb whose first chunk BM_DedupAnswer asks about

xet::Hash HashOf(uint64_t n) {
  xet::Hash h;
  std::mt19937_64 rng(n);
  for (size_t i = 0; i < 32; i += 8) {
    const uint64_t v = rng();
    for (size_t b = 0; b < 8; ++b) h.bytes[i + b] = static_cast<uint8_t>(v >> (8 * b));
  }
  return h;
}

struct Fixture {
  std::unordered_map<xet::XorbHash, xet::XorbLayout, xet::HashHasher> layouts;
  std::vector<FileTermRef> terms;
  xet::LayoutLookup lookup;

  explicit Fixture(bool merged) {
    for (uint32_t x = 0; x < kXorbs; ++x) {
      xet::XorbLayout l;
      for (uint32_t c = 0; c < kChunks; ++c)
        l.chunks.push_back({HashOf(x * 100000ULL + c), kChunkSize, (c + 1) * 34000});
      layouts.emplace(HashOf(x), std::move(l));
    }
    uint64_t offset = 0;
    for (uint32_t t = 0; t < kTerms; ++t) {
      // unmerged: consecutive terms name different xorbs and a xorb's ranges leave gaps between them.
      const uint32_t x = merged ? t / 100 : t % kXorbs;
      const uint32_t k = merged ? t % 100 : t / kXorbs;
      const uint32_t start = k * 10;
      const uint32_t end = start + (merged ? 10 : 9);
      offset += uint64_t{end - start} * kChunkSize;
      terms.push_back({HashOf(x), start, end, (end - start) * kChunkSize, offset});
    }
    lookup = [this](const xet::XorbHash& h) -> const xet::XorbLayout* {
      auto it = layouts.find(h);
      return it == layouts.end() ? nullptr : &it->second;
    };
  }
};

const Fixture& Get(bool merged) {
  static const Fixture unmerged_fixture(false);
  static const Fixture merged_fixture(true);
  return merged ? merged_fixture : unmerged_fixture;
}

// `workers`: the pool that helps the calling thread write the answer's parts (0: the caller alone). `cairn
// serve` gives it one worker fewer than the cores, so *_2threads is the server on a 2-core machine.
void BM_Reconstruction(benchmark::State& state, bool merged, ApiVersion version, bool random_range,
                       size_t workers) {
  const Fixture& f = Get(merged);
  WorkerPool pool(workers);
  const TransferUrlSigner signer("http://127.0.0.1:8080", HashOf(7));
  std::mt19937_64 rng(1);
  const uint64_t size = f.terms.back().end_offset;
  size_t body = 0;
  for (auto _ : state) {
    ReconstructionQuery q{std::nullopt, version, 1'900'000'000};
    if (random_range) {
      const uint64_t a = rng() % size;
      q.range = ByteRange{a, a + rng() % (size - a)};
    }
    auto answer = AnswerReconstruction(f.terms, f.lookup, q, signer, workers > 0 ? &pool : nullptr);
    body = answer.size();
    benchmark::DoNotOptimize(answer);
  }
  state.counters["body_MB"] = static_cast<double>(body) / 1e6;
}
BENCHMARK_CAPTURE(BM_Reconstruction, unmerged_v2_full, false, ApiVersion::kV2, false, 0)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_Reconstruction, unmerged_v2_full_2threads, false, ApiVersion::kV2, false, 1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_Reconstruction, unmerged_v1_full, false, ApiVersion::kV1, false, 0)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_Reconstruction, unmerged_v1_full_2threads, false, ApiVersion::kV1, false, 1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_Reconstruction, merged_v2_full, true, ApiVersion::kV2, false, 0)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_Reconstruction, merged_v2_full_2threads, true, ApiVersion::kV2, false, 1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_Reconstruction, merged_v1_full, true, ApiVersion::kV1, false, 0)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_Reconstruction, merged_v1_full_2threads, true, ApiVersion::kV1, false, 1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_Reconstruction, unmerged_v2_random, false, ApiVersion::kV2, true, 0)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_Reconstruction, unmerged_v2_random_2threads, false, ApiVersion::kV2, true, 1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_Reconstruction, unmerged_v1_random, false, ApiVersion::kV1, true, 0)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_Reconstruction, unmerged_v1_random_2threads, false, ApiVersion::kV1, true, 1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// The same answers through CasService on an index on disk, caches warm: what a GET costs the server short of
// HTTP (the file and its scope from the index, terms and layouts from the caches, the answer written by the
// caller and one pool worker, as `cairn serve` on 2 cores). The index: SQLite in CAIRN_BENCH_DIR (else the
// current directory), or PostgreSQL 15 in a private server on this machine (`_pg` benchmarks).
index::testing::PostgresCluster& BenchCluster() {
  static std::unique_ptr<index::testing::PostgresCluster> cluster = [] {
    auto c = index::testing::PostgresCluster::Start("cas-bench");
    if (!c) throw std::runtime_error(c.error().message);
    return std::move(*c);
  }();
  return *cluster;
}

struct ServiceFixture {
  fs::path dir;
  std::unique_ptr<index::Index> index;
  store::MemoryStore store;  // reconstruction never reads blobs
  WorkerPool pool{1};
  std::unique_ptr<CasService> service;
  xet::FileHash file = HashOf(424242);

  ServiceFixture(const Fixture& f, const std::string& name, bool postgres = false) {
    std::string url;
    if (postgres) {
      auto conn = index::pg::Conn::Connect(BenchCluster().uri());
      if (!conn || !(*conn)->Exec("CREATE SCHEMA " + name)) throw std::runtime_error("create schema " + name);
      url = BenchCluster().uri() + "?options=-csearch_path%3D" + name;
    } else {
      const char* env =
          std::getenv("CAIRN_BENCH_DIR");  // NOLINT(concurrency-mt-unsafe): before threads start
      dir = fs::path(env ? env : ".") / ("cairn-cas-bench-" + name + "-" + std::to_string(::getpid()));
      fs::create_directories(dir);
      url = "sqlite:" + (dir / "index.db").string();
    }
    auto opened = index::OpenIndex(url);
    if (!opened) throw std::runtime_error(opened.error().message);
    index = std::move(*opened);
    std::vector<const std::pair<const xet::XorbHash, xet::XorbLayout>*> xorbs;
    for (const auto& entry : f.layouts) xorbs.push_back(&entry);
    WorkerPool writers(16);  // concurrent registrations share group commits
    writers.ParallelFor(xorbs.size(), [&](size_t i) {
      if (!index->PutXorb(xorbs[i]->first, xorbs[i]->second)) throw std::runtime_error("PutXorb failed");
    });
    xet::FileRecord record;
    record.hash = file;
    for (const auto& t : f.terms) record.terms.push_back({t.xorb, 0, t.bytes, t.chunk_start, t.chunk_end});
    index::ShardCommit commit;
    commit.shard = HashOf(4242);
    commit.shard_size = 1;
    // With the terms' byte ranges, as the service registers files (schema 5).
    auto file_commit = index::MakeFileCommit(record, f.lookup);
    if (!file_commit) throw std::runtime_error(file_commit.error().message);
    commit.files.push_back(std::move(*file_commit));
    commit.scope = "bench";
    // The shard also lists every xorb, in order, with one dedup entry: the neighbourhood BM_DedupAnswer asks
    // for.
    for (uint32_t x = 0; x < kXorbs; ++x) commit.xorbs.listed.push_back(HashOf(x));
    commit.dedup.push_back({f.layouts.at(HashOf(kDedupXorb)).chunks[0].hash, HashOf(kDedupXorb)});
    if (!index->CommitShard(commit)) throw std::runtime_error("CommitShard failed");
    ServiceOptions options_for_service;
    options_for_service.url_keys = UrlKeys::Single(HashOf(7));
    service = std::make_unique<CasService>(*index, store, pool, options_for_service);
  }
  ~ServiceFixture() {
    service.reset();
    index.reset();
    std::error_code ec;
    if (!dir.empty()) fs::remove_all(dir, ec);
  }
  ServiceFixture(const ServiceFixture&) = delete;
  ServiceFixture& operator=(const ServiceFixture&) = delete;
};

// The 99th percentile of per-request times: the service benchmarks run one request per repetition.
double P99(const std::vector<double>& v) {
  std::vector<double> sorted = v;
  std::sort(sorted.begin(), sorted.end());
  return sorted.empty() ? 0.0 : sorted[std::min(sorted.size() - 1, sorted.size() * 99 / 100)];
}

void OneRequestPerRepetition(benchmark::internal::Benchmark* b) {
  b->Unit(benchmark::kMillisecond)
      ->UseRealTime()
      ->Iterations(1)
      ->Repetitions(200)
      ->ComputeStatistics("p99", P99)
      ->ReportAggregatesOnly(true);
}

// `planned`: ask for the whole file as a byte range, which is planned on every request (whole-file requests
// reuse the plan kept from the first one).
void BM_ServiceReconstruction(benchmark::State& state, bool merged, ApiVersion version, bool planned,
                              bool postgres = false) {
  static ServiceFixture unmerged_service(Get(false), "unmerged");
  static ServiceFixture merged_service(Get(true), "merged");
  ServiceFixture& f = [&]() -> ServiceFixture& {
    if (!postgres) return merged ? merged_service : unmerged_service;
    static ServiceFixture unmerged_pg(Get(false), "unmerged_pg", true);
    static ServiceFixture merged_pg(Get(true), "merged_pg", true);
    return merged ? merged_pg : unmerged_pg;
  }();
  const std::optional<ByteRange> range =
      planned ? std::optional<ByteRange>(ByteRange{0, UINT64_MAX}) : std::nullopt;
  size_t body = 0;
  for (auto _ : state) {
    auto answer = f.service->Reconstruct(f.file, "bench", range, version);
    if (!answer || answer->status != ReconstructionStatus::kOk) {
      state.SkipWithError("reconstruction failed");
      break;
    }
    body = answer->size();
    benchmark::DoNotOptimize(answer);
  }
  state.counters["body_MB"] = static_cast<double>(body) / 1e6;
}
BENCHMARK_CAPTURE(BM_ServiceReconstruction, unmerged_v2, false, ApiVersion::kV2, false)
    ->Apply(OneRequestPerRepetition);
BENCHMARK_CAPTURE(BM_ServiceReconstruction, unmerged_v2_planned_each_time, false, ApiVersion::kV2, true)
    ->Apply(OneRequestPerRepetition);
BENCHMARK_CAPTURE(BM_ServiceReconstruction, unmerged_v1, false, ApiVersion::kV1, false)
    ->Apply(OneRequestPerRepetition);
BENCHMARK_CAPTURE(BM_ServiceReconstruction, unmerged_v1_planned_each_time, false, ApiVersion::kV1, true)
    ->Apply(OneRequestPerRepetition);
BENCHMARK_CAPTURE(BM_ServiceReconstruction, merged_v2, true, ApiVersion::kV2, false)
    ->Apply(OneRequestPerRepetition);
BENCHMARK_CAPTURE(BM_ServiceReconstruction, merged_v1, true, ApiVersion::kV1, false)
    ->Apply(OneRequestPerRepetition);
BENCHMARK_CAPTURE(BM_ServiceReconstruction, unmerged_v2_pg, false, ApiVersion::kV2, false, true)
    ->Apply(OneRequestPerRepetition);
BENCHMARK_CAPTURE(BM_ServiceReconstruction, unmerged_v2_planned_each_time_pg, false, ApiVersion::kV2, true,
                  true)
    ->Apply(OneRequestPerRepetition);
BENCHMARK_CAPTURE(BM_ServiceReconstruction, unmerged_v1_pg, false, ApiVersion::kV1, false, true)
    ->Apply(OneRequestPerRepetition);
BENCHMARK_CAPTURE(BM_ServiceReconstruction, unmerged_v1_planned_each_time_pg, false, ApiVersion::kV1, true,
                  true)
    ->Apply(OneRequestPerRepetition);
BENCHMARK_CAPTURE(BM_ServiceReconstruction, merged_v2_pg, true, ApiVersion::kV2, false, true)
    ->Apply(OneRequestPerRepetition);
BENCHMARK_CAPTURE(BM_ServiceReconstruction, merged_v1_pg, true, ApiVersion::kV1, false, true)
    ->Apply(OneRequestPerRepetition);

// GET /v1/chunks short of HTTP: a hit in a shard of 1,000 xorbs of 1,024 chunks, answered with as much of the
// neighbourhood as `cap_mib` allows (64 MiB holds nearly all of it, the 68 MB whole is past the cap, so every
// answer is computed: layouts from the service's cache, chunk hashes keyed, the shard serialized).
// `whole`: a cap above the whole neighbourhood, so that the answer is kept and served again (after the
// first).
void BM_DedupAnswer(benchmark::State& state, size_t cap_mib) {
  static ServiceFixture fixture(Get(false), "dedup");
  static WorkerPool pool{0};
  static std::map<size_t, std::unique_ptr<CasService>> services;  // one per cap, across the repetitions
  auto& slot = services[cap_mib];
  if (!slot) {
    ServiceOptions options;
    options.url_keys = UrlKeys::Single(HashOf(7));
    options.dedup_answer_max_bytes = cap_mib << 20;
    slot = std::make_unique<CasService>(*fixture.index, fixture.store, pool, options);
  }
  CasService& service = *slot;
  const xet::ChunkHash chunk = Get(false).layouts.at(HashOf(kDedupXorb)).chunks[0].hash;
  size_t body = 0;
  size_t xorbs = 0;
  for (auto _ : state) {
    auto answer = service.DedupShard(chunk, "bench");
    if (!answer) {
      state.SkipWithError(answer.error().message.c_str());
      break;
    }
    body = answer->size();
    xorbs = (body - xet::kEmptyShardBytes) / xet::XorbListingBytes(kChunks);
    benchmark::DoNotOptimize(answer);
  }
  state.counters["body_MB"] = static_cast<double>(body) / 1e6;
  state.counters["xorbs"] = static_cast<double>(xorbs);
}
BENCHMARK_CAPTURE(BM_DedupAnswer, cap_1MiB, 1)->Apply(OneRequestPerRepetition)->Repetitions(50);
BENCHMARK_CAPTURE(BM_DedupAnswer, cap_4MiB, 4)->Apply(OneRequestPerRepetition)->Repetitions(50);
BENCHMARK_CAPTURE(BM_DedupAnswer, cap_16MiB, 16)->Apply(OneRequestPerRepetition)->Repetitions(50);
BENCHMARK_CAPTURE(BM_DedupAnswer, cap_60MiB, 60)->Apply(OneRequestPerRepetition)->Repetitions(50);
BENCHMARK_CAPTURE(BM_DedupAnswer, whole_kept, 64)->Apply(OneRequestPerRepetition)->Repetitions(50);

// Shard registrations through CasService::PutShard, durable end to end: the shard's put (and its grant's) on
// a LocalDiskStore and the index commit on SQLite, both in CAIRN_BENCH_DIR (else the current directory; run
// it on disk: tmpfs hides the fsyncs). Each shard is new: 4 files of 1 to 16 chunks of one stored xorb of
// 8,000 chunks, the shape index_bench's BM_ShardCommits registers; "again" registers one shard over and over
// (a client retrying, or uploading what its scope has already). The store is fresh, so most puts also create
// and sync their two-level directory, as on a new node or the first put into each directory after a restart.
struct PutShardFixture {
  static constexpr uint32_t kXorbChunks = 8000;
  static constexpr uint32_t kMaxFileChunks = 16;
  fs::path dir;
  std::unique_ptr<store::LocalDiskStore> store;
  std::unique_ptr<index::Index> index;
  WorkerPool pool{1};
  std::unique_ptr<CasService> service;
  ingest::BuiltXorb xorb;
  std::atomic<uint64_t> next{0};
  std::vector<uint8_t> again;  // a shard registered in setup

  PutShardFixture() {
    const char* env = std::getenv("CAIRN_BENCH_DIR");  // NOLINT(concurrency-mt-unsafe): before threads start
    dir = fs::path(env ? env : ".") / ("cairn-cas-bench-put-shard-" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    auto opened_store = store::LocalDiskStore::Open(dir / "blobs");
    if (!opened_store) throw std::runtime_error(opened_store.error().message);
    store = std::move(*opened_store);
    auto opened = index::OpenIndex("sqlite:" + (dir / "index.db").string());
    if (!opened) throw std::runtime_error(opened.error().message);
    index = std::move(*opened);
    service = std::make_unique<CasService>(*index, *store, pool, ServiceOptions{});
    constexpr uint64_t kChunkBytes = 512;
    std::vector<uint8_t> data(kXorbChunks * kChunkBytes);
    std::mt19937_64 rng(42);
    for (auto& b : data) b = static_cast<uint8_t>(rng());
    const std::span<const uint8_t> file(data);
    ingest::BuildOptions options;
    options.fixed_chunk_bytes = kChunkBytes;
    auto up = ingest::BuildUpload(std::span(&file, 1), options);
    if (up.xorbs.size() != 1) throw std::runtime_error("expected one xorb");
    xorb = std::move(up.xorbs.front());
    if (auto put = service->PutXorb(xorb.hash, xorb.body); !put)
      throw std::runtime_error(put.error().message);
    again = NextShard();
    if (auto put = service->PutShard(again, "bench"); !put) throw std::runtime_error(put.error().message);
  }
  ~PutShardFixture() {
    service.reset();
    index.reset();
    store.reset();
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  PutShardFixture(const PutShardFixture&) = delete;
  PutShardFixture& operator=(const PutShardFixture&) = delete;

  // A shard no earlier call returned: its files are chunk windows (start, length) no earlier file used.
  std::vector<uint8_t> NextShard() {
    const uint64_t n = next.fetch_add(1);
    xet::Shard shard;
    for (uint64_t f = 0; f < 4; ++f) {
      const uint64_t w = n * 4 + f;
      const uint32_t length = 1 + static_cast<uint32_t>(w % kMaxFileChunks);
      const uint64_t start = w / kMaxFileChunks;
      if (start + kMaxFileChunks > kXorbChunks) throw std::runtime_error("out of distinct files");
      std::vector<ingest::PlacedChunk> chunks;
      for (uint32_t c = 0; c < length; ++c) {
        const auto at = static_cast<uint32_t>(start + c);
        chunks.push_back({xorb.layout.chunks[at].hash, xorb.layout.chunks[at].unpacked_size, xorb.hash, at});
      }
      xet::FileRecord record = ingest::FileRecordOf(chunks);
      record.sha256 = HashOf(w);
      shard.files.push_back(std::move(record));
    }
    return ingest::ShardUploadForm(shard);
  }
};

PutShardFixture& PutShards() {
  static PutShardFixture fixture;  // thread-safe: every benchmark thread waits for the first
  return fixture;
}

void BM_PutShard(benchmark::State& state, bool again) {
  PutShardFixture& f = PutShards();
  for (auto _ : state) {
    const std::vector<uint8_t> shard = again ? f.again : f.NextShard();
    auto put = f.service->PutShard(shard, "bench");
    if (!put || put->registered == again) {
      state.SkipWithError(put ? "unexpected outcome" : put.error().message.c_str());
      break;
    }
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK_CAPTURE(BM_PutShard, new, false)->Threads(1)->Threads(8)->Threads(32)->UseRealTime()->MinTime(2.0);
BENCHMARK_CAPTURE(BM_PutShard, again, true)->Threads(1)->Threads(32)->UseRealTime()->MinTime(2.0);

}  // namespace
}  // namespace cairn::cas
