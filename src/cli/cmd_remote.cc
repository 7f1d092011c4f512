// The client commands, against a running server: `cairn get`, `cairn put`, `cairn ls`, `cairn rm`,
// `cairn stat`.
//
// Exit codes a script can act on: 0 done; 1 the server failed or could not be reached (and every failure of
// `cairn rm`); 2 bad usage; 3 no such file (or not visible to the token); 4 the bytes did not verify; 5 the
// output could not be written.
#include <unistd.h>

#include <boost/json.hpp>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <string_view>

#include "cli/commands.h"
#include "client/downloader.h"
#include "client/uploader.h"
#include "net/http_client.h"

namespace cairn::cli {
namespace {

namespace json = boost::json;

// --endpoint / --token, else CAIRN_ENDPOINT / CAIRN_TOKEN.
bool ResolveRemote(RemoteOptions& r, const char* command) {
  // NOLINTBEGIN(concurrency-mt-unsafe): read once at start, before any thread exists
  if (r.endpoint.empty())
    if (const char* e = std::getenv("CAIRN_ENDPOINT")) r.endpoint = e;
  if (r.token.empty())
    if (const char* t = std::getenv("CAIRN_TOKEN")) r.token = t;
  // NOLINTEND(concurrency-mt-unsafe)
  while (!r.endpoint.empty() && r.endpoint.back() == '/') r.endpoint.pop_back();
  if (r.endpoint.empty()) {
    std::cerr << "cairn " << command << ": no server: give --endpoint URL or set CAIRN_ENDPOINT\n";
    return false;
  }
  return true;
}

net::RetryPolicy Policy(const RemoteOptions& r) {
  net::RetryPolicy p;
  p.attempts = r.attempts;
  return p;
}

int ExitCode(const Error& e) {
  switch (e.code) {
    case ErrorCode::kNotFound:
      return 3;
    case ErrorCode::kHashMismatch:
    case ErrorCode::kDamaged:
      return 4;
    case ErrorCode::kIo:
      return 5;
    case ErrorCode::kLimit:
    case ErrorCode::kMalformed:
    case ErrorCode::kInconsistent:
    case ErrorCode::kUnavailable:
    case ErrorCode::kConflict:
    case ErrorCode::kStale:
    case ErrorCode::kUnknownReference:
    case ErrorCode::kUnauthorized:
    case ErrorCode::kDenied:
    case ErrorCode::kQuota:
    case ErrorCode::kUnsatisfiable:
      return 1;
  }
  return 1;
}

// Says why `cairn COMMAND` failed, on stderr, and gives its exit code.
int Fail(std::string_view command, const Error& e, int code = -1) {
  std::cerr << "cairn " << command << ": " << e.message << "\n";
  return code >= 0 ? code : ExitCode(e);
}

// A listing page that is not one (another server on the port, say).
int NotAListing(std::string_view command) {
  std::cerr << "cairn " << command << ": the listing is not what cairn answers\n";
  return 1;
}

std::string Human(double bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  size_t u = 0;
  while (bytes >= 1024 && u + 1 < std::size(kUnits)) {
    bytes /= 1024;
    ++u;
  }
  std::ostringstream out;
  out << std::fixed << std::setprecision(u == 0 ? 0 : 1) << bytes << " " << kUnits[u];
  return out.str();
}

// A one-line progress display on a terminal: bytes, rate, time left; redrawn at most 5 times a second.
class Progress {
 public:
  explicit Progress(bool on) : on_(on && ::isatty(STDERR_FILENO) != 0), start_(Clock::now()) {}
  void Update(uint64_t done, uint64_t total) {
    if (!on_) return;
    const auto now = Clock::now();
    if (now - last_ < std::chrono::milliseconds(200) && done != total) return;
    last_ = now;
    const double secs = std::chrono::duration<double>(now - start_).count();
    const double rate = secs > 0 ? static_cast<double>(done) / secs : 0;
    const double left = rate > 0 ? static_cast<double>(total - std::min(done, total)) / rate : 0;
    std::cerr << "\r" << Human(static_cast<double>(done)) << " / " << Human(static_cast<double>(total))
              << "  " << Human(rate) << "/s  ETA " << static_cast<uint64_t>(left) << "s   " << std::flush;
  }
  void Done() {
    if (on_) std::cerr << "\n";
  }

 private:
  using Clock = std::chrono::steady_clock;
  bool on_;
  Clock::time_point start_;
  Clock::time_point last_{};
};

// What an error answer says: its {"error": ...} message, else its body as it came.
std::string ServerMessage(const net::HttpResponse& res) {
  boost::system::error_code ec;
  const json::value v = json::parse(res.body, ec);
  const json::value* error = !ec && v.is_object() ? v.get_object().if_contains("error") : nullptr;
  if (error != nullptr && error->is_string()) return std::string(error->get_string());
  return res.body.empty() ? "HTTP " + std::to_string(res.status) : res.body;
}

Result<json::value> GetJson(net::HttpClient& http, const RemoteOptions& r, const std::string& path) {
  auto res = http.Send("GET", r.endpoint + path, net::BearerHeader(r.token));
  if (!res) return res.error();
  if (res->status == 401 || res->status == 403)
    return Malformed("the server refused the token (" + std::to_string(res->status) + "): " + res->body);
  if (res->status != 200)
    return Unavailable("GET " + path + " answered " + std::to_string(res->status) + ": " + res->body);
  boost::system::error_code ec;
  json::value v = json::parse(res->body, ec);
  if (ec) return Malformed("GET " + path + " did not answer JSON");
  return v;
}

}  // namespace

int RunGet(GetOptions& opts) {
  if (!ResolveRemote(opts.remote, "get")) return 2;
  const auto file = xet::Hash::FromHex(opts.file);
  if (!file) {
    std::cerr << "cairn get: FILE_HASH must be 64 hex digits\n";
    return 2;
  }
  client::DownloadOptions d;
  d.endpoint = opts.remote.endpoint;
  d.token = opts.remote.token;
  d.file = *file;
  d.output = opts.output.empty() ? file->hex() : opts.output;
  d.parallel = opts.parallel;
  d.attempts = opts.remote.attempts;
  if (!opts.range.empty()) {
    const std::string_view r = opts.range;
    const size_t dash = r.find('-');
    uint64_t a = 0;
    uint64_t b = 0;
    // Digits only, each number within 64 bits (from_chars fails on overflow rather than saturating).
    const auto number = [](std::string_view t, uint64_t& v) {
      const auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
      return !t.empty() && ec == std::errc() && p == t.data() + t.size();
    };
    if (dash == std::string_view::npos || !number(r.substr(0, dash), a) || !number(r.substr(dash + 1), b) ||
        b < a) {
      std::cerr << "cairn get: --range is A-B, inclusive byte offsets (0-1023)\n";
      return 2;
    }
    d.range = std::pair<uint64_t, uint64_t>{a, b};
  }
  Progress progress(!opts.json && d.output != "-");
  d.progress = [&progress](uint64_t done, uint64_t total) { progress.Update(done, total); };
  const auto start = std::chrono::steady_clock::now();
  auto got = client::Download(d);
  progress.Done();
  if (!got) return Fail("get", got.error());
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (opts.json) {
    json::object o{{"hash", file->hex()},
                   {"path", d.output},
                   {"size", got->total},
                   {"written", got->bytes},
                   {"resumed_from", got->resumed_from},
                   {"fetched_bytes", got->fetched_bytes},
                   {"verified", got->verified},
                   {"retries", got->retries},
                   {"refreshed_urls", got->refreshed_urls},
                   {"seconds", secs}};
    std::cout << json::serialize(o) << "\n";
  } else if (d.output != "-") {
    std::cerr << d.output << ": " << got->total << " bytes" << (got->verified ? ", verified" : "")
              << (got->resumed_from > 0 ? ", resumed at " + std::to_string(got->resumed_from) : "") << ", "
              << Human(secs > 0 ? static_cast<double>(got->bytes) / secs : 0) << "/s\n";
  }
  return 0;
}

int RunPut(PutOptions& opts) {
  if (!ResolveRemote(opts.remote, "put")) return 2;
  client::UploadOptions u;
  u.endpoint = opts.remote.endpoint;
  u.token = opts.remote.token;
  u.paths = opts.paths;
  u.parallel = opts.parallel;
  u.attempts = opts.remote.attempts;
  u.global_dedup = !opts.no_global_dedup;
  Progress progress(!opts.json);
  u.progress = [&progress](uint64_t done, uint64_t total) { progress.Update(done, total); };
  const auto start = std::chrono::steady_clock::now();
  auto up = client::Upload(u);
  progress.Done();
  if (!up) {  // a path that is not there or cannot be read is a local failure (5), not a missing file (3)
    const bool local = up.error().code == ErrorCode::kNotFound || up.error().code == ErrorCode::kIo;
    return Fail("put", up.error(), local ? 5 : -1);
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (opts.json) {
    json::array files;
    for (const auto& f : up->files)
      files.push_back(json::object{
          {"path", f.path}, {"hash", f.hash.hex()}, {"size", f.size}, {"sha256", f.sha256.hex()}});
    json::object o{{"files", std::move(files)},
                   {"bytes_read", up->bytes_read},
                   {"xorb_bytes_sent", up->xorb_bytes_sent},
                   {"xorbs_sent", up->xorbs_sent},
                   {"chunks_deduped", up->chunks_deduped},
                   {"dedup_queries", up->dedup_queries},
                   {"shard_bytes", up->shard_bytes},
                   {"shard_registered", up->shard_registered},
                   {"retries", up->retries},
                   {"seconds", secs}};
    std::cout << json::serialize(o) << "\n";
  } else {
    for (const auto& f : up->files)
      std::cout << f.hash.hex() << "  " << f.size << "  " << f.sha256.hex() << "  " << f.path << "\n";
    std::cerr << up->files.size() << " files, " << Human(static_cast<double>(up->bytes_read)) << " read, "
              << Human(static_cast<double>(up->xorb_bytes_sent)) << " sent in " << up->xorbs_sent
              << " xorbs, " << Human(secs > 0 ? static_cast<double>(up->bytes_read) / secs : 0) << "/s\n";
  }
  return 0;
}

int RunLs(LsOptions& opts) {
  if (!ResolveRemote(opts.remote, "ls")) return 2;
  net::HttpClient http(Policy(opts.remote));
  std::string cursor;
  json::array all;
  for (;;) {
    auto page =
        GetJson(http, opts.remote, "/v1/files?limit=1000" + (cursor.empty() ? "" : "&cursor=" + cursor));
    if (!page) return Fail("ls", page.error());
    const json::object* o = page->if_object();
    const json::array* files = o && o->if_contains("files") ? o->at("files").if_array() : nullptr;
    if (files == nullptr) return NotAListing("ls");
    for (const auto& f : *files) {
      if (opts.json) {
        all.push_back(f);
        continue;
      }
      const json::object& fo = f.as_object();
      const auto sha =
          fo.at("sha256").is_string() ? std::string(fo.at("sha256").get_string()) : std::string("-");
      std::cout << fo.at("hash").as_string().c_str() << "  " << fo.at("size").to_number<uint64_t>() << "  "
                << sha << "  " << fo.at("created_at").to_number<int64_t>() << "\n";
    }
    const json::value* next = o->if_contains("next_cursor");
    if (next == nullptr || !next->is_string()) break;
    cursor = std::string(next->get_string());
  }
  if (opts.json) std::cout << json::serialize(all) << "\n";
  return 0;
}

int RunRm(RmOptions& opts) {
  if (!ResolveRemote(opts.remote, "rm")) return 2;
  std::vector<xet::FileHash> files;
  for (const auto& f : opts.files) {
    const auto hash = xet::Hash::FromHex(f);
    if (!hash) {
      std::cerr << "cairn rm: " << f << ": FILE_HASH must be 64 hex digits\n";
      return 2;
    }
    files.push_back(*hash);
  }
  net::HttpClient http(Policy(opts.remote));
  int rc = 0;
  for (const auto& file : files) {
    auto res = http.Send("DELETE", opts.remote.endpoint + "/v1/files/" + file.hex(),
                         net::BearerHeader(opts.remote.token));
    if (!res) return Fail("rm", res.error());
    if (res->status == 204) {
      std::cout << "removed " << file.hex() << "\n";
      continue;
    }
    const std::string message = ServerMessage(*res);
    std::cerr << "cairn rm: " << (message.find(file.hex()) == std::string::npos ? file.hex() + ": " : "")
              << message << " (HTTP " << res->status << ")\n";
    rc = 1;
    // A refused token (401, 403) or scope (409) would be refused for every other file too.
    if (res->status == 401 || res->status == 403 || res->status == 409) break;
  }
  return rc;
}

int RunStat(StatOptions& opts) {
  if (!ResolveRemote(opts.remote, "stat")) return 2;
  net::HttpClient http(Policy(opts.remote));
  auto page = GetJson(http, opts.remote, "/v1/files?limit=1");
  if (!page) return Fail("stat", page.error());
  const json::object* o = page->if_object();
  const json::object* totals = o && o->if_contains("totals") ? o->at("totals").if_object() : nullptr;
  if (totals == nullptr) return NotAListing("stat");
  const auto files = totals->at("files").to_number<uint64_t>();
  const auto bytes = totals->at("bytes").to_number<uint64_t>();
  const double ratio = o->at("server_dedup_ratio").to_number<double>();
  if (opts.json) {
    std::cout << json::serialize(
                     json::object{{"files", files}, {"bytes", bytes}, {"server_dedup_ratio", ratio}})
              << "\n";
  } else {
    std::cout << "files: " << files << "\nbytes: " << bytes << " (" << Human(static_cast<double>(bytes))
              << ")\nserver dedup ratio: " << std::fixed << std::setprecision(2) << ratio << "\n";
  }
  return 0;
}

}  // namespace cairn::cli
