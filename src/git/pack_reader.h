// Reads a git pack (gitformat-pack.txt, versions 2 and 3) as a client pushes it or an upstream's upload-pack
// sends it: every entry inflated, deltas (ofs-delta and ref-delta) applied, each object's id computed, the
// trailing SHA-1 checked. What receive-pack and a mirror store.
//
// Hostile input is the normal case, so everything is bounded: by the bytes given (no read past them), by the
// limits (objects, one object's size before and after a delta, all objects' bytes together, delta chains),
// and every zlib stream must inflate to exactly the size its header announced (a zip bomb stops at the
// bound). Failures: kMalformed for a pack git would not have written, kLimit past a limit, kUnknownReference
// for a ref-delta whose base is neither in the pack nor given by `base`. Pure: no I/O, no threads.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "common/error.h"
#include "hub/git_object.h"

namespace cairn::git {

struct PackLimits {
  size_t max_objects = 1000000;
  uint64_t max_object_bytes = 64ULL << 20;  // one object, inflated (a delta and what it makes alike)
  uint64_t max_total_bytes = 2ULL << 30;    // every object's bytes together (what the reader holds)
  size_t max_delta_depth = 4096;            // a chain of deltas, each on the one before
};

using PackedObject = hub::RawObject;

// An object the pack's deltas may be based on without carrying it (a thin pack's bases: what the receiver
// has).
using BaseLookup = std::function<std::optional<PackedObject>(const hub::ObjectId&)>;

// The pack's objects in pack order. Annotated tags (type 4) are refused (kMalformed): the Hub's tags are
// lightweight.
Result<std::vector<PackedObject>> ReadPack(std::span<const uint8_t> pack, const PackLimits& limits,
                                           const BaseLookup& base = nullptr);

// Applies one delta (gitformat-pack.txt, "Deltified representation") to `base`; kMalformed for a delta that
// does not fit it, kLimit when the result would pass `max_bytes`.
Result<std::vector<uint8_t>> ApplyDelta(std::span<const uint8_t> base, std::span<const uint8_t> delta,
                                        uint64_t max_bytes);

}  // namespace cairn::git
