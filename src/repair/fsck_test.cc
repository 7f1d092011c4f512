// fsck and rebuild in process: real uploads (built as the stock client builds them) through CasService into
// a SQLite index and a local-disk store, then each kind of damage made behind their backs.
#include "repair/fsck.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <optional>
#include <span>

#include "cas/grant.h"
#include "cas/test_backend.h"
#include "index/records.h"
#include "ingest/upload_builder.h"
#include "store/power_loss.h"
#include "xet/hashing.h"
#include "xet/test_support.h"
#include "xet/xorb.h"

namespace cairn::repair {
namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<uint8_t>;
using store::BlobKind;

FsckOptions Options(bool deep, bool repair, std::string default_scope = {}) {
  FsckOptions o;
  o.deep = deep;
  o.repair = repair;
  o.threads = 2;
  o.default_scope = std::move(default_scope);
  return o;
}

std::unique_ptr<index::SqliteIndex> OpenSqlite(const fs::path& path) {
  index::SqliteOptions o;
  o.path = path.string();
  auto ix = index::SqliteIndex::Open(o);
  EXPECT_TRUE(ix.ok()) << ix.error().message;
  return ix.ok() ? std::move(*ix) : nullptr;
}

bool Visible(index::Index& ix, const xet::FileHash& f, const std::string& scope) {
  auto v = ix.FileVisibleTo(f, scope);
  return v.ok() && *v;
}

class Fsck : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(cas::testing::OpenTestBackend("cairn-fsck", &dir_, &store_, &index_));
    service_ = std::make_unique<cas::CasService>(*index_, *store_, pool_, cas::ServiceOptions{});
  }
  void TearDown() override {
    service_.reset();
    index_.reset();
    store_.reset();
    fs::remove_all(dir_);
  }

  ingest::BuiltUpload Upload(uint64_t seed, const std::string& scope, size_t files = 2) {
    std::vector<Bytes> data;
    for (size_t i = 0; i < files; ++i)
      data.push_back(xet::testing::TextLikeBytes(seed + i, 300'000 + i * 1000));
    std::vector<std::span<const uint8_t>> spans(data.begin(), data.end());
    ingest::BuildOptions o;
    o.max_xorb_bytes = 256 << 10;  // several xorbs
    auto up = ingest::BuildUpload(spans, o);
    for (const auto& x : up.xorbs) EXPECT_TRUE(service_->PutXorb(x.hash, x.body).ok());
    auto r = service_->PutShard(up.shard_bytes, scope);
    EXPECT_TRUE(r.ok()) << r.error().message;
    return up;
  }

  FsckReport Run(const FsckOptions& o) {
    auto r = repair::Fsck(*service_, *index_, *store_, o);
    EXPECT_TRUE(r.ok()) << r.error().message;
    return r.ok() ? std::move(*r) : FsckReport{};
  }
  FsckReport Deep() { return Run(Options(true, false)); }

  static size_t Count(const FsckReport& r, FindingKind kind, const std::string& what) {
    return static_cast<size_t>(std::count_if(r.findings.begin(), r.findings.end(), [&](const Finding& f) {
      return f.kind == kind && f.what == what;
    }));
  }
  fs::path BlobPath(BlobKind kind, const xet::Hash& h) const {
    const std::string hex = h.hex();
    return dir_ / "blobs" / std::string(store::BlobKindFolder(kind)) / hex.substr(0, 2) / hex.substr(2, 2) /
           hex;
  }

  fs::path dir_;
  WorkerPool pool_{1};
  std::unique_ptr<store::LocalDiskStore> store_;
  std::unique_ptr<index::SqliteIndex> index_;
  std::unique_ptr<cas::CasService> service_;
};

TEST_F(Fsck, AConsistentIndexAndStoreReportNothing) {
  const auto up = Upload(1, "alice");
  const auto report = Deep();
  EXPECT_TRUE(report.clean());
  EXPECT_FALSE(report.damaged());
  EXPECT_EQ(report.indexed_xorbs, up.xorbs.size());
  EXPECT_EQ(report.stored_xorbs, up.xorbs.size());
  EXPECT_EQ(report.indexed_shards, 1u);
  EXPECT_EQ(report.stored_grants, 1u);
  EXPECT_EQ(report.checked_files, 2u);
  EXPECT_GT(report.checked_terms, 0u);
  EXPECT_GT(report.verified_bytes, 0u);
}

TEST_F(Fsck, FindsAMissingObject) {
  const auto up = Upload(2, "alice");
  ASSERT_TRUE(fs::remove(BlobPath(BlobKind::kXorb, up.xorbs[1].hash)));
  const auto report = Run(Options(false, false));
  EXPECT_EQ(Count(report, FindingKind::kMissingObject, "xorb"), 1u);
  EXPECT_EQ(report.findings.front().hash, up.xorbs[1].hash);
  EXPECT_TRUE(report.damaged());
  // Nothing can be done about it from here: a repair changes nothing and says so.
  const auto repaired = Run(Options(false, true));
  EXPECT_TRUE(repaired.damaged());
  EXPECT_EQ(repaired.repaired, 0u);
}

TEST_F(Fsck, FindsAndReindexesAnUnindexedXorbFromItsOwnBytes) {
  const auto up = Upload(3, "alice");
  // Another upload's xorb, stored through a second index: this store has it, this index does not (what a
  // crash between the store's commit and the index's leaves).
  auto other = OpenSqlite(dir_ / "other.db");
  ASSERT_TRUE(other);
  cas::CasService elsewhere(*other, *store_, pool_, {});
  const auto data = xet::testing::TextLikeBytes(99, 100'000);
  const std::span<const uint8_t> spans[] = {data};
  const auto stray = ingest::BuildUpload(spans, {});
  ASSERT_TRUE(elsewhere.PutXorb(stray.xorbs[0].hash, stray.xorbs[0].body).ok());

  auto report = Run(Options(false, false));
  ASSERT_EQ(report.findings.size(), 1u);
  EXPECT_EQ(report.findings[0].kind, FindingKind::kUnindexed);
  EXPECT_EQ(report.findings[0].hash, stray.xorbs[0].hash);
  EXPECT_FALSE(report.damaged());  // never acknowledged: garbage, not damage

  report = Run(Options(false, true));
  ASSERT_EQ(report.findings.size(), 1u);
  EXPECT_TRUE(report.findings[0].repaired);
  EXPECT_TRUE(*index_->HasXorb(stray.xorbs[0].hash));
  EXPECT_TRUE(Deep().clean());
}

TEST_F(Fsck, DeepFindsAFlippedByteInAXorb) {
  const auto up = Upload(4, "alice");
  const fs::path path = BlobPath(BlobKind::kXorb, up.xorbs[0].hash);
  ASSERT_TRUE(xet::testing::FlipByte(path, 1000, 0x20));
  EXPECT_TRUE(Run(Options(false, false)).clean());  // a shallow check reads no bytes
  const auto report = Deep();
  ASSERT_EQ(report.findings.size(), 1u);
  EXPECT_EQ(report.findings[0].kind, FindingKind::kCorrupt);
  EXPECT_EQ(report.findings[0].hash, up.xorbs[0].hash);
  EXPECT_TRUE(report.damaged());
  // A stored shard that does not hash to its name is found the same way.
  const fs::path shard = BlobPath(BlobKind::kShard, xet::ChunkHashOf(up.shard_bytes));
  std::ofstream(shard, std::ios::binary | std::ios::app) << "x";
  EXPECT_EQ(Count(Deep(), FindingKind::kCorrupt, "shard"), 1u);
}

TEST_F(Fsck, DeepFindsAFileTermNamingAMissingChunk) {
  const auto up = Upload(5, "alice");
  const auto& x = up.shard.xorbs.front();
  xet::FileRecord bad;
  bad.hash.bytes.fill(0x5a);
  const auto chunks = static_cast<uint32_t>(x.chunks.size());
  bad.terms.push_back({.xorb = x.hash,
                       .xorb_flags = 0,
                       .unpacked_bytes = 10,
                       .chunk_start = chunks - 1,
                       .chunk_end = chunks + 1});  // one chunk past the xorb's end
  xet::Hash shard;
  shard.bytes.fill(0x33);
  ASSERT_TRUE(index_
                  ->CommitShard({.shard = shard,
                                 .shard_size = 1,
                                 .files = {index::MakeFileCommit(bad)},
                                 .dedup = {},
                                 .scope = "alice",
                                 .xorbs = {}})
                  .ok());
  const auto report = Deep();
  EXPECT_EQ(Count(report, FindingKind::kBadTerm, "file"), 1u);
  EXPECT_EQ(Count(report, FindingKind::kMissingObject, "shard"), 1u);  // the made-up shard has no bytes
  EXPECT_TRUE(report.damaged());
}

TEST_F(Fsck, RebuiltIndexServesEveryFileToItsScopesAgain) {
  const auto a = Upload(6, "alice");
  const auto b = Upload(7, "bob/model");
  ASSERT_TRUE(service_->PutShard(a.shard_bytes, "carol").ok());  // a second scope for alice's files

  auto fresh = OpenSqlite(dir_ / "rebuilt.db");
  ASSERT_TRUE(fresh);
  cas::CasService rebuilt_service(*fresh, *store_, pool_, {});
  auto report = RebuildIndex(rebuilt_service, *fresh, *store_, Options(false, false));
  ASSERT_TRUE(report.ok()) << report.error().message;
  EXPECT_FALSE(report->damaged());
  EXPECT_EQ(report->repaired, a.xorbs.size() + b.xorbs.size() + 2);  // every xorb, both shards

  for (const auto& f : a.file_hashes) {
    auto before = index_->GetFile(f);
    auto after = fresh->GetFile(f);
    ASSERT_TRUE(after.ok());
    EXPECT_EQ((*after)->packed_terms, (*before)->packed_terms);
    EXPECT_EQ((*after)->sha256, (*before)->sha256);
    EXPECT_TRUE(Visible(*fresh, f, "alice"));
    EXPECT_TRUE(Visible(*fresh, f, "carol"));
    EXPECT_FALSE(Visible(*fresh, f, "bob/model"));
    auto answer = rebuilt_service.Reconstruct(f, "alice", std::nullopt, cas::ApiVersion::kV2);
    ASSERT_TRUE(answer.ok()) << answer.error().message;
    EXPECT_EQ(answer->status, cas::ReconstructionStatus::kOk);
  }
  for (const auto& f : b.file_hashes) EXPECT_TRUE(Visible(*fresh, f, "bob/model"));
  EXPECT_EQ(fresh->Stats()->files, index_->Stats()->files);
  EXPECT_EQ(fresh->Stats()->chunks, index_->Stats()->chunks);
  // The rebuilt index is as consistent as the original, and a second rebuild into it is refused.
  auto again = repair::Fsck(rebuilt_service, *fresh, *store_, Options(true, false));
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->clean());
  EXPECT_EQ(RebuildIndex(rebuilt_service, *fresh, *store_, Options(false, false)).error().code,
            ErrorCode::kInconsistent);
}

TEST_F(Fsck, ShardsWithoutAGrantNeedADefaultScope) {
  const auto up = Upload(8, "alice");
  // A store from before grants were kept.
  std::vector<xet::Hash> grants;
  ASSERT_TRUE(store_->List(BlobKind::kGrant, [&](const xet::Hash& h) { grants.push_back(h); }).ok());
  ASSERT_EQ(grants.size(), 1u);
  ASSERT_TRUE(*store_->Delete(BlobKind::kGrant, grants[0]));

  auto fresh = OpenSqlite(dir_ / "rebuilt.db");
  ASSERT_TRUE(fresh);
  cas::CasService rebuilt_service(*fresh, *store_, pool_, {});
  auto report = RebuildIndex(rebuilt_service, *fresh, *store_, Options(false, false));
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(Count(*report, FindingKind::kUnindexed, "shard"), 1u);
  EXPECT_EQ(report->repaired, up.xorbs.size());  // the xorbs, not the shard
  report = repair::Fsck(rebuilt_service, *fresh, *store_, Options(false, true, "restored"));
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(report->repaired, 1u);
  EXPECT_TRUE(Visible(*fresh, up.file_hashes[0], "restored"));
}

// ---- Fault injection: an upload of three xorbs, failed at one step in turn, then retried.

ingest::BuiltUpload FaultTestUpload(uint64_t seed) {
  const auto data = xet::testing::TextLikeBytes(seed, 600'000);
  const std::span<const uint8_t> spans[] = {data};
  ingest::BuildOptions bo;
  bo.max_xorb_bytes = 256 << 10;
  return ingest::BuildUpload(spans, bo);
}

// The upload as a client makes it; whether every step succeeded.
bool TryUpload(cas::CasService& service, const ingest::BuiltUpload& up) {
  for (const auto& x : up.xorbs) {
    if (!service.PutXorb(x.hash, x.body).ok()) return false;
  }
  return service.PutShard(up.shard_bytes, "alice").ok();
}

// After a failed upload: nothing of it is served and nothing is damage; the client's retry then succeeds
// and the file is served, with the index and store consistent.
void ExpectFailedThenRetried(cas::CasService& service, index::Index& index, store::BlobStore& store,
                             const ingest::BuiltUpload& up, const std::function<void()>& disarm,
                             size_t site) {
  EXPECT_FALSE(service.Reconstruct(up.file_hashes[0], "alice", std::nullopt, cas::ApiVersion::kV2).ok())
      << "site " << site;
  auto report = repair::Fsck(service, index, store, Options(true, false));
  ASSERT_TRUE(report.ok());
  EXPECT_FALSE(report->damaged()) << "site " << site;
  disarm();
  ASSERT_TRUE(TryUpload(service, up)) << "site " << site;
  auto answer = service.Reconstruct(up.file_hashes[0], "alice", std::nullopt, cas::ApiVersion::kV2);
  ASSERT_TRUE(answer.ok());
  EXPECT_EQ(answer->status, cas::ReconstructionStatus::kOk);
  report = repair::Fsck(service, index, store, Options(true, false));
  ASSERT_TRUE(report.ok());
  EXPECT_TRUE(report->clean()) << "site " << site;
}

// On tmpfs when there is one: fsyncs cost nothing there, and neither test needs the disk's durability (the
// fault tests fail the steps themselves, and the power-loss tracker models what a sync makes durable).
fs::path FreshDir(const std::string& name) {
  std::error_code ec;
  const fs::path base = fs::is_directory("/dev/shm", ec) && ::access("/dev/shm", W_OK) == 0
                            ? fs::path("/dev/shm")
                            : fs::temp_directory_path();
  fs::path dir = base / (name + "-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// The store's fault seam (the kernel failing a step: ENOSPC, EIO), at every step of every put an upload makes
// (each xorb, the shard, its grant) in turn.
TEST(FaultInjection, AFailedStoreStepAtAnyPointLosesNothingAndServesNothingHalfWritten) {
  const auto up = FaultTestUpload(42);
  ASSERT_GE(up.xorbs.size(), 2u);
  WorkerPool pool(1);
  size_t sites = 0;
  for (size_t fail_at = 0;; ++fail_at) {
    const fs::path dir = FreshDir("cairn-store-fault");
    size_t step = 0;
    bool armed = false;  // from after Open
    store::LocalDiskOptions so;
    so.fault_injector = [&](const store::PutStepInfo&) -> Status {
      if (armed && step++ == fail_at) return IoError("injected: No space left on device");
      return Ok{};
    };
    auto st = store::LocalDiskStore::Open(dir / "blobs", so);
    ASSERT_TRUE(st.ok());
    armed = true;
    auto ix = OpenSqlite(dir / "index.db");
    cas::CasService service(*ix, **st, pool, {});
    if (TryUpload(service, up)) {  // past the last step: every site was covered
      ix.reset();
      fs::remove_all(dir);
      break;
    }
    ++sites;
    ExpectFailedThenRetried(
        service, *ix, **st, up, [&] { armed = false; }, fail_at);
    ix.reset();
    fs::remove_all(dir);
  }
  RecordProperty("fault_sites", static_cast<int>(sites));
  // Each xorb: create, write, fsync, link, directory fsync; then the shard's and the grant's.
  EXPECT_GE(sites, 5 * (up.xorbs.size() + 2));
}

// The index's fault seam: each durable commit an upload makes (one per xorb, one for the shard) fails in
// turn; the blobs it stored are unindexed leftovers, not damage.
TEST(FaultInjection, AFailedIndexCommitAtAnyPointLosesNothing) {
  const auto up = FaultTestUpload(43);
  WorkerPool pool(1);
  size_t sites = 0;
  for (size_t fail_at = 0;; ++fail_at) {
    const fs::path dir = FreshDir("cairn-index-fault");
    std::atomic<size_t> commit{0};
    std::atomic<bool> armed{true};
    index::SqliteOptions io;
    io.path = (dir / "index.db").string();
    io.fault_before_commit = [&]() -> Status {
      if (armed && commit++ == fail_at) return IoError("injected: disk I/O error at COMMIT");
      return Ok{};
    };
    auto ix = index::SqliteIndex::Open(io);
    ASSERT_TRUE(ix.ok());
    auto st = store::LocalDiskStore::Open(dir / "blobs");
    ASSERT_TRUE(st.ok());
    cas::CasService service(**ix, **st, pool, {});
    commit = 0;  // the commits of opening (migrations, secrets) do not count
    if (TryUpload(service, up)) {
      ix->reset();
      fs::remove_all(dir);
      break;
    }
    ++sites;
    ExpectFailedThenRetried(
        service, **ix, **st, up, [&] { armed = false; }, fail_at);
    ix->reset();
    fs::remove_all(dir);
  }
  RecordProperty("fault_sites", static_cast<int>(sites));
  EXPECT_EQ(sites, up.xorbs.size() + 1);
}

// ---- Power loss: every write not yet durable dropped (store/power_loss.h), at every step of two uploads.
//
// The simulated disk is the store's directory alone. The SQLite index lies beside it and keeps every commit:
// its own durability (synchronous=FULL, WAL) is trusted, and what is tested is the store under it. Since the
// index commits a xorb or a shard only after the store's put of it returned (durable), an index that named an
// object the power cut took would be the store's fault, and fsck reports it as a missing object (damage).

struct PowerUpload {
  Bytes data;
  ingest::BuiltUpload up;
};

PowerUpload PowerTestUpload(uint64_t seed) {
  PowerUpload u{.data = xet::testing::TextLikeBytes(seed, 200'000), .up = {}};
  const std::span<const uint8_t> spans[] = {u.data};
  u.up = ingest::BuildUpload(spans, {});  // one xorb
  return u;
}

// The file as a client gets it: the terms the service serves to alice, read from their xorbs through the
// service and decoded. Nothing when the service does not serve it.
std::optional<Bytes> Download(cas::CasService& service, const xet::FileHash& file) {
  auto terms = service.VisibleTerms(file, "alice");
  if (!terms.ok()) return std::nullopt;
  Bytes out;
  xet::ChunkDecoder decoder;
  for (const auto& t : **terms) {
    auto layout = service.Layout(t.xorb);
    if (!layout.ok() || t.chunk_end > (*layout)->chunks.size() || t.chunk_start >= t.chunk_end)
      return std::nullopt;
    const uint32_t begin = (*layout)->begin_offset(t.chunk_start);
    Bytes raw((*layout)->chunks[t.chunk_end - 1].end_offset - begin);
    if (!service.ReadXorb(t.xorb, begin, raw).ok()) return std::nullopt;
    for (size_t pos = 0; pos < raw.size();) {
      auto h = xet::ChunkHeader::Parse(std::span(raw).subspan(pos));
      if (!h.ok() || raw.size() - pos - xet::kChunkHeaderSize < h->compressed_length) return std::nullopt;
      const size_t at = out.size();
      out.resize(at + h->uncompressed_length);
      const auto payload = std::span(raw).subspan(pos + xet::kChunkHeaderSize, h->compressed_length);
      if (!decoder.Decode(*h, payload, std::span(out).subspan(at)).ok()) return std::nullopt;
      pos += xet::kChunkHeaderSize + h->compressed_length;
    }
  }
  return out;
}

// Temporary files under `root` (none may remain once the store opened).
std::vector<std::string> TempFiles(const fs::path& root) {
  std::vector<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    if (e.path().filename().string().starts_with(".tmp.")) out.push_back(e.path().string());
  }
  return out;
}

// A machine running the service on a store whose disk the tracker watches.
struct Machine {
  Machine(const fs::path& dir, store::testing::PowerLossTracker* tracker, bool o_tmpfile) {
    store::LocalDiskOptions so;
    so.use_o_tmpfile = o_tmpfile;
    if (tracker != nullptr) so.fault_injector = tracker->Injector();
    auto st = store::LocalDiskStore::Open(dir / "disk" / "blobs", so);
    EXPECT_TRUE(st.ok()) << st.error().message;
    if (!st.ok()) return;
    store = std::move(*st);
    index = OpenSqlite(dir / "index.db");
    service = std::make_unique<cas::CasService>(*index, *store, pool, cas::ServiceOptions{});
  }
  bool up() const { return service != nullptr; }

  WorkerPool pool{1};
  std::unique_ptr<store::LocalDiskStore> store;
  std::unique_ptr<index::SqliteIndex> index;
  std::unique_ptr<cas::CasService> service;
};

// What a restart after the power cut must find; each problem as text (none: empty). `acked` uploads were
// acknowledged before the cut, `interrupted` (if any) was under way.
std::vector<std::string> CheckAfterPowerLoss(Machine& m, const fs::path& dir,
                                             std::span<const PowerUpload* const> acked,
                                             const PowerUpload* interrupted) {
  std::vector<std::string> problems;
  for (const auto& t : TempFiles(dir / "disk")) problems.push_back("temporary file left: " + t);
  for (size_t i = 0; i < acked.size(); ++i) {
    const auto& u = *acked[i];
    const auto got = Download(*m.service, u.up.file_hashes[0]);
    if (got != u.data)
      problems.push_back("acknowledged upload " + std::to_string(i) +
                         (got ? " served wrong bytes" : " not served"));
    // Beside what serving needs, the shard and its grant (index rebuilds read them).
    const xet::Hash grant = xet::ChunkHashOf(cas::EncodeGrant({xet::ChunkHashOf(u.up.shard_bytes), "alice"}));
    for (const auto& [kind, hash] : {std::pair{BlobKind::kShard, xet::ChunkHashOf(u.up.shard_bytes)},
                                     std::pair{BlobKind::kGrant, grant}}) {
      auto stat = m.store->Stat(kind, hash);
      if (!stat.ok() || !stat->exists)
        problems.push_back("acknowledged upload " + std::to_string(i) + ": its " +
                           std::string(store::BlobKindName(kind)) + " is gone");
    }
  }
  if (interrupted != nullptr) {
    const auto got = Download(*m.service, interrupted->up.file_hashes[0]);
    if (got && *got != interrupted->data) problems.push_back("the interrupted upload is served half-written");
  }
  auto report = repair::Fsck(*m.service, *m.index, *m.store, Options(true, false));
  if (!report.ok()) {
    problems.push_back("fsck failed: " + report.error().message);
  } else if (report->damaged()) {
    for (const auto& f : report->findings) {
      if (f.kind != FindingKind::kUnindexed)
        problems.push_back("fsck: " + f.what + " " + f.hash.hex() + ": " + f.detail);
    }
  }
  return problems;
}

struct PowerCut {
  bool happened = false;  // false: the cut came after the last step
  std::vector<std::string> problems;
};

enum class AfterCrash {
  kPowerLoss,            // the machine lost power at the cut
  kRestartThenPowerLoss  // the process died at the cut; restarted, it retried, then the machine lost power
};

// Uploads `uploads` in order with the power cut before step `cut` (counted from after Open), restarts,
// checks, and retries the rest.
PowerCut RunPowerCut(std::span<const PowerUpload> uploads, size_t cut, bool o_tmpfile, AfterCrash after,
                     const std::function<bool(const store::PutStepInfo&)>& ignore = nullptr) {
  PowerCut result;
  const fs::path dir = FreshDir("cairn-power");
  store::testing::PowerLossTracker tracker(dir / "disk");
  EXPECT_TRUE(tracker.Baseline().ok());
  tracker.Ignore(ignore);
  std::vector<const PowerUpload*> acked;
  const PowerUpload* interrupted = nullptr;
  size_t next = 0;
  {
    Machine m(dir, &tracker, o_tmpfile);
    if (!m.up()) return result;
    tracker.CrashAt(cut);
    for (; next < uploads.size(); ++next) {
      if (!TryUpload(*m.service, uploads[next].up)) break;
      acked.push_back(&uploads[next]);
    }
  }
  result.happened = next < uploads.size();
  if (result.happened) {
    interrupted = &uploads[next];
    if (after == AfterCrash::kRestartThenPowerLoss) {
      // Same disk, new process: the retry succeeds and is acknowledged, then the power goes.
      tracker.Restart();
      Machine m(dir, &tracker, o_tmpfile);
      if (m.up() && TryUpload(*m.service, interrupted->up)) {
        acked.push_back(interrupted);
        interrupted = nullptr;
        ++next;
      } else {
        result.problems.push_back("the retry after a restart failed");
      }
    }
    if (auto st = tracker.PowerLoss(); !st.ok()) result.problems.push_back(st.error().message);
    Machine m(dir, nullptr, o_tmpfile);  // the restart
    if (m.up()) {
      auto p = CheckAfterPowerLoss(m, dir, acked, interrupted);
      result.problems.insert(result.problems.end(), p.begin(), p.end());
      for (; next < uploads.size(); ++next) {  // the client retries
        if (!TryUpload(*m.service, uploads[next].up) ||
            Download(*m.service, uploads[next].up.file_hashes[0]) != uploads[next].data)
          result.problems.push_back("upload " + std::to_string(next) + " failed on retry");
      }
    }
  }
  fs::remove_all(dir);
  return result;
}

// The steps (after Open) an upload takes on a fresh store.
size_t StepsOf(const PowerUpload& u, bool o_tmpfile) {
  const fs::path dir = FreshDir("cairn-power-steps");
  store::testing::PowerLossTracker tracker(dir / "disk");
  EXPECT_TRUE(tracker.Baseline().ok());
  size_t steps = 0;
  {
    Machine m(dir, &tracker, o_tmpfile);
    const size_t opened = tracker.steps();
    EXPECT_TRUE(m.up() && TryUpload(*m.service, u.up));
    steps = tracker.steps() - opened;
  }
  fs::remove_all(dir);
  return steps;
}

class PowerLoss : public ::testing::TestWithParam<bool> {
 protected:
  PowerLoss() : uploads_{PowerTestUpload(50), PowerTestUpload(51)} {}
  const PowerUpload uploads_[2];
};

INSTANTIATE_TEST_SUITE_P(TempFiles, PowerLoss, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& p) {
                           return p.param ? "OTmpfile" : "Named";
                         });

// Runs a cut before each step in turn, until the uploads pass their last step; how many cuts there were.
size_t CutAtEveryStep(std::span<const PowerUpload> uploads, bool o_tmpfile, AfterCrash after) {
  size_t cuts = 0;
  for (size_t cut = 0;; ++cut) {
    const auto r = RunPowerCut(uploads, cut, o_tmpfile, after);
    if (!r.happened) break;
    ++cuts;
    EXPECT_TRUE(r.problems.empty()) << "cut before step " << cut << ": "
                                    << ::testing::PrintToString(r.problems);
  }
  return cuts;
}

// Each put (the xorb, the shard, the grant): two blob directories (each made, its parent synced), create,
// write, sync, name, directory sync; a xorb writes and syncs twice (body, then footer).
constexpr size_t kStepsPerUpload = 11 + 2 * 9;

// A power cut before each step of two uploads in turn (every put's blob directories, temporary file,
// writes, syncs and name): what was acknowledged survives byte-exact, the interrupted upload is served
// whole or not at all, nothing is damage, no temporary file stays, and the retry succeeds.
TEST_P(PowerLoss, APowerCutAtAnyStepLosesNoAcknowledgedUpload) {
  const size_t cuts = CutAtEveryStep(uploads_, GetParam(), AfterCrash::kPowerLoss);
  RecordProperty("power_cuts", static_cast<int>(cuts));
  EXPECT_GE(cuts, 2 * kStepsPerUpload);
}

// The process dies at each step instead; restarted on the same disk, its retry is acknowledged, and then the
// machine loses power: the retry must make durable what the dead process left undone.
TEST_P(PowerLoss, ACrashThenARetryThenAPowerCutLosesNothing) {
  const size_t cuts = CutAtEveryStep(uploads_, GetParam(), AfterCrash::kRestartThenPowerLoss);
  RecordProperty("power_cuts", static_cast<int>(cuts));
  EXPECT_GE(cuts, 2 * kStepsPerUpload);
}

// The checks found the first upload lost: not served, and fsck reports its xorb (missing or corrupt).
void ExpectFirstUploadLost(const PowerCut& r) {
  ASSERT_TRUE(r.happened);
  const auto has = [&](const std::string& prefix) {
    return std::any_of(r.problems.begin(), r.problems.end(),
                       [&](const std::string& p) { return p.starts_with(prefix); });
  };
  EXPECT_TRUE(has("acknowledged upload 0 not served")) << ::testing::PrintToString(r.problems);
  EXPECT_TRUE(has("fsck: xorb")) << ::testing::PrintToString(r.problems);
}

// The negative controls: the simulation bites. With the sync of a blob's directory after it got its name
// forgotten, a power cut after the first upload loses it, and the checks say so; with file syncs forgotten,
// the blobs come back empty.
TEST_P(PowerLoss, AForgottenSyncIsCaught) {
  std::string named_in;
  const auto forget_dir_sync = [&named_in](const store::PutStepInfo& s) {
    if (s.step == store::PutStep::kLink) named_in = fs::path(s.target).parent_path().string();
    return s.step == store::PutStep::kFsyncDir && s.path == named_in;
  };
  // Cut at the first step of the second upload: the first was acknowledged.
  const size_t steps = StepsOf(uploads_[0], GetParam());
  EXPECT_EQ(steps, kStepsPerUpload);
  ExpectFirstUploadLost(RunPowerCut(uploads_, steps, GetParam(), AfterCrash::kPowerLoss, forget_dir_sync));
  ExpectFirstUploadLost(
      RunPowerCut(uploads_, steps, GetParam(), AfterCrash::kPowerLoss,
                  [](const store::PutStepInfo& s) { return s.step == store::PutStep::kFsyncFile; }));
}

TEST(Grant, RoundTripsAndRefusesAnythingElse) {
  cas::Grant g;
  g.shard.bytes.fill(0xab);
  g.scope = "alice/model with spaces\nand a newline";
  const auto bytes = cas::EncodeGrant(g);
  auto back = cas::ParseGrant(bytes);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->shard, g.shard);
  EXPECT_EQ(back->scope, g.scope);
  for (size_t cut = 0; cut < bytes.size(); ++cut)
    EXPECT_FALSE(cas::ParseGrant(std::span(bytes).first(cut)).ok()) << cut;
  Bytes bad = bytes;
  bad[20] = 'z';  // not hex
  EXPECT_FALSE(cas::ParseGrant(bad).ok());
  EXPECT_FALSE(cas::ParseGrant(Bytes(cas::kMaxGrantSize + 1, 'a')).ok());
}

TEST(Revocation, RoundTripsAndIsNeverTakenForAGrant) {
  cas::Revocation r;
  r.file.bytes.fill(0xcd);
  r.scope = "bob";
  const auto bytes = cas::EncodeRevocation(r);
  auto back = cas::ParseRevocation(bytes);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->file, r.file);
  EXPECT_EQ(back->scope, r.scope);
  for (size_t cut = 0; cut < bytes.size(); ++cut)
    EXPECT_FALSE(cas::ParseRevocation(std::span(bytes).first(cut)).ok()) << cut;
  EXPECT_FALSE(cas::ParseGrant(bytes).ok());
  EXPECT_FALSE(cas::ParseRevocation(cas::EncodeGrant({r.file, r.scope})).ok());
  EXPECT_NE(cas::RevocationName(r), cas::GrantName({r.file, r.scope}));
}

}  // namespace
}  // namespace cairn::repair
