// Reconstruction answers (protocol §5.2, §5.3, §5.10): which chunk ranges of which xorbs rebuild a byte range
// of a file, and signed URLs for the bytes. Answers are written straight into strings: hex forms are computed
// once per xorb, nothing is allocated per term beyond the plan's flat vectors, and a large answer is cut into
// parts that the worker pool (when given) writes concurrently.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "cas/transfer_url.h"
#include "common/worker_pool.h"
#include "xet/verify.h"
#include "xet/xorb.h"

namespace cairn::cas {

// One term of a stored file, with the file offset where it ends (cumulative), so that a byte range maps to
// terms by binary search.
struct FileTermRef {
  xet::XorbHash xorb;
  uint32_t chunk_start = 0;
  uint32_t chunk_end = 0;  // exclusive
  uint32_t bytes = 0;
  uint64_t end_offset = 0;
  // The term's bytes in its xorb's chunk region (end exclusive), as the index recorded them; 0, 0 when it
  // did not (files registered before schema 5), and the xorb's layout then gives them.
  uint32_t range_start = 0;
  uint32_t range_end = 0;
};

enum class ApiVersion { kV1, kV2 };

struct ReconstructionQuery {
  std::optional<ByteRange> range;  // inclusive, as from a Range header; may extend past the end of the file
  ApiVersion version = ApiVersion::kV2;
  uint64_t url_expiry_unix = 0;
};

enum class ReconstructionStatus {
  kOk,
  kRangeNotSatisfiable,  // start at or past the end of the file (416)
  kMissingXorb,          // a term needed a layout the index does not have (500: the index is damaged)
};

struct ReconstructionAnswer {
  ReconstructionStatus status = ReconstructionStatus::kOk;
  // JSON for kOk, in parts written concurrently and sent in order (never joined on the serving path).
  std::vector<std::string> body;
  std::string detail;

  std::string Text() const;  // the parts joined
  size_t size() const;       // total bytes
};

// Ranges wider than this many per URL are split over several fetch entries (v2), keeping URLs short.
inline constexpr size_t kMaxRangesPerUrl = 256;

struct ChunkSpan {
  uint32_t start = 0;
  uint32_t end = 0;  // exclusive
};

// A term kept in an answer.
struct PlannedTerm {
  uint32_t xorb = 0;  // index into ReconstructionPlan::xorbs
  ChunkSpan chunks;
  uint32_t bytes = 0;
};

// A run of chunks an answer fetches from a xorb, and their bytes in it (end exclusive).
struct XorbSpan {
  ChunkSpan chunks;
  uint32_t first_byte = 0;
  uint32_t end_byte = 0;
};

// A xorb an answer fetches from.
struct PlannedXorb {
  xet::XorbHash hash;
  // Looked up only when a term needs it: its byte range was not recorded, or the requested range cuts it
  // (a whole-file answer over recorded ranges reads no layout at all). Alive as long as the plan needs it
  // (see holds).
  const xet::XorbLayout* layout = nullptr;
  bool layout_missing = false;
  XorbSigningState signing{};   // hex form and MAC state, prepared once
  std::vector<XorbSpan> spans;  // sorted and merged
};

// What an answer for a byte range of a file says, short of its expiry and signatures: the terms, the xorbs
// and their chunk ranges. Planning is a fifth of a 100,000-term answer, and a whole-file plan never changes
// (files and layouts are immutable), so the service keeps whole-file plans for the next request.
struct ReconstructionPlan {
  ReconstructionStatus status = ReconstructionStatus::kOk;
  std::string detail;  // why, when status is not kOk
  uint64_t offset_into_first = 0;
  std::vector<PlannedTerm> terms;
  std::vector<PlannedXorb> xorbs;
  // Keep the layouts the xorbs point to alive when the plan outlives the lookup (set by whoever keeps it).
  std::vector<std::shared_ptr<const xet::XorbLayout>> holds;
  // Which keys prepared the xorbs' signing states (set by whoever keeps the plan, to notice a rotation).
  uint64_t key_generation = 0;
  // Which record of the file it plans (FileEntry::created_at; set by whoever keeps the plan, to notice a
  // file swept and registered again with other xorbs).
  int64_t file_record = 0;

  size_t MemoryBytes() const;  // what the plan itself takes (the layouts it holds are counted elsewhere)
};

// Plans an answer for `range` (all of the file when empty) of the file made of `terms`. `layouts` is asked
// only for the xorbs of terms without recorded byte ranges and of the (at most two) terms the range cuts.
ReconstructionPlan PlanReconstruction(std::span<const FileTermRef> terms, const xet::LayoutLookup& layouts,
                                      std::optional<ByteRange> range, const TransferUrlSigner& signer);
// Writes the answer a plan describes (its status and detail when the plan failed), URLs expiring at
// `url_expiry_unix`.
ReconstructionAnswer WriteReconstruction(const ReconstructionPlan& plan, ApiVersion version,
                                         uint64_t url_expiry_unix, const TransferUrlSigner& signer,
                                         WorkerPool* pool = nullptr);

// Answers a reconstruction query for one file: PlanReconstruction, then WriteReconstruction.
ReconstructionAnswer AnswerReconstruction(std::span<const FileTermRef> terms,
                                          const xet::LayoutLookup& layouts, const ReconstructionQuery& query,
                                          const TransferUrlSigner& signer, WorkerPool* pool = nullptr);

// Answers the batch form for several files (whole files, v1 shapes): {"files": {...}, "fetch_info": {...}}.
struct BatchFile {
  xet::FileHash hash;
  std::span<const FileTermRef> terms;
};
ReconstructionAnswer AnswerBatchReconstruction(std::span<const BatchFile> files,
                                               const xet::LayoutLookup& layouts, uint64_t url_expiry_unix,
                                               const TransferUrlSigner& signer, WorkerPool* pool = nullptr);

}  // namespace cairn::cas
