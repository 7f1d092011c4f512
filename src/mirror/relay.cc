#include "mirror/relay.h"

#include <algorithm>
#include <map>

#include "xet/hashing.h"
#include "xet/xorb.h"

namespace cairn::mirror {

xet::Result<std::shared_ptr<Relay>> Relay::Create(const std::filesystem::path& dir, const xet::FileHash& file,
                                                  xet::ParsedReconstruction plan,
                                                  std::vector<std::string> scopes) {
  if (plan.offset_into_first != 0) return xet::Malformed("upstream's whole-file answer starts inside a term");
  std::vector<xet::XorbHash> xorbs;
  xorbs.reserve(plan.fetches.size());
  for (const auto& f : plan.fetches) {
    auto hash = xet::Hash::FromHex(f.xorb);
    if (!hash) return xet::Malformed("upstream's answer names a xorb that is no hash");
    if (f.last >= (1ULL << 32)) return xet::Malformed("upstream's answer has a range past 4 GiB");
    xorbs.push_back(*hash);
  }
  for (const auto& t : plan.terms) {
    if (t.length >= (1ULL << 32)) return xet::Malformed("upstream's answer has a term past 4 GiB");
  }
  auto spool = Spool::Create(dir);
  if (!spool.ok()) return spool.error();
  return std::make_shared<Relay>(file, std::move(plan), std::move(xorbs), std::move(scopes),
                                 std::move(*spool));
}

Relay::Relay(const xet::FileHash& file, xet::ParsedReconstruction plan, std::vector<xet::XorbHash> xorbs,
             std::vector<std::string> scopes, std::shared_ptr<Spool> spool)
    : file_(file),
      plan_(std::move(plan)),
      scopes_(std::move(scopes)),
      spool_(std::move(spool)),
      xorbs_(std::move(xorbs)) {
  base_.assign(plan_.fetches.size(), UINT64_MAX);
  verified_.assign(plan_.fetches.size(), false);
  uint64_t at = 0;
  for (const auto& t : plan_.terms) {
    size_ += t.length;
    if (base_[t.fetch] != UINT64_MAX) continue;
    base_[t.fetch] = at;
    at += plan_.fetches[t.fetch].last - plan_.fetches[t.fetch].first + 1;
    order_.push_back(t.fetch);
    by_xorb_.emplace(xorbs_[t.fetch], t.fetch);
  }
  whole_ = Build(0, size_);
}

bool Relay::Readable(const std::string& scope) const {
  return std::find(scopes_.begin(), scopes_.end(), scope) != scopes_.end();
}

xet::Status Relay::Receive(const Fetcher& fetch, const std::function<bool()>& stopping) {
  // Bytes go to the spool in blocks of kBatch, not as libcurl hands them over (16 KiB): each write wakes the
  // readers waiting on the spool, and a dozen of them woken every 16 KiB cost more than the transfer.
  constexpr size_t kBatch = 256 << 10;
  std::vector<uint8_t> pending;
  pending.reserve(kBatch);
  for (const size_t i : order_) {
    const Fetch& f = plan_.fetches[i];
    const uint64_t length = f.last - f.first + 1;
    uint64_t got = 0;  // written to the spool
    const auto flush = [&]() -> xet::Status {
      if (pending.empty()) return xet::Ok{};
      auto st = spool_->Write(base_[i] + got, pending);
      got += pending.size();
      pending.clear();
      return st;
    };
    for (int tries = 0; got < length; ++tries) {
      const uint64_t before = got;
      xet::Status written = xet::Ok{};
      auto st = fetch(f, got, [&](std::span<const uint8_t> block) {
        if (stopping() || block.size() > length - got - pending.size()) {
          written = xet::Unavailable(stopping() ? "the server is stopping" : "upstream sent more than asked");
          return false;
        }
        pending.insert(pending.end(), block.begin(), block.end());
        if (pending.size() >= kBatch) written = flush();
        return written.ok();
      });
      if (written.ok()) written = flush();  // what came before a cut counts
      if (!written.ok()) st = written;
      if (st.ok() && got < length) st = xet::Unavailable("upstream's range ended short");
      if (st.ok()) break;
      // A cut range is asked again from where it stopped, while tries bring bytes.
      if (st.error().code != xet::ErrorCode::kUnavailable || got == before || tries >= 8 || stopping()) {
        spool_->Finish(false);
        FileChecked(false);  // the file comes through resolve: what was not verified is never served
        return st;
      }
    }
    if (IsWholeXorb(i)) Verified(i);
  }
  spool_->Finish(true);
  return xet::Ok{};
}

bool Relay::IsWholeXorb(size_t i) const {
  const Fetch& f = plan_.fetches[i];
  if (f.first != 0 || f.cs != 0) return false;  // a xorb's first chunk starts at its byte 0
  const uint64_t end = base_[i] + (f.last - f.first + 1);
  xet::ChunkDecoder decoder;
  std::vector<xet::HashedChunk> chunks;
  uint8_t head[xet::kChunkHeaderSize];
  std::vector<uint8_t> payload, out;
  for (uint64_t pos = base_[i]; pos < end;) {
    if (end - pos < sizeof head || !spool_->ReadWritten(pos, head).ok()) return false;
    auto h = xet::ChunkHeader::Parse(head);
    if (!h.ok() || end - pos - sizeof head < h->compressed_length) return false;
    payload.resize(h->compressed_length);
    if (!spool_->ReadWritten(pos + sizeof head, payload).ok()) return false;
    out.resize(h->uncompressed_length);
    if (!decoder.Decode(*h, payload, out).ok()) return false;
    chunks.push_back({xet::ChunkHashOf(out), out.size()});
    pos += sizeof head + h->compressed_length;
  }
  return chunks.size() == f.ce - f.cs && xet::XorbHashOf(chunks) == xorbs_[i];
}

void Relay::Verified(size_t fetch) {
  {
    std::lock_guard lock(mu_);
    verified_[fetch] = true;
  }
  cv_.notify_all();
}

void Relay::FileChecked(bool passed) {
  {
    std::lock_guard lock(mu_);
    if (check_ != Check::kPending) return;
    check_ = passed ? Check::kPassed : Check::kFailed;
  }
  cv_.notify_all();
}

xet::Status Relay::AwaitVerified(size_t fetch) const {
  std::unique_lock lock(mu_);
  // The file's check comes after all of it arrived and was decoded: a wait bounded by the transfer's own
  // stall limit each time nothing changes.
  for (;;) {
    if (verified_[fetch] || check_ == Check::kPassed) return xet::Ok{};
    if (check_ == Check::kFailed) {
      return xet::Unavailable("upstream's bytes of this range did not verify; ask again for the file");
    }
    if (cv_.wait_for(lock, kStall) == std::cv_status::timeout) {
      return xet::Unavailable("the relayed range is not verified yet; ask again");
    }
  }
}

xet::Status Relay::ReadSpool(uint64_t offset, std::span<uint8_t> out) const {
  size_t done = 0;
  while (done < out.size()) {
    auto n = spool_->Read(offset + done, out.subspan(done), kStall);
    if (!n.ok()) return n.error();
    if (*n == 0) return xet::Unavailable("the relayed bytes end early");
    done += *n;
  }
  return xet::Ok{};
}

xet::Status Relay::Produce(uint64_t offset, const net::HttpClient::Sink& sink) const {
  // Chunk by chunk as the bytes arrive (a range may be a whole xorb: a plain download waiting for all of it
  // would time out). The cursor stays where the last term ended: consecutive terms of one range read on.
  xet::ChunkDecoder decoder;
  size_t fetch = SIZE_MAX;
  uint32_t chunk = 0;
  uint64_t pos = 0;  // in the spool
  uint8_t head[xet::kChunkHeaderSize];
  std::vector<uint8_t> payload;
  std::vector<uint8_t> out;
  const auto next_header = [&](uint64_t end) -> xet::Result<xet::ChunkHeader> {
    if (end - pos < sizeof head) return xet::Malformed("upstream's range ends inside a chunk header");
    if (auto st = ReadSpool(pos, head); !st.ok()) return st.error();
    auto h = xet::ChunkHeader::Parse(head);
    if (!h.ok()) return xet::Malformed("upstream's chunk: " + h.error().message);
    if (end - pos - sizeof head < h->compressed_length)
      return xet::Malformed("upstream's range ends inside a chunk");
    return *h;
  };
  uint64_t at = 0;  // the file offset where the current term starts
  for (const auto& t : plan_.terms) {
    const uint64_t start = at;
    at += t.length;
    if (at <= offset) continue;
    const Fetch& f = plan_.fetches[t.fetch];
    const uint64_t end = base_[t.fetch] + (f.last - f.first + 1);
    if (fetch != t.fetch || chunk > t.cs) {
      fetch = t.fetch;
      chunk = f.cs;
      pos = base_[t.fetch];
    }
    for (; chunk < t.cs; ++chunk) {
      auto h = next_header(end);
      if (!h.ok()) return h.error();
      pos += sizeof head + h->compressed_length;
    }
    uint64_t produced = 0;
    for (; chunk < t.ce; ++chunk) {
      auto h = next_header(end);
      if (!h.ok()) return h.error();
      payload.resize(h->compressed_length);
      if (auto st = ReadSpool(pos + sizeof head, payload); !st.ok()) return st;
      pos += sizeof head + h->compressed_length;
      out.resize(h->uncompressed_length);
      if (auto st = decoder.Decode(*h, payload, out); !st.ok())
        return xet::Malformed("upstream's chunk of xorb " + t.xorb + ": " + st.error().message);
      const uint64_t file_pos = start + produced;
      produced += out.size();
      if (produced > t.length) break;
      if (file_pos + out.size() <= offset) continue;
      const uint64_t skip = offset > file_pos ? offset - file_pos : 0;
      if (!sink({out.data() + skip, out.size() - skip})) return xet::IoError("the file's bytes were refused");
    }
    if (produced != t.length)
      return xet::Malformed("upstream's term of xorb " + t.xorb + " decodes to " + std::to_string(produced) +
                            " bytes, not the " + std::to_string(t.length) + " it announced");
  }
  return xet::Ok{};
}

cas::ReconstructionPlan Relay::Plan(std::optional<cas::ByteRange> range) const {
  if (!range) return whole_;
  if (range->start >= size_ && size_ > 0) {
    cas::ReconstructionPlan plan;
    plan.status = cas::ReconstructionStatus::kRangeNotSatisfiable;
    plan.detail = "the range starts at or past the end of the file";
    return plan;
  }
  return Build(range->start, std::min(size_, range->end + 1));
}

// The terms covering file bytes [start, end), each xorb with the spans of the fetches they use.
cas::ReconstructionPlan Relay::Build(uint64_t start, uint64_t end) const {
  cas::ReconstructionPlan plan;
  std::map<std::string_view, uint32_t> xorb_of;  // xorb hex → index in plan.xorbs
  std::vector<std::vector<size_t>> fetches;      // by plan xorb: the fetches used
  std::vector<bool> used(plan_.fetches.size(), false);
  uint64_t at = 0;
  for (const auto& t : plan_.terms) {
    const uint64_t t_start = at;
    at += t.length;
    if (at <= start || t_start >= end) continue;
    if (plan.terms.empty()) plan.offset_into_first = start - t_start;
    auto [it, added] = xorb_of.try_emplace(t.xorb, static_cast<uint32_t>(plan.xorbs.size()));
    if (added) {
      cas::PlannedXorb x;
      x.hash = xorbs_[t.fetch];
      plan.xorbs.push_back(std::move(x));
      fetches.emplace_back();
    }
    if (!used[t.fetch]) {
      used[t.fetch] = true;
      fetches[it->second].push_back(t.fetch);
    }
    plan.terms.push_back(cas::PlannedTerm{
        .xorb = it->second, .chunks = {t.cs, t.ce}, .bytes = static_cast<uint32_t>(t.length)});
  }
  for (size_t x = 0; x < plan.xorbs.size(); ++x) {
    for (const size_t i : fetches[x]) {
      const Fetch& f = plan_.fetches[i];
      plan.xorbs[x].spans.push_back(cas::XorbSpan{.chunks = {f.cs, f.ce},
                                                  .first_byte = static_cast<uint32_t>(f.first),
                                                  .end_byte = static_cast<uint32_t>(f.last + 1)});
    }
    std::sort(plan.xorbs[x].spans.begin(), plan.xorbs[x].spans.end(),
              [](const cas::XorbSpan& a, const cas::XorbSpan& b) { return a.first_byte < b.first_byte; });
  }
  return plan;
}

namespace {

class SpoolRange final : public cas::RelayedRange {
 public:
  SpoolRange(std::shared_ptr<const Relay> relay, size_t fetch, uint64_t base, uint64_t length)
      : relay_(std::move(relay)), fetch_(fetch), base_(base), length_(length) {}
  uint64_t length() const override { return length_; }
  // Bytes only once the range is verified (Relay::AwaitVerified): a reader waits, or errs.
  xet::Status ReadAt(uint64_t offset, std::span<uint8_t> out) const override {
    if (offset > length_ || out.size() > length_ - offset) return xet::Malformed("a read past the range");
    if (auto st = relay_->AwaitVerified(fetch_); !st.ok()) return st;
    return relay_->ReadSpool(base_ + offset, out);
  }

 private:
  std::shared_ptr<const Relay> relay_;
  size_t fetch_;
  uint64_t base_;
  uint64_t length_;
};

}  // namespace

std::shared_ptr<const cas::RelayedRange> Relay::Open(const xet::XorbHash& xorb, uint64_t first,
                                                     uint64_t last) const {
  const auto [from, to] = by_xorb_.equal_range(xorb);
  for (auto it = from; it != to; ++it) {
    const Fetch& f = plan_.fetches[it->second];
    if (first < f.first || last > f.last || last < first) continue;
    return std::make_shared<SpoolRange>(shared_from_this(), it->second, base_[it->second] + (first - f.first),
                                        last - first + 1);
  }
  return nullptr;
}

}  // namespace cairn::mirror
