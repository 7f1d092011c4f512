// One file arriving without Xet (a git-lfs upload, a file fetched by its SHA-256) made a Xet file on the
// server: its bytes, fed in blocks of any size, are cut by the stock client's chunker, each chunk
// deduplicated against the upload itself and against what the CAS already holds for the scope (the CAS's own
// dedup answers, as an hf_xet client would receive them), new chunks packed into xorbs as hf_xet packs them
// and stored through CasService::PutXorb (validated like any upload), and at the end — once the size and the
// SHA-256 match what was announced — a shard describing the file (with its SHA-256) registered for the scope
// through CasService::PutShard. So the file then has a Xet hash, a later hf_xet upload of the same bytes
// dedups against it chunk for chunk, and a commit naming the SHA-256 finds it.
//
// Failures: kMalformed for more or fewer bytes than announced, kHashMismatch for another SHA-256; the CAS's
// errors as they come. Nothing is registered then; xorbs already stored are referenced by nothing and left to
// the collector (as a client's abandoned upload). Thread-safety: none (one ingest, one thread at a time);
// several ingests may run at once. Memory: one xorb being filled (64 MiB) and ~100 bytes per chunk.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "cas/service.h"
#include "ingest/chunk_placer.h"
#include "ingest/chunk_stream.h"
#include "ingest/shard_records.h"
#include "xet/hash.h"
#include "xet/result.h"

namespace cairn::lfs {

struct Ingested {
  xet::FileHash file;
  uint64_t size = 0;
  uint64_t chunks = 0;
  uint64_t chunks_deduped = 0;
  uint64_t new_bytes = 0;   // chunk bytes stored in new xorbs
  uint64_t xorbs = 0;       // new xorbs
  bool registered = false;  // false: the same shard was registered before
};

class FileIngest {
 public:
  // `sha256` in the hex form git-lfs names objects by; `cas` must outlive the ingest.
  static xet::Result<std::unique_ptr<FileIngest>> Begin(cas::CasService& cas, std::string scope,
                                                        std::string_view sha256, uint64_t size);

  xet::Status Feed(std::span<const uint8_t> block);
  xet::Result<Ingested> Finish();  // once
  uint64_t received() const { return chunks_.bytes(); }

 private:
  FileIngest(cas::CasService& cas, std::string scope, const xet::Hash& sha256, uint64_t size);
  xet::Status Store(ingest::SealedXorb&& xorb);

  cas::CasService& cas_;
  const std::string scope_;
  const xet::Hash expected_sha256_;  // in shard order
  const uint64_t size_;
  ingest::Sha256 sha_;
  ingest::ChunkStream chunks_;
  ingest::ChunkPlacer placer_;
  ingest::ChunkPlacer::File file_;
  xet::Status failed_ = xet::Ok{};
};

}  // namespace cairn::lfs
