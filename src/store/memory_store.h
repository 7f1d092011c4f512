// A BlobStore in memory, for tests. Same contract as every BlobStore (see blob_store.h) except durability:
// everything is lost with the object. OpenForRead returns a sealed memfd copy of the blob.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "store/blob_store.h"

namespace cairn::store {

class MemoryStore final : public BlobStore {
 public:
  MemoryStore() = default;

  Result<std::unique_ptr<BlobWriter>> BeginPut(BlobKind kind, const xet::Hash& hash) override;
  Result<BlobStat> Stat(BlobKind kind, const xet::Hash& hash) override;
  Status ReadRange(BlobKind kind, const xet::Hash& hash, uint64_t offset, std::span<uint8_t> out) override;
  Result<OpenBlob> OpenForRead(BlobKind kind, const xet::Hash& hash) override;
  Status List(BlobKind kind, const std::function<void(const xet::Hash&)>& fn) override;
  Result<bool> Delete(BlobKind kind, const xet::Hash& hash) override;
  std::string Describe() const override { return "memory"; }

  // Test hook: replaces a blob's bytes without any checks (simulates on-media corruption).
  void OverwriteForTest(BlobKind kind, const xet::Hash& hash, std::vector<uint8_t> bytes);

 private:
  class Writer;
  using Key = std::pair<BlobKind, xet::Hash>;
  using Bytes = std::shared_ptr<const std::vector<uint8_t>>;

  Bytes Find(BlobKind kind, const xet::Hash& hash);
  Result<PutOutcome> Commit(BlobKind kind, const xet::Hash& hash, std::vector<uint8_t> bytes,
                            const PutOptions& options);

  std::mutex mu_;
  std::map<Key, Bytes> blobs_;  // values are immutable and shared, so readers copy outside the lock
};

}  // namespace cairn::store
