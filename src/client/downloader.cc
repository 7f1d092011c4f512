#include "client/downloader.h"

#include <unistd.h>

#include <atomic>
#include <boost/json.hpp>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <system_error>
#include <thread>
#include <unordered_map>
#include <vector>

#include "net/http_client.h"
#include "xet/hashing.h"
#include "xet/reconstruction_answer.h"
#include "xet/xorb.h"

namespace cairn::client {
using net::BearerHeader;
using net::HttpClient;
using net::RetryPolicy;
namespace {

using Plan = xet::ParsedReconstruction;
using Fetched = xet::DecodedFetch;
namespace fs = std::filesystem;
namespace json = boost::json;

struct Query {
  std::string endpoint, token, file;
  std::optional<std::pair<uint64_t, uint64_t>> range;
};

// Asks for the reconstruction, v2 first. `v1` remembers that the server only speaks v1.
Result<Plan> AskPlan(HttpClient& http, const Query& q, bool* v1) {
  std::vector<std::string> headers = BearerHeader(q.token);
  if (q.range)
    headers.push_back("Range: bytes=" + std::to_string(q.range->first) + "-" +
                      std::to_string(q.range->second));
  for (const bool v2 : {true, false}) {
    if (v2 && *v1) continue;
    auto r = http.Send("GET", q.endpoint + (v2 ? "/v2" : "/v1") + "/reconstructions/" + q.file, headers);
    if (!r) return r.error();
    if (v2 && (r->status == 404 || r->status == 501)) continue;  // v2 not served (or, harmless, no such file)
    if (r->status == 200) {
      if (!v2) *v1 = true;
      return xet::ParseReconstruction(r->body, v2);
    }
    if (r->status == 404)
      return NotFound("file " + q.file + " is not there (or the token's scope does not see it)");
    if (r->status == 416) return Unsatisfiable("the range starts past the end of the file");
    return Malformed("the reconstruction answered " + std::to_string(r->status) + ": " +
                     r->body.substr(0, 300));
  }
  return NotFound("file " + q.file + " is not there");
}

RetryPolicy Policy(const DownloadOptions& o) {
  RetryPolicy p;
  p.attempts = o.attempts;
  return p;
}

// The resume record of one chunk written: its hash and size.
constexpr size_t kRecordSize = 36;

class DownloadRun {
 public:
  DownloadRun(const DownloadOptions& o, Plan plan, Query q, bool v1)
      : o_(o),
        plan_(std::move(plan)),
        query_(std::move(q)),
        v1_(v1),
        slots_(std::max<size_t>(1, o.parallel) * 2) {
    state_.resize(plan_.fetches.size());
    // Fetch order: by first use; each fetch's last use, so that the writer can let it go.
    std::vector<bool> seen(plan_.fetches.size());
    last_use_.assign(plan_.fetches.size(), 0);
    for (size_t i = 0; i < plan_.terms.size(); ++i) {
      const size_t f = plan_.terms[i].fetch;
      if (!seen[f]) order_.push_back(f);
      seen[f] = true;
      last_use_[f] = i;
    }
  }

  // Writes the plan's bytes (skipping `skip` at the front, at most `limit`) through `write`, each chunk's
  // hash and size through `record`.
  Status Execute(uint64_t skip, uint64_t limit, const std::function<Status(std::span<const uint8_t>)>& write,
                 const std::function<Status(const xet::ChunkHash&, uint64_t)>& record) {
    std::vector<std::thread> workers;
    for (size_t i = 0; i < std::max<size_t>(1, o_.parallel); ++i) workers.emplace_back([this] { Work(); });
    auto st = Write(skip, limit, write, record);
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& w : workers) w.join();
    return st;
  }

  uint64_t fetched_bytes() const { return fetched_bytes_.load(); }
  int retries() const { return retries_.load(); }
  int refreshed() const { return refreshed_.load(); }

 private:
  enum class State { kWaiting, kFetching, kReady, kFailed, kReleased };
  struct Slot {
    State state = State::kWaiting;
    bool kept = false;  // used, and kept in memory for a later term
    Fetched data;
    Error error{ErrorCode::kIo, ""};
  };

  // Fetches one range (on the calling thread), refreshing its URL when it expired.
  Result<Fetched> FetchOne(HttpClient& http, size_t i) {
    for (int refresh = 0;; ++refresh) {
      Plan::Fetch f;
      {
        std::lock_guard lock(mu_);
        f = plan_.fetches[i];
      }
      auto r =
          http.Send("GET", f.url, {"Range: bytes=" + std::to_string(f.first) + "-" + std::to_string(f.last)});
      if (!r) return r.error();
      if (r->status == 403 && refresh < 3) {
        if (auto st = Refresh(http, i); !st) return st.error();
        continue;
      }
      if (r->status != 200 && r->status != 206)
        return Malformed("a transfer answered " + std::to_string(r->status) + ": " + r->body.substr(0, 300));
      fetched_bytes_ += r->body.size();
      // A body that does not decode is worth another try (a proxy cut it, say), as the stock client does.
      auto decoded = xet::DecodeFetch(f, {reinterpret_cast<const uint8_t*>(r->body.data()), r->body.size()});
      if (!decoded && refresh < 3) continue;
      return decoded;
    }
  }

  // Asks for the reconstruction again and takes the fresh URL of fetch `i` from it (the same chunks).
  Status Refresh(HttpClient& http, size_t i) {
    bool v1 = v1_;
    auto fresh = AskPlan(http, query_, &v1);
    if (!fresh) return fresh.error();
    ++refreshed_;
    std::lock_guard lock(mu_);
    Plan::Fetch& f = plan_.fetches[i];
    for (const auto& g : fresh->fetches) {
      if (g.xorb == f.xorb && g.cs == f.cs && g.ce == f.ce && g.first == f.first && g.last == f.last) {
        f.url = g.url;
        return Ok{};
      }
    }
    return Inconsistent("the reconstruction asked again no longer has xorb " + f.xorb + "'s range");
  }

  void Work() {
    HttpClient http(Policy(o_));
    for (;;) {
      size_t i = 0;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return stop_ || (next_ < order_.size() && held_ < slots_); });
        if (stop_) return;
        i = order_[next_++];
        if (state_[i].state != State::kWaiting) continue;  // the writer took it itself
        state_[i].state = State::kFetching;
        ++held_;
      }
      const int before = http.retried();
      auto got = FetchOne(http, i);
      retries_ += http.retried() - before;
      std::lock_guard lock(mu_);
      Finish(i, std::move(got));
    }
  }

  void Finish(size_t i, Result<Fetched> got) {
    if (got) {
      state_[i].data = std::move(*got);
      state_[i].state = State::kReady;
    } else {
      state_[i].error = got.error();
      state_[i].state = State::kFailed;
    }
    cv_.notify_all();
  }

  Status Write(uint64_t skip, uint64_t limit, const std::function<Status(std::span<const uint8_t>)>& write,
               const std::function<Status(const xet::ChunkHash&, uint64_t)>& record) {
    HttpClient own(Policy(o_));  // for fetches the writer makes itself
    for (size_t ti = 0; ti < plan_.terms.size() && limit > 0; ++ti) {
      const Plan::Term& t = plan_.terms[ti];
      std::unique_lock lock(mu_);
      Slot& s = state_[t.fetch];
      if (s.state == State::kWaiting || s.state == State::kReleased) {  // not started, or let go: fetch now
        s.state = State::kFetching;
        ++held_;
        lock.unlock();
        const int before = own.retried();
        auto got = FetchOne(own, t.fetch);
        retries_ += own.retried() - before;
        lock.lock();
        Finish(t.fetch, std::move(got));
      }
      cv_.wait(lock, [&] { return s.state == State::kReady || s.state == State::kFailed; });
      if (s.state == State::kFailed) return s.error;
      const Plan::Fetch& f = plan_.fetches[t.fetch];
      const Fetched& d = s.data;
      lock.unlock();
      const size_t first = t.cs - f.cs;
      const size_t end = t.ce - f.cs;
      const uint64_t from = first == 0 ? 0 : d.ends[first - 1];
      if (d.ends[end - 1] - from != t.length) {
        return Inconsistent("a term of xorb " + t.xorb + " decoded to " +
                            std::to_string(d.ends[end - 1] - from) + " bytes, not the " +
                            std::to_string(t.length) + " the reconstruction says");
      }
      for (size_t c = first; c < end && limit > 0; ++c) {
        const uint64_t cb = c == 0 ? 0 : d.ends[c - 1];
        std::span<const uint8_t> chunk(d.bytes.data() + cb, d.ends[c] - cb);
        const bool whole = skip == 0 && chunk.size() <= limit;
        if (skip >= chunk.size()) {
          skip -= chunk.size();
          continue;
        }
        chunk = chunk.subspan(skip);
        skip = 0;
        if (chunk.size() > limit) chunk = chunk.first(limit);
        if (auto st = write(chunk); !st) return st;
        if (whole && record)
          if (auto st = record(d.hashes[c], chunk.size()); !st) return st;
        limit -= chunk.size();
      }
      lock.lock();
      // A fetch a later term uses again is kept, but only so many: kept ones fill the window that fetches
      // ahead, so past half of it they are let go and fetched again when needed.
      const bool again = last_use_[t.fetch] != ti;
      if (again && !s.kept && kept_ < slots_ / 2) {
        s.kept = true;
        ++kept_;
      } else if (!again || !s.kept) {
        if (s.kept) --kept_;
        s.kept = false;
        s.data = Fetched{};
        s.state = State::kReleased;
        --held_;
        cv_.notify_all();
      }
    }
    return Ok{};
  }

  const DownloadOptions& o_;
  Plan plan_;
  const Query query_;
  const bool v1_;
  const size_t slots_;
  std::vector<size_t> order_;
  std::vector<size_t> last_use_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Slot> state_;
  size_t next_ = 0;
  size_t held_ = 0;  // fetches in flight or in memory (at most slots_ from the workers)
  size_t kept_ = 0;  // of those, used and kept for a later term
  bool stop_ = false;
  std::atomic<uint64_t> fetched_bytes_{0};
  std::atomic<int> retries_{0};
  std::atomic<int> refreshed_{0};
};

Error OutputError(const std::string& what, const fs::path& path) {
  return IoError(what + " " + path.string() + ": " + std::system_category().message(errno));
}

struct OutputPaths {
  fs::path out;
  fs::path part;     // a whole file's bytes until they are verified
  fs::path records;  // the hash and size of each whole chunk in the part, to resume from
};

// Reads back what an earlier run left: the whole chunks recorded, the part cut back to them. Returns the
// bytes they hold (0: nothing to resume).
uint64_t ReadBackRecordedChunks(const OutputPaths& paths, const xet::FileHash& file,
                                std::vector<xet::HashedChunk>& done) {
  // Each recorded chunk is read back and hashed: the part's bytes count only where they still are what
  // was received (a crash can lose written data that the records outlived, a disk can damage it).
  std::ifstream in(paths.records, std::ios::binary);
  std::ifstream data(paths.part, std::ios::binary);
  std::vector<char> rec(kRecordSize);
  // The records start with the hash of the file they are of: another file's part is not resumed.
  xet::Hash of;
  if (!in.read(reinterpret_cast<char*>(of.bytes.data()), 32) || of != file) in.setstate(std::ios::failbit);
  std::vector<uint8_t> chunk;
  std::error_code ec;
  uint64_t sum = 0;
  while (in.read(rec.data(), kRecordSize)) {
    xet::HashedChunk c;
    std::memcpy(c.hash.bytes.data(), rec.data(), 32);
    uint32_t size = 0;
    std::memcpy(&size, rec.data() + 32, 4);
    c.size = size;
    if (size == 0 || size > xet::kMaxChunkUnpacked) break;
    chunk.resize(size);
    if (!data.read(reinterpret_cast<char*>(chunk.data()), size) || xet::ChunkHashOf(chunk) != c.hash) break;
    sum += size;
    done.push_back(c);
  }
  fs::resize_file(paths.part, sum, ec);
  if (ec) done.clear();
  fs::resize_file(paths.records, done.empty() ? 0 : 32 + done.size() * kRecordSize, ec);
  if (ec) done.clear();
  return done.empty() ? 0 : sum;
}

// The plan of what is left to download. A resumed download the server has nothing past is complete; one
// whose recorded chunks do not end where the server's do starts again (`q`, `done` and `outcome` say so).
Result<Plan> AskRemainingPlan(HttpClient& http, Query& q, bool* v1, bool whole, DownloadOutcome& outcome,
                              std::vector<xet::HashedChunk>& done) {
  auto plan = AskPlan(http, q, v1);
  if (!plan && plan.error().code == ErrorCode::kUnsatisfiable && outcome.resumed_from > 0) {
    plan = Plan{};  // everything was there already
  } else if (!plan) {
    return plan.error();
  }
  if (whole && outcome.resumed_from > 0 && plan->offset_into_first != 0) {
    // The recorded chunks do not end where the server's do: start again.
    done.clear();
    outcome.resumed_from = 0;
    q.range.reset();
    plan = AskPlan(http, q, v1);
    if (!plan) return plan.error();
  }
  return plan;
}

// The bytes the plan gives past its offset into the first term, within the range asked for.
uint64_t BytesToWrite(const Plan& plan, const std::optional<std::pair<uint64_t, uint64_t>>& range) {
  uint64_t total = 0;
  for (const auto& t : plan.terms) total += t.length;
  total -= std::min(total, plan.offset_into_first);
  if (range && range->second - range->first < UINT64_MAX)
    total = std::min(total, range->second - range->first + 1);
  return total;
}

// What a download writes to: stdout, the output, or for a whole file the part and its records.
struct OutputFiles {
  std::FILE* file = nullptr;
  std::FILE* rec = nullptr;
};

Status OpenOutput(OutputFiles& f, const DownloadOptions& o, const OutputPaths& paths, bool whole,
                  bool resuming) {
  if (o.output == "-") {
    f.file = stdout;
    return Ok{};
  }
  f.file = std::fopen((whole ? paths.part : paths.out).c_str(), whole && resuming ? "r+b" : "wb");
  if (f.file == nullptr) return OutputError("cannot write", whole ? paths.part : paths.out);
  if (!whole) return Ok{};
  f.rec = std::fopen(paths.records.c_str(), resuming ? "ab" : "wb");
  if (f.rec != nullptr && !resuming && std::fwrite(o.file.bytes.data(), 1, 32, f.rec) != 32) {  // which file
    (void)std::fclose(f.rec);
    f.rec = nullptr;
  }
  if (std::fseek(f.file, 0, SEEK_END) != 0 || f.rec == nullptr) {
    const auto e = OutputError("cannot write", f.rec == nullptr ? paths.records : paths.part);
    (void)std::fclose(f.file);
    if (f.rec != nullptr) (void)std::fclose(f.rec);
    f = OutputFiles{};
    return e;
  }
  return Ok{};
}

// Flushes and closes what OpenOutput opened (never stdout). Whether all of it went well.
bool CloseOutput(const OutputFiles& f) {
  bool flushed = std::fflush(f.file) == 0 && (f.rec == nullptr || std::fflush(f.rec) == 0);
  if (f.file != stdout) flushed = std::fclose(f.file) == 0 && flushed;
  if (f.rec != nullptr) flushed = std::fclose(f.rec) == 0 && flushed;
  return flushed;
}

// A whole file's part becomes the output once the chunks written give its hash; otherwise it is removed.
Result<DownloadOutcome> KeepVerified(const OutputPaths& paths, const xet::FileHash& file,
                                     const std::vector<xet::HashedChunk>& done, DownloadOutcome outcome) {
  if (xet::FileHashOf(done) != file) {
    std::error_code ec;
    fs::remove(paths.part, ec);
    fs::remove(paths.records, ec);
    return HashMismatch("the bytes received do not give file hash " + file.hex() +
                        " (the partial download was removed)");
  }
  outcome.verified = true;
  std::error_code ec;
  fs::rename(paths.part, paths.out, ec);
  if (ec) return IoError("rename " + paths.part.string() + " to " + paths.out.string() + ": " + ec.message());
  fs::remove(paths.records, ec);
  return outcome;
}

}  // namespace

Result<DownloadOutcome> Download(const DownloadOptions& o) {
  HttpClient http(Policy(o));
  Query q{o.endpoint, o.token, o.file.hex(), o.range};
  while (!q.endpoint.empty() && q.endpoint.back() == '/') q.endpoint.pop_back();
  const bool whole = !o.range && o.output != "-";
  const OutputPaths paths{o.output, o.output + ".cairn-part", o.output + ".cairn-part.chunks"};
  DownloadOutcome outcome;

  std::vector<xet::HashedChunk> done;
  if (whole && fs::exists(paths.part) && fs::exists(paths.records))
    outcome.resumed_from = ReadBackRecordedChunks(paths, o.file, done);
  if (whole && outcome.resumed_from > 0)
    q.range = std::pair<uint64_t, uint64_t>{outcome.resumed_from, UINT64_MAX - 1};

  bool v1 = false;
  auto plan = AskRemainingPlan(http, q, &v1, whole, outcome, done);
  if (!plan) return plan.error();
  const uint64_t total = BytesToWrite(*plan, o.range);
  outcome.total = total + outcome.resumed_from;

  OutputFiles files;
  if (auto st = OpenOutput(files, o, paths, whole, outcome.resumed_from > 0); !st) return st.error();
  uint64_t written = 0;
  const auto write = [&](std::span<const uint8_t> bytes) -> Status {
    if (std::fwrite(bytes.data(), 1, bytes.size(), files.file) != bytes.size())
      return OutputError("writing", paths.out);
    written += bytes.size();
    if (o.progress) o.progress(outcome.resumed_from + written, outcome.total);
    return Ok{};
  };
  const auto record = [&](const xet::ChunkHash& h, uint64_t size) -> Status {
    done.push_back({h, size});
    if (files.rec == nullptr) return Ok{};
    char buf[kRecordSize];
    std::memcpy(buf, h.bytes.data(), 32);
    const auto s32 = static_cast<uint32_t>(size);
    std::memcpy(buf + 32, &s32, 4);
    if (std::fwrite(buf, 1, kRecordSize, files.rec) != kRecordSize)
      return OutputError("writing", paths.records);
    return Ok{};
  };
  const uint64_t skip = plan->offset_into_first;
  DownloadRun run(o, std::move(*plan), q, v1);
  auto st = run.Execute(skip, total, write,
                        whole ? std::function<Status(const xet::ChunkHash&, uint64_t)>(record) : nullptr);
  outcome.bytes = written;
  outcome.fetched_bytes = run.fetched_bytes();
  outcome.retries = run.retries() + http.retried();
  outcome.refreshed_urls = run.refreshed();
  const bool flushed = CloseOutput(files);
  if (!st) return st.error();
  if (!flushed) return OutputError("writing", paths.out);
  if (!whole) return outcome;
  return KeepVerified(paths, o.file, done, outcome);
}

}  // namespace cairn::client
