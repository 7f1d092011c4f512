// Copying every blob of one store into another (`cairn store copy`): how a one-box deployment moves its bytes
// to S3, or back. Resumable and verified.
//
// Every blob listed at the source is read whole, judged by the caller's verifier (the store does not know
// formats: the caller checks a xorb or a shard against its hash), put at the destination (a conditional put:
// an intact blob already there is kept, a corrupt one replaced), then read back from the destination and
// judged again. Running the copy again after an interruption redoes only what is missing: blobs already at
// the destination are read back and judged, not copied. A blob whose source bytes fail the verifier is not
// copied and is reported; the copy goes on with the others and fails at the end.
//
// Thread-safety: CopyStore uses `threads` threads of its own; both stores must allow concurrent calls (every
// BlobStore does). Memory: one whole blob per thread (a xorb is at most 64 MiB).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "store/blob_store.h"

namespace cairn::store {

// Whether `bytes` are the blob `hash` of `kind` claims to be.
using BlobVerifier =
    std::function<bool(BlobKind kind, const xet::Hash& hash, std::span<const uint8_t> bytes)>;

struct StoreCopyOptions {
  BlobVerifier verify;  // required
  size_t threads = 4;
  // Reads every copied blob back from the destination and judges it again (`cairn store copy`). A backup
  // and a restore leave it to `cairn backup --verify` and `cairn fsck --deep`: it doubles their reads.
  bool read_back = true;
  std::function<void(BlobKind kind, uint64_t done, uint64_t total)>
      progress;  // from any thread; may be empty
};

struct KindCopyReport {
  BlobKind kind = BlobKind::kXorb;
  uint64_t listed = 0;              // at the source
  uint64_t copied = 0;              // put at the destination by this run
  uint64_t present = 0;             // already at the destination, intact
  uint64_t bytes = 0;               // of every listed blob
  uint64_t copied_bytes = 0;        // of the blobs this run put
  std::vector<std::string> failed;  // "<hex>: why", for blobs that are not verified at the destination
};

struct StoreCopyReport {
  std::vector<KindCopyReport> kinds;  // xorbs, then shards
  bool ok() const;
};

// Copies every xorb and shard of `from` into `to`. An error only when a store cannot be listed; per-blob
// failures are in the report (ok() false).
Result<StoreCopyReport> CopyStore(BlobStore& from, BlobStore& to, const StoreCopyOptions& options);

// Copies the blobs `hashes` of one kind (each as CopyStore does: verified at the source, and read back when
// `read_back`); failures are in the report.
KindCopyReport CopyBlobs(BlobStore& from, BlobStore& to, BlobKind kind, std::span<const xet::Hash> hashes,
                         const StoreCopyOptions& options);

}  // namespace cairn::store
