#include "index/cached_index.h"

#include <unordered_map>

namespace cairn::index {

CachedIndex::CachedIndex(std::unique_ptr<Index> inner, size_t cache_bytes)
    : ForwardingIndex(std::move(inner)), xorbs_(cache_bytes / 16 * 15), shard_xorbs_(cache_bytes / 16) {}

Result<std::shared_ptr<const XorbEntry>> CachedIndex::GetXorb(const XorbHash& hash) {
  if (auto hit = xorbs_.Get(hash)) return hit;
  auto e = inner().GetXorb(hash);
  if (e.ok()) xorbs_.Put(hash, *e, (*e)->memory_size());
  return e;
}

Result<std::vector<std::shared_ptr<const XorbEntry>>> CachedIndex::GetXorbs(
    std::span<const XorbHash> hashes) {
  if (hashes.size() > kMaxXorbsPerRead) return Malformed("too many xorbs in one read");
  std::vector<std::shared_ptr<const XorbEntry>> out(hashes.size());
  // The misses go to the backend in one read (one round trip on PostgreSQL), each hash once.
  std::vector<XorbHash> missing;
  std::unordered_map<XorbHash, std::vector<size_t>, xet::HashHasher> wanted;  // hash -> its places in out
  for (size_t i = 0; i < hashes.size(); ++i) {
    if ((out[i] = xorbs_.Get(hashes[i])) != nullptr) continue;
    auto& places = wanted[hashes[i]];
    if (places.empty()) missing.push_back(hashes[i]);
    places.push_back(i);
  }
  if (missing.empty()) return out;
  auto found = inner().GetXorbs(missing);
  if (!found.ok()) return found.error();
  if (found->size() != missing.size()) return IoError("index: a read of xorbs answered the wrong count");
  for (size_t m = 0; m < missing.size(); ++m) {
    const auto& e = (*found)[m];
    if (e == nullptr) continue;
    xorbs_.Put(missing[m], e, e->memory_size());
    for (size_t i : wanted[missing[m]]) out[i] = e;
  }
  return out;
}

Result<bool> CachedIndex::HasXorb(const XorbHash& hash) {
  if (xorbs_.Get(hash)) return true;
  return inner().HasXorb(hash);
}

Result<std::shared_ptr<const ShardXorbs>> CachedIndex::GetShardXorbs(const Hash& shard) {
  if (auto hit = shard_xorbs_.Get(shard)) return hit;
  auto e = inner().GetShardXorbs(shard);
  if (e.ok()) shard_xorbs_.Put(shard, *e, (*e)->memory_size());
  return e;
}

}  // namespace cairn::index
