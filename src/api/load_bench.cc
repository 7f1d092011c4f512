// Reconstruction under load, over HTTP, on a large index (issue 9's last benchmark). Two steps, driven by
// scripts/bench_load.py (`make bench-load`):
//
//   load_bench generate --index URL --files N --xorbs N [--terms 200] [--threads 32]
//     fills an index through the Index interface (the server's own write path, group commit included) with
//     N xorbs of 64 chunks (81,920 bytes each unpacked: 5 MiB per xorb) and N files of `terms` terms, each
//     term a whole xorb (200 terms: 1,000 MiB per file), all visible to scope "bench". File i's terms name
//     xorbs i*terms .. i*terms+terms-1 (mod N), so every xorb is shared by `terms` files, as dedup makes
//     them.
//
//   load_bench run --url http://HOST:PORT --token T --files N [--terms 200] [--rate 1000] [--seconds 60]
//                  [--connections 16] [--v1]
//     sends GET /v2/reconstructions/{file} for random files with a random Range, open loop: request k is due
//     at start + k/rate whatever happened before, and its latency counts from that moment (a slow answer
//     delays the ones queued behind it, and they count it). Prints one JSON line: requests, errors, achieved
//     rate, latency percentiles (ms) overall and p99 per 10 s, mean answer size.
//
// Hashes are derived from the numbers (splitmix64), so `run` knows every file without reading the index.
#include <algorithm>
#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iomanip>
#include <iostream>
#include <map>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "index/open_index.h"
#include "index/records.h"
#include "xet/verify.h"

namespace cairn::bench {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using Clock = std::chrono::steady_clock;

constexpr uint32_t kChunksPerXorb = 64;
constexpr uint32_t kChunkBytes = 81'920;
constexpr uint32_t kChunkStored = 40'000;  // compressed size in the xorb (only offsets matter here)

uint64_t SplitMix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// A distinct hash per (kind, n).
xet::Hash HashOf(uint64_t kind, uint64_t n) {
  xet::Hash h;
  for (uint64_t w = 0; w < 4; ++w) {
    const uint64_t v = SplitMix((kind << 56) ^ (n << 2) ^ w);
    std::memcpy(h.bytes.data() + 8 * w, &v, 8);
  }
  return h;
}
xet::Hash FileHash(uint64_t i) {
  return HashOf(1, i);
}
xet::Hash XorbHash(uint64_t x) {
  return HashOf(2, x);
}

struct Args {
  std::map<std::string, std::string> kv;
  bool Has(const std::string& k) const { return kv.contains(k); }
  std::string Str(const std::string& k, const std::string& def = "") const {
    auto it = kv.find(k);
    return it == kv.end() ? def : it->second;
  }
  uint64_t Num(const std::string& k, uint64_t def) const {
    auto it = kv.find(k);
    return it == kv.end() ? def : std::stoull(it->second);
  }
};

Args Parse(int argc, char** argv) {
  Args a;
  for (int i = 2; i < argc; ++i) {
    std::string k = argv[i];
    if (!k.starts_with("--")) continue;
    k.erase(0, 2);
    if (i + 1 < argc && !std::string_view(argv[i + 1]).starts_with("--")) {
      a.kv[k] = argv[++i];
    } else {
      a.kv[k] = "1";
    }
  }
  return a;
}

// Runs `work(i)` for i in [0, n) on `threads` threads, printing progress every few seconds; false when a
// call failed.
bool ParallelFor(const char* what, uint64_t n, size_t threads, const std::function<bool(uint64_t)>& work) {
  std::atomic<uint64_t> next{0};
  std::atomic<uint64_t> done{0};
  std::atomic<bool> failed{false};
  const auto start = Clock::now();
  std::vector<std::thread> pool;
  for (size_t t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      for (uint64_t i = next++; i < n && !failed; i = next++) {
        if (!work(i)) failed = true;
        ++done;
      }
    });
  }
  std::thread reporter([&] {
    auto report_at = start + std::chrono::seconds(5);
    while (done < n && !failed) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      if (Clock::now() < report_at) continue;
      report_at += std::chrono::seconds(5);
      const double s = std::chrono::duration<double>(Clock::now() - start).count();
      std::cerr << what << ": " << done.load() << " / " << n << " ("
                << static_cast<uint64_t>(static_cast<double>(done.load()) / s) << "/s)" << std::endl;
    }
  });
  for (auto& t : pool) t.join();
  reporter.join();
  if (failed) std::cerr << what << " failed" << std::endl;
  return !failed;
}

int Generate(const Args& a) {
  const uint64_t files = a.Num("files", 1'000'000);
  const uint64_t xorbs = a.Num("xorbs", 1'000'000);
  const uint64_t terms = a.Num("terms", 200);
  const size_t threads = a.Num("threads", 32);
  auto index = index::OpenIndex(a.Str("index"));
  if (!index) {
    std::cerr << "open: " << index.error().message << std::endl;
    return 1;
  }
  const auto layout_of = [](uint64_t x) {
    xet::XorbLayout layout;
    layout.chunks.reserve(kChunksPerXorb);
    for (uint32_t c = 0; c < kChunksPerXorb; ++c) {
      layout.chunks.push_back({HashOf(3, x * kChunksPerXorb + c), kChunkBytes, (c + 1) * kChunkStored});
    }
    return layout;
  };
  // Every xorb has the same chunk sizes: one layout gives every term's byte range, which the service records
  // with each file (reconstructions read no layout for terms they do not cut).
  const xet::XorbLayout sizes = layout_of(0);
  const xet::LayoutLookup same_sizes = [&sizes](const xet::XorbHash&) { return &sizes; };
  const auto t0 = Clock::now();
  const bool xorbs_ok = ParallelFor("xorbs", xorbs, threads, [&](uint64_t x) {
    auto r = (*index)->PutXorb(XorbHash(x), layout_of(x));
    if (!r) std::cerr << "xorb " << x << ": " << r.error().message << std::endl;
    return r.ok();
  });
  const auto t1 = Clock::now();
  constexpr uint64_t kFilesPerShard = 50;
  const uint64_t shards = (files + kFilesPerShard - 1) / kFilesPerShard;
  if (!xorbs_ok) return 1;
  const bool files_ok = ParallelFor("shards of 50 files", shards, threads, [&](uint64_t s) {
    index::ShardCommit commit;
    commit.shard = HashOf(4, s);
    commit.shard_size = 1;
    commit.scope = "bench";
    for (uint64_t i = s * kFilesPerShard; i < std::min(files, (s + 1) * kFilesPerShard); ++i) {
      xet::FileRecord rec;
      rec.hash = FileHash(i);
      for (uint64_t j = 0; j < terms; ++j) {
        rec.terms.push_back({.xorb = XorbHash((i * terms + j) % xorbs),
                             .xorb_flags = 0,
                             .unpacked_bytes = kChunksPerXorb * kChunkBytes,
                             .chunk_start = 0,
                             .chunk_end = kChunksPerXorb});
      }
      auto made = index::MakeFileCommit(rec, same_sizes);
      if (!made) {
        std::cerr << "file " << i << ": " << made.error().message << std::endl;
        return false;
      }
      commit.files.push_back(std::move(*made));
    }
    auto r = (*index)->CommitShard(commit);
    if (!r) std::cerr << "shard " << s << ": " << r.error().message << std::endl;
    return r.ok();
  });
  if (!files_ok) return 1;
  const auto t2 = Clock::now();
  std::printf("{\"xorbs\":%llu,\"files\":%llu,\"terms\":%llu,\"xorb_seconds\":%.1f,\"file_seconds\":%.1f}\n",
              static_cast<unsigned long long>(xorbs), static_cast<unsigned long long>(files),
              static_cast<unsigned long long>(terms), std::chrono::duration<double>(t1 - t0).count(),
              std::chrono::duration<double>(t2 - t1).count());
  return 0;
}

int Run(const Args& a) {
  const std::string url = a.Str("url", "http://127.0.0.1:8080");
  const std::string host = url.substr(url.find("://") + 3, url.rfind(':') - url.find("://") - 3);
  const auto port = static_cast<uint16_t>(std::stoul(url.substr(url.rfind(':') + 1)));
  const std::string auth = "Bearer " + a.Str("token");
  const uint64_t files = a.Num("files", 1'000'000);
  const uint64_t terms = a.Num("terms", 200);
  const double rate = static_cast<double>(a.Num("rate", 1000));
  const uint64_t seconds = a.Num("seconds", 60);
  const size_t connections = a.Num("connections", 16);
  const char* route = a.Has("v1") ? "/v1/reconstructions/" : "/v2/reconstructions/";
  const uint64_t file_size = terms * kChunksPerXorb * kChunkBytes;
  const auto total = static_cast<uint64_t>(rate * static_cast<double>(seconds));

  std::vector<double> latencies(total, -1.0);
  std::atomic<uint64_t> next{0};
  std::atomic<uint64_t> errors{0};
  std::atomic<uint64_t> body_bytes{0};
  std::mutex err_mu;
  std::string first_error;
  const auto start = Clock::now() + std::chrono::milliseconds(200);
  std::vector<std::thread> threads;
  for (size_t c = 0; c < connections; ++c) {
    threads.emplace_back([&, c] {
      std::mt19937_64 rng(1000 + c);
      net::io_context ioc;
      beast::tcp_stream stream(ioc);
      beast::flat_buffer buffer;
      bool connected = false;
      for (uint64_t k = next++; k < total; k = next++) {
        const auto due =
            start + std::chrono::nanoseconds(static_cast<int64_t>(1e9 * static_cast<double>(k) / rate));
        std::this_thread::sleep_until(due);
        const uint64_t file = rng() % files;
        const uint64_t first = rng() % file_size;
        const uint64_t last = first + rng() % (file_size - first);
        bhttp::request<bhttp::empty_body> req{bhttp::verb::get, route + FileHash(file).hex(), 11};
        req.set(bhttp::field::host, host);
        req.set(bhttp::field::authorization, auth);
        req.set(bhttp::field::range, "bytes=" + std::to_string(first) + "-" + std::to_string(last));
        bhttp::response<bhttp::string_body> res;
        beast::error_code ec;
        for (int attempt = 0; attempt < 2; ++attempt) {
          if (!connected) {
            stream.connect(net::ip::tcp::endpoint(net::ip::make_address(host), port), ec);
            connected = !ec;
          }
          if (connected) bhttp::write(stream, req, ec);
          if (connected && !ec) bhttp::read(stream, buffer, res, ec);
          if (!ec) break;
          stream.close();
          connected = false;  // the server closed a kept-alive connection: once more on a new one
        }
        latencies[k] = std::chrono::duration<double, std::milli>(Clock::now() - due).count();
        if (ec || res.result_int() != 200) {
          ++errors;
          std::lock_guard lock(err_mu);
          if (first_error.empty()) {
            first_error =
                ec ? ec.message() : std::to_string(res.result_int()) + " " + res.body().substr(0, 200);
          }
        } else {
          body_bytes += res.body().size();
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  const auto pct = [](const std::vector<double>& sorted, double p) {
    return sorted.empty() ? 0.0
                          : sorted[std::min(sorted.size() - 1,
                                            static_cast<size_t>(p * static_cast<double>(sorted.size())))];
  };
  // p99 of each 10 s of due times: whether the slow answers come together (a stall) or spread out (queueing).
  std::string windows;
  const auto per_window = static_cast<size_t>(rate * 10);
  for (size_t first = 0; first < latencies.size(); first += per_window) {
    std::vector<double> w(
        latencies.begin() + static_cast<std::ptrdiff_t>(first),
        latencies.begin() + static_cast<std::ptrdiff_t>(std::min(latencies.size(), first + per_window)));
    std::sort(w.begin(), w.end());
    std::ostringstream v;
    v << (windows.empty() ? "" : ",") << std::fixed << std::setprecision(2) << pct(w, 0.99);
    windows += v.str();
  }
  std::sort(latencies.begin(), latencies.end());
  std::printf(
      "{\"requests\":%llu,\"errors\":%llu,\"rate\":%.1f,\"p50_ms\":%.2f,\"p90_ms\":%.2f,\"p99_ms\":%.2f,"
      "\"p999_ms\":%.2f,\"max_ms\":%.2f,\"p99_by_10s_ms\":[%s],\"mean_body_bytes\":%.0f,\"first_error\":\"%"
      "s\"}\n",
      static_cast<unsigned long long>(total), static_cast<unsigned long long>(errors.load()),
      static_cast<double>(total) / elapsed, pct(latencies, 0.50), pct(latencies, 0.90), pct(latencies, 0.99),
      pct(latencies, 0.999), latencies.empty() ? 0.0 : latencies.back(), windows.c_str(),
      total > errors ? static_cast<double>(body_bytes.load()) / static_cast<double>(total - errors.load())
                     : 0.0,
      first_error.c_str());
  return errors == 0 ? 0 : 3;
}

}  // namespace
}  // namespace cairn::bench

int main(int argc, char** argv) {
  const std::string cmd = argc > 1 ? argv[1] : "";
  const auto args = cairn::bench::Parse(argc, argv);
  if (cmd == "generate") return cairn::bench::Generate(args);
  if (cmd == "run") return cairn::bench::Run(args);
  std::cerr << "usage: load_bench generate|run [--options] (see the top of load_bench.cc)\n";
  return 2;
}
