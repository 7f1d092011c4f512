// Protocol-layer benchmarks: chunking, chunk hashing, xorb validation against its decode+hash ceiling, shard
// parsing. Figures and the command that produced them are in BENCHMARKS.md.
#include <benchmark/benchmark.h>
#include <lz4frame.h>

#include <thread>

#include "common/worker_pool.h"
#include "xet/chunker.h"
#include "xet/hashing.h"
#include "xet/shard.h"
#include "xet/test_support.h"
#include "xet/xorb.h"

namespace cairn::xet {
namespace {

constexpr size_t kSeedChunks = 1024;
constexpr size_t kSeedChunkSize = 64 * 1024;

const std::vector<uint8_t>& RandomData() {
  static const auto d = testing::SplitMix64Bytes(1, 64 << 20);
  return d;
}
const std::vector<uint8_t>& TextData() {
  static const auto d = testing::TextLikeBytes(1, kSeedChunks * kSeedChunkSize);
  return d;
}

// The seed fixture (anchors.md §1.2): 1,024 text-like 64 KiB chunks, compressed as the stock client does.
struct SeedXorb {
  EncodedXorb xorb;
  std::vector<ChunkHeader> headers;
  std::vector<size_t> payload_offsets;
};

const SeedXorb& Seed(CompressionPolicy policy, bool random) {
  static std::map<std::pair<int, bool>, SeedXorb> cache;
  auto key = std::make_pair(static_cast<int>(policy), random);
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  const auto& data = random ? RandomData() : TextData();
  std::vector<std::span<const uint8_t>> chunks;
  for (size_t i = 0; i < kSeedChunks; ++i)
    chunks.push_back(std::span(data).subspan(i * kSeedChunkSize, kSeedChunkSize));
  SeedXorb s{EncodeXorb(chunks, policy), {}, {}};
  size_t pos = 0;
  while (pos < s.xorb.bytes.size()) {
    auto h = ChunkHeader::Parse(std::span(s.xorb.bytes).subspan(pos));
    s.headers.push_back(*h);
    s.payload_offsets.push_back(pos + kChunkHeaderSize);
    pos += kChunkHeaderSize + h->compressed_length;
  }
  return cache.emplace(key, std::move(s)).first->second;
}

void BM_Chunker(benchmark::State& state, bool random) {
  const auto& data = random ? RandomData() : TextData();
  for (auto _ : state) benchmark::DoNotOptimize(ChunkLengths(data).size());
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * data.size()));
}
BENCHMARK_CAPTURE(BM_Chunker, random, true)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Chunker, text, false)->Unit(benchmark::kMillisecond);

void BM_ChunkHash64KiB(benchmark::State& state) {
  const auto& data = RandomData();
  size_t offset = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(ChunkHashOf(std::span(data).subspan(offset, kSeedChunkSize)));
    offset = (offset + kSeedChunkSize) % (data.size() - kSeedChunkSize);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * kSeedChunkSize));
}
BENCHMARK(BM_ChunkHash64KiB);

// Validation of a whole xorb: one decode-and-hash pass, as the ingest path runs it.
void BM_ValidateXorb(benchmark::State& state, CompressionPolicy policy, bool random) {
  const auto& seed = Seed(policy, random);
  const size_t threads = static_cast<size_t>(state.range(0));
  WorkerPool pool(threads - 1);
  const ParallelFor parallel = [&](size_t n, const std::function<void(size_t)>& task) {
    pool.ParallelFor(n, task);
  };
  ValidateOptions options;
  options.expected_hash = &seed.xorb.hash;
  options.parallel = threads > 1 ? &parallel : nullptr;
  for (auto _ : state) {
    auto v = ValidateXorb(seed.xorb.bytes, options);
    if (!v) state.SkipWithError(v.error().message.c_str());
    benchmark::DoNotOptimize(v);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * kSeedChunks * kSeedChunkSize));
  state.counters["body_MB"] = static_cast<double>(seed.xorb.bytes.size()) / 1e6;
}
BENCHMARK_CAPTURE(BM_ValidateXorb, lz4_text, CompressionPolicy::kLz4, false)
    ->Arg(1)
    ->Arg(static_cast<int64_t>(std::thread::hardware_concurrency()))
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_ValidateXorb, bg4_text, CompressionPolicy::kBg4Lz4, false)
    ->Arg(1)
    ->Arg(static_cast<int64_t>(std::thread::hardware_concurrency()))
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_ValidateXorb, incompressible, CompressionPolicy::kLz4, true)
    ->Arg(1)
    ->Arg(static_cast<int64_t>(std::thread::hardware_concurrency()))
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// The ceiling for validation on one core: LZ4 frame decoding of every chunk, and BLAKE3 of the decoded bytes,
// each alone on the same chunks. Validation should cost little more than their sum.
void BM_CeilingDecodeOnly(benchmark::State& state) {
  const auto& seed = Seed(CompressionPolicy::kLz4, false);
  ChunkDecoder decoder;
  std::vector<uint8_t> out(kMaxChunkUnpacked);
  for (auto _ : state) {
    for (size_t i = 0; i < seed.headers.size(); ++i) {
      const auto& h = seed.headers[i];
      auto s =
          decoder.Decode(h, std::span(seed.xorb.bytes).subspan(seed.payload_offsets[i], h.compressed_length),
                         std::span(out).first(h.uncompressed_length));
      benchmark::DoNotOptimize(s);
    }
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * kSeedChunks * kSeedChunkSize));
}
BENCHMARK(BM_CeilingDecodeOnly)->Unit(benchmark::kMillisecond);

void BM_CeilingHashOnly(benchmark::State& state) {
  const auto& data = TextData();
  for (auto _ : state) {
    for (size_t i = 0; i < kSeedChunks; ++i) {
      benchmark::DoNotOptimize(ChunkHashOf(std::span(data).subspan(i * kSeedChunkSize, kSeedChunkSize)));
    }
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * kSeedChunks * kSeedChunkSize));
}
BENCHMARK(BM_CeilingHashOnly)->Unit(benchmark::kMillisecond);

// A shard like a large commit: 1,000 files of 8 terms over 100 xorbs of 1,000 chunks.
const std::vector<uint8_t>& BenchShard() {
  static const std::vector<uint8_t> bytes = [] {
    Shard s;
    auto rnd = testing::SplitMix64Bytes(9, 32 * 200000);
    size_t r = 0;
    auto next_hash = [&] { return Hash::FromBytes(rnd.data() + 32 * (r++ % 200000)); };
    for (int x = 0; x < 100; ++x) {
      XorbRecord xr{next_hash(), 0, 0, 0, {}};
      for (uint32_t c = 0; c < 1000; ++c) xr.chunks.push_back({next_hash(), c * 65536, 65536, 0});
      s.xorbs.push_back(std::move(xr));
    }
    for (int f = 0; f < 1000; ++f) {
      FileRecord fr{next_hash(), {}, {}, next_hash()};
      for (uint32_t t = 0; t < 8; ++t) {
        fr.terms.push_back({s.xorbs[(f + t) % 100].hash, 0, 10 * 65536, t * 10, t * 10 + 10});
        fr.verification.push_back(next_hash());
      }
      s.files.push_back(std::move(fr));
    }
    return SerializeShard(s);
  }();
  return bytes;
}

void BM_ShardParse(benchmark::State& state) {
  const auto& bytes = BenchShard();
  for (auto _ : state) {
    auto s = ParseShard(bytes);
    if (!s) state.SkipWithError(s.error().message.c_str());
    benchmark::DoNotOptimize(s);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes.size()));
  state.counters["shard_MB"] = static_cast<double>(bytes.size()) / 1e6;
}
BENCHMARK(BM_ShardParse)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace cairn::xet

BENCHMARK_MAIN();
