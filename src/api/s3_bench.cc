// cairn on an S3-compatible store, against the store alone, in one run: a private SeaweedFS (weed mini, the
// binary scripts/seaweedfs.sh builds) on loopback, and cairn's HTTP stack on an S3Store in front of it.
//
//   BM_S3XorbUploadHttp     64 MiB xorbs (1,024 text-like 64 KiB chunks, LZ4, ~35 MB bodies) POSTed to cairn,
//                           which validates them and streams them into the bucket as multipart uploads
//   BM_S3PlainPut           the same stored bytes PUT straight into the bucket, one signed request each (what
//                           `curl --aws-sigv4` does): the floor the upload is measured against (target ≤ 1.2
//                           ×)
//   BM_S3Transfer/...       a 64 MiB range, and 64 KiB ranges, of a stored (incompressible) xorb: through
//   cairn
//                           (proxy: the node's signed URL, the node reads the store), presigned (the client
//                           GETs the store with a presigned URL), and a plain signed GET of the store (the
//                           same libcurl client code for all, discarding what it reads) (target for
//                           proxy ≥ 80 % of the plain GET's throughput); and proxy-blocks, a second node
//                           reading the range in 4 MiB ranged GETs as the proxy did before ranges streamed
//
// Client and servers share the machine's cores. Every client request goes through libcurl with one kept-alive
// handle per client thread. CAIRN_BENCH_S3_PIN=1 gives SeaweedFS CPU 0 alone and this process (cairn and the
// clients) the others, as a store on a machine of its own would be: then what cairn costs comes out of its
// own cores, not the store's.
#include <benchmark/benchmark.h>
#include <curl/curl.h>
#include <sched.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>

#include "api/cas_routes.h"
#include "common/allocator.h"
#include "common/worker_pool.h"
#include "http/server.h"
#include "index/open_index.h"
#include "store/forwarding_store.h"
#include "store/s3_store.h"
#include "store/seaweedfs_cluster.h"
#include "xet/test_support.h"
#include "xet/xorb.h"

namespace cairn::api {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

const std::string kJwtKey(64, 'j');
constexpr char kBucket[] = "bench";

template <typename R>
auto Must(R r, const char* what) {
  if (!r) throw std::runtime_error(std::string(what) + ": " + r.error().message);
  return std::move(*r);
}

xet::EncodedXorb XorbOf(uint64_t seed, bool random) {
  constexpr size_t kChunk = 64 << 10;
  std::vector<uint8_t> data;
  if (random) {
    data.resize(1024 * kChunk);
    std::mt19937_64 rng(seed);
    for (size_t i = 0; i < data.size(); i += 8) {
      const uint64_t v = rng();
      std::memcpy(data.data() + i, &v, 8);
    }
  } else {
    data = xet::testing::TextLikeBytes(seed, 1024 * kChunk);
  }
  std::vector<std::span<const uint8_t>> chunks;
  for (size_t i = 0; i < 1024; ++i) chunks.push_back(std::span(data).subspan(i * kChunk, kChunk));
  return xet::EncodeXorb(chunks, xet::CompressionPolicy::kLz4);
}

bool Pinned() {
  const char* p = std::getenv("CAIRN_BENCH_S3_PIN");  // NOLINT(concurrency-mt-unsafe): read-only environment
  return p != nullptr && std::string(p) == "1";
}

// CPU 0 for SeaweedFS, the rest for this process (threads inherit their creator's set).
void PinThisProcess() {
  const long cpus = ::sysconf(_SC_NPROCESSORS_ONLN);
  if (cpus < 2) throw std::runtime_error("CAIRN_BENCH_S3_PIN=1 needs two CPUs or more");
  cpu_set_t set;
  CPU_ZERO(&set);
  for (long c = 1; c < cpus; ++c) CPU_SET(c, &set);
  if (::sched_setaffinity(0, sizeof(set), &set) != 0) throw std::runtime_error("sched_setaffinity");
}

// Every thread weed has now; the threads it starts later inherit CPU 0 from them.
void PinWeed(pid_t pid) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(0, &set);
  for (const auto& task : fs::directory_iterator("/proc/" + std::to_string(pid) + "/task")) {
    const pid_t tid = std::stoi(task.path().filename().string());
    (void)::sched_setaffinity(tid, sizeof(set), &set);  // a thread may have ended meanwhile
  }
}

// The S3 store as it read transfers before ranges were streamed: the default OpenRange, one ranged GET per
// 4 MiB block (the proxy-blocks path, for comparison in the same run).
class BlockReads final : public store::ForwardingStore {
 public:
  explicit BlockReads(store::BlobStore& s) : ForwardingStore(s) {}
  // The default OpenRange (reads through ReadRange), and no files to send from.
  std::unique_ptr<store::BlobReader> OpenRange(store::BlobKind k, const xet::Hash& h, uint64_t offset,
                                               uint64_t length) override {
    return ReaderThroughReadRange(k, h, offset, length);
  }
  bool local() const override { return false; }
};

// SeaweedFS, and cairn's stack on a bucket of it, for the whole program.
struct Fixture {
  std::unique_ptr<store::testing::SeaweedCluster> weed;
  std::unique_ptr<store::S3Store> store;
  fs::path dir;
  std::unique_ptr<index::Index> index;
  WorkerPool pool{1};
  std::unique_ptr<http::Server> server;
  std::unique_ptr<cas::CasService> service;
  std::string url;
  std::unique_ptr<BlockReads> blocks_store;  // a second node on the same bucket and index, reading in blocks
  std::unique_ptr<http::Server> blocks_server;
  std::unique_ptr<cas::CasService> blocks_service;

  Fixture() {
    RetainFreedMemory();                     // as cairn serve does
    spdlog::set_level(spdlog::level::warn);  // no line per request
    if (Pinned()) PinThisProcess();
    weed = Must(store::testing::SeaweedCluster::Start("s3-bench"), "SeaweedFS");
    if (Pinned()) PinWeed(weed->pid());
    if (auto st = weed->CreateBucket(kBucket); !st) throw std::runtime_error(st.error().message);
    store::S3StoreOptions so;
    so.s3 = weed->Options(kBucket);
    so.prefix = "run" + std::to_string(::getpid()) + "/";
    // CAIRN_BENCH_S3_PART_MIB: the multipart part size (cairn's default: 16; 64 and more: one PUT a xorb).
    if (const char* p =
            std::getenv("CAIRN_BENCH_S3_PART_MIB"))  // NOLINT(concurrency-mt-unsafe): before threads
      so.part_bytes = std::stoull(p) << 20;
    store = Must(store::S3Store::Open(so), "store");
    // SeaweedFS's first write to a fresh volume costs ~1 s (it grows the volume): pay it before measuring.
    const std::vector<uint8_t> warm(4 << 20, 1);
    Must(store->Put(store::BlobKind::kShard, xet::Hash{}, warm), "warm-up put");
    const char* env = std::getenv("CAIRN_BENCH_DIR");  // NOLINT(concurrency-mt-unsafe): before threads
    dir = fs::path(env ? env : ".") / ("cairn-s3-bench-" + std::to_string(::getpid()));
    fs::create_directories(dir);
    index = Must(index::OpenIndex("sqlite:" + (dir / "index.db").string()), "index");
    http::ServerOptions o;
    o.host = "127.0.0.1";
    o.port = 0;
    o.io_threads = 2;
    o.worker_threads = 16;  // request threads: transfers wait on the store
    server = std::make_unique<http::Server>(o, std::make_shared<http::Authenticator>(kJwtKey));
    if (!server->Listen().ok()) throw std::runtime_error("listen");
    url = "http://127.0.0.1:" + std::to_string(server->port());
    cas::ServiceOptions opts;
    opts.public_url = url;
    service = std::make_unique<cas::CasService>(*index, *store, pool, opts);
    RegisterCasRoutes(*server, *service);
    server->Start();

    blocks_store = std::make_unique<BlockReads>(*store);
    blocks_server = std::make_unique<http::Server>(o, std::make_shared<http::Authenticator>(kJwtKey));
    if (!blocks_server->Listen().ok()) throw std::runtime_error("listen");
    opts.public_url = "http://127.0.0.1:" + std::to_string(blocks_server->port());
    blocks_service = std::make_unique<cas::CasService>(*index, *blocks_store, pool, opts);
    RegisterCasRoutes(*blocks_server, *blocks_service);
    blocks_server->Start();
  }
  ~Fixture() {
    blocks_server->Stop(2s);
    blocks_server->Wait();
    server->Stop(2s);
    server->Wait();
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  static Fixture& Get() {
    static Fixture f;
    return f;
  }
};

size_t Discard(char*, size_t size, size_t n, void* counter) {
  *static_cast<size_t*>(counter) += size * n;
  return size * n;
}

// One kept-alive libcurl handle.
class Curl {
 public:
  Curl() : h_(curl_easy_init()) {}
  ~Curl() { curl_easy_cleanup(h_); }
  Curl(const Curl&) = delete;
  Curl& operator=(const Curl&) = delete;

  // GETs `range` of `url` into nothing; returns the bytes received (throws on a status but 200/206). With
  // `signer`, the request is signed as cairn signs its own (curl's SigV4, the empty payload's hash).
  size_t Get(const std::string& url, const std::string& range, const store::S3Options* signer = nullptr) {
    size_t got = 0;
    curl_easy_reset(h_);
    curl_slist* headers = nullptr;
    std::string sigv4;
    if (signer != nullptr) {
      sigv4 = "aws:amz:" + signer->region + ":s3";
      curl_easy_setopt(h_, CURLOPT_AWS_SIGV4, sigv4.c_str());
      curl_easy_setopt(h_, CURLOPT_USERNAME, signer->access_key.c_str());
      curl_easy_setopt(h_, CURLOPT_PASSWORD, signer->secret_key.c_str());
      headers = curl_slist_append(
          headers, "x-amz-content-sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
      curl_easy_setopt(h_, CURLOPT_HTTPHEADER, headers);
    }
    curl_easy_setopt(h_, CURLOPT_URL, url.c_str());
    curl_easy_setopt(h_, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h_, CURLOPT_RANGE, range.c_str());
    curl_easy_setopt(h_, CURLOPT_WRITEFUNCTION, Discard);
    curl_easy_setopt(h_, CURLOPT_WRITEDATA, &got);
    const CURLcode rc = curl_easy_perform(h_);
    curl_slist_free_all(headers);
    if (rc != CURLE_OK) throw std::runtime_error("GET " + url + " failed");
    long status = 0;
    curl_easy_getinfo(h_, CURLINFO_RESPONSE_CODE, &status);
    if (status != 200 && status != 206) throw std::runtime_error("GET answered " + std::to_string(status));
    return got;
  }

  // POSTs a xorb body to cairn; throws unless it is accepted.
  void PostXorb(const std::string& url, const std::string& auth, std::span<const uint8_t> body) {
    curl_easy_reset(h_);
    curl_slist* headers = curl_slist_append(nullptr, auth.c_str());
    headers = curl_slist_append(headers, "Content-Type: application/octet-stream");
    size_t got = 0;
    curl_easy_setopt(h_, CURLOPT_URL, url.c_str());
    curl_easy_setopt(h_, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h_, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(h_, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
    curl_easy_setopt(h_, CURLOPT_POSTFIELDS, reinterpret_cast<const char*>(body.data()));
    curl_easy_setopt(h_, CURLOPT_WRITEFUNCTION, Discard);
    curl_easy_setopt(h_, CURLOPT_WRITEDATA, &got);
    const CURLcode rc = curl_easy_perform(h_);
    curl_slist_free_all(headers);
    long status = 0;
    curl_easy_getinfo(h_, CURLINFO_RESPONSE_CODE, &status);
    if (rc != CURLE_OK || status != 200)
      throw std::runtime_error("xorb POST answered " + std::to_string(status));
  }

 private:
  CURL* h_;
};

constexpr int kUploads = 12;

double CpuMs(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

// CPU milliseconds the weed process has used (user + system, from /proc).
double WeedCpuMs(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::istringstream fields(stat.substr(stat.rfind(')') + 2));
  std::string f;
  double utime = 0, stime = 0;
  for (int i = 3; i <= 15 && fields >> f; ++i) {
    if (i == 14) utime = std::stod(f);
    if (i == 15) stime = std::stod(f);
  }
  return (utime + stime) * 1000.0 / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

// Per-iteration CPU of cairn (this process but the benchmark's own thread) and of SeaweedFS. Pinned, it pins
// SeaweedFS's threads again first (those started since).
class CpuMeter {
 public:
  explicit CpuMeter(pid_t weed) : weed_(weed) {
    if (Pinned()) PinWeed(weed);
    process0_ = CpuMs(CLOCK_PROCESS_CPUTIME_ID);
    thread0_ = CpuMs(CLOCK_THREAD_CPUTIME_ID);
    weed0_ = WeedCpuMs(weed);
  }
  void Report(benchmark::State& state) const {
    const auto n = static_cast<double>(state.iterations());
    const double client = CpuMs(CLOCK_THREAD_CPUTIME_ID) - thread0_;
    state.counters["cairn_cpu_ms"] = (CpuMs(CLOCK_PROCESS_CPUTIME_ID) - process0_ - client) / n;
    state.counters["weed_cpu_ms"] = (WeedCpuMs(weed_) - weed0_) / n;
  }

 private:
  pid_t weed_;
  double process0_ = 0, thread0_ = 0, weed0_ = 0;
};

std::vector<xet::EncodedXorb>& UploadXorbs() {
  static std::vector<xet::EncodedXorb> xorbs = [] {
    std::vector<xet::EncodedXorb> v;
    for (int i = 0; i < kUploads; ++i) v.push_back(XorbOf(1 + i, false));
    return v;
  }();
  return xorbs;
}

void BM_S3XorbUploadHttp(benchmark::State& state) {
  auto& f = Fixture::Get();
  auto& xorbs = UploadXorbs();
  const std::string auth = "Authorization: Bearer " +
                           Must(http::MintToken(kJwtKey, {"bench", http::Permission::kWrite}, 1h), "token");
  Curl client;
  size_t next = 0;
  size_t bytes = 0;
  const CpuMeter cpu(f.weed->pid());
  for (auto _ : state) {
    const auto& x = xorbs[next++ % xorbs.size()];
    client.PostXorb(f.url + "/v1/xorbs/default/" + x.hash.hex(), auth, x.bytes);
    bytes += x.bytes.size();
  }
  cpu.Report(state);
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
}
BENCHMARK(BM_S3XorbUploadHttp)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(kUploads);

// What cairn stores for the same xorbs (the body and its footer), PUT straight into the bucket.
void BM_S3PlainPut(benchmark::State& state) {
  auto& f = Fixture::Get();
  std::vector<std::vector<uint8_t>> objects;
  for (const auto& x : UploadXorbs()) {
    objects.emplace_back(x.bytes);
    xet::AppendFooterV1(objects.back(), x.hash, x.layout);
  }
  size_t next = 0;
  size_t bytes = 0;
  const CpuMeter cpu(f.weed->pid());
  for (auto _ : state) {
    const size_t i = next++;
    store::S3Request req;
    req.method = "PUT";
    req.key = "plain/" + std::to_string(::getpid()) + "/" + std::to_string(i);
    req.body = objects[i % objects.size()];
    req.checksum = true;
    auto res = Must(f.store->client().Send(req), "PUT");
    if (res.status != 200) state.SkipWithError("PUT refused");
    bytes += UploadXorbs()[i % objects.size()].bytes.size();  // as the upload counts them
  }
  cpu.Report(state);  // cairn_cpu_ms here: the client's SHA-256 and signing, on another thread of curl's
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
}
BENCHMARK(BM_S3PlainPut)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(kUploads);

// ---- Transfers of a stored incompressible xorb (~64 MiB object).

struct Stored {
  xet::EncodedXorb xorb = XorbOf(99, true);
  uint64_t region = 0;
  Stored() {
    auto& f = Fixture::Get();
    Must(f.service->PutXorb(xorb.hash, xorb.bytes), "store the xorb");
    region = xorb.bytes.size();
  }
  static Stored& Get() {
    static Stored s;
    return s;
  }
};

enum class Path { kProxy, kPresigned, kPlain, kProxyBlocks };

// `range_bytes` ranges at random offsets, `threads` clients at once, each with its own connection.
void Transfer(benchmark::State& state, Path path, uint64_t range_bytes, int threads, int per_thread) {
  auto& f = Fixture::Get();
  auto& s = Stored::Get();
  const uint64_t now = static_cast<uint64_t>(std::time(nullptr));
  std::atomic<uint64_t> bytes{0};
  const CpuMeter cpu(f.weed->pid());  // cairn_cpu_ms here: cairn and the clients' threads
  for (auto _ : state) {
    std::vector<std::thread> clients;
    for (int t = 0; t < threads; ++t) {
      clients.emplace_back([&, t] {
        Curl curl;
        std::mt19937_64 rng(static_cast<uint64_t>(t) * 7919 + 1);
        for (int i = 0; i < per_thread; ++i) {
          const uint64_t start = range_bytes >= s.region ? 0 : rng() % (s.region - range_bytes);
          const uint64_t end = std::min(s.region, start + range_bytes) - 1;
          const std::string range = std::to_string(start) + "-" + std::to_string(end);
          if (path == Path::kPlain) {
            bytes += curl.Get(f.store->client().Url(f.store->KeyOf(store::BlobKind::kXorb, s.xorb.hash)),
                              range, &f.store->client().options());
            continue;
          }
          const std::string url =
              path == Path::kProxy ? f.service->TransferUrl(s.xorb.hash, {{start, end}}, now + 3600)
              : path == Path::kProxyBlocks
                  ? f.blocks_service->TransferUrl(s.xorb.hash, {{start, end}}, now + 3600)
                  : f.store->PresignedUrl(store::BlobKind::kXorb, s.xorb.hash, now, now + 3600, range);
          bytes += curl.Get(url, range);
        }
      });
    }
    for (auto& c : clients) c.join();
  }
  cpu.Report(state);
  state.counters["requests"] = static_cast<double>(threads * per_thread);
  state.SetBytesProcessed(static_cast<int64_t>(bytes.load()));
}

void BM_S3Transfer64MiB(benchmark::State& state) {
  Transfer(state, static_cast<Path>(state.range(0)), 64ULL << 20, 1, 4);
}
BENCHMARK(BM_S3Transfer64MiB)
    ->ArgName("path")  // 0 proxy, 1 presigned, 2 plain, 3 proxy reading 4 MiB blocks (before streaming)
    ->DenseRange(0, 3)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(3);

void BM_S3Transfer64KiB(benchmark::State& state) {
  Transfer(state, static_cast<Path>(state.range(0)), 64 << 10, 8, 64);
}
BENCHMARK(BM_S3Transfer64KiB)
    ->ArgName("path")
    ->DenseRange(0, 3)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(3);

}  // namespace
}  // namespace cairn::api
