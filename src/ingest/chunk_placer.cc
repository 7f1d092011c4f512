#include "ingest/chunk_placer.h"

#include <algorithm>

#include "ingest/shard_records.h"
#include "xet/xorb.h"

namespace cairn::ingest {

std::vector<std::span<const uint8_t>> SealedXorb::Spans() const {
  std::vector<std::span<const uint8_t>> spans;
  spans.reserve(ends.size());
  uint32_t start = 0;
  for (const uint32_t end : ends) {
    spans.emplace_back(data.data() + start, end - start);
    start = end;
  }
  return spans;
}

std::vector<xet::ChunkHash> SealedXorb::Hashes() const {
  std::vector<xet::ChunkHash> hashes;
  hashes.reserve(chunks.size());
  for (const auto& c : chunks) hashes.push_back(c.hash);
  return hashes;
}

std::vector<xet::PrehashedChunk> SealedXorb::Prehashed() const {
  std::vector<xet::PrehashedChunk> out;
  out.reserve(ends.size());
  uint32_t start = 0;
  for (size_t i = 0; i < ends.size(); ++i) {
    out.push_back({static_cast<uint32_t>(start + xet::kChunkHeaderSize), chunks[i].hash});
    start = ends[i];
  }
  return out;
}

ChunkPlacer::ChunkPlacer(Options options) : o_(std::move(options)) {
  o_.max_xorb_bytes = std::min<uint64_t>(std::max<uint64_t>(o_.max_xorb_bytes, 1), xet::kMaxXorbUnpacked);
  if (o_.new_buffer) current_.data = o_.new_buffer();
}

std::optional<ChunkPlacer::Placement> ChunkPlacer::Known(File& file, const xet::ChunkHash& h, uint64_t size) {
  const bool first = file.chunks_.empty();
  file.chunks_.push_back({h, size});
  file.size_ += size;
  ++stats_.chunks;
  const auto reuse = [&](const Placement& p) {
    file.at_.push_back(p);
    ++stats_.chunks_deduped;
    return p;
  };
  if (auto it = placed_.find(h); it != placed_.end()) return reuse(it->second);
  if (auto p = RemoteMatch(h)) return reuse(*p);
  if (o_.ask && (first || h.mod(xet::kGlobalDedupModulus) == 0)) {
    ++stats_.dedup_queries;
    if (auto answer = o_.ask(h)) {
      Learn(*answer);
      if (auto p = RemoteMatch(h)) return reuse(*p);
    }
  }
  return std::nullopt;
}

void ChunkPlacer::Append(File& file, const xet::ChunkHash& h, uint64_t size, std::span<const uint8_t> bytes) {
  const Placement p{false, static_cast<uint32_t>(sealed_.size()),
                    static_cast<uint32_t>(current_.chunks.size())};
  current_.data.insert(current_.data.end(), bytes.begin(), bytes.end());
  current_.ends.push_back(static_cast<uint32_t>(current_.data.size()));
  current_.chunks.push_back({h, size});
  current_unpacked_ += size;
  placed_.emplace(h, p);
  file.at_.push_back(p);
}

Status ChunkPlacer::Place(File& file, std::span<const uint8_t> bytes) {
  const xet::ChunkHash h = xet::ChunkHashOf(bytes);
  if (Known(file, h, bytes.size())) return Ok{};
  if (current_.encoded || current_.chunks.size() == xet::kMaxXorbChunks ||
      current_unpacked_ + bytes.size() > o_.max_xorb_bytes) {
    if (auto st = Flush(); !st) return st;
  }
  current_.encoded = false;
  Append(file, h, bytes.size(), bytes);
  return Ok{};
}

Status ChunkPlacer::PlaceEncoded(File& file, const xet::ChunkHash& hash, uint32_t size,
                                 std::span<const uint8_t> record, const std::optional<xet::XorbHash>& whole) {
  if (Known(file, hash, size)) return Ok{};
  if (!current_.encoded || current_whole_ != whole || current_.chunks.size() == xet::kMaxXorbChunks ||
      current_unpacked_ + size > o_.max_xorb_bytes ||
      current_.data.size() + record.size() > xet::kMaxXorbUploadBytes) {
    if (auto st = Flush(); !st) return st;
  }
  current_.encoded = true;
  current_whole_ = whole;
  Append(file, hash, size, record);
  return Ok{};
}

Status ChunkPlacer::Flush() {
  return current_.chunks.empty() ? Status(Ok{}) : Seal();
}

Status ChunkPlacer::Seal() {
  current_.hash = xet::XorbHashOf(current_.chunks);
  sealed_.emplace_back(current_.hash, current_.chunks);
  ++stats_.xorbs_sealed;
  stats_.new_bytes += current_unpacked_;
  SealedXorb done = std::move(current_);
  current_ = SealedXorb{};
  current_unpacked_ = 0;
  if (o_.new_buffer) current_.data = o_.new_buffer();
  return o_.on_seal ? o_.on_seal(std::move(done)) : Status(Ok{});
}

std::optional<ChunkPlacer::Placement> ChunkPlacer::RemoteMatch(const xet::ChunkHash& h) const {
  for (const auto& [key, table] : keyed_) {
    const auto it = table.find(xet::HmacChunkHash(key, h));  // a zero key keys nothing
    if (it != table.end()) return it->second;
  }
  return std::nullopt;
}

// The xorbs of a dedup answer join what later chunks are matched against; an answer that does not parse
// teaches nothing.
void ChunkPlacer::Learn(std::span<const uint8_t> answer) {
  auto shard = xet::ParseShard(answer);
  if (!shard || !shard->footer) return;
  const xet::HmacKey& key = shard->footer->chunk_hash_hmac_key;
  auto found = std::find_if(keyed_.begin(), keyed_.end(), [&](const auto& e) { return e.first == key; });
  if (found == keyed_.end()) found = keyed_.insert(keyed_.end(), {key, {}});
  auto& table = found->second;
  for (const auto& x : shard->xorbs) {
    const auto id = static_cast<uint32_t>(remote_.size());
    remote_.push_back(x.hash);
    for (uint32_t c = 0; c < x.chunks.size(); ++c) table.emplace(x.chunks[c].hash, Placement{true, id, c});
  }
}

xet::FileRecord ChunkPlacer::RecordOf(const File& file) const {
  std::vector<PlacedChunk> placed;
  placed.reserve(file.at_.size());
  for (size_t i = 0; i < file.at_.size(); ++i) {
    const Placement& p = file.at_[i];
    placed.push_back({file.chunks_[i].hash, file.chunks_[i].size,
                      p.remote ? remote_[p.xorb] : sealed_[p.xorb].first, p.chunk});
  }
  return FileRecordOf(placed);
}

std::vector<xet::XorbRecord> ChunkPlacer::Listings() const {
  std::vector<xet::XorbRecord> out;
  out.reserve(sealed_.size());
  for (const auto& [hash, chunks] : sealed_)
    out.push_back(XorbRecordOf(hash, chunks, /*mark_global_dedup=*/true));
  return out;
}

}  // namespace cairn::ingest
