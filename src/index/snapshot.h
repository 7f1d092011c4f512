// What a snapshot of the index (the SQLite file `cairn backup` writes with CopyIndex) names in the blob
// store, read from the file directly: opened read-only, never migrated, so that a backup's snapshot stays
// byte for byte what its manifest says.
//
// Thread-safety: a plain function; the file must not change while it reads.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/error.h"
#include "index/records.h"

namespace cairn::index {

struct SnapshotObjects {
  // Registered and not claimed by a sweep (a claimed one's bytes may be gone already: the collector of the
  // deployment the snapshot is restored into finishes its sweep), in hash order.
  std::vector<XorbHash> xorbs;
  std::vector<Hash> shards;
  uint64_t xorb_bytes = 0;  // their chunk regions
  uint64_t shard_bytes = 0;
  // The scopes each of those shards was registered for (cas/grant.h names their grants).
  std::vector<ShardScope> shard_scopes;
  // Those shards with no recorded scope (registered before schema 12): only their grants know their scopes.
  std::vector<Hash> unscoped_shards;
  // The revocations not cleared (cas/grant.h: each has a blob).
  std::vector<RevocationKey> revocations;
};

Result<SnapshotObjects> ReadSnapshotObjects(const std::string& sqlite_path);

// Makes the SQLite index file at `path`, closed by everyone, one self-contained file (a rollback journal
// instead of a write-ahead log, so that it opens read-only with nothing beside it) and durable.
Status SealSnapshotFile(const std::string& path);

}  // namespace cairn::index
