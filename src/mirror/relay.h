// A Xet file being copied from upstream through upstream's own reconstruction: its xorb ranges are fetched
// once, in the order the file needs them, into a spool (spool.h), each chunk decoded and hashed once as it
// arrives (the range's index), and from there
//   - handed on chunk by chunk in the file's order, with its hash, its decoded bytes and its record, to the
//     mirror's fetch, which checks the file and stores the records as they are (Produce), and
//   - sent on to clients once checked: the mirror answers a reconstruction of the file with upstream's
//     terms (Plan) under its own transfer URLs, and serves those URLs' ranges from the spool (Open) — so the
//     first hf_xet client downloads at upstream's pace, and upstream sends each range once however many ask.
//
// An answer for a part of the file (hf_xet asks in blocks: 256 MiB, then larger) fetches only the bytes of
// the chunks that part needs, as a direct download does: the relay asks upstream for its own answer for the
// part (RangeAsker) and narrows each range to the chunks upstream names there, when that answer agrees with
// the whole file's. The bytes such a narrowed range claims to hold are checked against the chunk boundaries
// of its arrived range before it is served (CheckClaim): upstream's word alone never decides what a client
// reads. Without an answer (upstream cannot give one), a part's answer fetches the whole ranges.
//
// Nothing unverified reaches a client. A range is served once its bytes are known to be right: a fetch that
// spans a whole xorb as soon as it arrived, when its chunks, decoded and hashed, give the xorb's hash; any
// other (part of a xorb, whose hash alone its chunks cannot give) once the whole file, decoded from the
// spool, was checked against its SHA-256 and Xet hash (FileChecked). A range that fails, or whose file fails,
// is cut short (its reader errs: hf_xet asks again and is answered from the file the mirror then stores).
//
// A range that starts at its xorb's first byte is written, where the store allows (a `Filler`; at most
// kMaxFilled ranges of a file), straight into a put of that xorb rather than the spool: when the file's
// chunks are stored as that very xorb, the put is committed as it is (TakeFilled, CasService::PutHashedXorb),
// and the bytes are written once.
//
// Thread-safety: Receive runs on one thread of its own; every other method may be called concurrently.
// Ownership: shared by the flight that fetches the file and the requests reading it; the spool's file goes
// with the last of them. Failures: kUnavailable to readers once the transfer failed or stalled; kMalformed
// for an upstream answer that does not describe a file (a term in no fetch, a fetch that does not decode).
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "cas/filled_xorb.h"
#include "cas/relay.h"
#include "common/unique_fd.h"
#include "mirror/spool.h"
#include "net/http_client.h"
#include "xet/reconstruction_answer.h"
#include "xet/xorb.h"

namespace cairn::mirror {

class Relay : public std::enable_shared_from_this<Relay> {
 public:
  using Fetch = xet::ParsedReconstruction::Fetch;
  // Sends bytes [fetch.first + from, fetch.last] of a fetch to the sink.
  using Fetcher = std::function<Status(const Fetch&, uint64_t from, const net::HttpClient::Sink&)>;
  // Upstream's answer for file bytes [first, last] (called from Plan, on the request's thread).
  using RangeAsker = std::function<Result<xet::ParsedReconstruction>(uint64_t first, uint64_t last)>;
  // A put of a xorb to write its range into (CasService::BeginFilledXorb), or null for none (the spool).
  using Filler = std::function<std::unique_ptr<cas::FilledXorb>(const xet::XorbHash&)>;

  // `plan`: upstream's answer for the whole file. `scopes`: the CAS scopes that may read it here. `ask`:
  // how to ask upstream for a part's answer (none: a part's answer fetches whole ranges). `fill`: where the
  // ranges that start a xorb are written (none: the spool).
  static Result<std::shared_ptr<Relay>> Create(const std::filesystem::path& dir, const xet::FileHash& file,
                                               xet::ParsedReconstruction plan,
                                               std::vector<std::string> scopes, RangeAsker ask = nullptr,
                                               const Filler& fill = nullptr);
  // `xorbs`: each fetch's xorb hash, parsed (by fetch index).
  Relay(const xet::FileHash& file, xet::ParsedReconstruction plan, std::vector<xet::XorbHash> xorbs,
        std::vector<std::string> scopes, std::shared_ptr<Spool> spool, RangeAsker ask = nullptr);

  const xet::FileHash& file() const { return file_; }
  uint64_t size() const { return size_; }
  bool Readable(const std::string& scope) const;

  // Fetches every range (each retried from where a cut left it while tries bring bytes), then ends the
  // spool; `stopping` ends it early. What failed, if anything (the readers then fail too).
  Status Receive(const Fetcher& fetch, const std::function<bool()>& stopping);
  // A chunk of the file as Produce hands it on: its hash (of `decoded`), its decoded bytes, its record as it
  // arrived (header and payload) and, when its range starts at its xorb's first byte, that xorb. The spans
  // are valid during the call.
  struct Chunk {
    xet::ChunkHash hash;
    std::span<const uint8_t> decoded;
    std::span<const uint8_t> record;
    std::optional<xet::XorbHash> from;
  };
  using ChunkSink = std::function<bool(const Chunk&)>;  // false: stop (Produce then fails with kIo)
  // The file's chunks in order, each as soon as its range's index has it (long before a whole xorb
  // arrived); every term checked to decode to the length upstream announced (kMalformed otherwise).
  Status Produce(const ChunkSink& sink) const;
  // Bytes of the file itself from `offset`, up to out.size(), decoded from the relayed ranges as they
  // arrive: a plain download of the file while it is fetched reads them here (Spool::ReadThrough), so the
  // fetch writes no second, decoded copy of the file. As a spool does, it holds the file's last byte back
  // until the file was checked (FileChecked(true)) and answers 0 past it; kUnavailable once the transfer or
  // the check failed or stalled, kMalformed for a term that does not decode to the length announced.
  Result<size_t> ReadDecoded(uint64_t offset, std::span<uint8_t> out) const;

  // The put fetch ranges of xorb `xorb` were written into, once all of it arrived (null otherwise, and after
  // the first call): the caller commits it or drops it. The ranges are still served from its file.
  std::unique_ptr<cas::FilledXorb> TakeFilled(const xet::XorbHash& xorb);
  // Bytes of fetch `i`'s range from `offset` in it, already arrived: read into `out`, or a descriptor of the
  // file that holds them and where.
  Status ReadFetched(size_t i, uint64_t offset, std::span<uint8_t> out) const;
  Result<cas::RelayedBytes> FileOf(size_t i, uint64_t offset) const;

  // An answer for `range` of the file (whole when empty), in upstream's terms; a part's ranges narrowed to
  // the chunks it needs when upstream's answer for it allows.
  cas::ReconstructionPlan Plan(std::optional<cas::ByteRange> range) const;
  // Bytes [first, last] of a xorb when they lie in one of the ranges relayed (null otherwise).
  std::shared_ptr<const cas::RelayedRange> Open(const xet::XorbHash& xorb, uint64_t first,
                                                uint64_t last) const;
  // What a narrowed range was said to hold: its chunks [cs, ce), and the terms of the part's answer in it,
  // each as (first chunk, end chunk, bytes decoded).
  struct Claim {
    uint32_t cs = 0, ce = 0;
    std::vector<std::tuple<uint32_t, uint32_t, uint64_t>> terms;
  };
  // Whether bytes [first, last] of fetch `fetch`, arrived, hold what `claim` says: Ok, or kUnavailable
  // (never served; the relay stops narrowing).
  Status CheckClaim(size_t fetch, uint64_t first, uint64_t last, const Claim& claim) const;
  // Waits until the bytes of fetch `fetch` are known to be right (Ok) or never will be (kUnavailable).
  Status AwaitVerified(size_t fetch) const;
  // The fetch of the file (Produce's bytes, fed to the store) passed its checks, or did not (or gave up on
  // the relay): the ranges waiting for it are served, or fail. The first call counts.
  void FileChecked(bool passed);

  static constexpr std::chrono::seconds kStall{120};  // a reader waits this long for the next bytes

  // A chunk of a fetch's range as its index holds it: where its record lies in the xorb and its length
  // (header and payload), its decoded size, the decoded bytes before it in the range, and its hash.
  struct Indexed {
    uint64_t start = 0;
    uint32_t length = 0;
    uint32_t size = 0;
    uint64_t decoded_before = 0;
    xet::ChunkHash hash;
  };
  // Receive's index of one range as its bytes arrive (in memory, before they are read back from the spool):
  // each record decoded and hashed once; a record split between two blocks is kept until it is whole.
  struct RangeIndexer {
    RangeIndexer(uint64_t first_byte, uint64_t bytes, xet::ChunkDecoder& chunk_decoder)
        : first(first_byte), length(bytes), decoder(chunk_decoder) {}
    const uint64_t first;   // the range's first byte in the xorb
    const uint64_t length;  // its bytes
    xet::ChunkDecoder& decoder;
    uint64_t next = 0;           // where the record not yet indexed starts, in the range
    uint64_t decoded = 0;        // decoded bytes of the records indexed
    std::vector<uint8_t> carry;  // the start of a record whose last byte has not arrived
    bool broken = false;         // a record that does not parse or decode (or runs past the range)
    // The records the next `bytes` of the range complete.
    std::vector<Indexed> Feed(std::span<const uint8_t> bytes);

   private:
    // The length of the record `head` starts (header and payload); 0 when it is none or runs past the range.
    size_t RecordLength(std::span<const uint8_t> head) const;
    void Index(std::span<const uint8_t> record, std::vector<Indexed>& out);
  };

 private:
  const xet::FileHash file_;
  const xet::ParsedReconstruction plan_;
  const std::vector<std::string> scopes_;
  std::shared_ptr<Spool> spool_;
  std::vector<size_t> order_;                     // fetches in the order the file needs them
  std::vector<uint64_t> base_;                    // each fetch's offset in the spool (by fetch index)
  std::vector<xet::XorbHash> xorbs_;              // each fetch's xorb (by fetch index)
  std::multimap<xet::XorbHash, size_t> by_xorb_;  // xorb → its fetches
  uint64_t size_ = 0;
  std::vector<uint64_t> term_start_;  // each term's first byte in the file, then the file's size
  cas::ReconstructionPlan whole_;     // Plan(nullopt): it never changes
  RangeAsker ask_;
  // The terms covering file bytes [start, end); `used`, when given, gets each planned xorb's fetches.
  cas::ReconstructionPlan Build(uint64_t start, uint64_t end,
                                std::vector<std::vector<size_t>>* used = nullptr) const;
  // `base` (Build's) with its first and last terms and every xorb's ranges narrowed to those of `answer`
  // (upstream's for the same part), their claims recorded; nullopt when the two do not agree.
  std::optional<cas::ReconstructionPlan> Narrow(const cas::ReconstructionPlan& base,
                                                const std::vector<std::vector<size_t>>& used,
                                                const xet::ParsedReconstruction& answer) const;
  struct FetchIndex {
    std::vector<Indexed> chunks;
    bool complete = false;  // the records end where the range does, every one indexed
    bool broken = false;    // a record that does not parse or decode: nothing after it is indexed
  };
  // Adds what `indexer` found of fetch `i` to its index; `ended`: the range is all there.
  void Publish(size_t i, const std::vector<Indexed>& found, const RangeIndexer& indexer, bool ended);
  // Waits until chunk `k` of fetch `i`'s range is indexed: it, or kMalformed (not a chunk of the range) or
  // kUnavailable (the transfer failed or stalled).
  Result<Indexed> AwaitIndexed(size_t i, size_t k) const;
  // The decoded bytes of chunk `c` of fetch `i` (indexed, so arrived), read into `record` and, when
  // compressed, decoded into `out`: a span of one of them.
  Result<std::span<const uint8_t>> Decoded(size_t i, const Indexed& c, xet::ChunkDecoder& decoder,
                                           std::vector<uint8_t>& record, std::vector<uint8_t>& out) const;
  // Waits until the file's check is in: Ok when it passed, kUnavailable when it failed or did not come.
  Status AwaitFileChecked() const;
  // Whether fetch `i`'s range, arrived, is the whole xorb upstream named (its chunks give its hash).
  bool IsWholeXorb(size_t i) const;
  void Verified(size_t fetch);

  enum class Check { kPending, kPassed, kFailed };
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  std::vector<bool> verified_;     // by fetch index; guarded by mu_
  Check check_ = Check::kPending;  // the file's; guarded by mu_
  // Narrowed ranges handed out: (fetch, first, last) → what they claim; guarded by mu_.
  mutable std::map<std::tuple<size_t, uint64_t, uint64_t>, Claim> claims_;
  // Parts' answers already narrowed, by [start, end) (hf_xet's clients ask the same blocks); guarded by mu_.
  mutable std::map<std::pair<uint64_t, uint64_t>, cas::ReconstructionPlan> narrowed_;
  static constexpr size_t kMaxNarrowed = 256;
  // A narrowed range was found not to be the chunks it claimed: upstream's part answers are not used
  // again; guarded by mu_.
  mutable bool distrusted_ = false;
  std::vector<FetchIndex> index_;  // by fetch index; guarded by mu_

  // A put a fetch's range is written into instead of the spool.
  struct Filled {
    // Receive's until `arrived`, then TakeFilled's; guarded by mu_.
    std::unique_ptr<cas::FilledXorb> writer;
    UniqueFd fd;           // the put's file, for readers; set before the relay is shared
    bool arrived = false;  // guarded by mu_
  };
  std::vector<Filled> filled_;  // by fetch index
  Filler fill_;                 // set by Create
  // Each filled fetch holds a descriptor for the relay's life: past this many (16 GiB of xorbs and more), a
  // file's ranges go to the spool, so that no file can take the server's descriptors.
  static constexpr size_t kMaxFilled = 256;
  size_t filled_count_ = 0;  // Receive's
  // Opens a put for fetch `i` when it starts its xorb (Receive, before its first byte).
  void Fill(size_t i);
  // Writes bytes [offset, offset + bytes.size()) of fetch `i`'s range where they go.
  Status Write(size_t i, uint64_t offset, std::span<const uint8_t> bytes);
};

}  // namespace cairn::mirror
