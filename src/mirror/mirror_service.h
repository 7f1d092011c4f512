// A pull-through mirror of an upstream Hub (docs/mirror.md): a repository this server does not hold, asked
// for by a reader, is copied from upstream — its history as git (commits, trees and small files from the
// upstream's upload-pack, so ids and history are exactly the upstream's), its large files when first asked
// for (fetched by their SHA-256 and chunked into this server's CAS, deduplicated against everything it holds)
// — and served by the ordinary Hub and Xet routes from then on, also when upstream is slow or gone.
//
// A mirrored repository is an ordinary repository of the index whose scope marks it (hub::IsMirrored): every
// node sharing the index sees it, a write to it is refused, the collector treats it as any other. Branch and
// tag names are asked of upstream again once `revision_ttl` has passed since this node last did (commit ids
// never change and are never asked again); when upstream cannot be reached (or in offline mode) the last
// names seen are served.
//
// Thread-safety: every method may be called concurrently. Concurrent requests for the same large file on
// this node wait for one upstream transfer (the first to ask runs it; it is not cancelled when that client
// goes away), and nodes sharing the index take a lease on the file in it, so that one of them fetches it.
// Ownership: borrows the index, the Hub service, the file service and the CAS, which outlive it. Failures:
// Error — kNotFound (RepoNotFound, RevisionNotFound, EntryNotFound) when upstream has no such thing,
// kUnauthorized when the mirror's read policy wants a token, kUnavailable (503, with Retry-After) when
// upstream cannot be reached for something this server does not hold.
#pragma once

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "cas/service.h"
#include "common/clock.h"
#include "files/file_service.h"
#include "hub/hub_service.h"
#include "index/index.h"
#include "lfs/file_ingest.h"
#include "mirror/relay.h"
#include "mirror/spool.h"
#include "mirror/upstream.h"

namespace cairn::mirror {

struct MirrorOptions {
  UpstreamOptions upstream{};
  // Which repositories are mirrored: entries "ns" (a namespace), "ns/name", "datasets/ns/name",
  // "spaces/ns/name"; empty: every repository this server does not hold itself.
  std::vector<std::string> repos{};
  bool token_to_read = false;  // mirrored repositories need a valid token of this server to be read
  std::chrono::seconds revision_ttl{60};
  bool offline = false;  // never ask upstream: serve what was fetched
  // A file's lease in the index (one transfer across the nodes sharing it): renewed every third of this while
  // the transfer runs; a node that died holds it no longer than this.
  int64_t lease_seconds = 60;
  // Where the bytes of files being fetched are kept for plain downloads that read them as they arrive
  // (spool.h); empty: such downloads wait for the whole file.
  std::filesystem::path spool_dir{};
  // The most bytes of large files mirrored repositories may hold (0: no limit). Past it, the least recently
  // read mirrored repositories are evicted (Evict) — never a repository this server holds itself, never the
  // most recently read one, never one with a file being fetched; their bytes are freed by the collector.
  uint64_t max_bytes = 0;
  // The URL the other nodes sharing the index reach this one at (empty: none). A node whose clients ask for a
  // Xet file another node holds the lease of relays it from that node's transfer route as its ranges arrive
  // there (signed with the URL keys the nodes share), rather than waiting for the whole file.
  std::string node_url{};
  // How often the limit is checked besides after fetches (those checked at most every kEvictGap; 0: only when
  // Evict is called).
  std::chrono::seconds evict_interval{300};
  const Clock* clock = &Clock::System();
};

// What an eviction found and did.
struct EvictReport {
  uint64_t repos = 0;                // mirrored repositories
  uint64_t held_bytes = 0;           // the sizes of their large files, before
  uint64_t kept_bytes = 0;           // after
  std::vector<std::string> evicted;  // their names ("datasets/ns/name"), least recently read first
};

// What a mirror did since it started (this node): for the metrics and `cairn mirror ls`.
struct MirrorCounters {
  uint64_t repos_fetched = 0;   // repositories copied for the first time
  uint64_t syncs = 0;           // ref listings asked of upstream
  uint64_t files_fetched = 0;   // large files fetched
  uint64_t file_hits = 0;       // large files asked for and held already
  uint64_t upstream_bytes = 0;  // bytes of large files received from upstream
  uint64_t new_bytes = 0;       // of those, chunk bytes stored (the rest deduplicated)
  // Bytes written a second time, decoded, for plain downloads reading a file as it comes: a file relayed
  // through upstream's Xet reconstruction is read from the relay instead, so only files through resolve.
  uint64_t spooled_bytes = 0;
  // Bytes of whole xorbs relayed straight into the store's puts and stored as they arrived: written once.
  uint64_t stored_in_place_bytes = 0;
  uint64_t upstream_failures = 0;  // requests upstream could not answer
  uint64_t peer_fetches = 0;       // large files another node sharing the index fetched while this one waited
  uint64_t peer_relays = 0;      // of those, relayed from that node as they arrived (MirrorOptions::node_url)
  uint64_t relayed_answers = 0;  // reconstructions answered with upstream's terms while the file came
  uint64_t evicted_repos = 0;    // mirrored repositories evicted for the size limit
  uint64_t held_bytes = 0;       // large files' bytes mirrored repositories held at the last check
  // Files whose Xet hash here is not the one upstream gave (upstream chunked them otherwise).
  uint64_t xet_hash_differs = 0;
};

class MirrorService {
 public:
  MirrorService(index::RepoIndex& index, index::MirrorIndex& leases, hub::HubService& hub,
                files::FileService& files, cas::CasService& cas, MirrorOptions options);
  ~MirrorService();  // waits for the fetches in flight, which stop at their next block
  MirrorService(const MirrorService&) = delete;
  MirrorService& operator=(const MirrorService&) = delete;

  // Whether a repository of this name is mirrored when this server does not hold it.
  bool Mirrors(const hub::RepoId& id) const;
  // Whether the read policy lets `caller` read (and list) mirrored repositories.
  bool MayRead(const hub::Caller& caller) const { return !(options_.token_to_read && caller.anonymous()); }

  // The repository for reading: a local one as HubService::Open gives it; a mirrored one after the read
  // policy is checked, copied from upstream first when this server does not hold it yet.
  Result<hub::Repo> Open(const hub::Caller& caller, const hub::RepoId& id);
  // The id upstream gives a repository named without a namespace (a legacy id: "gpt2"), for a redirect there;
  // kNotFound when upstream has none, kUnavailable when it cannot be asked (or the mirror is offline).
  Result<hub::RepoId> Canonical(hub::RepoType type, std::string_view name);
  // The id upstream gives a repository Open found renamed there (its old name redirects to this one), for a
  // redirect of the request; nullopt when Open did not find it so.
  std::optional<hub::RepoId> RenamedTo(const hub::RepoId& id) const;
  // Brings a mirrored repository's refs up to date with upstream's when revision_ttl has passed since this
  // node last did (git's ref listing); nothing when upstream cannot be reached (the last refs seen stand).
  void Refresh(const hub::Repo& repo);
  // A revision of a repository Open gave: for a mirrored one, branch and tag names as upstream has them
  // (asked again past revision_ttl), a commit id fetched when it is not held.
  Result<hub::ObjectId> Resolve(const hub::Repo& repo, std::string_view revision);
  // A large file of a mirrored repository (`info` from HubService::Stat at `commit`, with its LFS pointer):
  // held, or being fetched. Starts the fetch when neither (in the background: it goes on whoever waits,
  // and whoever goes away); a fetch is begun only once upstream has described the file, so `xet` is known
  // from the start when upstream stores it with Xet (and is then the hash it will be stored under, or the
  // fetch fails).
  struct Pending {
    std::optional<xet::FileHash> xet;
    bool held = false;                   // stored and linked: served now
    std::shared_ptr<const Spool> spool;  // not held: its bytes as they arrive (null without a spool_dir)
  };
  Result<Pending> Begin(const hub::Repo& repo, const hub::ObjectId& commit, const hub::PathInfo& info);
  // The same, waiting until the file is stored: its Xet file.
  Result<xet::FileHash> Large(const hub::Repo& repo, const hub::ObjectId& commit, const hub::PathInfo& info);
  // The same for a file git-lfs names by its SHA-256 and size (no path): fetched through upstream's LFS batch
  // API; kNotFound when upstream has no such object for the repository.
  Result<xet::FileHash> LargeBySha256(const hub::Repo& repo, const hub::LfsPointer& pointer);
  // Waits for a fetch in flight on this node of a file with this Xet hash (hf_xet asking the reconstruction
  // of a file whose resolve answered before its bytes arrived) to be stored, or to be relayed (RelayPlan
  // answers then); false when there is none, or it failed.
  bool Await(const xet::FileHash& file);

  // The relays of Xet files being fetched (relay.h), for the CAS routes: a reconstruction of such a file is
  // answered with upstream's terms (under transfer URLs of this server that expire within
  // kRelayedUrlSeconds), and those URLs' ranges are sent on as they arrive. A relay is kept that long after
  // its last answer, then the stored file answers.
  std::optional<cas::ReconstructionPlan> RelayPlan(const xet::FileHash& file, const std::string& scope,
                                                   std::optional<cas::ByteRange> range);
  std::shared_ptr<const cas::RelayedRange> RelayOpen(const xet::XorbHash& xorb, uint64_t first,
                                                     uint64_t last);
  static constexpr int64_t kRelayedUrlSeconds = 600;

  // Evicts the least recently read mirrored repositories until what they hold is within `max_bytes` (see
  // MirrorOptions); with max_bytes 0, only measures. A repository's size is the sum of its large files'
  // sizes, as its read scope's totals give them (a file two of them share counts in both; small files and
  // history live in the index).
  Result<EvictReport> Evict(uint64_t max_bytes);

  MirrorCounters counters() const;

 private:
  struct Flight;
  // A large file to fetch: its pointer, what messages call it, how upstream describes it and sends its bytes
  // from an offset on.
  struct Wanted {
    hub::LfsPointer pointer;
    std::optional<hub::ObjectId> commit;  // of a file named by its path: its bytes may come through Xet
    std::string what;
    std::function<Result<UpstreamFile>()> describe;
    std::function<Result<UpstreamFile>(uint64_t, const net::HttpClient::Sink&)> download;
  };
  Wanted FromPath(const hub::Repo& repo, const hub::ObjectId& commit, const hub::PathInfo& info) const;
  // The file's flight, started when there is none: described by upstream (or failed) when it returns.
  Result<std::shared_ptr<Flight>> Join(const hub::Repo& repo, const Wanted& wanted);
  // The flight of a large file of a mirrored repository at a path; null when it is held already (a hit).
  Result<std::shared_ptr<Flight>> FlightOf(const hub::Repo& repo, const hub::ObjectId& commit,
                                           const hub::PathInfo& info);
  // Waits for a flight's end: what it stored, or why not.
  Result<xet::FileHash> Settle(Flight& flight);
  // The objects `wants` reach less what `haves` reach, from upstream's upload-pack, each checked as a push's
  // are (kMalformed for a pack or an object cairn refuses).
  Result<std::vector<index::RepoObject>> FetchObjects(const hub::RepoId& id,
                                                      const std::vector<hub::ObjectId>& wants,
                                                      const std::vector<hub::ObjectId>& haves);
  // Copies upstream's refs (and the history they reach that is not held) into the repository, creating it
  // when `existing` is null. The repository as it is after.
  Result<hub::Repo> Sync(const hub::RepoId& id, const hub::Repo* existing);
  // Sync's steps. The objects upstream's refs name that `existing` does not hold (all of them when null).
  Result<std::vector<hub::ObjectId>> NotHeld(const std::vector<UpstreamRef>& refs, const hub::Repo* existing);
  // Creates the mirrored repository with upstream's refs and the history they reach (the one another node or
  // request created first when there is one).
  Result<index::RepoRecord> CreateMirrored(const hub::RepoId& id, const std::vector<UpstreamRef>& refs,
                                           std::vector<index::RepoObject> objects, int64_t now);
  // Stores the objects fetched, then moves each of the repository's refs (`local`: as they were listed) to
  // where upstream has it.
  Status UpdateMirrored(const hub::Repo& repo, const std::vector<index::Ref>& local,
                        const std::vector<UpstreamRef>& refs, const std::vector<index::RepoObject>& objects);
  // Runs in a flight's thread: fetched, checked, stored and linked (a FetchJob's steps, in the .cc).
  class FetchJob;
  Result<xet::FileHash> Fetch(const hub::Repo& repo, const Wanted& wanted, Flight& flight);
  // Called for every block or chunk that arrives: false once the fetch must stop (renews the lease).
  using GoingOn = std::function<bool()>;
  // Hands the file's bytes from an offset on to the plain downloads reading them as they arrive.
  using ToSpool = std::function<void(uint64_t offset, std::span<const uint8_t> bytes)>;
  // The file from a relay's chunks in order, stored as they arrived (lfs::FileIngest::FeedChunk) and
  // checked (size, SHA-256): what was stored, or why not. (Plain downloads read the relay meanwhile.)
  Result<lfs::Ingested> StoreRelayed(Relay& relay, const hub::Repo& repo, const hub::LfsPointer& pointer,
                                     const GoingOn& going_on);
  // Every byte of the file through upstream's resolve into `ingest` (chunked here); a transfer cut after
  // some bytes resumes where they end, as long as each try brings more.
  Status ReceiveResolved(const Wanted& wanted, lfs::FileIngest& ingest, const GoingOn& going_on,
                         const ToSpool& to_spool);
  Error Failed(const Error& e, const std::string& what);
  // A relay of the file through upstream's Xet reconstruction, registered and receiving on `receiver`;
  // null when upstream gives none (its bytes then come through resolve). With `peer` (another node's URL),
  // the ranges come from that node's relay of the file rather than from upstream.
  std::shared_ptr<Relay> StartRelay(const hub::Repo& repo, const hub::ObjectId& commit,
                                    const xet::FileHash& file, std::thread& receiver,
                                    const std::string& peer = "");
  bool Fresh(int64_t repo) const;
  bool Stopping() const;
  // The repository's link of the large file with this SHA-256, when it has one.
  std::optional<xet::FileHash> Linked(const hub::Repo& repo, const std::string& sha256);

  index::RepoIndex& index_;
  index::MirrorIndex& leases_;
  const std::string holder_;  // this node in leases: its LeaseHolder (a random name and its URL), encoded
  hub::HubService& hub_;
  files::FileService& files_;
  cas::CasService& cas_;
  const MirrorOptions options_;
  const Upstream upstream_;

  mutable std::mutex mu_;
  std::map<int64_t, int64_t> synced_at_;                    // guarded by mu_: repository → unix seconds
  std::condition_variable cv_;                              // flights' changes
  std::map<std::string, std::shared_ptr<Flight>> flights_;  // guarded by mu_: "<repo>:<sha256>"
  // guarded by mu_: the flights' threads
  std::vector<std::pair<std::shared_ptr<Flight>, std::thread>> fetchers_;
  bool stopping_ = false;  // guarded by mu_
  struct Relayed {
    std::shared_ptr<Relay> relay;
    int64_t keep_until = INT64_MAX;  // unix seconds; INT64_MAX while its fetch runs
  };
  std::vector<Relayed> relays_;  // guarded by mu_
  // Drops relays past their time (mu_ held).
  void PruneRelays();
  // Takes a relay out of relays_ (it failed: RelayPlan answers with it no more) and wakes Await.
  void DropRelay(const std::shared_ptr<Relay>& relay);
  // Whether a relay of the file is registered (mu_ held): RelayPlan answers for it now.
  bool RelayedLocked(const xet::FileHash& file);
  // Records a read of a mirrored repository in the index (its eviction order), at most once a minute per
  // repository on this node.
  void NoteRead(const hub::Repo& repo);
  std::map<int64_t, int64_t> noted_at_;  // guarded by mu_: repository → unix seconds
  // guarded by mu_: renamed repositories' old paths (hub::RepoPath) → their ids upstream (bounded: cleared
  // past kMaxRenamed)
  std::map<std::string, hub::RepoId> renamed_;
  static constexpr size_t kMaxRenamed = 10000;
  bool evict_due_ = false;                              // guarded by mu_: a fetch ended since the last check
  static constexpr std::chrono::seconds kEvictGap{10};  // between two checks of the limit
  std::thread evictor_;                                 // checks the size limit (max_bytes > 0)
  MirrorCounters counters_;                             // guarded by mu_
};

}  // namespace cairn::mirror
