#include "store/open_store.h"

#include "store/local_disk_store.h"
#include "store/s3_store.h"

namespace cairn::store {

Result<StoreLocation> ParseStoreUrl(std::string_view url) {
  StoreLocation where;
  if (url.starts_with("file:") && url.size() > 5) {
    where.kind = StoreLocation::Kind::kFile;
    where.path = std::string(url.substr(5));
    return where;
  }
  if (url.starts_with("s3://") && url.size() > 5) {
    where.kind = StoreLocation::Kind::kS3;
    std::string_view rest = url.substr(5);
    const size_t slash = rest.find('/');
    where.bucket = std::string(rest.substr(0, slash));
    if (slash != std::string_view::npos) where.prefix = std::string(rest.substr(slash + 1));
    if (where.bucket.empty()) return Malformed("store URL " + std::string(url) + " names no bucket");
    if (!where.prefix.empty() && !where.prefix.ends_with('/')) where.prefix += '/';
    return where;
  }
  return Malformed("store URL must be file:PATH or s3://BUCKET[/PREFIX], not \"" + std::string(url) + "\"");
}

Result<std::unique_ptr<BlobStore>> OpenStore(std::string_view url, const OpenStoreOptions& options) {
  auto where = ParseStoreUrl(url);
  if (!where) return where.error();
  if (where->kind == StoreLocation::Kind::kFile) {
    auto local = LocalDiskStore::Open(where->path);
    if (!local) return local.error();
    return std::unique_ptr<BlobStore>(std::move(*local));
  }
  S3StoreOptions s3;
  s3.s3 = options.s3;
  s3.s3.bucket = where->bucket;
  s3.prefix = where->prefix;
  s3.part_bytes = options.s3_part_bytes;
  s3.public_endpoint = options.s3_public_endpoint;
  auto remote = S3Store::Open(std::move(s3));
  if (!remote) return remote.error();
  return std::unique_ptr<BlobStore>(std::move(*remote));
}

}  // namespace cairn::store
