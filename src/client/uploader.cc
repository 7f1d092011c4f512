#include "client/uploader.h"

#include <algorithm>
#include <boost/json.hpp>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "ingest/chunk_placer.h"
#include "ingest/chunk_stream.h"
#include "ingest/shard_records.h"
#include "net/http_client.h"
#include "xet/hashing.h"
#include "xet/shard.h"
#include "xet/xorb.h"

namespace cairn::client {
using net::BearerHeader;
using net::HttpClient;
using net::RetryPolicy;
namespace {

namespace fs = std::filesystem;

constexpr size_t kReadBlock = 8 << 20;

// A sealed xorb waiting to be sent, then its chunk list alone.
using LocalXorb = ingest::SealedXorb;

class UploadRun {
 public:
  explicit UploadRun(const UploadOptions& o)
      : o_(o),
        http_(Policy()),
        placer_({.ask = o.global_dedup ? ingest::ChunkPlacer::Ask(
                                             [this](const xet::ChunkHash& h) { return AskServer(h); })
                                       : nullptr,
                 .on_seal = [this](ingest::SealedXorb&& x) { return Queue(std::move(x)); },
                 .new_buffer = [this] { return TakeBuffer(); }}) {
    endpoint_ = o.endpoint;
    while (!endpoint_.empty() && endpoint_.back() == '/') endpoint_.pop_back();
  }

  Result<UploadOutcome> Go() {
    std::vector<fs::path> files;
    uint64_t total = 0;
    for (const auto& p : o_.paths) {
      std::error_code ec;
      if (fs::is_directory(p, ec)) {
        std::vector<fs::path> found;
        for (auto it = fs::recursive_directory_iterator(p, ec);
             !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
          if (it->is_regular_file(ec)) found.push_back(it->path());
        }
        if (ec) return IoError("walking " + p + ": " + ec.message());
        std::sort(found.begin(), found.end());
        files.insert(files.end(), found.begin(), found.end());
      } else if (fs::is_regular_file(p, ec)) {
        files.emplace_back(p);
      } else {
        return NotFound(p + " is not a file or a directory");
      }
    }
    for (const auto& f : files) {
      std::error_code ec;
      total += fs::file_size(f, ec);
    }
    total_ = total;
    for (size_t i = 0; i < std::max<size_t>(1, o_.parallel); ++i) senders_.emplace_back([this] { Send(); });
    Status st = Ok{};
    for (const auto& f : files) {
      st = ReadFile(f);
      if (!st) break;
    }
    if (st) st = placer_.Flush();
    {
      std::lock_guard lock(mu_);
      closed_ = true;
    }
    cv_.notify_all();
    for (auto& t : senders_) t.join();
    if (!st) return st.error();
    if (!send_error_) return send_error_.error();
    if (auto s = SendShard(); !s) return s.error();
    out_.retries = http_.retried() + retries_;
    out_.chunks_deduped = placer_.stats().chunks_deduped;
    out_.dedup_queries = placer_.stats().dedup_queries;
    return out_;
  }

 private:
  RetryPolicy Policy() const {
    RetryPolicy p;
    p.attempts = o_.attempts;
    return p;
  }

  Status ReadFile(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return IoError("cannot read " + path.string());
    ingest::ChunkPlacer::File file;
    ingest::Sha256 sha;
    ingest::ChunkStream chunks;
    const ingest::ChunkStream::OnChunk on_chunk = [&](std::span<const uint8_t> chunk) {
      if (!refused_.empty()) return Status(Malformed(refused_));
      return placer_.Place(file, chunk);
    };
    // Two blocks in turn: the SHA-256 of one runs on another thread while this one chunks it, and finishes
    // before the other block is read into (the SHA-256 and the chunking were half the time each).
    std::vector<uint8_t> blocks[2] = {std::vector<uint8_t>(kReadBlock), std::vector<uint8_t>(kReadBlock)};
    std::future<void> hashing;
    const auto finish_hashing = [&hashing] {
      if (hashing.valid()) hashing.get();
    };
    for (size_t turn = 0;; ++turn) {
      std::vector<uint8_t>& block = blocks[turn % 2];
      in.read(reinterpret_cast<char*>(block.data()), static_cast<std::streamsize>(block.size()));
      const auto n = static_cast<size_t>(in.gcount());
      if (n == 0) break;
      const std::span<const uint8_t> data(block.data(), n);
      finish_hashing();  // of the block before: one thread updates the digest at a time, in order
      hashing = std::async(std::launch::async, [&sha, data] { sha.Update(data); });
      if (auto st = chunks.Feed(data, on_chunk); !st) {
        finish_hashing();
        return st;
      }
      out_.bytes_read += n;
      if (o_.progress) o_.progress(out_.bytes_read, total_);
      if (in.eof()) break;
      // The next read goes into the other block: its hashing ended before this block's began.
    }
    finish_hashing();
    if (in.bad()) return IoError("reading " + path.string() + " failed");
    if (auto st = chunks.Finish(on_chunk); !st) return st;
    UploadedFile done{path.string(), {}, chunks.bytes(), sha.Final()};
    files_.push_back(std::move(file));
    out_.files.push_back(std::move(done));
    return Ok{};
  }

  // A buffer for the next xorb's bytes: one a sent xorb gave back, else a new one.
  std::vector<uint8_t> TakeBuffer() {
    std::lock_guard lock(mu_);
    std::vector<uint8_t> b;
    if (!spare_.empty()) {
      b = std::move(spare_.back());
      spare_.pop_back();
    }
    b.reserve(xet::kMaxXorbUnpacked);
    return b;
  }

  // A global-dedup query: the answer's shard, or nothing (as the stock client: a failed query is a miss).
  std::optional<std::vector<uint8_t>> AskServer(const xet::ChunkHash& h) {
    auto r = http_.Send("GET", endpoint_ + "/v1/chunks/default/" + h.hex(), BearerHeader(o_.token));
    if (!r) return std::nullopt;
    if (r->status == 401 || r->status == 403) {
      refused_ = "the server refused the token (" + std::to_string(r->status) + "): " + r->body;
      return std::nullopt;
    }
    if (r->status != 200) return std::nullopt;
    return std::vector<uint8_t>(r->body.begin(), r->body.end());
  }

  // Hands a sealed xorb to the senders (waiting while `parallel` are in flight).
  Status Queue(ingest::SealedXorb&& x) {
    std::unique_lock lock(mu_);  // the senders read local_
    const auto id = local_.size();
    local_.push_back(std::make_unique<LocalXorb>(std::move(x)));
    cv_.wait(lock, [&] { return queue_.size() < std::max<size_t>(1, o_.parallel) || !send_error_; });
    queue_.push_back(id);
    cv_.notify_all();
    return Ok{};
  }

  void Send() {
    HttpClient http(Policy());
    for (;;) {
      LocalXorb* xp = nullptr;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return !queue_.empty() || closed_; });
        if (queue_.empty()) break;
        xp = local_[queue_.front()].get();
        queue_.pop_front();
        cv_.notify_all();
        if (!send_error_) continue;  // drain: the upload failed already
      }
      LocalXorb& x = *xp;
      // The chunks' hashes come from the reading thread, which hashed every chunk; the server hashes every
      // chunk again as it validates the xorb: a slip here is refused there.
      auto encoded = xet::EncodeXorb(x.Spans(), xet::CompressionPolicy::kAuto, x.Hashes());
      const int retried_before = http.retried();
      Status st = Ok{};
      {
        const std::string_view body(reinterpret_cast<const char*>(encoded.bytes.data()),
                                    encoded.bytes.size());
        auto r =
            http.Send("POST", endpoint_ + "/v1/xorbs/default/" + x.hash.hex(), BearerHeader(o_.token), body);
        if (!r) {
          st = r.error();
        } else if (r->status != 200) {
          st = Malformed("xorb " + x.hash.hex() + " was refused (" + std::to_string(r->status) +
                         "): " + r->body.substr(0, 300));
        }
        std::lock_guard lock(mu_);
        if (st) {
          out_.xorb_bytes_sent += body.size();
          ++out_.xorbs_sent;
        }
      }
      std::lock_guard lock(mu_);
      // Sent: only its chunk list is still needed. The buffer goes back for the next xorb (a fresh 64 MiB
      // allocation would be mapped and zeroed by the kernel again, page by page).
      x.data.clear();
      spare_.push_back(std::move(x.data));
      x.data = {};
      retries_ += http.retried() - retried_before;
      if (!st && send_error_) send_error_ = st;
      cv_.notify_all();
    }
  }

  Status SendShard() {
    xet::Shard shard;
    for (size_t f = 0; f < files_.size(); ++f) {
      xet::FileRecord record = placer_.RecordOf(files_[f]);
      record.sha256 = out_.files[f].sha256;
      out_.files[f].hash = record.hash;
      shard.files.push_back(std::move(record));
    }
    shard.xorbs = placer_.Listings();
    const std::vector<uint8_t> bytes = ingest::ShardUploadForm(shard);
    if (bytes.size() > xet::kMaxShardBytes)
      return LimitExceeded("the upload's shard would be " + std::to_string(bytes.size()) +
                           " bytes, past the protocol's 64 MiB: upload fewer files at once");
    out_.shard_bytes = bytes.size();
    const std::string body(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    for (int attempt = 0; attempt < std::max(1, o_.attempts); ++attempt) {
      auto r = http_.Send("POST", endpoint_ + "/v2/shards", BearerHeader(o_.token), body);
      if (!r) return r.error();
      if (r->status == 404 || r->status == 501) {
        auto v1 = http_.Send("POST", endpoint_ + "/v1/shards", BearerHeader(o_.token), body);
        if (!v1) return v1.error();
        if (v1->status != 200)
          return Malformed("the shard was refused (" + std::to_string(v1->status) + "): " + v1->body);
        out_.shard_registered = v1->body.find("\"result\":1") != std::string::npos;
        return Ok{};
      }
      if (r->status != 200)
        return Malformed("the shard was refused (" + std::to_string(r->status) + "): " + r->body);
      // NDJSON progress; the last frame says how it ended.
      std::string last;
      for (size_t at = 0; at < r->body.size();) {
        const size_t nl = std::min(r->body.find('\n', at), r->body.size());
        if (nl > at) last = r->body.substr(at, nl - at);
        at = nl + 1;
      }
      boost::system::error_code ec;
      const auto frame = boost::json::parse(last, ec);
      const auto* o = ec ? nullptr : frame.if_object();
      const auto* type = o && o->if_contains("type") ? o->at("type").if_string() : nullptr;
      if (type != nullptr && *type == "result") {
        out_.shard_registered = true;
        return Ok{};
      }
      const bool retryable =
          o && o->if_contains("retryable") && o->at("retryable").is_bool() && o->at("retryable").get_bool();
      if (!retryable) return Malformed("the shard was refused: " + last);
      ++retries_;
    }
    return Unavailable("the shard could not be registered after " + std::to_string(o_.attempts) + " tries");
  }

  const UploadOptions& o_;
  std::string endpoint_;
  HttpClient http_;  // the reading thread's: dedup queries and the shard
  uint64_t total_ = 0;
  UploadOutcome out_;
  std::vector<ingest::ChunkPlacer::File> files_;
  std::vector<std::unique_ptr<LocalXorb>> local_;  // sealed xorbs in order (their bytes gone once sent)
  std::string refused_;                            // set when a dedup query's token was refused

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<size_t> queue_;
  std::vector<std::vector<uint8_t>> spare_;  // buffers of sent xorbs, for the next ones
  bool closed_ = false;
  Status send_error_ = Ok{};
  int retries_ = 0;
  std::vector<std::thread> senders_;
  ingest::ChunkPlacer placer_;  // last: its callbacks use the members above
};

}  // namespace

Result<UploadOutcome> Upload(const UploadOptions& options) {
  UploadRun run(options);
  return run.Go();
}

}  // namespace cairn::client
