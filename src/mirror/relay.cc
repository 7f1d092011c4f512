#include "mirror/relay.h"

#include <fcntl.h>

#include <algorithm>
#include <cerrno>
#include <map>

#include "common/posix_io.h"
#include "xet/hashing.h"
#include "xet/xorb.h"

namespace cairn::mirror {

Result<std::shared_ptr<Relay>> Relay::Create(const std::filesystem::path& dir, const xet::FileHash& file,
                                             xet::ParsedReconstruction plan, std::vector<std::string> scopes,
                                             RangeAsker ask, const Filler& fill) {
  if (plan.offset_into_first != 0) return Malformed("upstream's whole-file answer starts inside a term");
  std::vector<xet::XorbHash> xorbs;
  xorbs.reserve(plan.fetches.size());
  for (const auto& f : plan.fetches) {
    auto hash = xet::Hash::FromHex(f.xorb);
    if (!hash) return Malformed("upstream's answer names a xorb that is no hash");
    if (f.last >= (1ULL << 32)) return Malformed("upstream's answer has a range past 4 GiB");
    xorbs.push_back(*hash);
  }
  for (const auto& t : plan.terms) {
    if (t.length >= (1ULL << 32)) return Malformed("upstream's answer has a term past 4 GiB");
  }
  auto spool = Spool::Create(dir);
  if (!spool.ok()) return spool.error();
  auto relay = std::make_shared<Relay>(file, std::move(plan), std::move(xorbs), std::move(scopes),
                                       std::move(*spool), std::move(ask));
  relay->fill_ = fill;  // before the relay is shared
  return relay;
}

void Relay::Fill(size_t i) {
  const Fetch& f = plan_.fetches[i];
  if (!fill_ || f.first != 0 || f.cs != 0 || filled_count_ >= kMaxFilled) return;  // the spool
  auto writer = fill_(xorbs_[i]);
  if (writer == nullptr) return;
  UniqueFd fd(::fcntl(writer->fd(), F_DUPFD_CLOEXEC, 0));  // the put's own goes with it
  if (!fd.valid()) return;                                 // out of descriptors: the spool
  ++filled_count_;
  std::lock_guard lock(mu_);  // readers come to fetch i's file through mu_, after its bytes
  filled_[i].writer = std::move(writer);
  filled_[i].fd = std::move(fd);
}

Status Relay::Write(size_t i, uint64_t offset, std::span<const uint8_t> bytes) {
  cas::FilledXorb* writer = filled_[i].writer.get();  // Receive's alone until the range has arrived
  if (writer == nullptr) return spool_->Write(base_[i] + offset, bytes);
  if (offset != writer->size()) return Inconsistent("a relayed range written out of order");
  return writer->Append(bytes);
}

Status Relay::ReadFetched(size_t i, uint64_t offset, std::span<uint8_t> out) const {
  if (!filled_[i].fd.valid()) return spool_->ReadWritten(base_[i] + offset, out);
  if (const int err = PreadFull(filled_[i].fd.get(), offset, out); err != 0)
    return IoError("reading a relayed range back: " + OpenErrorText(err));
  return Ok{};
}

Result<cas::RelayedBytes> Relay::FileOf(size_t i, uint64_t offset) const {
  if (!filled_[i].fd.valid()) {
    auto fd = spool_->Duplicate();
    if (!fd.ok()) return fd.error();
    return cas::RelayedBytes{.fd = std::move(*fd), .offset = base_[i] + offset};
  }
  UniqueFd fd = filled_[i].fd.Duplicate();
  if (!fd.valid()) return IoError("a descriptor of a relayed range: " + ErrnoText(errno));
  return cas::RelayedBytes{.fd = std::move(fd), .offset = offset};
}

std::unique_ptr<cas::FilledXorb> Relay::TakeFilled(const xet::XorbHash& xorb) {
  std::lock_guard lock(mu_);
  const auto [from, to] = by_xorb_.equal_range(xorb);
  for (auto it = from; it != to; ++it) {
    Filled& f = filled_[it->second];
    if (f.arrived && f.writer != nullptr) return std::move(f.writer);
  }
  return nullptr;
}

Relay::Relay(const xet::FileHash& file, xet::ParsedReconstruction plan, std::vector<xet::XorbHash> xorbs,
             std::vector<std::string> scopes, std::shared_ptr<Spool> spool, RangeAsker ask)
    : file_(file),
      plan_(std::move(plan)),
      scopes_(std::move(scopes)),
      spool_(std::move(spool)),
      xorbs_(std::move(xorbs)),
      ask_(std::move(ask)) {
  base_.assign(plan_.fetches.size(), UINT64_MAX);
  verified_.assign(plan_.fetches.size(), false);
  index_.resize(plan_.fetches.size());
  filled_.resize(plan_.fetches.size());
  uint64_t at = 0;
  for (const auto& t : plan_.terms) {
    term_start_.push_back(size_);
    size_ += t.length;
    if (base_[t.fetch] != UINT64_MAX) continue;
    base_[t.fetch] = at;
    at += plan_.fetches[t.fetch].last - plan_.fetches[t.fetch].first + 1;
    order_.push_back(t.fetch);
    by_xorb_.emplace(xorbs_[t.fetch], t.fetch);
  }
  term_start_.push_back(size_);
  whole_ = Build(0, size_);
}

bool Relay::Readable(const std::string& scope) const {
  return std::find(scopes_.begin(), scopes_.end(), scope) != scopes_.end();
}

Status Relay::Receive(const Fetcher& fetch, const std::function<bool()>& stopping) {
  // Bytes go to the spool in blocks of kBatch, not as libcurl hands them over (16 KiB): each write wakes the
  // readers waiting on the spool, and a dozen of them woken every 16 KiB cost more than the transfer.
  constexpr size_t kBatch = 256 << 10;
  std::vector<uint8_t> pending;
  pending.reserve(kBatch);
  xet::ChunkDecoder decoder;
  for (const size_t i : order_) {
    const Fetch& f = plan_.fetches[i];
    const uint64_t length = f.last - f.first + 1;
    uint64_t got = 0;  // written
    Fill(i);
    RangeIndexer indexer(f.first, length, decoder);
    const auto flush = [&]() -> Status {
      if (pending.empty()) return Ok{};
      auto st = Write(i, got, pending);
      got += pending.size();
      // Indexed from memory once written (Produce reads the records from there).
      if (st.ok()) Publish(i, indexer.Feed(pending), indexer, false);
      pending.clear();
      return st;
    };
    for (int tries = 0; got < length; ++tries) {
      const uint64_t before = got;
      Status written = Ok{};
      auto st = fetch(f, got, [&](std::span<const uint8_t> block) {
        if (stopping() || block.size() > length - got - pending.size()) {
          written = Unavailable(stopping() ? "the server is stopping" : "upstream sent more than asked");
          return false;
        }
        pending.insert(pending.end(), block.begin(), block.end());
        if (pending.size() >= kBatch) written = flush();
        return written.ok();
      });
      if (written.ok()) written = flush();  // what came before a cut counts
      if (!written.ok()) st = written;
      if (st.ok() && got < length) st = Unavailable("upstream's range ended short");
      if (st.ok()) break;
      // A cut range is asked again from where it stopped, while tries bring bytes.
      if (st.error().code != ErrorCode::kUnavailable || got == before || tries >= 8 || stopping()) {
        spool_->Finish(false);
        FileChecked(false);  // the file comes through resolve: what was not verified is never served
        return st;
      }
    }
    Publish(i, {}, indexer, true);
    {
      std::lock_guard lock(mu_);
      filled_[i].arrived = true;  // its put, if any, is TakeFilled's now
    }
    if (IsWholeXorb(i)) Verified(i);
  }
  spool_->Finish(true);
  return Ok{};
}

size_t Relay::RangeIndexer::RecordLength(std::span<const uint8_t> head) const {
  auto h = xet::ChunkHeader::Parse(head);
  if (!h.ok() || h->compressed_length > length - next - xet::kChunkHeaderSize) return 0;
  return xet::kChunkHeaderSize + h->compressed_length;
}

void Relay::RangeIndexer::Index(std::span<const uint8_t> record, std::vector<Indexed>& out) {
  auto h = xet::ChunkHeader::Parse(record);
  auto hash = h.ok() ? decoder.DecodeAndHash(*h, record.subspan(xet::kChunkHeaderSize))
                     : Result<xet::ChunkHash>(h.error());
  if (!hash.ok()) {
    broken = true;
    return;
  }
  out.push_back(Indexed{.start = first + next,
                        .length = static_cast<uint32_t>(record.size()),
                        .size = h->uncompressed_length,
                        .decoded_before = decoded,
                        .hash = *hash});
  decoded += h->uncompressed_length;
  next += record.size();
}

std::vector<Relay::Indexed> Relay::RangeIndexer::Feed(std::span<const uint8_t> bytes) {
  std::vector<Indexed> out;
  while (!broken && !bytes.empty()) {
    // A record that lies whole in these bytes is indexed in place.
    if (carry.empty() && bytes.size() >= xet::kChunkHeaderSize) {
      const size_t n = RecordLength(bytes);
      if (n == 0) {
        broken = true;
        break;
      }
      if (bytes.size() >= n) {
        Index(bytes.first(n), out);
        bytes = bytes.subspan(n);
        continue;
      }
    }
    // One that does not is kept until its last byte arrives.
    const size_t want = carry.size() < xet::kChunkHeaderSize ? xet::kChunkHeaderSize : RecordLength(carry);
    if (want == 0) {
      broken = true;
      break;
    }
    const size_t take = std::min(want - carry.size(), bytes.size());
    carry.insert(carry.end(), bytes.begin(), bytes.begin() + static_cast<ptrdiff_t>(take));
    bytes = bytes.subspan(take);
    if (carry.size() < xet::kChunkHeaderSize) continue;
    const size_t n = RecordLength(carry);
    if (n == 0) {
      broken = true;
    } else if (carry.size() == n) {
      Index(carry, out);
      carry.clear();
    }
  }
  return out;
}

void Relay::Publish(size_t i, const std::vector<Indexed>& found, const RangeIndexer& indexer, bool ended) {
  {
    std::lock_guard lock(mu_);
    FetchIndex& index = index_[i];
    index.chunks.insert(index.chunks.end(), found.begin(), found.end());
    index.broken = indexer.broken || (ended && (!indexer.carry.empty() || indexer.next != indexer.length));
    index.complete = !index.broken && ended;
  }
  cv_.notify_all();
}

bool Relay::IsWholeXorb(size_t i) const {
  const Fetch& f = plan_.fetches[i];
  if (f.first != 0 || f.cs != 0) return false;  // a xorb's first chunk starts at its byte 0
  std::vector<xet::HashedChunk> chunks;
  {
    std::lock_guard lock(mu_);
    const FetchIndex& index = index_[i];
    if (!index.complete || index.chunks.size() != f.ce - f.cs) return false;
    chunks.reserve(index.chunks.size());
    for (const auto& c : index.chunks) chunks.push_back({c.hash, c.size});
  }
  return xet::XorbHashOf(chunks) == xorbs_[i];
}

Result<Relay::Indexed> Relay::AwaitIndexed(size_t i, size_t k) const {
  std::unique_lock lock(mu_);
  for (;;) {
    const FetchIndex& index = index_[i];
    if (k < index.chunks.size()) return index.chunks[k];
    if (index.complete || index.broken) {
      return Malformed("upstream's range of xorb " + plan_.fetches[i].xorb + " does not hold chunk " +
                       std::to_string(plan_.fetches[i].cs + k) + " as announced");
    }
    if (check_ == Check::kFailed) return Unavailable("upstream's Xet transfer failed");
    if (cv_.wait_for(lock, kStall) == std::cv_status::timeout)
      return Unavailable("upstream's Xet transfer stalled");
  }
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

Status Relay::AwaitVerified(size_t fetch) const {
  std::unique_lock lock(mu_);
  // The file's check comes after all of it arrived and was decoded: a wait bounded by the transfer's own
  // stall limit each time nothing changes.
  for (;;) {
    if (verified_[fetch] || check_ == Check::kPassed) return Ok{};
    if (check_ == Check::kFailed) {
      return Unavailable("upstream's bytes of this range did not verify; ask again for the file");
    }
    if (cv_.wait_for(lock, kStall) == std::cv_status::timeout) {
      return Unavailable("the relayed range is not verified yet; ask again");
    }
  }
}

Result<std::span<const uint8_t>> Relay::Decoded(size_t i, const Indexed& c, xet::ChunkDecoder& decoder,
                                                std::vector<uint8_t>& record,
                                                std::vector<uint8_t>& out) const {
  // The index hashed this record as it arrived; the spool's bytes never change after.
  record.resize(c.length);
  if (auto st = ReadFetched(i, c.start - plan_.fetches[i].first, record); !st.ok()) return st.error();
  auto h = xet::ChunkHeader::Parse(record);
  if (!h.ok()) return h.error();
  const auto payload = std::span<const uint8_t>(record).subspan(xet::kChunkHeaderSize);
  if (h->scheme == xet::CompressionScheme::kNone) return payload;
  out.resize(h->uncompressed_length);
  if (auto st = decoder.Decode(*h, payload, out); !st.ok()) return st.error();
  return std::span<const uint8_t>(out);
}

Status Relay::Produce(const ChunkSink& sink) const {
  xet::ChunkDecoder decoder;
  std::vector<uint8_t> record;
  std::vector<uint8_t> out;
  for (const auto& t : plan_.terms) {
    const Fetch& f = plan_.fetches[t.fetch];
    if (t.cs < f.cs || t.ce > f.ce) return Malformed("upstream's term lies outside its range");
    const std::optional<xet::XorbHash> from =
        f.first == 0 && f.cs == 0 ? std::optional(xorbs_[t.fetch]) : std::nullopt;
    uint64_t produced = 0;
    for (uint32_t chunk = t.cs; chunk < t.ce; ++chunk) {
      auto c = AwaitIndexed(t.fetch, chunk - f.cs);
      if (!c.ok()) return c.error();
      auto decoded = Decoded(t.fetch, *c, decoder, record, out);
      if (!decoded.ok()) return decoded.error();
      produced += decoded->size();
      if (produced > t.length) break;
      if (!sink(Chunk{.hash = c->hash, .decoded = *decoded, .record = record, .from = from}))
        return IoError("the file's chunks were refused");
    }
    if (produced != t.length)
      return Malformed("upstream's term of xorb " + t.xorb + " decodes to " + std::to_string(produced) +
                       " bytes, not the " + std::to_string(t.length) + " it announced");
  }
  return Ok{};
}

Status Relay::AwaitFileChecked() const {
  std::unique_lock lock(mu_);
  if (!cv_.wait_for(lock, kStall, [&] { return check_ != Check::kPending; }))
    return Unavailable("the relayed file is not checked yet; ask again");
  if (check_ == Check::kFailed) return Unavailable("the relayed file failed its check; ask again");
  return Ok{};
}

Result<size_t> Relay::ReadDecoded(uint64_t offset, std::span<uint8_t> out) const {
  bool checked = false;
  {
    std::lock_guard lock(mu_);
    if (check_ == Check::kFailed) return Unavailable("upstream's Xet transfer failed; ask again");
    checked = check_ == Check::kPassed;
  }
  // The last byte waits for the file's check: a reader is never handed all of a file that fails.
  if (!checked && offset + 1 >= size_) {
    if (auto st = AwaitFileChecked(); !st.ok()) return st.error();
    checked = true;
  }
  const uint64_t limit = checked ? size_ : size_ - 1;
  if (offset >= limit || out.empty()) return size_t{0};
  const uint64_t end = std::min<uint64_t>(limit, offset + out.size());
  // The term holding `offset`, then its chunks from the first, skipped by their decoded sizes (indexed).
  const auto after = std::upper_bound(term_start_.begin(), term_start_.end(), offset);
  auto t = static_cast<size_t>(after - term_start_.begin() - 1);
  xet::ChunkDecoder decoder;
  std::vector<uint8_t> record;
  std::vector<uint8_t> decoded;
  uint64_t at = offset;  // the next byte to copy
  while (at < end) {
    const auto& term = plan_.terms[t];
    const Fetch& f = plan_.fetches[term.fetch];
    if (term.cs < f.cs || term.ce > f.ce) return Malformed("upstream's term lies outside its range");
    const uint64_t term_end = term_start_[t + 1];
    uint64_t chunk_start = term_start_[t];
    for (uint32_t chunk = term.cs; chunk < term.ce && at < end; ++chunk) {
      auto c = AwaitIndexed(term.fetch, chunk - f.cs);
      if (!c.ok()) return c.error();
      const uint64_t chunk_end = chunk_start + c->size;
      if (chunk_end > term_end)
        return Malformed("upstream's term of xorb " + term.xorb + " decodes to more than it announced");
      if (chunk_end > at) {
        auto bytes = Decoded(term.fetch, *c, decoder, record, decoded);
        if (!bytes.ok()) return bytes.error();
        if (bytes->size() != c->size)
          return Malformed("a relayed chunk decodes to another size than indexed");
        const uint64_t stop = std::min(chunk_end, end);
        std::copy(bytes->begin() + static_cast<ptrdiff_t>(at - chunk_start),
                  bytes->begin() + static_cast<ptrdiff_t>(stop - chunk_start),
                  out.begin() + static_cast<ptrdiff_t>(at - offset));
        at = stop;
      }
      chunk_start = chunk_end;
    }
    if (at < end) {
      if (chunk_start != term_end)
        return Malformed("upstream's term of xorb " + term.xorb +
                         " decodes to fewer bytes than it announced");
      ++t;
    }
  }
  return static_cast<size_t>(end - offset);
}

cas::ReconstructionPlan Relay::Plan(std::optional<cas::ByteRange> range) const {
  if (!range) return whole_;
  if (range->start >= size_ && size_ > 0) {
    cas::ReconstructionPlan plan;
    plan.status = cas::ReconstructionStatus::kRangeNotSatisfiable;
    plan.detail = "the range starts at or past the end of the file";
    return plan;
  }
  const uint64_t start = range->start;
  const uint64_t end = std::min(size_, range->end + 1);
  std::vector<std::vector<size_t>> used;
  auto base = Build(start, end, &used);
  if (!ask_ || (start == 0 && end == size_)) return base;
  {
    std::lock_guard lock(mu_);
    if (distrusted_) return base;
    if (auto it = narrowed_.find({start, end}); it != narrowed_.end()) return it->second;
  }
  auto answer = ask_(start, end - 1);
  if (!answer.ok()) return base;
  auto narrowed = Narrow(base, used, *answer);
  if (!narrowed) return base;
  std::lock_guard lock(mu_);
  if (narrowed_.size() < kMaxNarrowed) narrowed_.emplace(std::make_pair(start, end), *narrowed);
  return std::move(*narrowed);
}

namespace {

// A narrowed range of fetch `fetch`: bytes [first, last] of its xorb, and what they hold.
struct Narrowed {
  size_t fetch;
  uint64_t first, last;
  Relay::Claim claim;
};

// Upstream's ranges of xorb `x` of `plan` in `answer`, each inside one of the relayed ranges `fetches` of
// `all` (and at their bytes where they share an end chunk), not overlapping, and covering every term of the
// xorb in `plan` (whose terms are claimed by the range holding them): as spans, added to `out`. nullopt
// where they are not.
std::optional<std::vector<cas::XorbSpan>> NarrowedSpans(const cas::ReconstructionPlan& plan, uint32_t x,
                                                        const std::vector<size_t>& fetches,
                                                        const std::vector<Relay::Fetch>& all,
                                                        const xet::ParsedReconstruction& answer,
                                                        std::vector<Narrowed>& out) {
  const std::string hex = plan.xorbs[x].hash.hex();
  std::vector<cas::XorbSpan> spans;
  std::vector<Narrowed> mine;
  for (const auto& u : answer.fetches) {
    if (u.xorb != hex) continue;
    if (u.cs >= u.ce || u.first > u.last) return std::nullopt;
    const auto within = std::find_if(fetches.begin(), fetches.end(), [&](size_t i) {
      const Relay::Fetch& f = all[i];
      return f.cs <= u.cs && u.ce <= f.ce && f.first <= u.first && u.last <= f.last &&
             (u.cs != f.cs || u.first == f.first) && (u.ce != f.ce || u.last == f.last);
    });
    if (within == fetches.end()) return std::nullopt;
    // Inside a relayed range, which is below 4 GiB (Create).
    spans.push_back(cas::XorbSpan{.chunks = {u.cs, u.ce},
                                  .first_byte = static_cast<uint32_t>(u.first),
                                  .end_byte = static_cast<uint32_t>(u.last + 1)});
    mine.push_back(Narrowed{*within, u.first, u.last, Relay::Claim{.cs = u.cs, .ce = u.ce, .terms = {}}});
  }
  for (const auto& t : plan.terms) {
    if (t.xorb != x) continue;
    const auto holder = std::find_if(mine.begin(), mine.end(), [&](const Narrowed& n) {
      return n.claim.cs <= t.chunks.start && t.chunks.end <= n.claim.ce;
    });
    if (holder == mine.end()) return std::nullopt;
    holder->claim.terms.emplace_back(t.chunks.start, t.chunks.end, t.bytes);
  }
  std::sort(spans.begin(), spans.end(),
            [](const cas::XorbSpan& a, const cas::XorbSpan& b) { return a.first_byte < b.first_byte; });
  for (size_t i = 1; i < spans.size(); ++i) {
    if (spans[i].first_byte < spans[i - 1].end_byte) return std::nullopt;
  }
  out.insert(out.end(), mine.begin(), mine.end());
  return spans;
}

// The terms of `answer` (upstream's for a part) in place of `base`'s (the whole file's for the same part):
// the same terms, but for the first, which may start at a later chunk of its term, and the last, which may
// end at an earlier one — each no longer than the whole file's, the first ending where it does. false
// where they are not.
bool TermsAgree(const cas::ReconstructionPlan& base, const xet::ParsedReconstruction& answer) {
  const size_t n = base.terms.size();
  if (n == 0 || answer.terms.size() != n || answer.offset_into_first > base.offset_into_first) return false;
  for (size_t i = 0; i < n; ++i) {
    const auto& a = answer.terms[i];
    const auto& b = base.terms[i];
    if (a.xorb != base.xorbs[b.xorb].hash.hex() || a.cs < b.chunks.start || a.ce > b.chunks.end ||
        a.cs >= a.ce || a.length > b.bytes)
      return false;
    if ((i > 0 && a.cs != b.chunks.start) || (i + 1 < n && a.ce != b.chunks.end)) return false;
    if (a.cs == b.chunks.start && a.ce == b.chunks.end && a.length != b.bytes) return false;
  }
  // The bytes the first term's skipped chunks held are those the two answers skip differently.
  const uint64_t skipped = base.offset_into_first - answer.offset_into_first;
  const auto& a0 = answer.terms[0];
  const auto& b0 = base.terms[0];
  if (a0.cs == b0.chunks.start && skipped != 0) return false;
  if (a0.ce == b0.chunks.end && a0.length + skipped != b0.bytes) return false;
  return true;
}

}  // namespace

std::optional<cas::ReconstructionPlan> Relay::Narrow(const cas::ReconstructionPlan& base,
                                                     const std::vector<std::vector<size_t>>& used,
                                                     const xet::ParsedReconstruction& answer) const {
  // The terms are the whole file's (which the file's check verifies) but where the part's answer cuts the
  // first and the last at a chunk; what it says of them is checked against the bytes before they are
  // served (CheckClaim), as is where it says their chunks lie.
  if (!TermsAgree(base, answer)) return std::nullopt;
  cas::ReconstructionPlan plan = base;
  plan.offset_into_first = answer.offset_into_first;
  for (size_t i = 0; i < plan.terms.size(); ++i) {
    plan.terms[i].chunks = {answer.terms[i].cs, answer.terms[i].ce};
    plan.terms[i].bytes = static_cast<uint32_t>(answer.terms[i].length);
  }
  std::vector<Narrowed> narrowed;
  for (uint32_t x = 0; x < plan.xorbs.size(); ++x) {
    auto spans = NarrowedSpans(plan, x, used[x], plan_.fetches, answer, narrowed);
    if (!spans) return std::nullopt;  // all or nothing: a narrowed term needs its range's check
    plan.xorbs[x].spans = std::move(*spans);
  }
  std::lock_guard lock(mu_);
  for (const auto& n : narrowed) {
    auto [it, added] = claims_.try_emplace({n.fetch, n.first, n.last}, n.claim);
    if (added) continue;
    Claim& had = it->second;
    if (had.cs != n.claim.cs || had.ce != n.claim.ce) return std::nullopt;  // two answers disagree
    for (const auto& t : n.claim.terms) {
      if (std::find(had.terms.begin(), had.terms.end(), t) == had.terms.end()) had.terms.push_back(t);
    }
  }
  return plan;
}

Status Relay::CheckClaim(size_t fetch, uint64_t first, uint64_t last, const Claim& claim) const {
  const Fetch& f = plan_.fetches[fetch];
  bool holds = false;
  {
    std::lock_guard lock(mu_);
    const FetchIndex& index = index_[fetch];
    const auto& c = index.chunks;
    // Chunk `chunk`'s record start in the xorb and the decoded bytes before it (the range's end after the
    // last); callers check f.cs <= chunk <= f.ce.
    const auto start = [&](uint32_t chunk) {
      const size_t k = chunk - f.cs;
      return k < c.size() ? c[k].start : f.last + 1;
    };
    const auto before = [&](uint32_t chunk) {
      const size_t k = chunk - f.cs;
      return k < c.size() ? c[k].decoded_before : c.back().decoded_before + c.back().size;
    };
    holds = index.complete && c.size() == size_t{f.ce - f.cs} && f.cs <= claim.cs && claim.cs < claim.ce &&
            claim.ce <= f.ce && start(claim.cs) == first && start(claim.ce) == last + 1;
    for (const auto& [cs, ce, bytes] : claim.terms) {
      holds = holds && claim.cs <= cs && cs < ce && ce <= claim.ce && before(ce) - before(cs) == bytes;
    }
  }
  if (holds) return Ok{};
  {
    std::lock_guard lock(mu_);
    distrusted_ = true;  // answers from now on fetch whole ranges
    narrowed_.clear();
  }
  return Unavailable(
      "upstream's answer for a part of the file named bytes that are not its chunks; ask again");
}

// The terms covering file bytes [start, end), each xorb with the spans of the fetches they use.
cas::ReconstructionPlan Relay::Build(uint64_t start, uint64_t end,
                                     std::vector<std::vector<size_t>>* used_by) const {
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
  if (used_by != nullptr) *used_by = std::move(fetches);
  return plan;
}

namespace {

// Bytes [first, last] of a xorb inside fetch `fetch`'s range, `offset` bytes into it.
class ArrivedRange final : public cas::RelayedRange {
 public:
  ArrivedRange(std::shared_ptr<const Relay> relay, size_t fetch, uint64_t offset, uint64_t first,
               uint64_t last, std::optional<Relay::Claim> claim)
      : relay_(std::move(relay)),
        fetch_(fetch),
        offset_(offset),
        first_(first),
        last_(last),
        claim_(std::move(claim)) {}
  uint64_t length() const override { return last_ - first_ + 1; }
  // Bytes only once the range is verified (Relay::AwaitVerified: all of them have arrived then) and, for a
  // narrowed one, found to be the chunks it was said to be: a reader waits, or errs.
  Result<cas::RelayedBytes> AwaitBytes() const override {
    if (auto st = relay_->AwaitVerified(fetch_); !st.ok()) return st.error();
    if (claim_) {
      if (auto st = relay_->CheckClaim(fetch_, first_, last_, *claim_); !st.ok()) return st.error();
    }
    return relay_->FileOf(fetch_, offset_);
  }

 private:
  std::shared_ptr<const Relay> relay_;
  size_t fetch_;
  uint64_t offset_;        // in the fetch's range
  uint64_t first_, last_;  // in the xorb
  std::optional<Relay::Claim> claim_;
};

}  // namespace

std::shared_ptr<const cas::RelayedRange> Relay::Open(const xet::XorbHash& xorb, uint64_t first,
                                                     uint64_t last) const {
  const auto [from, to] = by_xorb_.equal_range(xorb);
  for (auto it = from; it != to; ++it) {
    const Fetch& f = plan_.fetches[it->second];
    if (first < f.first || last > f.last || last < first) continue;
    std::optional<Claim> claim;
    {
      std::lock_guard lock(mu_);
      if (auto c = claims_.find({it->second, first, last}); c != claims_.end()) claim = c->second;
    }
    return std::make_shared<ArrivedRange>(shared_from_this(), it->second, first - f.first, first, last,
                                          claim);
  }
  return nullptr;
}

}  // namespace cairn::mirror
