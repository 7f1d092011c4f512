// Immutable blobs keyed by (kind, hash): the bytes of xorbs and shards. The index says what exists for
// clients; the store only keeps bytes, so every blob here may be unreferenced (GC's business) but a blob the
// index names must be complete.
//
// Contract, for every implementation:
//  - Atomic and durable puts. A put is invisible until it commits; when Commit (or Put) returns success the
//    blob is complete under its name and survives a crash or power loss. A failed or abandoned put leaves
//    nothing under the name (an older, intact blob stays as it was).
//  - An existing blob counts only if it verifies. Committing a hash that is already stored checks the stored
//    bytes (size, then the caller's verifier or a byte comparison with the new data) and atomically replaces
//    a torn or corrupt blob with the new bytes.
//  - The store does not check that bytes match their hash; that is the caller's job (it knows the format).
//  - Thread-safety: every BlobStore method may be called concurrently from any thread, also for the same
//    key. A BlobWriter is used by one thread at a time (its BlobFlusher by another).
//  - Failures are values: kNotFound for an unknown blob, kInconsistent for a range outside a blob, kIo when
//    the operating system fails (its message names the path and errno text). Nothing throws.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "common/error.h"
#include "common/unique_fd.h"
#include "xet/hash.h"

namespace cairn::store {

// Xorbs and shards as clients uploaded them; grants record which scope registered a shard, and revocations
// which scope removed a file since (cas/grant.h), so that an index can be rebuilt from the store alone.
enum class BlobKind : uint8_t { kXorb, kShard, kGrant, kRevocation };
inline constexpr BlobKind kBlobKinds[] = {BlobKind::kXorb, BlobKind::kShard, BlobKind::kGrant,
                                          BlobKind::kRevocation};
std::string_view BlobKindName(BlobKind kind);    // "xorb", "shard", "grant", "revocation"
std::string_view BlobKindFolder(BlobKind kind);  // where a store keeps each kind: "xorbs", "shards", ...

// Decides whether an already-stored blob of the expected size is intact. `existing` is valid only during the
// call. Used e.g. to re-validate a stored xorb instead of comparing it byte for byte with the upload.
using ExistingVerifier = std::function<bool(std::span<const uint8_t> existing)>;

struct PutOptions {
  ExistingVerifier verify_existing;  // empty: an existing blob must equal the new bytes exactly
};

struct PutOutcome {
  bool already_present = false;   // an intact blob was there; the new bytes were discarded
  bool replaced_corrupt = false;  // a blob was there but failed verification; it was replaced
};

struct BlobStat {
  bool exists = false;
  uint64_t size = 0;
};

// A blob opened for reading: its size, and where the store keeps blobs in files, a read-only descriptor
// positioned nowhere in particular (use pread/sendfile with explicit offsets). The caller owns it; it stays
// valid after the blob is deleted or replaced (it then reads the old bytes). Stores without files (S3) give
// no descriptor: read through ReadRange.
struct OpenBlob {
  UniqueFd fd;  // invalid where the store has no file to give
  uint64_t size = 0;
};

// Makes the bytes appended to one put durable while the put goes on: a thread of the caller's flushes behind
// the thread that appends, so that Commit finds little left to flush. Obtained from BlobWriter::NewFlusher.
class BlobFlusher {
 public:
  virtual ~BlobFlusher() = default;
  // Makes every byte appended before the call durable. Thread-safe against Append on the writer. A failure
  // also fails the writer's Commit: the put cannot succeed any more.
  virtual Status Flush() = 0;

 protected:
  BlobFlusher() = default;
};

// One put in progress. Append pieces in order, then Commit once. Destroying the writer without a
// successful Commit aborts the put and removes whatever was written.
class BlobWriter {
 public:
  virtual ~BlobWriter() = default;
  BlobWriter(const BlobWriter&) = delete;
  BlobWriter& operator=(const BlobWriter&) = delete;

  // Appends `data`. After a failure the writer is unusable: only destruction (= abort) remains.
  virtual Status Append(std::span<const uint8_t> data) = 0;
  // Appends `data` that the caller keeps valid and unchanged until Commit has returned or the writer is
  // destroyed: a store may then send it from the caller's memory instead of copying it (S3). Same failures.
  virtual Status AppendStable(std::span<const uint8_t> data) { return Append(data); }
  // A flusher for this put (see BlobFlusher), or null when the store cannot flush early or gains nothing
  // by it (Commit alone is always enough). Call it before the first Append; it must not outlive the writer.
  virtual std::unique_ptr<BlobFlusher> NewFlusher() { return nullptr; }
  // A descriptor of the file the put writes, from which the bytes appended so far can be read (pread,
  // sendfile) while the put is open: a caller that fills a blob as its bytes arrive can serve them from there
  // instead of keeping a copy of its own. Owned by the writer (duplicate it to keep it past the writer's
  // life or its Commit). -1 where the store keeps a put elsewhere than in a file (S3, memory).
  virtual int ReadableFd() const { return -1; }
  // Makes the blob durable and visible under its name. May be called once.
  virtual Result<PutOutcome> Commit(const PutOptions& options = {}) = 0;
  virtual uint64_t bytes_appended() const = 0;

 protected:
  BlobWriter() = default;
};

// The bytes [offset, offset + length) of one blob, read in order. Read fills `out` exactly with the next
// bytes; its errors are ReadRange's (kInconsistent also for reading past `length`), and after one the reader
// is spent. One thread at a time; the store must outlive the reader.
class BlobReader {
 public:
  virtual ~BlobReader() = default;
  virtual Status Read(std::span<uint8_t> out) = 0;
};

class BlobStore {
 public:
  virtual ~BlobStore() = default;
  BlobStore(const BlobStore&) = delete;
  BlobStore& operator=(const BlobStore&) = delete;

  // Starts a streaming put, e.g. so a xorb upload can be written while it is validated.
  virtual Result<std::unique_ptr<BlobWriter>> BeginPut(BlobKind kind, const xet::Hash& hash) = 0;

  // Puts the concatenation of `pieces` (a convenience over BeginPut/Append/Commit).
  Result<PutOutcome> Put(BlobKind kind, const xet::Hash& hash,
                         std::span<const std::span<const uint8_t>> pieces, const PutOptions& options = {});
  Result<PutOutcome> Put(BlobKind kind, const xet::Hash& hash, std::span<const uint8_t> bytes,
                         const PutOptions& options = {});

  // exists=false (not an error) for an unknown blob.
  virtual Result<BlobStat> Stat(BlobKind kind, const xet::Hash& hash) = 0;

  // Reads exactly out.size() bytes starting at `offset`. kInconsistent when [offset, offset + out.size())
  // does not lie inside the blob; kNotFound when there is no blob.
  virtual Status ReadRange(BlobKind kind, const xet::Hash& hash, uint64_t offset, std::span<uint8_t> out) = 0;
  // The whole blob (Stat, then one ReadRange): kNotFound when there is none, ReadRange's errors otherwise.
  Result<std::vector<uint8_t>> ReadWhole(BlobKind kind, const xet::Hash& hash);

  // A reader of [offset, offset + length) of a blob; contacts nothing until its first Read. A store reached
  // over the network answers it with one request read as the reader goes (not one per ReadRange); the
  // default reads through ReadRange.
  virtual std::unique_ptr<BlobReader> OpenRange(BlobKind kind, const xet::Hash& hash, uint64_t offset,
                                                uint64_t length);

  // The blob's size and, where the store has files, a descriptor for zero-copy serving (sendfile).
  // kNotFound when there is no blob.
  virtual Result<OpenBlob> OpenForRead(BlobKind kind, const xet::Hash& hash) = 0;
  // Whether the store keeps blobs in local files: OpenForRead is then cheap enough for a network thread and
  // gives a descriptor. False for a store reached over the network (S3), whose calls wait on round trips.
  virtual bool local() const { return true; }

  // Calls `fn` for every blob of `kind`, in no particular order. Blobs put or deleted during the walk may or
  // may not be reported.
  virtual Status List(BlobKind kind, const std::function<void(const xet::Hash&)>& fn) = 0;

  // Removes a blob durably. Returns whether one was there (deleting an unknown blob is not an error).
  virtual Result<bool> Delete(BlobKind kind, const xet::Hash& hash) = 0;
  // Removes many blobs durably (unknown ones are not an error), in as few requests as the store allows (S3:
  // one per 1,000). The default deletes them one by one. A failure may leave some deleted: run it again.
  virtual Status DeleteMany(BlobKind kind, std::span<const xet::Hash> hashes);

  // A URL that lets anyone GET the whole blob until `expiry_unix` without credentials, straight from the
  // store (an S3 presigned URL); empty where the store has none (local disk). `tag` is signed into the URL
  // and otherwise ignored: different tags give different URLs for the same blob. Thread-safe, contacts
  // nothing.
  virtual std::string PresignedUrl(BlobKind /*kind*/, const xet::Hash& /*hash*/, uint64_t /*now_unix*/,
                                   uint64_t /*expiry_unix*/, std::string_view /*tag*/) const {
    return {};
  }

  // Whether the store answers now (readiness): kUnavailable or kIo when it does not.
  virtual Status Ping() { return Ok{}; }
  // Where the blobs are, for messages and logs ("file:/srv/cairn/blobs", "s3://bucket at http://..."),
  // without credentials.
  virtual std::string Describe() const = 0;

 protected:
  BlobStore() = default;
  // What OpenRange does by default: a reader calling this store's ReadRange as it goes (for decorators that
  // want it whatever the store they wrap does).
  std::unique_ptr<BlobReader> ReaderThroughReadRange(BlobKind kind, const xet::Hash& hash, uint64_t offset,
                                                     uint64_t length);
};

}  // namespace cairn::store
