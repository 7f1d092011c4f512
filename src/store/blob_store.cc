#include "store/blob_store.h"

namespace cairn::store {

std::string_view BlobKindName(BlobKind kind) {
  return kind == BlobKind::kXorb ? "xorb" : "shard";
}

xet::Result<PutOutcome> BlobStore::Put(BlobKind kind, const xet::Hash& hash,
                                       std::span<const std::span<const uint8_t>> pieces,
                                       const PutOptions& options) {
  auto writer = BeginPut(kind, hash);
  if (!writer.ok()) return writer.error();
  for (const auto& piece : pieces) {
    if (auto st = (*writer)->AppendStable(piece); !st.ok()) return st.error();  // alive until we return
  }
  return (*writer)->Commit(options);
}

xet::Result<PutOutcome> BlobStore::Put(BlobKind kind, const xet::Hash& hash, std::span<const uint8_t> bytes,
                                       const PutOptions& options) {
  const std::span<const uint8_t> pieces[] = {bytes};
  return Put(kind, hash, pieces, options);
}

}  // namespace cairn::store
