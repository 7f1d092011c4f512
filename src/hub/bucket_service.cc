#include "hub/bucket_service.h"

#include <map>

#include "common/media_type.h"

namespace cairn::hub {

BucketService::BucketService(index::RepoIndex& index, files::FileService& files, const Clock& clock,
                             quota::QuotaService* quota)
    : index_(index), files_(files), clock_(clock), quota_(quota) {}

int64_t BucketService::Now() const {
  return clock_.UnixSeconds();
}

Result<index::BucketTotals> BucketService::Totals(const Repo& bucket) {
  auto t = index_.GetBucketTotals(bucket.record.id);
  if (!t.ok()) return FromIndex(t.error());
  return *t;
}

Result<BucketPage> BucketService::List(const Repo& bucket, std::string prefix, bool recursive,
                                       const std::optional<std::string>& cursor, size_t limit) {
  while (prefix.ends_with('/')) prefix.pop_back();
  BucketPage page;
  if (!prefix.empty()) {
    if (!ValidPath(prefix)) return page;
    auto exact = index_.GetBucketFiles(bucket.record.id, {prefix});
    if (!exact.ok()) return FromIndex(exact.error());
    if ((*exact)[0]) {
      if (!cursor) page.entries.push_back({prefix, false, std::move(*(*exact)[0])});
      return page;
    }
    prefix += '/';
  }
  // `from` is inclusive. After a file, the next possible path is the file's followed by \x01: paths hold no
  // control characters (ValidPath), so nothing lies between. Non-recursive listings fold each folder into one
  // entry and go on from the folder's name followed by '0', the character after '/'.
  std::optional<std::string> from = cursor;
  while (page.entries.size() < limit) {
    const size_t want = recursive ? limit - page.entries.size() : 1;
    auto files = index_.ListBucket(bucket.record.id, prefix,
                                   from ? std::optional<std::string_view>(*from) : std::nullopt, want);
    if (!files.ok()) return FromIndex(files.error());
    if (files->empty()) return page;
    for (auto& f : *files) {
      const size_t slash = recursive ? std::string::npos : f.path.find('/', prefix.size());
      if (slash == std::string::npos) {
        from = f.path + '\x01';
        std::string path = f.path;
        page.entries.push_back({std::move(path), false, std::move(f)});
      } else {
        std::string dir = f.path.substr(0, slash);
        from = dir + "0";
        page.entries.push_back({std::move(dir), true, {}});
      }
    }
  }
  page.next = from;
  return page;
}

Result<std::vector<index::BucketFile>> BucketService::Stat(const Repo& bucket,
                                                           const std::vector<std::string>& paths) {
  std::vector<std::string> valid;
  for (const auto& p : paths) {
    if (ValidPath(p)) valid.push_back(p);
  }
  std::vector<index::BucketFile> out;
  if (valid.empty()) return out;
  auto got = index_.GetBucketFiles(bucket.record.id, valid);
  if (!got.ok()) return FromIndex(got.error());
  for (auto& f : *got) {
    if (f) out.push_back(std::move(*f));
  }
  return out;
}

Result<index::BucketFile> BucketService::StatOne(const Repo& bucket, const std::string& path) {
  auto got = Stat(bucket, {path});
  if (!got.ok()) return got.error();
  if (got->empty()) return EntryNotFound(path + " is not in this bucket");
  return std::move(got->front());
}

Result<std::vector<BucketOpFailure>> BucketService::Apply(const Caller& caller, const Repo& bucket,
                                                          const std::vector<BucketOp>& ops) {
  if (ops.size() > kMaxOps) {
    return Malformed("at most " + std::to_string(kMaxOps) + " operations a batch");
  }
  std::vector<BucketOpFailure> failed;
  std::vector<index::BucketChange> changes;
  const int64_t now = Now();
  for (const BucketOp& op : ops) {
    const auto fail = [&](std::string why) { failed.push_back({op.path, std::move(why)}); };
    if (!ValidPath(op.path)) {
      fail("invalid path");
      continue;
    }
    if (op.kind == BucketOp::Kind::kDelete) {
      changes.push_back({op.path, std::nullopt});
      continue;
    }
    if (!op.file) {
      fail("a file needs its xetHash");
      continue;
    }
    // Checked where it enters: what is stored goes into a Content-Type header when the file is served.
    if (op.content_type && !ValidMediaType(*op.content_type)) {
      fail("contentType is not a media type (RFC 9110 type/subtype and parameters, ASCII, at most " +
           std::to_string(kMaxMediaTypeBytes) + " bytes)");
      continue;
    }
    if (op.kind == BucketOp::Kind::kCopy && op.source &&
        !(op.source->type == RepoType::kBucket && op.source->ns == bucket.record.ns &&
          op.source->name == bucket.record.name)) {
      fail("a copy from another repository must be lent to this bucket first (HubService::ShareLarge)");
      continue;
    }
    index::BucketFile f{op.path, *op.file, 0, op.mtime_ms, op.content_type, now};
    // The size is the registered file's: visible to this bucket's scope, through an upload for it. Empty
    // files have no upload (hf_xet names them by the zero hash).
    if (!op.file->is_zero()) {
      auto entry = files_.VisibleEntry(*op.file, bucket.record.scope);
      if (!entry.ok()) {
        if (entry.error().code != ErrorCode::kNotFound) return FromIndex(entry.error());
        fail("no file " + op.file->hex() + " was uploaded to this bucket");
        continue;
      }
      f.size = (*entry)->size;
    }
    changes.push_back({op.path, std::move(f)});
  }
  // One change per path, the batch's last (in order, as the batch reads): the backends need not agree on how
  // two changes of one path in one transaction combine.
  std::map<std::string, size_t> last;
  for (size_t i = 0; i < changes.size(); ++i) last[changes[i].path] = i;
  std::vector<index::BucketChange> once;
  for (size_t i = 0; i < changes.size(); ++i) {
    if (last[changes[i].path] == i) once.push_back(std::move(changes[i]));
  }
  // The files added become readable through the bucket's read scope first (it sees only what a batch put
  // in), then the paths name them.
  std::vector<xet::FileHash> published;
  for (const auto& change : once) {
    if (change.put && !change.put->file.is_zero()) published.push_back(change.put->file);
  }
  quota::Admission admission;
  if (quota_ != nullptr) {
    auto admitted = quota_->Admit(bucket.record.ns, published, 0);
    if (!admitted.ok()) return FromIndex(admitted.error());
    admission = std::move(*admitted);
  }
  // Charged (and checked against the quota) in the transaction that publishes them.
  if (auto st = files_.Share(std::move(published), bucket.record.read_scope, admission.FilesCharge());
      !st.ok())
    return FromIndex(admission.Explain(st.error()));
  admission.FilesPublished();
  if (!once.empty()) {
    size_t puts = 0;
    for (const auto& change : once) puts += change.put ? 1 : 0;
    const auto event = caller.Actor().Event(
        now, "bucket.batch", bucket.record.ns, RepoPath(bucket.id()),
        std::to_string(puts) + " put, " + std::to_string(once.size() - puts) + " deleted");
    if (auto st = index_.ChangeBucket(bucket.record.id, once, &event); !st.ok()) return FromIndex(st.error());
  }
  return failed;
}

}  // namespace cairn::hub
