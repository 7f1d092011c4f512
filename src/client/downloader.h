// `cairn get`: downloads a file (or a byte range of it) the way the stock client does, from any Xet CAS.
//
// The reconstruction comes from GET /v2/reconstructions (GET /v1/reconstructions when the server answers 404
// or 501 to v2); its xorb ranges are fetched from their transfer URLs by `parallel` threads, each over a
// connection of its own, in the order the file needs them and at most 2 × parallel ranges ahead of the
// writer; every chunk is decoded and checked (header, sizes, the decoded length each term expects) before
// its bytes are written, and the file is written in order. An expired transfer URL (403) gets the
// reconstruction asked again and the fresh URL used.
//
// Whole-file downloads are verified and resumable: the bytes go to OUT.cairn-part, the file hash, then the
// hash and size of each chunk written, to OUT.cairn-part.chunks; at the end the chunks' hashes must give the
// file hash asked for (the protocol gives no per-chunk reference, so this is where a chunk's hash is
// checked), and only then is the part renamed to OUT. A later run with the same OUT resumes after the last
// recorded chunk whose bytes in the part still hash to what was recorded (everything from the first that does
// not is fetched again). Range downloads (and downloads to stdout) are checked chunk by chunk but cannot be
// verified against the hash.
//
// Thread-safety: Download runs its own threads; call it from one thread. Failures: kNotFound (404: unknown
// file or not visible to the token), kUnsatisfiable (416: range outside the file), kHashMismatch (the bytes
// do not give the file hash: the part is removed), kMalformed (an answer cairn cannot read), kUnavailable
// (the server kept failing), kIo (the output).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "common/error.h"
#include "xet/hash.h"

namespace cairn::client {

struct DownloadOptions {
  std::string endpoint;  // the CAS base URL (http://host:port)
  std::string token;     // a read token of a scope that sees the file
  xet::FileHash file;
  std::optional<std::pair<uint64_t, uint64_t>> range;  // inclusive; none: the whole file
  std::string output;                                  // a path, or "-" for stdout
  size_t parallel = 8;
  int attempts = 8;  // tries per request on transient failures (see http_client.h)
  // Bytes written so far and the total, called from the writing thread as it goes.
  std::function<void(uint64_t done, uint64_t total)> progress;
};

struct DownloadOutcome {
  uint64_t bytes = 0;          // written by this run
  uint64_t total = 0;          // of the file, or of the range
  uint64_t resumed_from = 0;   // bytes already there from an earlier run
  uint64_t fetched_bytes = 0;  // transfer bytes received
  bool verified = false;       // the file hash was checked
  int retries = 0;             // requests sent again
  int refreshed_urls = 0;      // reconstructions asked again for expired URLs
};

Result<DownloadOutcome> Download(const DownloadOptions& options);

}  // namespace cairn::client
