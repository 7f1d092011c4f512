// Plain downloads (GET /v1/files) with read-ahead, in the shape of OxiCloud's read-ahead table
// (BENCHMARKS.md states its figures beside these):
//
//   a 192 MiB file of random bytes, as content-defined chunks (the stock client's) and as fixed 128 KiB
//   chunks (the largest a Xet chunk may be; OxiCloud's were 256 KiB), stored on local disk and on S3 (a
//   private SeaweedFS on loopback), read through cairn's HTTP stack by libcurl clients discarding the bytes,
//   with read-ahead depth N = 1, 2, 4, 8, 16; warm (page cache) and cold (page cache dropped before each run:
//   /proc/sys/vm/drop_caches where permitted, else POSIX_FADV_DONTNEED on every stored file); 1 stream, and
//   16 streams each reading a CDC file of its own; unthrottled, and with the store's reads throttled to 300
//   and 100 MB/s by a token bucket (the rate achieved is what the table shows, against the target).
//
// In the same run, the ceilings the targets are relative to: decoding and verifying the stored xorbs from
// memory (one thread), and a plain sequential read of the same stored bytes from a cold cache (4 MiB reads;
// on S3 one streamed GET per xorb); and the HTTP ceiling: the same bytes from memory through the same server
// and clients.
//
//   build/release/src/api/readahead_bench [--reps 3] [--dir /var/tmp/cairn-readahead-bench] [--quick]
//   [--warm]
//                                         [--store all|local|s3] [--client-buffer BYTES]
//
// It stores 17 files of 192 MiB (3.2 GiB) per store, under --dir and SeaweedFS's temporary directory,
// removed at the end. Without a SeaweedFS binary (scripts/seaweedfs.sh), `all` measures local disk alone.
#include <curl/curl.h>
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "api/file_routes.h"
#include "cas/service.h"
#include "common/unique_fd.h"
#include "common/worker_pool.h"
#include "files/file_service.h"
#include "http/server.h"
#include "index/open_index.h"
#include "ingest/upload_builder.h"
#include "store/forwarding_store.h"
#include "store/local_disk_store.h"
#include "store/s3_store.h"
#include "store/seaweedfs_cluster.h"
#include "xet/hashing.h"
#include "xet/test_support.h"
#include "xet/xorb.h"

namespace cairn {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr uint64_t kFileBytes = 192ULL << 20;
constexpr size_t kStreams = 16;
const std::string kJwtKey(64, 'j');
// The clients' receive buffer: libcurl's default (16 KiB) costs a read(2) per 16 KiB, which on 2 cores shared
// with the server measures the client; the curl tool reads 100 KiB at a time, download managers more.
long kClientBuffer = 1L << 20;  // NOLINT: --client-buffer

// Reads of the wrapped store delivered at `rate` bytes/s overall, as by a link of that rate: each read takes
// its slot on one shared timeline when it is asked for, and returns when its last byte is due (or when the
// wrapped store answers, if that is later). The wrapped store's own time is inside the slot, not added to it.
class ThrottledStore final : public store::ForwardingStore {
 public:
  ThrottledStore(store::BlobStore& inner, double rate) : ForwardingStore(inner), rate_(rate) {}
  Status ReadRange(store::BlobKind k, const xet::Hash& h, uint64_t offset, std::span<uint8_t> out) override {
    Clock::time_point due;
    {
      std::lock_guard lock(mu_);
      const auto now = Clock::now();
      if (next_ < now) next_ = now;
      next_ += std::chrono::duration_cast<Clock::duration>(
          std::chrono::duration<double>(static_cast<double>(out.size()) / rate_));
      due = next_;
    }
    auto st = inner_.ReadRange(k, h, offset, out);
    std::this_thread::sleep_until(due);
    return st;
  }
  std::unique_ptr<store::BlobReader> OpenRange(store::BlobKind k, const xet::Hash& h, uint64_t offset,
                                               uint64_t length) override {
    // The base's reader, through ReadRange (throttled), not the wrapped store's own.
    return ReaderThroughReadRange(k, h, offset, length);
  }

 private:
  const double rate_;
  std::mutex mu_;
  Clock::time_point next_{};
};

size_t Discard(char* /*data*/, size_t size, size_t n, void* counter) {
  *static_cast<uint64_t*>(counter) += size * n;
  return size * n;
}

// Downloads `urls` at once (a thread and a connection each); MB/s over all of them.
double Download(const std::vector<std::string>& urls, const std::string& auth) {
  std::vector<uint64_t> got(urls.size());
  std::vector<std::thread> threads;
  const auto start = Clock::now();
  for (size_t i = 0; i < urls.size(); ++i) {
    threads.emplace_back([&, i] {
      CURL* c = curl_easy_init();
      curl_slist* h = curl_slist_append(nullptr, auth.c_str());
      curl_easy_setopt(c, CURLOPT_URL, urls[i].c_str());
      curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
      curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, Discard);
      curl_easy_setopt(c, CURLOPT_WRITEDATA, &got[i]);
      curl_easy_setopt(c, CURLOPT_FAILONERROR, 1L);
      curl_easy_setopt(c, CURLOPT_BUFFERSIZE, kClientBuffer);
      if (curl_easy_perform(c) != CURLE_OK) got[i] = 0;
      curl_slist_free_all(h);
      curl_easy_cleanup(c);
    });
  }
  for (auto& t : threads) t.join();
  const double secs = std::chrono::duration<double>(Clock::now() - start).count();
  uint64_t total = 0;
  for (size_t i = 0; i < urls.size(); ++i) {
    if (got[i] != kFileBytes) {
      throw std::runtime_error("download " + urls[i] + " got " + std::to_string(got[i]) + " bytes");
    }
    total += got[i];
  }
  return static_cast<double>(total) / secs / 1e6;
}

std::vector<fs::path> BlobFiles(const fs::path& root) {
  std::vector<fs::path> out;
  for (const auto& e : fs::recursive_directory_iterator(root))
    if (e.is_regular_file()) out.push_back(e.path());
  return out;
}

// Drops the page cache: the whole of it where permitted (root), else every stored file's pages.
std::string DropCache(const fs::path& blobs) {
  ::sync();
  {
    std::ofstream drop("/proc/sys/vm/drop_caches");
    if (drop << "3" << std::flush) return "drop_caches";
  }
  for (const auto& p : BlobFiles(blobs)) {
    const UniqueFd fd(::open(p.c_str(), O_RDONLY | O_CLOEXEC));
    if (fd.valid()) (void)::posix_fadvise(fd.get(), 0, 0, POSIX_FADV_DONTNEED);
  }
  return "fadvise";
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Stored {
  std::vector<xet::FileHash> files;
  std::vector<xet::XorbHash> xorbs0;  // the first file's xorbs, in order
};

// Uploads `count` files of random bytes, chunked as asked.
Stored Upload(cas::CasService& cas, uint64_t fixed_chunk, uint64_t seed, size_t count) {
  Stored s;
  for (size_t i = 0; i < count; ++i) {
    const auto data = xet::testing::SplitMix64Bytes(seed + i, kFileBytes);
    const std::span<const uint8_t> one(data);
    ingest::BuildOptions o;
    o.fixed_chunk_bytes = fixed_chunk;
    auto up = ingest::BuildUpload(std::span(&one, 1), o);
    for (const auto& x : up.xorbs) {
      if (auto st = cas.PutXorb(x.hash, x.body); !st) throw std::runtime_error(st.error().message);
      if (i == 0) s.xorbs0.push_back(x.hash);
    }
    if (auto st = cas.PutShard(up.shard_bytes, "bench"); !st) throw std::runtime_error(st.error().message);
    s.files.push_back(up.file_hashes[0]);
  }
  return s;
}

// The ceilings: decode and verify the first file's stored xorbs from memory (one thread), and read their
// stored bytes in order from a cold cache (4 MiB reads of one streamed read per xorb: one ranged GET on S3).
std::pair<double, double> Ceilings(store::BlobStore& st, const fs::path& cold_dir, const Stored& s,
                                   int reps) {
  std::vector<std::vector<uint8_t>> stored;
  uint64_t stored_bytes = 0;
  for (const auto& x : s.xorbs0) {
    auto stat = st.Stat(store::BlobKind::kXorb, x);
    if (!stat) throw std::runtime_error(stat.error().message);
    stored.emplace_back(stat->size);
    if (auto r = st.ReadRange(store::BlobKind::kXorb, x, 0, stored.back()); !r)
      throw std::runtime_error(r.error().message);
    stored_bytes += stat->size;
  }
  std::vector<double> decode;
  std::vector<double> cold;
  xet::ChunkDecoder decoder;
  std::vector<uint8_t> out(xet::kMaxChunkUnpacked);
  std::vector<uint8_t> buf(4 << 20);
  for (int r = 0; r < reps; ++r) {
    const auto start = Clock::now();
    uint64_t unpacked = 0;
    for (const auto& b : stored) {
      // Chunks up to the footer (whose first bytes are no chunk header).
      size_t at = 0;
      while (at < b.size()) {
        auto chunk = xet::StoredChunk::Parse(std::span(b).subspan(at));
        if (!chunk) break;
        const xet::ChunkHeader& h = chunk->header;
        std::span<const uint8_t> bytes = chunk->payload;
        if (h.scheme != xet::CompressionScheme::kNone) {
          (void)decoder.Decode(h, chunk->payload, {out.data(), h.uncompressed_length});
          bytes = {out.data(), h.uncompressed_length};
        }
        volatile auto hash = xet::ChunkHashOf(bytes).bytes[0];
        (void)hash;
        unpacked += bytes.size();
        at += chunk->stored_size();
      }
    }
    decode.push_back(static_cast<double>(unpacked) /
                     std::chrono::duration<double>(Clock::now() - start).count() / 1e6);
    DropCache(cold_dir);
    const auto cstart = Clock::now();
    for (size_t i = 0; i < s.xorbs0.size(); ++i) {
      auto reader = st.OpenRange(store::BlobKind::kXorb, s.xorbs0[i], 0, stored[i].size());
      for (uint64_t left = stored[i].size(); left > 0;) {
        const size_t n = static_cast<size_t>(std::min<uint64_t>(left, buf.size()));
        if (auto rd = reader->Read({buf.data(), n}); !rd) throw std::runtime_error(rd.error().message);
        left -= n;
      }
    }
    cold.push_back(static_cast<double>(stored_bytes) /
                   std::chrono::duration<double>(Clock::now() - cstart).count() / 1e6);
  }
  return {Median(decode), Median(cold)};
}

// 192 MiB from memory through the same HTTP stack and clients (the body read in blocks, as a file's is): what
// the server and the loopback connection carry on this machine, with no store read, decode or hash.
class MemorySource final : public http::ByteSource {
 public:
  explicit MemorySource(const std::vector<uint8_t>& bytes) : bytes_(bytes) {}
  http::Status ReadAt(uint64_t offset, std::span<uint8_t> out) const override {
    std::memcpy(out.data(), bytes_.data() + offset, out.size());
    return http::Ok{};
  }

 private:
  const std::vector<uint8_t>& bytes_;
};

struct Served {
  std::unique_ptr<http::Server> server;
  std::string base;
};

Served Serve(const std::function<void(http::Server&)>& routes) {
  http::ServerOptions ho;
  ho.port = 0;
  Served s{std::make_unique<http::Server>(ho, std::make_shared<http::Authenticator>(kJwtKey)), ""};
  if (!s.server->Listen()) throw std::runtime_error("listen");
  routes(*s.server);
  s.server->Start();
  s.base = "http://127.0.0.1:" + std::to_string(s.server->port());
  return s;
}

void Stop(Served& s) {
  s.server->Stop(std::chrono::seconds(5));
  s.server->Wait();
}

// The HTTP ceiling: 1 and 16 streams of 192 MiB from memory.
std::pair<double, double> HttpCeiling(const std::string& auth, int reps) {
  const auto bytes = xet::testing::SplitMix64Bytes(1, kFileBytes);
  auto source = std::make_shared<MemorySource>(bytes);
  Served s = Serve([&](http::Server& server) {
    server.router().Handle(http::Verb::get, "/memory", http::RouteOptions().Name("memory"),
                           [source](const std::shared_ptr<http::Exchange>& ex) {
                             http::Response r;
                             r.body.emplace_back(http::SourceSegment{source, 0, kFileBytes, nullptr});
                             ex->Respond(std::move(r));
                           });
  });
  std::vector<double> one;
  for (int r = 0; r < reps; ++r) one.push_back(Download({s.base + "/memory"}, auth));
  const double many = Download(std::vector<std::string>(kStreams, s.base + "/memory"), auth);
  Stop(s);
  return {Median(one), many};
}

// One store's rows of the table.
struct Backend {
  std::string label;  // the table's "store" column
  store::BlobStore* store = nullptr;
  index::Index* index = nullptr;
  fs::path cold_dir;  // where its bytes live on this machine (the page cache fallback drops these)
  size_t fetch_threads = 4;
};

int Main(int argc, char** argv) {
  int reps = 3;
  fs::path dir = "/var/tmp/cairn-readahead-bench";
  bool quick = false;
  bool warm_only = false;  // to profile the warm path
  std::string which = "all";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--reps" && i + 1 < argc)
      reps = std::stoi(argv[++i]);
    else if (a == "--dir" && i + 1 < argc)
      dir = argv[++i];
    else if (a == "--quick")
      quick = true;
    else if (a == "--warm")
      warm_only = true;
    else if (a == "--store" && i + 1 < argc)
      which = argv[++i];
    else if (a == "--client-buffer" && i + 1 < argc)
      kClientBuffer = std::stol(argv[++i]);
  }
  if (which != "all" && which != "local" && which != "s3") {
    std::cerr << "usage: readahead_bench [--reps N] [--dir DIR] [--quick] [--store all|local|s3]\n";
    return 2;
  }
  (void)std::signal(SIGPIPE, SIG_IGN);
  spdlog::set_level(spdlog::level::warn);
  curl_global_init(CURL_GLOBAL_DEFAULT);
  fs::remove_all(dir);
  fs::create_directories(dir);
  auto token = http::MintToken(kJwtKey, {"bench", http::Permission::kRead}, std::chrono::hours(1));
  const std::string auth = "Authorization: Bearer " + *token;
  WorkerPool pool(1);
  cas::ServiceOptions so;
  so.url_keys = cas::UrlKeys::Single([] {
    xet::Hash h;
    h.bytes.fill(7);
    return h;
  }());

  // The stores: local disk, and S3 on a private SeaweedFS (when its binary is there, or asked for).
  std::vector<Backend> backends;
  std::unique_ptr<store::LocalDiskStore> disk;
  std::unique_ptr<index::Index> disk_index;
  std::unique_ptr<store::testing::SeaweedCluster> weed;
  std::unique_ptr<store::S3Store> s3;
  std::unique_ptr<index::Index> s3_index;
  const auto open_index = [&](const std::string& name) {
    auto ix = index::OpenIndex("sqlite:" + (dir / name).string());
    if (!ix) throw std::runtime_error(ix.error().message);
    return std::move(*ix);
  };
  if (which != "s3") {
    auto d = store::LocalDiskStore::Open(dir / "blobs");
    if (!d) throw std::runtime_error(d.error().message);
    disk = std::move(*d);
    disk_index = open_index("index.db");
    backends.push_back({"local disk", disk.get(), disk_index.get(), dir / "blobs", 4});
  }
  if (which != "local") {
    auto w = store::testing::SeaweedCluster::Start("readahead-bench");
    if (!w && which == "s3") throw std::runtime_error(w.error().message);
    if (!w) {
      std::cerr << "no S3 rows: " << w.error().message << "\n";
    } else {
      weed = std::move(*w);
      if (auto st = weed->CreateBucket("bench"); !st) throw std::runtime_error(st.error().message);
      store::S3StoreOptions s3o;
      s3o.s3 = weed->Options("bench");
      auto opened = store::S3Store::Open(s3o);
      if (!opened) throw std::runtime_error(opened.error().message);
      s3 = std::move(*opened);
      s3_index = open_index("index-s3.db");
      backends.push_back({"S3 (SeaweedFS)", s3.get(), s3_index.get(), weed->directory(), 32});
    }
  }

  const auto [http_one, http_many] = HttpCeiling(auth, reps);
  std::vector<std::string> notes;
  notes.push_back("HTTP ceiling (192 MiB from memory through the same server and clients): " +
                  std::to_string(std::llround(http_one)) + " MB/s for 1 stream, " +
                  std::to_string(std::llround(http_many)) + " MB/s for 16");
  std::cout << "| chunks | cache | store | streams | N=1 | N=2 | N=4 | N=8 | N=16 |\n"
            << "|---|---|---|--:|--:|--:|--:|--:|--:|" << std::endl;
  std::string cold_how;
  for (const Backend& b : backends) {
    cas::CasService uploader(*b.index, *b.store, pool, so);
    std::cerr << b.label << ": uploading " << kStreams + 1 << " files of 192 MiB...\n";
    const Stored cdc = Upload(uploader, 0, 100, kStreams);
    const Stored fixed = Upload(uploader, 128 << 10, 100, 1);  // the first file's bytes, chunked at 128 KiB
    for (const auto& [label, stored] :
         {std::pair<const char*, const Stored*>{"CDC", &cdc}, {"fixed 128 KiB", &fixed}}) {
      const auto [decode, seq_cold] = Ceilings(*b.store, b.cold_dir, *stored, reps);
      notes.push_back(b.label + ", " + label + ": in-memory decode-and-verify ceiling " +
                      std::to_string(std::llround(decode)) +
                      " MB/s (one thread); cold sequential read of the stored bytes " +
                      std::to_string(std::llround(seq_cold)) + " MB/s");
      for (const double throttle : {0.0, 300e6, 100e6}) {
        for (const bool cold : {false, true}) {
          for (const size_t streams : {size_t{1}, kStreams}) {
            if ((throttle > 0 || stored->files.size() < streams) && streams > 1) continue;
            if (quick && (streams > 1 || throttle > 0)) continue;
            if (warm_only && cold) continue;
            std::string row =
                std::string("| ") + label + " | " + (cold ? "cold" : "warm") + " | " + b.label +
                (throttle > 0 ? ", throttled " + std::to_string(std::llround(throttle / 1e6)) + " MB/s"
                              : std::string()) +
                " | " + std::to_string(streams) + " |";
            for (const size_t depth : {1, 2, 4, 8, 16}) {
              std::unique_ptr<ThrottledStore> throttled;
              store::BlobStore* st = b.store;
              if (throttle > 0) {
                throttled = std::make_unique<ThrottledStore>(*b.store, throttle);
                st = throttled.get();
              }
              cas::CasService cas(*b.index, *st, pool, so);
              files::FileServiceOptions fo;
              fo.read_ahead.depth = depth;
              fo.fetch_threads = b.fetch_threads;
              files::FileService files(cas, *b.index, fo);
              Served s =
                  Serve([&](http::Server& server) { api::RegisterFileRoutes(server, files, *b.index, {}); });
              std::vector<std::string> urls;
              for (size_t i = 0; i < streams; ++i)
                urls.push_back(s.base + "/v1/files/" + stored->files[i].hex());
              std::vector<double> rates;
              for (int r = 0; r < (streams > 1 || throttle > 0 ? 1 : reps); ++r) {
                if (cold) cold_how = DropCache(b.cold_dir);
                rates.push_back(Download(urls, auth));
              }
              row += " " + std::to_string(std::llround(Median(rates))) + " |";
              Stop(s);
            }
            std::cout << row << std::endl;
          }
        }
      }
    }
  }
  std::cout << "\nCold runs dropped the cache with " << cold_how << ". Medians of " << reps
            << " runs (1 run for 16 streams and throttled rows). Fetch threads: 4 on local disk, 32 on S3.\n";
  for (const auto& n : notes) std::cout << n << "\n";
  fs::remove_all(dir);
  return 0;
}

}  // namespace
}  // namespace cairn

int main(int argc, char** argv) {
  try {
    return cairn::Main(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "readahead_bench: " << e.what() << "\n";
    return 1;
  }
}
