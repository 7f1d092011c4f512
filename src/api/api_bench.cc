// The 64 MiB xorb upload (anchors.md §1.2: 1,024 text-like 64 KiB chunks, LZ4-compressed as hf_xet does) over
// HTTP on loopback into a real server on disk, and in the same run its parts alone: the HTTP transfer into
// memory, the validation (the caller and one pool worker, as `cairn serve` on 2 cores) and the durable write
// (temp file, fsync, rename, directory fsync). The upload should cost little more than the largest part.
// Data goes to $CAIRN_BENCH_DIR, else the current directory (run from a disk-backed directory: tmpfs would
// hide the fsync cost).
//
// CAIRN_BENCH_SERVER_CPUS and CAIRN_BENCH_CLIENT_CPUS (CPU lists such as "1" or "2-3") pin the server's
// threads (and the parts measured alone) and the client's thread to different CPUs, so that the upload's
// figure is the server's rather than a share of cores it splits with the client.
#include <benchmark/benchmark.h>
#include <sched.h>
#include <unistd.h>

#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <string_view>

#include "api/cas_routes.h"
#include "http/test_util.h"
#include "index/open_index.h"
#include "store/local_disk_store.h"
#include "xet/test_support.h"
#include "xet/xorb.h"

namespace cairn::api {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

// Pins the calling thread (and the threads it starts afterwards) to the CPUs listed in environment variable
// `var` ("1", "0,2", "2-3"); does nothing when it is unset.
void PinTo(const char* var) {
  const char* list = std::getenv(var);  // NOLINT(concurrency-mt-unsafe): read on the benchmark thread
  if (list == nullptr || *list == 0) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  std::string_view rest(list);
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    const size_t dash = item.find('-');
    const int lo = std::stoi(std::string(item.substr(0, dash)));
    const int hi = dash == std::string_view::npos ? lo : std::stoi(std::string(item.substr(dash + 1)));
    for (int cpu = lo; cpu <= hi; ++cpu) CPU_SET(cpu, &set);
  }
  if (sched_setaffinity(0, sizeof(set), &set) != 0)
    throw std::runtime_error(std::string("cannot pin ") + var);
}

const std::string kJwtKey(64, 'j');

// A seed-shaped xorb; `seed` 1 is the seed fixture itself, others are as large and as compressible.
xet::EncodedXorb SeedShapedXorb(uint64_t seed) {
  constexpr size_t kChunk = 64 << 10;
  const auto data = xet::testing::TextLikeBytes(seed, 1024 * kChunk);
  std::vector<std::span<const uint8_t>> chunks;
  for (size_t i = 0; i < 1024; ++i) chunks.push_back(std::span(data).subspan(i * kChunk, kChunk));
  return xet::EncodeXorb(chunks, xet::CompressionPolicy::kLz4);
}

const xet::EncodedXorb& SeedXorb() {
  static const xet::EncodedXorb x = SeedShapedXorb(1);
  return x;
}

fs::path FreshDir(const std::string& name) {
  const char* env = std::getenv("CAIRN_BENCH_DIR");  // NOLINT(concurrency-mt-unsafe): read before threads
  fs::path dir = fs::path(env ? env : ".") / ("cairn-api-bench-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// The value of a result that must hold one (Result or http::Result); the benchmark cannot go on without.
template <typename R>
auto Must(R r, const char* what) {
  if (!r) throw std::runtime_error(std::string(what) + ": " + r.error().message);
  return std::move(*r);
}

// cairn serve's stack on a fresh data directory, as configured on a 2-core machine.
struct Server {
  fs::path dir = FreshDir("serve");
  std::unique_ptr<store::LocalDiskStore> store = Must(store::LocalDiskStore::Open(dir / "blobs"), "store");
  std::unique_ptr<index::Index> index;
  WorkerPool pool{1};
  std::unique_ptr<cas::CasService> service;
  std::unique_ptr<http::Server> server;

  Server() {
    index = Must(index::OpenIndex("sqlite:" + (dir / "index.db").string()), "index");
    service = std::make_unique<cas::CasService>(*index, *store, pool, cas::ServiceOptions{});
    http::ServerOptions o;
    o.host = "127.0.0.1";
    o.port = 0;
    o.io_threads = 2;
    o.worker_threads = 2;
    server = std::make_unique<http::Server>(o, std::make_shared<http::Authenticator>(kJwtKey));
    if (!server->Listen().ok()) throw std::runtime_error("listen");
    RegisterCasRoutes(*server, *service);
    server->Start();
  }
  ~Server() {
    server->Stop(2s);
    server->Wait();
    server.reset();
    service.reset();
    index.reset();
    store.reset();
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;
};

// Receives a body in place into a pooled buffer, as the xorb route does, and answers 200: the HTTP transfer
// alone, for comparison.
class DiscardSink final : public http::BodySink {
 public:
  explicit DiscardSink(BufferPool& pool) : buf_(pool.Take()) {
    if (buf_ == nullptr) throw std::runtime_error("no buffer");
  }
  std::span<uint8_t> ReceiveBuffer() override { return buf_->bytes().subspan(size_); }
  void OnData(std::span<const uint8_t> data, Next next) override {
    size_ += data.size();
    next(http::Ok{});
  }
  void OnEnd(std::shared_ptr<http::Exchange> ex) override {
    ex->Respond(http::Response::Json(200, R"({"was_inserted":true})"));
  }

 private:
  std::unique_ptr<BufferPool::Buffer> buf_;
  size_t size_ = 0;
};

// One running server (steady state: its index connections and threads warm) receiving distinct new xorbs, one
// request at a time on one keep-alive connection, at `path` + the xorb's hash. Counter after_send_ms: from
// the client's last body byte handed to the socket to the answer, i.e. what the server adds once the body is
// in (the rest of the time is spent moving 35 MB through loopback with client and server sharing the two
// cores).
constexpr int kUploads = 8;

void PostXorbs(benchmark::State& state, const std::string& path) {
  std::vector<xet::EncodedXorb> xorbs;
  for (int i = 0; i < kUploads; ++i) xorbs.push_back(i == 0 ? SeedXorb() : SeedShapedXorb(100 + i));
  const std::string auth =
      "Bearer " + Must(http::MintToken(kJwtKey, {"bench", http::Permission::kWrite}, 1h), "token");
  PinTo("CAIRN_BENCH_SERVER_CPUS");  // the server's threads start here and keep this mask
  Server srv;
  BufferPool buffers(xet::kMaxXorbUploadBytes, cas::ServiceOptions{}.upload_buffers_kept);
  srv.server->router().HandleStream(
      http::Verb::post, "/bench/discard/{hash}",
      http::RouteOptions().Name("discard").Auth(http::Permission::kWrite).MaxBody(xet::kMaxXorbUploadBytes),
      [&buffers](const std::shared_ptr<http::Exchange>&) -> http::Result<std::unique_ptr<http::BodySink>> {
        return std::unique_ptr<http::BodySink>(std::make_unique<DiscardSink>(buffers));
      });
  http::testing::Client client(srv.server->port());
  PinTo("CAIRN_BENCH_CLIENT_CPUS");
  size_t next = 0;
  size_t bytes = 0;
  double after_send_ms = 0;
  // CPU of the whole process minus the client's thread: what the server spent (all its threads).
  const auto cpu_ms = [](clockid_t clock) {
    timespec ts{};
    clock_gettime(clock, &ts);
    return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
  };
  const double process0 = cpu_ms(CLOCK_PROCESS_CPUTIME_ID);
  const double client0 = cpu_ms(CLOCK_THREAD_CPUTIME_ID);
  for (auto _ : state) {
    state.PauseTiming();
    const auto& x = xorbs[next++ % xorbs.size()];
    const std::string body(x.bytes.begin(), x.bytes.end());
    std::string head = "POST " + path;
    head += x.hash.hex() + " HTTP/1.1\r\nHost: bench\r\nAuthorization: " + auth;
    head += "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n";
    state.ResumeTiming();
    client.WriteRaw(head);
    client.WriteRaw(body);
    const auto sent = std::chrono::steady_clock::now();
    auto res = client.Read();
    after_send_ms +=
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - sent).count();
    if (res.result_int() != 200 || res.body() != R"({"was_inserted":true})")
      state.SkipWithError(("upload answered " + res.body()).c_str());
    bytes += x.bytes.size();
  }
  const double server_cpu =
      (cpu_ms(CLOCK_PROCESS_CPUTIME_ID) - process0) - (cpu_ms(CLOCK_THREAD_CPUTIME_ID) - client0);
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
  state.counters["after_send_ms"] = after_send_ms / static_cast<double>(state.iterations());
  state.counters["server_cpu_ms"] = server_cpu / static_cast<double>(state.iterations());
}

void BM_XorbUploadHttp(benchmark::State& state) {
  PostXorbs(state, "/v1/xorbs/default/");
}
BENCHMARK(BM_XorbUploadHttp)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(kUploads);

// The same requests into memory, nothing validated or written.
void BM_XorbReceiveAlone(benchmark::State& state) {
  PostXorbs(state, "/bench/discard/");
}
BENCHMARK(BM_XorbReceiveAlone)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(kUploads);

void BM_XorbValidateAlone(benchmark::State& state) {
  const auto& x = SeedXorb();
  PinTo("CAIRN_BENCH_SERVER_CPUS");
  WorkerPool pool(1);
  const xet::ParallelFor parallel = [&pool](size_t n, const std::function<void(size_t)>& task) {
    pool.ParallelFor(n, task);
  };
  xet::ValidateOptions vo;
  vo.expected_hash = &x.hash;
  vo.parallel = &parallel;
  for (auto _ : state) {
    auto v = xet::ValidateXorb(x.bytes, vo);
    if (!v) state.SkipWithError("invalid");
    benchmark::DoNotOptimize(v);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * x.bytes.size()));
}
BENCHMARK(BM_XorbValidateAlone)->Unit(benchmark::kMillisecond)->UseRealTime();

// `fresh_pages`: the xorbs of one run stay on disk, as the server's do, so every write fills page-cache pages
// not used just before; otherwise each write's directory is removed and the next write reuses its pages. In a
// virtual machine that returns free memory to its host (free page reporting), the first touch of a page is a
// host fault: the difference between the two is that cost, which the server's uploads pay.
void DurableWrites(benchmark::State& state, bool fresh_pages) {
  std::vector<xet::EncodedXorb> xorbs;
  for (int i = 0; i < kUploads; ++i) xorbs.push_back(i == 0 ? SeedXorb() : SeedShapedXorb(200 + i));
  std::vector<std::vector<uint8_t>> footers(xorbs.size());
  for (size_t i = 0; i < xorbs.size(); ++i) xet::AppendFooterV1(footers[i], xorbs[i].hash, xorbs[i].layout);
  PinTo("CAIRN_BENCH_SERVER_CPUS");
  const fs::path kept = FreshDir("write-kept");
  auto kept_store = Must(store::LocalDiskStore::Open(kept), "store");
  size_t next = 0;
  for (auto _ : state) {
    state.PauseTiming();
    const size_t i = next++ % xorbs.size();
    const fs::path dir = FreshDir("write");
    auto own_store = fresh_pages ? nullptr : Must(store::LocalDiskStore::Open(dir), "store");
    store::LocalDiskStore& store = fresh_pages ? *kept_store : *own_store;
    state.ResumeTiming();
    auto w = Must(store.BeginPut(store::BlobKind::kXorb, xorbs[i].hash), "begin");
    if (!w->Append(xorbs[i].bytes) || !w->Append(footers[i]) || !w->Commit({})) {
      state.SkipWithError("write failed");
    }
    state.PauseTiming();
    w.reset();
    own_store.reset();
    fs::remove_all(dir);
    state.ResumeTiming();
  }
  kept_store.reset();
  fs::remove_all(kept);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * xorbs[0].bytes.size()));
}

void BM_XorbDurableWriteAlone(benchmark::State& state) {
  DurableWrites(state, false);
}
BENCHMARK(BM_XorbDurableWriteAlone)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_XorbDurableWriteFreshPages(benchmark::State& state) {
  DurableWrites(state, true);
}
BENCHMARK(BM_XorbDurableWriteFreshPages)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(kUploads);

}  // namespace
}  // namespace cairn::api
