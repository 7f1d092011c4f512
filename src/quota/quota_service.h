// Storage quotas per namespace (docs/operations.md "Quotas"). What a namespace is charged: the distinct
// chunks its repositories' and buckets' committed files reference, each chunk of a xorb once at its
// unpacked size however many of its files name it (a chunk two namespaces both reference counts for both),
// plus the git objects of its repositories (commits, trees, small files) kept in the index. Uploads not yet
// committed are not charged (the collector frees them past its grace), but a namespace whose quota is used
// up stores no more xorbs.
//
// Enforcement: a commit or a bucket batch is admitted only if what it adds fits (Admit). The quick path
// charges its large files at their full size and its small files, checked against the limit inside the very
// transactions that store and publish them (Admission), so nodes admitting at once never pass the limit
// between them and an admission costs no write of its own. When that would not fit, or the record is stale (a
// deletion, a sweep), the namespace is measured exactly and the commit charged what it really adds (its
// chunks the namespace does not reference yet). A measure reads every committed file's terms: its cost grows
// with the namespace, and it runs only near the limit.
//
// Thread-safety: every method may be called concurrently. Ownership: borrows the index and the clock, which
// must outlive it. Failures: kQuota (403) when a quota has no room, with a message for the user; index
// failures as they come.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "common/clock.h"
#include "common/error.h"
#include "index/index.h"

namespace cairn::quota {

// What a namespace holds.
struct Usage {
  std::string ns;
  std::optional<uint64_t> limit;  // none: no quota (or one without a limit)
  uint64_t used = 0;              // bytes charged: exact when `exact`, else an upper bound
  bool exact = false;
  int64_t measured_at = 0;  // unix seconds; 0: never measured
  // Filled by a measure: the repositories and distinct committed files it read, and the two parts of `used`.
  uint64_t repos = 0;
  uint64_t files = 0;
  uint64_t chunk_bytes = 0;
  uint64_t object_bytes = 0;
};

// What a commit or a bucket batch was admitted for, charged by the writes that make it visible, in their own
// transactions (index::QuotaCharge): no write of its own. A commit stores its objects first, charged for its
// small files and reserving its large files' bytes (checked against the limit: kQuota stores nothing), then
// publishes its large files, which settles the reservation. A bucket batch publishes its files alone,
// charged and checked there. Destroyed with its reservation unsettled (the commit failed in between), it
// releases it; a process that dies first leaves it to expire (index::QuotaIndex). Move-only.
class Admission {
 public:
  Admission() = default;  // nothing to charge
  Admission(index::QuotaIndex& index, std::string ns, uint64_t object_bytes, uint64_t file_bytes);
  Admission(Admission&& o) noexcept;
  Admission& operator=(Admission&& o) noexcept;
  Admission(const Admission&) = delete;
  Admission& operator=(const Admission&) = delete;
  ~Admission();

  // The charge of the write that stores the commit's objects (null: none); then ObjectsStored once it did.
  const index::QuotaCharge* ObjectsCharge();
  void ObjectsStored() { stored_ = true; }
  // The charge of the write that publishes the files: settles what the objects' write reserved, or (no such
  // write: a bucket batch) charges and checks them. Then FilesPublished once it did.
  const index::QuotaCharge* FilesCharge();
  void FilesPublished() { published_ = true; }
  // A write's kQuota said in the words a user reads (what is used, of what limit, what this would add);
  // other errors as they are.
  Error Explain(Error e) const;

 private:
  index::QuotaIndex* index_ = nullptr;  // null: nothing to charge
  std::string ns_;
  uint64_t object_bytes_ = 0;
  uint64_t file_bytes_ = 0;
  bool stored_ = false;
  bool published_ = false;
  index::QuotaCharge charge_;  // what the last *Charge() returned points to
};

class QuotaService {
 public:
  QuotaService(index::Index& index, const Clock& clock);

  // Measures the namespace exactly now, and records the measure when it has a quota.
  Result<Usage> Measure(std::string_view ns);
  // The namespace's usage as last recorded (nullopt: it has no quota); `exact` says whether it is current.
  Result<std::optional<Usage>> Recorded(std::string_view ns);

  // kQuota when the namespace's quota is used up (nothing more can be stored for it).
  Status CheckRoom(std::string_view ns);
  // The same for the namespace of the repository whose CAS scope `scope` is; a scope of no repository (a
  // plain CAS scope) has no quota.
  Status CheckRoomForScope(std::string_view scope);
  // Admits a commit or bucket batch of the namespace that publishes `files` (large files, repeats allowed)
  // and stores `object_bytes` of small files, reserving what it adds; kQuota (nothing reserved) when that
  // does not fit. A commit that adds nothing (a deletion) is always admitted.
  Result<Admission> Admit(std::string_view ns, std::span<const xet::FileHash> files, uint64_t object_bytes);

  // Something of the namespace (nullopt: of any) may have gone: its next admission measures it.
  Status MarkStale(std::optional<std::string_view> ns);
  // Measures every namespace with a quota whose record is not exact; returns how many it measured.
  Result<size_t> RefreshAll();

  // Sets or removes (nullopt) the namespace's limit; a record without a limit still measures usage. In the
  // audit log as `by`'s (quota.set).
  Status SetLimit(const index::AuditActor& by, std::string_view ns, std::optional<uint64_t> limit);

 private:
  struct Measured;
  // Measures the namespace; with `added`, also what those files would add to it.
  Result<Measured> MeasureWith(std::string_view ns, std::span<const xet::FileHash> added);

  index::Index& index_;
  const Clock& clock_;
};

// A record's usage as recorded: what it is charged, exact or an upper bound (no breakdown: not measured now).
Usage UsageOf(const index::QuotaRecord& q);

// The refusal a user reads: the namespace, what it uses of its limit, what the request would add.
Error QuotaFull(const index::QuotaRecord& q, uint64_t adds);

// "1.5 GiB", "12 MiB", "512 B": byte counts in messages.
std::string FormatBytes(uint64_t bytes);

}  // namespace cairn::quota
