// A BlobStore in an S3-compatible bucket (see blob_store.h for the contract every store keeps).
//
// Layout: <prefix>xorbs/<hex> and <prefix>shards/<hex>, where <hex> is the Xet hex form of the hash.
//
// How a put becomes durable and atomic: S3 makes an object visible whole or not at all, and a 200 for a PUT
// (or for CompleteMultipartUpload) means the store has it durably. A blob up to `part_bytes` is one PUT; a
// larger one is a multipart upload whose parts are sent as the bytes arrive. Bytes appended with AppendStable
// are sent from the caller's memory (a xorb upload's own buffer: no second copy of a 64 MiB xorb); Append
// copies, and holds at most a part beyond what it has sent. Every PUT carries its body's SHA-256 in the
// signature (and `x-amz-checksum-sha256`), so the store refuses a body corrupted on the way. A put that is
// abandoned aborts its multipart upload.
//
// First writer wins: the put is conditional (`If-None-Match: *`), so a blob already stored is never
// overwritten by another node's concurrent put of the same hash (the index describes the bytes that were
// stored first). When the condition fails, the existing object is read back and judged by the caller's
// verifier (or compared with a digest of the new bytes); only a corrupt one is replaced.
//
// Descriptors: OpenForRead gives the size and no descriptor (there is no file to sendfile from); readers
// use ReadRange, one ranged GET each. OpenForRead answers from a bounded memory of the sizes this process saw
// (blobs are immutable), so a transfer costs one request to the store, not two; Stat always asks the store.
// A remembered size can only go stale if another process deletes or replaces the blob: a read that then
// fails forgets it, so the failure is an error the client retries, never wrong bytes.
//
// Thread-safety: as BlobStore. Failures: kNotFound, kInconsistent as the contract says; kUnavailable when
// the store cannot be reached or keeps failing (the API answers 503 and the client retries); kIo for what
// the store refused (credentials, a missing bucket), with the store's error code.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "store/blob_store.h"
#include "store/s3_client.h"

namespace cairn::store {

struct S3StoreOptions {
  S3Options s3;
  std::string prefix;           // key prefix inside the bucket ("" or ending in '/')
  std::string public_endpoint;  // presigned URLs name this endpoint (where clients reach the store), if set
  // Blobs up to this size are one PUT; larger ones multipart uploads of parts this large (≥ 5 MiB). One PUT
  // of a 35 MB xorb beat 16 MiB parts streamed as they arrive on SeaweedFS on loopback (BENCHMARKS.md).
  size_t part_bytes = 128ULL << 20;
};

class S3Store final : public BlobStore {
 public:
  // Checks the bucket answers with these credentials (one HEAD): a missing bucket or refused credentials
  // is one clear error here rather than a failure at the first upload.
  static Result<std::unique_ptr<S3Store>> Open(S3StoreOptions options);

  Result<std::unique_ptr<BlobWriter>> BeginPut(BlobKind kind, const xet::Hash& hash) override;
  Result<BlobStat> Stat(BlobKind kind, const xet::Hash& hash) override;
  Status ReadRange(BlobKind kind, const xet::Hash& hash, uint64_t offset, std::span<uint8_t> out) override;
  Result<OpenBlob> OpenForRead(BlobKind kind, const xet::Hash& hash) override;
  // One ranged GET, read as the reader goes (S3RangeReader).
  std::unique_ptr<BlobReader> OpenRange(BlobKind kind, const xet::Hash& hash, uint64_t offset,
                                        uint64_t length) override;
  Status List(BlobKind kind, const std::function<void(const xet::Hash&)>& fn) override;
  Result<bool> Delete(BlobKind kind, const xet::Hash& hash) override;
  // DeleteObjects, 1,000 keys a request.
  Status DeleteMany(BlobKind kind, std::span<const xet::Hash> hashes) override;
  Status Ping() override;
  bool local() const override { return false; }
  std::string PresignedUrl(BlobKind kind, const xet::Hash& hash, uint64_t now_unix, uint64_t expiry_unix,
                           std::string_view tag) const override;
  std::string Describe() const override;

  // The object key of a blob.
  std::string KeyOf(BlobKind kind, const xet::Hash& hash) const;
  S3Client& client() { return *client_; }

 private:
  class Writer;
  class Reader;
  S3Store(S3StoreOptions options, std::unique_ptr<S3Client> client)
      : options_(std::move(options)), client_(std::move(client)) {}
  // An S3 answer that is neither success nor the expected miss, as an error naming the operation.
  Error Refused(std::string_view what, const S3Response& res) const;

  void RememberSize(BlobKind kind, const xet::Hash& hash, uint64_t size);
  void ForgetSize(BlobKind kind, const xet::Hash& hash);

  const S3StoreOptions options_;
  std::unique_ptr<S3Client> client_;
  std::unique_ptr<S3Client>
      presigner_;  // the same bucket and keys at public_endpoint; null: client_ presigns
  // Sizes seen, by kind and hash (the key's first byte is the kind). Cleared whole when full.
  static constexpr size_t kMaxSizes = 1 << 18;
  std::mutex sizes_mu_;
  std::unordered_map<std::string, uint64_t> sizes_;
};

}  // namespace cairn::store
