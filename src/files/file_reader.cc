#include "files/file_reader.h"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "xet/hashing.h"
#include "xet/xorb.h"

namespace cairn::files {
namespace {

// How far past the current use Pump looks for units to fetch: a file whose terms repeat one unit many times
// (runs of zeros) must not make every Read walk them all.
constexpr size_t kScanLimit = 4096;

// A fetch unit's bytes: the stored chunks as read, the decoded form of the compressed ones, and each chunk's
// verified bytes (into one or the other).
struct Loaded {
  std::unique_ptr<uint8_t[]> raw;
  std::unique_ptr<uint8_t[]> decoded;
  uint64_t decoded_size = 0;
  std::vector<std::span<const uint8_t>> chunks;
  // Set when a chunk failed verification: `chunks` holds the ones before it, which are good.
  std::optional<Error> corrupt;
};

Error Corrupt(const xet::XorbHash& xorb, uint32_t chunk, const std::string& why) {
  return Damaged("stored xorb " + xorb.hex() + " is corrupt at chunk " + std::to_string(chunk) + ": " + why);
}

// Reads chunks [cs, ce) of a xorb (stored bytes [first_byte, end_byte)) with one store call, then decodes and
// verifies every chunk against the layout.
Result<Loaded> LoadUnit(cas::CasService& cas, const xet::XorbHash& hash, const xet::XorbLayout& layout,
                        uint32_t cs, uint32_t ce, uint32_t first_byte, uint32_t end_byte, uint64_t unpacked) {
  Loaded out;
  const size_t size = end_byte - first_byte;
  out.raw.reset(
      new uint8_t[size]);  // NOLINT(cppcoreguidelines-owning-memory): not zeroed, filled by the read
  if (auto st = cas.ReadXorb(hash, first_byte, {out.raw.get(), size}); !st) {
    // The index names the xorb: its absence from the store is damage, not an unknown file.
    if (st.error().code == ErrorCode::kNotFound)
      return Damaged("stored xorb " + hash.hex() + " is missing: " + st.error().message);
    return st.error();
  }
  thread_local xet::ChunkDecoder decoder;
  const auto fail = [&out](Error e) -> Result<Loaded> {
    out.corrupt = std::move(e);
    return std::move(out);
  };
  out.chunks.reserve(ce - cs);
  for (uint32_t c = cs; c < ce; ++c) {
    const size_t begin = layout.begin_offset(c) - first_byte;
    const size_t end = layout.chunks[c].end_offset - first_byte;
    auto chunk = xet::StoredChunk::Parse({out.raw.get() + begin, end - begin});
    if (!chunk) return fail(Corrupt(hash, c, chunk.error().message));
    const xet::ChunkHeader& header = chunk->header;
    if (chunk->stored_size() != end - begin || header.uncompressed_length != layout.chunks[c].unpacked_size)
      return fail(Corrupt(hash, c, "its header disagrees with the xorb's layout"));
    const std::span<const uint8_t> payload = chunk->payload;
    std::span<const uint8_t> bytes = payload;
    if (header.scheme != xet::CompressionScheme::kNone) {
      if (!out.decoded) out.decoded.reset(new uint8_t[unpacked]);  // NOLINT(cppcoreguidelines-owning-memory)
      const std::span<uint8_t> into(out.decoded.get() + out.decoded_size, header.uncompressed_length);
      if (out.decoded_size + into.size() > unpacked)
        return fail(Corrupt(hash, c, "larger than its layout says"));
      if (auto st = decoder.Decode(header, payload, into); !st)
        return fail(Corrupt(hash, c, st.error().message));
      out.decoded_size += into.size();
      bytes = into;
    }
    if (xet::ChunkHashOf(bytes) != layout.chunks[c].hash)
      return fail(Corrupt(hash, c, "its bytes do not match its hash"));
    out.chunks.push_back(bytes);
  }
  return out;
}

}  // namespace

struct FileReader::State : std::enable_shared_from_this<State> {
  State(const ReaderContext& c, const ReadAheadOptions& o) : ctx(c), opt(o) {}
  ~State() { ctx.budget.Give(held_bytes); }
  State(const State&) = delete;
  State& operator=(const State&) = delete;

  struct Xorb {
    xet::XorbHash hash;
    std::shared_ptr<const xet::XorbLayout> layout;
    std::vector<uint32_t> units;  // by first chunk
  };
  enum class UnitState { kIdle, kFetching, kReady, kFailed, kDone };
  struct Unit {
    uint32_t xorb = 0;
    uint32_t cs = 0, ce = 0;                // chunks (end exclusive)
    uint32_t first_byte = 0, end_byte = 0;  // stored bytes (end exclusive)
    uint64_t unpacked = 0;
    std::vector<uint32_t> uses;  // indices into State::uses, increasing
    size_t consumed = 0;         // uses sent
    UnitState state = UnitState::kIdle;
    // Shared with bytes lent from it (Lend), which keep it in memory after the unit lets it go.
    std::shared_ptr<const Loaded> data;
    Error error{ErrorCode::kIo, ""};
    uint64_t held = 0;  // bytes taken from both budgets for it
    uint32_t stamp = 0;
    bool reported = false;  // its corruption was reported
    bool retried = false;   // a failed read-ahead of it was tried again
    uint64_t charge() const { return (end_byte - first_byte) + unpacked; }
  };
  // A piece of the range: bytes [skip, skip + len) of the concatenated chunks [cb, ce) of a unit.
  struct Use {
    uint32_t unit = 0;
    uint32_t cb = 0, ce = 0;
    uint64_t skip = 0, len = 0;
  };

  Status Plan(const std::vector<cas::FileTermRef>& terms, uint64_t offset, uint64_t length);
  // Plan's steps. A term's part of the range: bytes [skip, skip + len) of chunks [cs, ce) of a xorb.
  struct Piece {
    uint32_t xorb;
    uint32_t cs, ce;
    uint64_t skip, len;
  };
  using XorbIds = std::unordered_map<xet::XorbHash, uint32_t, xet::HashHasher>;
  // The index into `xorbs` of `hash`, added with its layout when new.
  Result<uint32_t> XorbIdOf(const xet::XorbHash& hash, XorbIds& ids);
  // What of term `t` (of xorb `xorb`) the range [offset, end) takes, checked against the xorb's layout.
  Result<Piece> PieceOf(const cas::FileTermRef& t, uint32_t xorb, uint64_t offset, uint64_t end) const;
  // Merges xorb `x`'s chunk runs and cuts each into units.
  void CutUnits(uint32_t x, std::vector<std::pair<uint32_t, uint32_t>>& runs);
  void CutRun(uint32_t x, uint32_t cs, uint32_t ce);
  // The uses of a piece, one per unit it spans.
  void AddUses(const Piece& p);
  Status Read(std::span<uint8_t> out);
  Status Lend(uint64_t length, std::shared_ptr<const void>& owner,
              std::vector<std::span<const uint8_t>>& pieces);
  // Hands the next `n` bytes of the range to `sink(bytes, unit)`, in pieces, with `lock` held.
  template <typename Sink>
  Status Consume(std::unique_lock<std::mutex>& lock, uint64_t n, Sink&& sink);
  // Waits until unit `ui` (needed now) is in memory, reading it on this thread if nobody fetches it.
  Status EnsureReady(std::unique_lock<std::mutex>& lock, uint32_t ui);
  // Starts fetches of the units the next uses need, within depth and budgets.
  void Pump();
  void StartFetch(uint32_t ui, uint64_t charge);
  void Complete(uint32_t ui, Result<Loaded> loaded);
  void Release(Unit& u, UnitState next);
  // Drops held units (never `needed`, nor one needed no later than use `before`), the one needed farthest
  // ahead first, until `charge` more bytes fit the stream's budget and the server-wide one. Whether they fit.
  bool EvictFor(uint32_t needed, uint64_t charge, size_t before = SIZE_MAX);

  ReaderContext ctx;
  ReadAheadOptions opt;
  std::shared_ptr<const std::vector<cas::FileTermRef>> terms;
  std::vector<Xorb> xorbs;
  std::vector<Unit> units;
  std::vector<Use> uses;

  std::mutex mu;
  std::condition_variable cv;
  size_t cur = 0;  // the use being sent
  bool use_started = false;
  uint32_t chunk = 0;      // within the current use
  uint64_t in_chunk = 0;   // bytes of that chunk sent
  uint64_t use_left = 0;   // bytes of the current use still to send
  uint64_t remaining = 0;  // bytes of the range still to send
  uint64_t held_bytes = 0;
  size_t fetches = 0;
  uint32_t stamp = 0;
  bool cancelled = false;
  Status failed = Ok{};
};

Result<uint32_t> FileReader::State::XorbIdOf(const xet::XorbHash& hash, XorbIds& ids) {
  auto [pos, inserted] = ids.try_emplace(hash, static_cast<uint32_t>(xorbs.size()));
  if (inserted) {
    auto layout = ctx.cas.Layout(hash);
    if (!layout) {
      if (layout.error().code == ErrorCode::kNotFound)
        return Damaged("the file names xorb " + hash.hex() + ", which the index has no layout of");
      return layout.error();
    }
    xorbs.push_back({hash, std::move(*layout), {}});
  }
  return pos->second;
}

Result<FileReader::State::Piece> FileReader::State::PieceOf(const cas::FileTermRef& t, uint32_t xorb,
                                                            uint64_t offset, uint64_t end) const {
  const xet::XorbLayout& layout = *xorbs[xorb].layout;
  if (t.chunk_start >= t.chunk_end || t.chunk_end > layout.chunks.size())
    return Damaged("a term of the file lies outside xorb " + t.xorb.hex());
  const uint64_t term_begin = t.end_offset - t.bytes;
  const uint64_t from = std::max(offset, term_begin) - term_begin;
  const uint64_t to = std::min(end, t.end_offset) - term_begin;
  uint64_t at = 0;
  Piece p{xorb, t.chunk_end, t.chunk_end, 0, to - from};
  for (uint32_t c = t.chunk_start; c < t.chunk_end; ++c) {
    const uint64_t n = layout.chunks[c].unpacked_size;
    if (p.cs == t.chunk_end && at + n > from) {
      p.cs = c;
      p.skip = from - at;
    }
    if (at < to) p.ce = c + 1;
    at += n;
  }
  if (at != t.bytes) return Damaged("a term of the file disagrees with xorb " + t.xorb.hex());
  return p;
}

void FileReader::State::CutUnits(uint32_t x, std::vector<std::pair<uint32_t, uint32_t>>& runs) {
  std::sort(runs.begin(), runs.end());
  uint32_t run_start = runs.front().first;
  uint32_t run_end = runs.front().second;
  for (size_t i = 1; i < runs.size(); ++i) {
    if (runs[i].first <= run_end) {
      run_end = std::max(run_end, runs[i].second);
    } else {
      CutRun(x, run_start, run_end);
      run_start = runs[i].first;
      run_end = runs[i].second;
    }
  }
  CutRun(x, run_start, run_end);
}

void FileReader::State::CutRun(uint32_t x, uint32_t cs, uint32_t ce) {
  const xet::XorbLayout& layout = *xorbs[x].layout;
  Unit u;
  u.xorb = x;
  u.cs = cs;
  for (uint32_t c = cs; c < ce; ++c) {
    // At most unit_bytes stored and unit_bytes decoded: a unit of very compressible chunks would otherwise
    // decode to many times what was read, and what a connection's socket still holds of lent units (two
    // blocks' worth) would grow with it.
    const bool fits = layout.chunks[c].end_offset - layout.begin_offset(u.cs) <= opt.unit_bytes &&
                      u.unpacked + layout.chunks[c].unpacked_size <= opt.unit_bytes;
    if (c > u.cs && !fits) {
      u.first_byte = layout.begin_offset(u.cs);
      u.end_byte = layout.begin_offset(c);
      xorbs[x].units.push_back(static_cast<uint32_t>(units.size()));
      units.push_back(std::move(u));
      u = Unit{};
      u.xorb = x;
      u.cs = c;
      u.unpacked = 0;
    }
    u.ce = c + 1;
    u.unpacked += layout.chunks[c].unpacked_size;
  }
  u.first_byte = layout.begin_offset(u.cs);
  u.end_byte = layout.chunks[u.ce - 1].end_offset;
  xorbs[x].units.push_back(static_cast<uint32_t>(units.size()));
  units.push_back(std::move(u));
}

void FileReader::State::AddUses(const Piece& p) {
  const Xorb& x = xorbs[p.xorb];
  uint64_t skip = p.skip;
  uint64_t left = p.len;
  for (uint32_t c = p.cs; c < p.ce && left > 0;) {
    const auto it = std::upper_bound(x.units.begin(), x.units.end(), c,
                                     [this](uint32_t k, uint32_t u) { return k < units[u].cs; });
    const uint32_t ui = *(it - 1);
    Unit& u = units[ui];
    const uint32_t ce = std::min(p.ce, u.ce);
    uint64_t bytes = 0;
    for (uint32_t k = c; k < ce; ++k) bytes += x.layout->chunks[k].unpacked_size;
    const uint64_t len = std::min(bytes - skip, left);
    u.uses.push_back(static_cast<uint32_t>(uses.size()));
    uses.push_back({ui, c, ce, skip, len});
    left -= len;
    skip = 0;
    c = ce;
  }
}

Status FileReader::State::Plan(const std::vector<cas::FileTermRef>& file, uint64_t offset, uint64_t length) {
  const uint64_t size = file.empty() ? 0 : file.back().end_offset;
  if (length == 0 || offset + length > size || offset + length < offset)
    return Unsatisfiable("range outside the file");
  const uint64_t end = offset + length;
  remaining = length;
  const auto first = std::upper_bound(file.begin(), file.end(), offset,
                                      [](uint64_t o, const cas::FileTermRef& t) { return o < t.end_offset; });
  const auto last = std::upper_bound(first, file.end(), end - 1,
                                     [](uint64_t o, const cas::FileTermRef& t) { return o < t.end_offset; }) +
                    1;
  {
    std::vector<xet::XorbHash> wanted;
    for (auto it = first; it != last; ++it) wanted.push_back(it->xorb);
    if (auto st = ctx.cas.PrefetchXorbLayouts(std::move(wanted)); !st) return st;
  }
  std::vector<Piece> pieces;
  XorbIds xorb_ids;
  for (auto it = first; it != last; ++it) {
    auto xorb = XorbIdOf(it->xorb, xorb_ids);
    if (!xorb) return xorb.error();
    auto piece = PieceOf(*it, *xorb, offset, end);
    if (!piece) return piece.error();
    pieces.push_back(*piece);
  }
  // Units: each xorb's chunk runs, merged, cut at unit_bytes.
  std::vector<std::vector<std::pair<uint32_t, uint32_t>>> runs(xorbs.size());
  for (const Piece& p : pieces) runs[p.xorb].emplace_back(p.cs, p.ce);
  for (uint32_t x = 0; x < xorbs.size(); ++x) CutUnits(x, runs[x]);
  // Uses, in the order the range sends them.
  for (const Piece& p : pieces) AddUses(p);
  return Ok{};
}

void FileReader::State::Release(Unit& u, UnitState next) {
  u.data.reset();
  u.state = next;
  held_bytes -= u.held;
  ctx.budget.Give(u.held);
  u.held = 0;
}

void FileReader::State::Complete(uint32_t ui, Result<Loaded> loaded) {
  Unit& u = units[ui];
  if (!loaded) {
    u.error = loaded.error();
    Release(u, UnitState::kFailed);
  } else {
    if (loaded->corrupt && ctx.on_corrupt && !u.reported) ctx.on_corrupt(loaded->corrupt->message);
    if (loaded->corrupt) u.reported = true;  // a unit read again after being dropped is counted once
    u.data = std::make_shared<const Loaded>(std::move(*loaded));
    u.state = UnitState::kReady;
    // The decoded bytes were charged in full; give them back when no chunk needed decoding (the buffer,
    // once there, is as large as the unit's unpacked bytes).
    const uint64_t unused = u.data->decoded ? 0 : u.unpacked;
    u.held -= unused;
    held_bytes -= unused;
    ctx.budget.Give(unused);
    if (cancelled) Release(u, UnitState::kDone);
  }
  cv.notify_all();
}

void FileReader::State::StartFetch(uint32_t ui, uint64_t charge) {
  Unit& u = units[ui];
  u.state = UnitState::kFetching;
  u.held = charge;
  held_bytes += charge;
  ++fetches;
}

void FileReader::State::Pump() {
  if (!failed || cancelled) return;
  ++stamp;
  size_t distinct = 0;
  for (size_t j = cur; j < uses.size() && j < cur + kScanLimit; ++j) {
    const uint32_t ui = uses[j].unit;
    Unit& u = units[ui];
    if (u.stamp == stamp) continue;
    u.stamp = stamp;
    if (++distinct > opt.depth + 1) break;
    if (u.state != UnitState::kIdle) continue;
    const uint64_t charge = u.charge();
    // Room is made by dropping units held for later reuse that are needed after this one.
    if (held_bytes + charge > opt.stream_bytes && !EvictFor(ui, charge, j)) break;
    if (!ctx.budget.TryTake(charge)) break;
    StartFetch(ui, charge);
    // The job marks its unit failed if the queue drops it unrun (the server stopping), so that no reader
    // waits for it forever.
    struct Job {
      std::shared_ptr<State> state;
      uint32_t ui = 0;
      bool ran = false;
      ~Job() {
        if (ran) return;
        std::lock_guard lock(state->mu);
        state->Complete(ui, Unavailable("the server is stopping"));
      }
    };
    auto job = std::make_shared<Job>();  // built in place: a moved-from temporary would "drop" the job
    job->state = shared_from_this();
    job->ui = ui;
    const bool posted = ctx.fetchers.Post([job] {
      job->ran = true;
      State& s = *job->state;
      const Unit& unit = s.units[job->ui];
      const Xorb& x = s.xorbs[unit.xorb];
      auto loaded = LoadUnit(s.ctx.cas, x.hash, *x.layout, unit.cs, unit.ce, unit.first_byte, unit.end_byte,
                             unit.unpacked);
      std::lock_guard lock(s.mu);
      s.Complete(job->ui, std::move(loaded));
    });
    if (!posted) {  // the queue is full: read it when needed
      job->ran = true;
      --fetches;
      Release(u, UnitState::kIdle);
      break;
    }
  }
}

bool FileReader::State::EvictFor(uint32_t needed, uint64_t charge, size_t before) {
  const auto fits = [&] {
    return held_bytes + charge <= opt.stream_bytes && ctx.budget.in_use() + charge <= ctx.budget.capacity();
  };
  while (!fits()) {
    Unit* victim = nullptr;
    uint32_t farthest = 0;
    for (uint32_t ui = 0; ui < units.size(); ++ui) {
      Unit& u = units[ui];
      if (ui == needed || u.state != UnitState::kReady || u.uses[u.consumed] <= cur) continue;  // sent now
      const uint32_t next = u.uses[u.consumed];
      if (victim == nullptr || next > farthest) {
        victim = &u;
        farthest = next;
      }
    }
    if (victim == nullptr || (before != SIZE_MAX && farthest <= before)) return false;
    Release(*victim, UnitState::kIdle);
  }
  return true;
}

Status FileReader::State::EnsureReady(std::unique_lock<std::mutex>& lock, uint32_t ui) {
  for (;;) {
    Unit& u = units[ui];
    switch (u.state) {
      case UnitState::kReady:
        return Ok{};
      case UnitState::kFailed:
        // A read-ahead that failed for a reason other than the data (a store out of reach for a moment) is
        // tried once more now that the unit is needed.
        if (!Retryable(u.error) || u.retried) return u.error;
        u.retried = true;
        u.state = UnitState::kIdle;
        continue;
      case UnitState::kFetching:
        cv.wait(lock);
        continue;
      case UnitState::kIdle:
      case UnitState::kDone: {
        const uint64_t charge = u.charge();
        (void)EvictFor(ui, charge);  // what does not fit is taken anyway: this unit is needed now
        ctx.budget.Take(charge);
        StartFetch(ui, charge);
        const Xorb& x = xorbs[u.xorb];
        const uint32_t cs = u.cs, ce = u.ce, fb = u.first_byte, eb = u.end_byte;
        const uint64_t unpacked = u.unpacked;
        lock.unlock();
        auto loaded = LoadUnit(ctx.cas, x.hash, *x.layout, cs, ce, fb, eb, unpacked);
        lock.lock();
        Complete(ui, std::move(loaded));
        continue;
      }
    }
  }
}

template <typename Sink>
Status FileReader::State::Consume(std::unique_lock<std::mutex>& lock, uint64_t n, Sink&& sink) {
  if (!failed) return failed;
  if (n > remaining) return Unsatisfiable("read past the end of the range");
  uint64_t done = 0;
  while (done < n) {
    const Use use = uses[cur];
    if (!use_started) {
      chunk = use.cb;
      in_chunk = use.skip;
      use_left = use.len;
      use_started = true;
      Pump();  // the window moved
    }
    if (auto st = EnsureReady(lock, use.unit); !st) {
      failed = st;
      return st;
    }
    Unit& u = units[use.unit];
    while (use_left > 0 && done < n) {
      if (chunk - u.cs >= u.data->chunks.size()) {  // the chunk failed verification
        failed = *u.data->corrupt;
        return failed;
      }
      const std::span<const uint8_t> bytes = u.data->chunks[chunk - u.cs];
      const size_t k = static_cast<size_t>(std::min<uint64_t>({bytes.size() - in_chunk, use_left, n - done}));
      sink(bytes.subspan(in_chunk, k), use.unit);
      in_chunk += k;
      use_left -= k;
      done += k;
      if (in_chunk == bytes.size()) {
        ++chunk;
        in_chunk = 0;
      }
    }
    if (use_left == 0) {
      if (++u.consumed == u.uses.size()) Release(u, UnitState::kDone);
      ++cur;
      use_started = false;
    }
  }
  remaining -= n;
  Pump();
  return Ok{};
}

Status FileReader::State::Read(std::span<uint8_t> out) {
  std::unique_lock lock(mu);
  size_t filled = 0;
  return Consume(lock, out.size(), [&](std::span<const uint8_t> bytes, uint32_t /*unit*/) {
    // Only this thread releases a unit being sent: copy without the lock.
    lock.unlock();
    std::memcpy(out.data() + filled, bytes.data(), bytes.size());
    lock.lock();
    filled += bytes.size();
  });
}

Status FileReader::State::Lend(uint64_t length, std::shared_ptr<const void>& owner,
                               std::vector<std::span<const uint8_t>>& pieces) {
  // The units' loaded bytes, shared: the reader counts a unit against its budgets until it has sent (or
  // dropped) it, as when it copies; what the socket still holds then is the server's, per connection.
  auto held = std::make_shared<std::vector<std::shared_ptr<const Loaded>>>();
  std::unique_lock lock(mu);
  auto st = Consume(lock, length, [&](std::span<const uint8_t> bytes, uint32_t ui) {
    pieces.push_back(bytes);
    if (held->empty() || held->back() != units[ui].data) held->push_back(units[ui].data);
  });
  owner = std::move(held);
  return st;
}

Result<std::unique_ptr<FileReader>> FileReader::Open(
    const ReaderContext& context, std::shared_ptr<const std::vector<cas::FileTermRef>> terms, uint64_t offset,
    uint64_t length, const ReadAheadOptions& options) {
  auto state = std::make_shared<State>(context, options);
  state->terms = std::move(terms);
  if (auto st = state->Plan(*state->terms, offset, length); !st) return st.error();
  {
    std::lock_guard lock(state->mu);
    state->Pump();  // the first units are on their way before the first Read
  }
  return std::unique_ptr<FileReader>(new FileReader(std::move(state)));
}

FileReader::~FileReader() {
  std::lock_guard lock(state_->mu);
  state_->cancelled = true;
  for (auto& u : state_->units)
    if (u.state == State::UnitState::kReady) state_->Release(u, State::UnitState::kDone);
}

Status FileReader::Read(std::span<uint8_t> out) {
  return state_->Read(out);
}

Status FileReader::Lend(uint64_t length, std::shared_ptr<const void>& owner,
                        std::vector<std::span<const uint8_t>>& pieces) {
  return state_->Lend(length, owner, pieces);
}

uint64_t FileReader::remaining() const {
  std::lock_guard lock(state_->mu);
  return state_->remaining;
}

size_t FileReader::units() const {
  return state_->units.size();
}

size_t FileReader::fetches() const {
  std::lock_guard lock(state_->mu);
  return state_->fetches;
}

}  // namespace cairn::files
