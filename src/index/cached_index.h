// The index behind in-memory caches of the records that never change once written: xorb layouts (every
// reconstruction and every upload's check reads them) and the xorbs a shard brought together. One decorator
// for every backend, applied where the index is opened (OpenIndex), so the backends hold no cache of their
// own. Everything else passes straight through (forwarding_index.h).
//
// Contract: index.h's, unchanged (a cached record is the one the backend returned, and records are
// immutable). Thread-safety: as the inner index; the caches are thread-safe (common/lru_cache.h). Owns the
// inner index. Failures are the inner index's, never cached. When records can be deleted (garbage
// collection), the deleting path must forget them here first.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/lru_cache.h"
#include "index/forwarding_index.h"

namespace cairn::index {

class CachedIndex final : public ForwardingIndex {
 public:
  // `cache_bytes` is shared between the two caches: 15/16 for xorb layouts, 1/16 for shards' xorbs.
  CachedIndex(std::unique_ptr<Index> inner, size_t cache_bytes);

  Result<std::shared_ptr<const XorbEntry>> GetXorb(const XorbHash& hash) override;
  Result<std::vector<std::shared_ptr<const XorbEntry>>> GetXorbs(std::span<const XorbHash> hashes) override;
  Result<bool> HasXorb(const XorbHash& hash) override;
  Result<std::shared_ptr<const ShardXorbs>> GetShardXorbs(const Hash& shard) override;

 private:
  LruCache<XorbHash, XorbEntry, xet::HashHasher> xorbs_;
  LruCache<Hash, ShardXorbs, xet::HashHasher> shard_xorbs_;
};

}  // namespace cairn::index
