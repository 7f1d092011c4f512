// How the Hub's services (hub_service.cc, purge.cc, history.cc, hub_check.cc) store git objects in the
// index: keyed by their id's bytes, of their kind, with their body. Internal to src/hub/.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hub/git_object.h"
#include "hub/hub_service.h"
#include "index/repo_records.h"

namespace cairn::hub {

// An object's key in the index: its id's bytes.
inline std::vector<uint8_t> KeyOf(const ObjectId& id) {
  return id.key();
}

// The object `body` of `kind` as the index stores it; its id in *id_out when given.
inline index::RepoObject StoredObject(ObjectKind kind, std::vector<uint8_t> body,
                                      ObjectId* id_out = nullptr) {
  const ObjectId id = HashObject(kind, body);
  if (id_out != nullptr) *id_out = id;
  return index::RepoObject{.key = KeyOf(id), .kind = static_cast<uint8_t>(kind), .data = std::move(body)};
}

inline std::vector<uint8_t> BytesOf(std::string_view s) {
  return {s.begin(), s.end()};
}

// The longest blob that can be an LFS pointer cairn writes (version line, oid line, size line): a walk reads
// no more of a blob to tell.
inline constexpr size_t kMaxLfsPointerBytes = 200;

}  // namespace cairn::hub
