// `cairn put`: uploads files the way the stock client does, to any Xet CAS.
//
// Each file is read once, in blocks, and cut into content-defined chunks (xet::Chunker); each chunk is
// hashed. A chunk already placed in this upload is not sent again (dedup within the upload); for the first
// chunk of each file and every chunk whose hash is 0 modulo 1,024 that is not, the server is asked (GET
// /v1/chunks/default/{hash}, as the stock client asks) and the xorbs of its answer (their chunk hashes keyed
// with the answer's HMAC key) join what later chunks are matched against (global dedup). New chunks are
// packed into xorbs of at most 64 MiB and 8,192 chunks, small files together; each full xorb is compressed as
// the stock client compresses (LZ4 or byte-grouped LZ4 per chunk group, whichever is smaller), hashed and
// POSTed by one of `parallel` threads while reading goes on (at most 2 × `parallel` xorbs in memory beside
// the one being filled: queued and in flight). When every xorb is stored, one shard describes the files
// (terms, verification hashes, SHA-256) and the new xorbs, and is POSTed to /v2/shards (/v1/shards where the
// server has no v2). Requests are retried on 408, 429, 5xx and connection errors with jittered back-off.
//
// Thread-safety: Upload runs its own threads; call it from one thread. Failures: kNotFound for a path that is
// not there, kIo for one that cannot be read, kMalformed when the server refuses the upload (its message),
// kUnavailable when it cannot be reached, kLimit when the shard would pass the protocol's 64 MiB.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/error.h"
#include "xet/hash.h"

namespace cairn::client {

struct UploadOptions {
  std::string endpoint;
  std::string token;               // a write token
  std::vector<std::string> paths;  // files, and directories (walked recursively, in name order)
  size_t parallel = 4;             // xorb uploads at once
  int attempts = 8;
  bool global_dedup = true;
  // Bytes read so far and the total of the files, from the reading thread.
  std::function<void(uint64_t done, uint64_t total)> progress;
};

struct UploadedFile {
  std::string path;
  xet::FileHash hash;
  uint64_t size = 0;
  xet::Hash sha256;  // as shards store it (Hash::hex() prints the usual digest)
};

struct UploadOutcome {
  std::vector<UploadedFile> files;
  uint64_t bytes_read = 0;       // of the files
  uint64_t xorb_bytes_sent = 0;  // bodies of the xorbs POSTed
  uint64_t xorbs_sent = 0;
  uint64_t chunks_deduped = 0;  // chunks not sent: already in this upload or on the server
  uint64_t dedup_queries = 0;
  uint64_t shard_bytes = 0;
  bool shard_registered = false;  // false: the server had it already
  int retries = 0;
};

Result<UploadOutcome> Upload(const UploadOptions& options);

}  // namespace cairn::client
