#include "git/pack_reader.h"

#include <openssl/evp.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <unordered_map>

#include "git/zlib.h"

namespace cairn::git {

namespace {

using hub::ObjectId;
using hub::ObjectKind;

constexpr uint8_t kOfsDelta = 6;
constexpr uint8_t kRefDelta = 7;

// A little-endian base-128 size as deltas write them; nullopt past the end or past 64 bits.
std::optional<uint64_t> DeltaSize(std::span<const uint8_t> in, size_t& pos) {
  uint64_t v = 0;
  for (unsigned shift = 0; shift < 64; shift += 7) {
    if (pos == in.size()) return std::nullopt;
    const uint8_t c = in[pos++];
    v |= static_cast<uint64_t>(c & 0x7f) << shift;
    if ((c & 0x80) == 0) return v;
  }
  return std::nullopt;
}

bool Sha1(std::span<const uint8_t> bytes, uint8_t out[20]) {
  unsigned len = 0;
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  const bool ok = ctx != nullptr && EVP_DigestInit_ex(ctx, EVP_sha1(), nullptr) == 1 &&
                  EVP_DigestUpdate(ctx, bytes.data(), bytes.size()) == 1 &&
                  EVP_DigestFinal_ex(ctx, out, &len) == 1 && len == 20;
  EVP_MD_CTX_free(ctx);
  return ok;
}

struct Entry {
  uint64_t offset = 0;
  uint8_t type = 0;           // 1-3, or a delta's 6 / 7
  std::vector<uint8_t> data;  // the body, or the delta until it is applied
  uint64_t base_offset = 0;   // ofs-delta
  ObjectId base_id;           // ref-delta
  std::optional<PackedObject> object;
  size_t depth = 0;
};

ObjectKind KindOf(uint8_t type) {
  return type == 1 ? ObjectKind::kCommit : type == 2 ? ObjectKind::kTree : ObjectKind::kBlob;
}

}  // namespace

Result<std::vector<uint8_t>> ApplyDelta(std::span<const uint8_t> base, std::span<const uint8_t> delta,
                                        uint64_t max_bytes) {
  size_t pos = 0;
  const auto src_size = DeltaSize(delta, pos);
  const auto dst_size = DeltaSize(delta, pos);
  if (!src_size || !dst_size) return Malformed("pack: a delta's header is cut");
  if (*src_size != base.size()) return Malformed("pack: a delta is for a base of another size");
  if (*dst_size > max_bytes) return LimitExceeded("pack: an object past the size limit");
  std::vector<uint8_t> out;
  out.reserve(*dst_size);
  while (pos < delta.size()) {
    const uint8_t op = delta[pos++];
    if ((op & 0x80) != 0) {
      // Copy from the base: up to four offset bytes and three size bytes, each present when its bit is set.
      uint64_t offset = 0;
      uint64_t size = 0;
      for (unsigned i = 0; i < 7; ++i) {
        if ((op & (1U << i)) == 0) continue;
        if (pos == delta.size()) return Malformed("pack: a delta's copy is cut");
        const uint64_t byte = delta[pos++];
        if (i < 4) {
          offset |= byte << (8 * i);
        } else {
          size |= byte << (8 * (i - 4));
        }
      }
      if (size == 0) size = 0x10000;
      if (offset > base.size() || size > base.size() - offset || size > *dst_size - out.size()) {
        return Malformed("pack: a delta copies from outside its base or past its size");
      }
      out.insert(out.end(), base.begin() + static_cast<std::ptrdiff_t>(offset),
                 base.begin() + static_cast<std::ptrdiff_t>(offset + size));
    } else if (op != 0) {
      if (op > delta.size() - pos || op > *dst_size - out.size()) {
        return Malformed("pack: a delta's insert is cut or runs past its size");
      }
      out.insert(out.end(), delta.begin() + static_cast<std::ptrdiff_t>(pos),
                 delta.begin() + static_cast<std::ptrdiff_t>(pos + op));
      pos += op;
    } else {
      return Malformed("pack: a delta holds the reserved instruction 0");
    }
  }
  if (out.size() != *dst_size) return Malformed("pack: a delta makes another size than it says");
  return out;
}

namespace {

uint32_t PackWord(std::span<const uint8_t> pack, size_t at) {
  return static_cast<uint32_t>(pack[at]) << 24 | static_cast<uint32_t>(pack[at + 1]) << 16 |
         static_cast<uint32_t>(pack[at + 2]) << 8 | pack[at + 3];
}

// The header (signature, version, object count, which it returns) and the trailing SHA-1.
Result<uint32_t> CheckPackFrame(std::span<const uint8_t> pack, const PackLimits& limits) {
  if (pack.size() < 32 || std::memcmp(pack.data(), "PACK", 4) != 0) {
    return Malformed("pack: no pack header");
  }
  const uint32_t version = PackWord(pack, 4);
  if (version != 2 && version != 3) return Malformed("pack: version " + std::to_string(version));
  const uint32_t count = PackWord(pack, 8);
  if (count > limits.max_objects) {
    return LimitExceeded("pack: " + std::to_string(count) + " objects, more than " +
                         std::to_string(limits.max_objects));
  }
  const size_t end = pack.size() - 20;
  uint8_t digest[20];
  if (!Sha1(pack.first(end), digest)) return IoError("pack: SHA-1 failed");
  if (std::memcmp(digest, pack.data() + end, 20) != 0) return Malformed("pack: the trailing SHA-1 is wrong");
  return count;
}

// An entry's header at `pos` (its type, its inflated size, a delta's base), up to its compressed data; `pos`
// moves past it.
Result<uint64_t> ReadEntryHeader(std::span<const uint8_t> pack, size_t end, size_t& pos, Entry& e) {
  e.offset = pos;
  uint8_t c = pack[pos++];
  e.type = (c >> 4) & 7;
  uint64_t size = c & 0x0f;
  for (unsigned shift = 4; (c & 0x80) != 0; shift += 7) {
    if (pos >= end || shift > 57) return Malformed("pack: an object header is cut or too long");
    c = pack[pos++];
    size |= static_cast<uint64_t>(c & 0x7f) << shift;
  }
  if (e.type == 4) return Malformed("pack: annotated tags are not supported (tags are lightweight here)");
  if (e.type == 0 || e.type == 5) return Malformed("pack: an object of unknown type");
  if (e.type == kOfsDelta) {
    if (pos >= end) return Malformed("pack: a delta's base offset is cut");
    c = pack[pos++];
    uint64_t ofs = c & 0x7f;
    while ((c & 0x80) != 0) {
      if (pos >= end || ofs > (UINT64_MAX >> 7) - 1) return Malformed("pack: a delta's base offset is bad");
      c = pack[pos++];
      ofs = ((ofs + 1) << 7) | (c & 0x7f);
    }
    if (ofs == 0 || ofs > e.offset) return Malformed("pack: a delta's base is not before it");
    e.base_offset = e.offset - ofs;
  } else if (e.type == kRefDelta) {
    if (end - pos < 20) return Malformed("pack: a delta's base id is cut");
    std::memcpy(e.base_id.bytes.data(), pack.data() + pos, 20);
    pos += 20;
  }
  return size;
}

// Every entry, its data inflated (deltas still deltas); `total` counts the inflated bytes against the limit.
Result<std::vector<Entry>> ReadEntries(std::span<const uint8_t> pack, uint32_t count,
                                       const PackLimits& limits, uint64_t& total) {
  const size_t end = pack.size() - 20;
  std::vector<Entry> entries;
  entries.reserve(std::min<size_t>(count, pack.size() / 2));
  size_t pos = 12;
  for (uint32_t i = 0; i < count; ++i) {
    if (pos >= end) return Malformed("pack: fewer objects than its header says");
    Entry e;
    auto size = ReadEntryHeader(pack, end, pos, e);
    if (!size.ok()) return size.error();
    if (*size > limits.max_object_bytes) return LimitExceeded("pack: an object past the size limit");
    total += *size;
    if (total > limits.max_total_bytes) return LimitExceeded("pack: more bytes than the limit");
    size_t consumed = 0;
    auto data = InflateExact(pack.subspan(pos, end - pos), *size, &consumed);
    if (!data.ok()) return data.error();
    e.data = std::move(*data);
    pos += consumed;
    entries.push_back(std::move(e));
  }
  if (pos != end) return Malformed("pack: bytes after its last object");
  return entries;
}

// Resolution: every whole object at once, each delta as soon as its base is known (a worklist of dependents),
// then the bases a thin pack does not carry.
class PackResolver {
 public:
  PackResolver(std::vector<Entry> entries, const PackLimits& limits, uint64_t total)
      : entries_(std::move(entries)), limits_(limits), total_(total) {
    for (size_t i = 0; i < entries_.size(); ++i) at_offset_.emplace(entries_[i].offset, i);
  }

  Result<std::vector<PackedObject>> Resolve(uint32_t count, const BaseLookup& base) && {
    for (size_t i = 0; i < entries_.size(); ++i) {
      if (auto st = Place(i); !st.ok()) return st.error();
    }
    if (auto st = ResolveThin(base); !st.ok()) return st.error();
    if (!waiting_on_offset_.empty()) return Malformed("pack: a delta's base never resolves");
    std::vector<PackedObject> out;
    out.reserve(count);
    for (size_t i = 0; i < count; ++i) {
      if (!entries_[i].object) return Malformed("pack: a delta's base never resolves");
      out.push_back(std::move(*entries_[i].object));
    }
    return out;
  }

 private:
  void Finish(size_t i, ObjectKind kind, std::vector<uint8_t> body) {
    PackedObject o{kind, hub::HashObject(kind, body), std::move(body)};
    by_id_.emplace(o.id, i);
    entries_[i].object = std::move(o);
  }

  // Entry i: a whole object is finished; a delta waits for its base, or is applied when the base is known.
  Status Place(size_t i) {
    Entry& e = entries_[i];
    if (e.type != kOfsDelta && e.type != kRefDelta) {
      Finish(i, KindOf(e.type), std::move(e.data));
      return Cascade(i);
    }
    std::optional<size_t> b;
    if (e.type == kOfsDelta) {
      auto it = at_offset_.find(e.base_offset);
      if (it == at_offset_.end()) return Malformed("pack: a delta's base offset is no object's");
      b = it->second;
      if (!entries_[*b].object) {
        waiting_on_offset_[e.base_offset].push_back(i);
        return Ok{};
      }
    } else {
      auto it = by_id_.find(e.base_id);
      if (it == by_id_.end()) {
        waiting_on_id_[e.base_id].push_back(i);
        return Ok{};
      }
      b = it->second;
    }
    // The base is resolved: queue this delta on it and let the cascade apply it.
    (e.type == kOfsDelta ? waiting_on_offset_[e.base_offset] : waiting_on_id_[e.base_id]).push_back(i);
    return Cascade(*b);
  }

  // The deltas waiting on resolved entry b, taken off the worklists.
  std::vector<size_t> TakeDependents(size_t b) {
    std::vector<size_t> next;
    if (auto it = waiting_on_offset_.find(entries_[b].offset); it != waiting_on_offset_.end()) {
      next = std::move(it->second);
      waiting_on_offset_.erase(it);
    }
    if (auto it = waiting_on_id_.find(entries_[b].object->id); it != waiting_on_id_.end()) {
      next.insert(next.end(), it->second.begin(), it->second.end());
      waiting_on_id_.erase(it);
    }
    return next;
  }

  // Resolves entry `first`'s dependents (and theirs), depth first.
  Status Cascade(size_t first) {
    std::vector<size_t> stack{first};
    while (!stack.empty()) {
      const size_t b = stack.back();
      stack.pop_back();
      for (const size_t d : TakeDependents(b)) {
        const PackedObject& bo = *entries_[b].object;
        if (entries_[b].depth + 1 > limits_.max_delta_depth)
          return LimitExceeded("pack: a delta chain too long");
        auto body = ApplyDelta(bo.body, entries_[d].data, limits_.max_object_bytes);
        if (!body.ok()) return body.error();
        total_ += body->size();
        if (total_ > limits_.max_total_bytes) return LimitExceeded("pack: more bytes than the limit");
        entries_[d].depth = entries_[b].depth + 1;
        std::vector<uint8_t>().swap(entries_[d].data);
        Finish(d, bo.kind, std::move(*body));
        stack.push_back(d);
      }
    }
    return Ok{};
  }

  // Thin packs: bases the pack does not carry, asked of `base`.
  Status ResolveThin(const BaseLookup& base) {
    while (!waiting_on_id_.empty()) {
      const ObjectId id = waiting_on_id_.begin()->first;
      std::optional<PackedObject> found = base ? base(id) : std::nullopt;
      if (!found || found->id != id) {
        return UnknownReference("pack: a delta's base " + id.hex() + " is neither in the pack nor stored");
      }
      // An external base stands in an entry of its own, past the pack's, so the cascade can name it.
      Entry ext;
      ext.offset = UINT64_MAX - entries_.size();
      ext.object = std::move(*found);
      entries_.push_back(std::move(ext));
      if (auto st = Cascade(entries_.size() - 1); !st.ok()) return st;
    }
    return Ok{};
  }

  std::vector<Entry> entries_;
  const PackLimits& limits_;
  uint64_t total_;
  std::unordered_map<uint64_t, size_t> at_offset_;
  std::unordered_map<ObjectId, size_t, hub::ObjectIdHash> by_id_;
  std::unordered_map<uint64_t, std::vector<size_t>> waiting_on_offset_;
  std::unordered_map<ObjectId, std::vector<size_t>, hub::ObjectIdHash> waiting_on_id_;
};

}  // namespace

Result<std::vector<PackedObject>> ReadPack(std::span<const uint8_t> pack, const PackLimits& limits,
                                           const BaseLookup& base) {
  auto count = CheckPackFrame(pack, limits);
  if (!count.ok()) return count.error();
  uint64_t total = 0;
  auto entries = ReadEntries(pack, *count, limits, total);
  if (!entries.ok()) return entries.error();
  return PackResolver(std::move(*entries), limits, total).Resolve(*count, base);
}

}  // namespace cairn::git
