// Reads a byte range of a stored file as plain bytes, every chunk verified, with read-ahead.
//
// Planning (Open): the terms covering the range are cut to the chunks the range needs, the chunk runs of each
// xorb are merged (terms sharing chunks share their bytes) and split into fetch units of at most
// ReadAheadOptions::unit_bytes stored bytes and as many decoded (one chunk may pass either), each read with
// one store call (one pread on local disk, one ranged GET on S3). Units are fetched on the service's fetch
// threads in the order the range needs them, `depth` units ahead of the one being sent, as long as the
// stream's own budget (`stream_bytes`) and the server-wide ByteBudget allow; a unit needed now is read
// whatever the budgets say (so a full budget slows a stream to no read-ahead, never stops it). A unit stays
// in memory until the last term using it was sent, unless memory is short: then the held unit needed farthest
// ahead is dropped and read again later.
//
// Verification: each chunk's header must agree with the xorb's layout (sizes), and each chunk's decoded bytes
// must hash to the layout's chunk hash; otherwise Read fails with kDamaged at that chunk, never handing
// out its bytes, and `on_corrupt` is told. A slow caller stops read-ahead: nothing is fetched past `depth`
// units ahead of what Read has handed out.
//
// Ownership and thread-safety: one caller at a time (Open, then Read in order). The reader may be destroyed
// with fetches in flight; they finish on their own and release what they hold. The CasService, fetch queue
// and budget must outlive every fetch (the FileService owns them in that order).
// Failures: Open: kDamaged for a layout the index lacks or terms that do not fit their xorbs, kUnsatisfiable
// for a range outside the file; Read: kDamaged for a stored xorb missing or failing its checks, the store's
// kIo and kUnavailable (a unit that failed for those is fetched once more when it is needed).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "cas/service.h"
#include "common/error.h"
#include "common/work_queue.h"
#include "files/byte_budget.h"

namespace cairn::files {

struct ReadAheadOptions {
  size_t depth = 2;                     // units fetched ahead of the one being sent (0: none)
  uint64_t unit_bytes = 4ULL << 20;     // stored, and decoded, bytes per fetch, at most (cut at chunks)
  uint64_t stream_bytes = 64ULL << 20;  // bytes one stream holds (fetched, not yet sent), at most
};

// What readers share: where bytes come from, the threads that fetch ahead, the server-wide budget, and who
// hears of a corrupt chunk.
struct ReaderContext {
  cas::CasService& cas;
  WorkQueue& fetchers;
  ByteBudget& budget;
  std::function<void(const std::string&)> on_corrupt;  // may be empty
};

class FileReader {
 public:
  // A reader of bytes [offset, offset + length) of the file made of `terms` (length > 0, within the file).
  static Result<std::unique_ptr<FileReader>> Open(const ReaderContext& context,
                                                  std::shared_ptr<const std::vector<cas::FileTermRef>> terms,
                                                  uint64_t offset, uint64_t length,
                                                  const ReadAheadOptions& options);
  ~FileReader();
  FileReader(const FileReader&) = delete;
  FileReader& operator=(const FileReader&) = delete;

  // Fills `out` with the next bytes of the range (kInconsistent past its end). After a failure every later
  // Read fails the same way.
  Status Read(std::span<uint8_t> out);
  // The next `length` bytes, as Read would give them, as `pieces` of the reader's own verified buffers
  // instead of a copy. `owner` keeps them alive until it is dropped (on any thread), however far the reader
  // has moved on or if it is gone. The budgets count them as they count what Read copies: until the reader
  // has handed out the unit they belong to. Fails as Read.
  Status Lend(uint64_t length, std::shared_ptr<const void>& owner,
              std::vector<std::span<const uint8_t>>& pieces);
  uint64_t remaining() const;

  // Fetch units the plan has, and store reads made so far (a unit read again after being dropped counts
  // twice): what "each xorb range is read once" is measured by.
  size_t units() const;
  size_t fetches() const;

  struct State;

 private:
  explicit FileReader(std::shared_ptr<State> state) : state_(std::move(state)) {}
  std::shared_ptr<State> state_;
};

}  // namespace cairn::files
