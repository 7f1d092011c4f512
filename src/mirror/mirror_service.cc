#include "mirror/mirror_service.h"

#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <unistd.h>

#include <thread>
#include <unordered_set>

#include "common/printable.h"
#include "git/pack_reader.h"
#include "hub/file_link.h"
#include "lfs/file_ingest.h"
#include "mirror/lease_holder.h"

namespace cairn::mirror {
namespace {

// Plain downloads reading `spool` read the decoded bytes of `relay` (null: the spool's own again).
void Follow(Spool* spool, const std::shared_ptr<Relay>& relay) {
  if (spool == nullptr) return;
  if (!relay) {
    spool->ReadThrough(nullptr);
    return;
  }
  spool->ReadThrough(
      [relay](uint64_t offset, std::span<uint8_t> out) { return relay->ReadDecoded(offset, out); });
}

}  // namespace

struct MirrorService::Flight {
  std::string key;
  bool described = false;            // upstream described the file: `xet` is what it said
  std::optional<xet::FileHash> xet;  // upstream's Xet hash of it, when it has one
  bool done = false;
  std::optional<Result<xet::FileHash>> result;
  std::shared_ptr<Spool> spool;  // its bytes as they arrive, for plain downloads (null: none)
};

MirrorService::MirrorService(index::RepoIndex& index, index::MirrorIndex& leases, hub::HubService& hub,
                             files::FileService& files, cas::CasService& cas, MirrorOptions options)
    : index_(index),
      leases_(leases),
      holder_(LeaseHolder{.node = hub::NewRepoScope().substr(4), .url = options.node_url}.Encode()),
      hub_(hub),
      files_(files),
      cas_(cas),
      options_(std::move(options)),
      upstream_(options_.upstream) {
  if (options_.max_bytes == 0 || options_.evict_interval.count() <= 0) return;
  evictor_ = std::thread([this] {
    std::unique_lock lock(mu_);
    while (!stopping_) {
      cv_.wait_for(lock, options_.evict_interval, [this] { return stopping_ || evict_due_; });
      if (stopping_) break;
      evict_due_ = false;
      lock.unlock();
      if (auto report = Evict(options_.max_bytes); !report.ok()) {
        spdlog::warn("mirror: checking the size limit: {}", Printable(report.error().message, 300));
      } else if (!report->evicted.empty()) {
        spdlog::info(
            "mirror: evicted {} repositories (least recently read) to stay within {} bytes: {} -> {}",
            report->evicted.size(), options_.max_bytes, report->held_bytes, report->kept_bytes);
      }
      lock.lock();
      // Fetches that end meanwhile are checked together: a burst of them measures once, not once each.
      cv_.wait_for(lock, kEvictGap, [this] { return stopping_; });
    }
  });
}

MirrorService::~MirrorService() {
  std::vector<std::pair<std::shared_ptr<Flight>, std::thread>> fetchers;
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    fetchers.swap(fetchers_);
  }
  cv_.notify_all();
  if (evictor_.joinable()) evictor_.join();
  for (auto& f : fetchers) f.second.join();
}

bool MirrorService::Stopping() const {
  std::lock_guard lock(mu_);
  return stopping_;
}

bool MirrorService::Mirrors(const hub::RepoId& id) const {
  if (options_.repos.empty()) return true;
  const std::string prefix = id.type == hub::RepoType::kModel ? "" : std::string(hub::Plural(id.type)) + "/";
  for (const auto& entry : options_.repos) {
    if (entry == prefix + id.str() || (entry.find('/') == std::string::npos && entry == id.ns)) return true;
  }
  return false;
}

MirrorCounters MirrorService::counters() const {
  std::lock_guard lock(mu_);
  return counters_;
}

Error MirrorService::Failed(const Error& e, const std::string& what) {
  switch (e.code) {
    case ErrorCode::kNotFound:
      return NotFound(what + ": upstream has none");
    case ErrorCode::kUnavailable: {
      std::lock_guard lock(mu_);
      ++counters_.upstream_failures;
      return Unavailable(what + ": the upstream Hub cannot be reached now; try again later");
    }
    default:
      return Unavailable(what + ": " + e.message);
  }
}

bool MirrorService::Fresh(int64_t repo) const {
  std::lock_guard lock(mu_);
  auto it = synced_at_.find(repo);
  return it != synced_at_.end() && options_.clock->UnixSeconds() - it->second < options_.revision_ttl.count();
}

Result<hub::Repo> MirrorService::Open(const hub::Caller& caller, const hub::RepoId& id) {
  auto found = index_.FindRepo(id.type, id.ns, id.name);
  if (found.ok() && !hub::IsMirrored(*found)) return hub_.Open(caller, id, false);
  if (!found.ok() && found.error().code != ErrorCode::kNotFound) return hub::FromIndex(found.error());
  if (!found.ok() && !Mirrors(id)) return hub_.Open(caller, id, false);
  if (!MayRead(caller)) {
    return Unauthorized("mirrored repositories need a token of this server");
  }
  if (found.ok()) {
    hub::Repo repo{std::move(*found)};
    NoteRead(repo);
    return repo;
  }
  if (options_.offline) {
    return Unavailable(id.str() + " was never fetched, and this mirror is offline");
  }
  auto synced = Sync(id, nullptr);
  if (!synced.ok() && synced.error().code == ErrorCode::kNotFound) {
    // Renamed upstream? Its API redirects the old name to the new one; the routes redirect the client there.
    if (auto now = upstream_.Canonical(id.type, id.str());
        now.ok() && !(now->ns == id.ns && now->name == id.name)) {
      std::lock_guard lock(mu_);
      if (renamed_.size() >= kMaxRenamed) renamed_.clear();
      renamed_[hub::RepoPath(id)] = *now;
    }
    return hub::RepoNotFound("Repository not found");
  }
  // A repository of this name created here meanwhile (by a user, not a mirror) is read as such.
  if (synced.ok() && !hub::IsMirrored(synced->record)) return hub_.Open(caller, id, false);
  if (synced.ok()) NoteRead(*synced);
  return synced;
}

Result<hub::Repo> MirrorService::Sync(const hub::RepoId& id, const hub::Repo* existing) {
  {
    std::lock_guard lock(mu_);
    ++counters_.syncs;
  }
  auto refs = upstream_.ListRefs(id);
  if (!refs.ok()) return Failed(refs.error(), id.str());
  // What upstream's refs name that is not held: fetched in one pack, less what the local refs reach.
  std::vector<hub::ObjectId> haves;
  std::vector<index::Ref> local;
  if (existing != nullptr) {
    auto held_refs = index_.ListRefs(existing->record.id);
    if (!held_refs.ok()) return hub::FromIndex(held_refs.error());
    local = std::move(*held_refs);
    for (const auto& r : local) {
      if (auto oid = hub::ObjectId::FromBytes(r.target)) haves.push_back(*oid);
    }
  }
  auto wants = NotHeld(*refs, existing);
  if (!wants.ok()) return wants.error();
  std::vector<index::RepoObject> objects;
  if (!wants->empty()) {
    auto fetched = FetchObjects(id, *wants, haves);
    if (!fetched.ok()) return Failed(fetched.error(), id.str());
    objects = std::move(*fetched);
  }

  const int64_t now = options_.clock->UnixSeconds();
  hub::Repo repo;
  if (existing == nullptr) {
    auto created = CreateMirrored(id, *refs, std::move(objects), now);
    if (!created.ok()) return created.error();
    repo.record = std::move(*created);
  } else {
    repo = *existing;
    if (auto st = UpdateMirrored(repo, local, *refs, objects); !st.ok()) return st.error();
  }
  std::lock_guard lock(mu_);
  synced_at_[repo.record.id] = now;
  return repo;
}

Result<std::vector<hub::ObjectId>> MirrorService::NotHeld(const std::vector<UpstreamRef>& refs,
                                                          const hub::Repo* existing) {
  std::unordered_set<hub::ObjectId, hub::ObjectIdHash> seen;
  std::vector<std::vector<uint8_t>> keys;
  std::vector<hub::ObjectId> targets;
  for (const auto& r : refs) {
    if (seen.insert(r.target).second) {
      keys.push_back(r.target.key());
      targets.push_back(r.target);
    }
  }
  if (existing == nullptr || keys.empty()) return targets;
  auto heads = index_.GetRepoObjectHeads(existing->record.id, keys, 0);
  if (!heads.ok()) return hub::FromIndex(heads.error());
  std::vector<hub::ObjectId> wants;
  for (size_t i = 0; i < targets.size(); ++i) {
    if (!(*heads)[i]) wants.push_back(targets[i]);
  }
  return wants;
}

Result<index::RepoRecord> MirrorService::CreateMirrored(const hub::RepoId& id,
                                                        const std::vector<UpstreamRef>& refs,
                                                        std::vector<index::RepoObject> objects, int64_t now) {
  index::NewRepo fresh{.type = id.type,
                       .ns = id.ns,
                       .name = id.name,
                       .is_private = false,
                       .created_at = now,
                       .scope = hub::NewMirrorScope(),
                       .read_scope = hub::NewRepoScope(),
                       .objects = std::move(objects),
                       .refs = {}};
  for (const auto& r : refs) fresh.refs.push_back(index::Ref{r.kind, r.name, r.target.key()});
  auto created = index_.CreateRepo(fresh);
  if (!created.ok()) {
    if (created.error().code != ErrorCode::kConflict) return hub::FromIndex(created.error());
    // Another node (or request) copied it first.
    auto found = index_.FindRepo(id.type, id.ns, id.name);
    if (!found.ok()) return hub::FromIndex(found.error());
    return std::move(*found);
  }
  std::lock_guard lock(mu_);
  ++counters_.repos_fetched;
  return std::move(*created);
}

Status MirrorService::UpdateMirrored(const hub::Repo& repo, const std::vector<index::Ref>& local,
                                     const std::vector<UpstreamRef>& refs,
                                     const std::vector<index::RepoObject>& objects) {
  if (!objects.empty()) {
    if (auto st = index_.PutRepoObjects(repo.record.id, objects); !st.ok()) return hub::FromIndex(st.error());
  }
  // Each ref as upstream has it (moved backwards too: upstream's history is the truth), and gone when
  // upstream deleted it. A concurrent sync that moved it first is left be.
  const auto find_local = [&](index::RefKind kind, const std::string& name) -> const index::Ref* {
    for (const auto& l : local) {
      if (l.kind == kind && l.name == name) return &l;
    }
    return nullptr;
  };
  for (const auto& r : refs) {
    const index::Ref* held = find_local(r.kind, r.name);
    if (held != nullptr && held->target == r.target.key()) continue;
    index::RefUpdate u{r.kind, r.name, std::nullopt, r.target.key()};
    if (held != nullptr) u.expected = held->target;
    if (auto st = index_.UpdateRef(repo.record.id, u); !st.ok() && st.error().code != ErrorCode::kConflict)
      return hub::FromIndex(st.error());
  }
  for (const auto& l : local) {
    bool kept = false;
    for (const auto& r : refs) kept = kept || (r.kind == l.kind && r.name == l.name);
    if (kept) continue;
    index::RefUpdate u{l.kind, l.name, l.target, std::nullopt};
    if (auto st = index_.UpdateRef(repo.record.id, u); !st.ok() && st.error().code != ErrorCode::kConflict)
      return hub::FromIndex(st.error());
  }
  return Ok{};
}

Result<std::vector<index::RepoObject>> MirrorService::FetchObjects(const hub::RepoId& id,
                                                                   const std::vector<hub::ObjectId>& wants,
                                                                   const std::vector<hub::ObjectId>& haves) {
  auto pack = upstream_.FetchPack(id, wants, haves);
  if (!pack.ok()) return pack.error();
  auto read = git::ReadPack(*pack, git::PackLimits{});
  if (!read.ok()) return Malformed("upstream's pack: " + read.error().message);
  return hub::StorableObjects(std::move(*read));
}

std::optional<hub::RepoId> MirrorService::RenamedTo(const hub::RepoId& id) const {
  std::lock_guard lock(mu_);
  auto it = renamed_.find(hub::RepoPath(id));
  if (it == renamed_.end() || !Mirrors(it->second)) return std::nullopt;
  return it->second;
}

Result<hub::RepoId> MirrorService::Canonical(hub::RepoType type, std::string_view name) {
  if (options_.offline) return Unavailable(std::string(name) + ": this mirror is offline");
  auto id = upstream_.Canonical(type, name);
  if (!id.ok()) {
    if (id.error().code == ErrorCode::kNotFound) {
      return hub::RepoNotFound("Repository not found");
    }
    return Failed(id.error(), std::string(name));
  }
  if (!Mirrors(*id)) return hub::RepoNotFound("Repository not found");
  return *id;
}

void MirrorService::Refresh(const hub::Repo& repo) {
  if (!hub::IsMirrored(repo.record) || options_.offline || Fresh(repo.record.id)) return;
  (void)Sync(repo.id(), &repo);
}

Result<hub::ObjectId> MirrorService::Resolve(const hub::Repo& repo, std::string_view revision) {
  if (!hub::IsMirrored(repo.record)) return hub_.Resolve(repo, revision);
  const bool commit_id = revision.size() == 40 && hub::ObjectId::FromHex(revision).has_value();
  auto held = hub_.Resolve(repo, revision);
  // A commit id names the same commit forever; a name is trusted for revision_ttl.
  if (held.ok() && (commit_id || Fresh(repo.record.id))) return held;
  if (!held.ok() && held.error().code != ErrorCode::kNotFound) return held;
  if (options_.offline) return held;
  auto synced = Sync(repo.id(), &repo);
  if (!synced.ok()) {
    // Upstream is out of reach: the last names seen stand.
    if (held.ok()) return held;
    return synced.error();
  }
  auto now = hub_.Resolve(*synced, revision);
  if (now.ok() || !commit_id || now.error().code != ErrorCode::kNotFound) return now;
  // A commit no ref of upstream names (an older one, or a pull request's): asked for by its id.
  auto fetched = FetchObjects(repo.id(), {*hub::ObjectId::FromHex(revision)}, {});
  if (!fetched.ok()) {
    if (fetched.error().code == ErrorCode::kNotFound || fetched.error().code == ErrorCode::kMalformed)
      return now;
    return Failed(fetched.error(), repo.id().str());
  }
  if (auto st = index_.PutRepoObjects(repo.record.id, *fetched); !st.ok()) return hub::FromIndex(st.error());
  return hub_.Resolve(repo, revision);
}

Result<std::shared_ptr<MirrorService::Flight>> MirrorService::Join(const hub::Repo& repo,
                                                                   const Wanted& wanted) {
  const std::string key = std::to_string(repo.record.id) + ":" + wanted.pointer.sha256;
  std::shared_ptr<Flight> flight;
  {
    std::unique_lock lock(mu_);
    auto [it, inserted] = flights_.try_emplace(key);
    if (!inserted) {
      flight = it->second;
      cv_.wait(lock, [&] { return flight->described || flight->done; });
      return flight;
    }
    it->second = std::make_shared<Flight>();
    flight = it->second;
    flight->key = key;
  }
  // A flight that ended between the caller's look at the repository and now has linked the file.
  if (auto linked = Linked(repo, wanted.pointer.sha256)) {
    std::lock_guard lock(mu_);
    flight->result = *linked;
    flight->described = true;
    flight->xet = **flight->result;
    flight->done = true;
    flights_.erase(key);
    cv_.notify_all();
    return flight;
  }
  // Described first (and so known to exist upstream), then fetched in the background.
  auto head = options_.offline ? Result<UpstreamFile>(Unavailable("offline")) : wanted.describe();
  std::lock_guard lock(mu_);
  if (!head.ok() || stopping_) {
    flight->result = head.ok() ? Unavailable("the server is stopping")
                     : options_.offline
                         ? Unavailable(wanted.what + " was never fetched, and this mirror is offline")
                         : Failed(head.error(), wanted.what);
    flight->done = true;
    flights_.erase(key);
    cv_.notify_all();
    return flight;
  }
  flight->described = true;
  flight->xet = head->xet;
  if (!options_.spool_dir.empty()) {
    auto spool = Spool::Create(options_.spool_dir);
    if (spool.ok()) flight->spool = std::move(*spool);  // else plain downloads wait for the whole file
  }
  cv_.notify_all();
  // Threads of flights that ended are joined here, so that they do not pile up (each has set its flight
  // done, under this lock, as its last step).
  std::erase_if(fetchers_, [](std::pair<std::shared_ptr<Flight>, std::thread>& f) {
    if (!f.first->done) return false;
    f.second.join();
    return true;
  });
  fetchers_.emplace_back(flight, [this, flight, repo, wanted] {
    auto result = Fetch(repo, wanted, *flight);
    if (!result.ok()) {
      spdlog::warn("mirror: fetching {} failed: {}", Printable(wanted.what, 200),
                   Printable(result.error().message, 300));
    }
    if (flight->spool) flight->spool->Finish(false);  // unless Fetch said every byte came
    std::lock_guard done_lock(mu_);
    if (result.ok()) evict_due_ = true;
    flight->result = std::move(result);
    flight->done = true;
    flights_.erase(flight->key);
    cv_.notify_all();
  });
  return flight;
}

MirrorService::Wanted MirrorService::FromPath(const hub::Repo& repo, const hub::ObjectId& commit,
                                              const hub::PathInfo& info) const {
  return Wanted{.pointer = *info.lfs,
                .commit = commit,
                .what = info.path,
                .describe = [this, id = repo.id(), commit,
                             path = info.path] { return upstream_.Head(id, commit, path); },
                .download =
                    [this, id = repo.id(), commit, path = info.path](uint64_t offset,
                                                                     const net::HttpClient::Sink& sink) {
                      return upstream_.Download(id, commit, path, offset, sink);
                    }};
}

Result<xet::FileHash> MirrorService::LargeBySha256(const hub::Repo& repo, const hub::LfsPointer& pointer) {
  if (!hub::IsMirrored(repo.record)) return NotFound("no such large file");
  // git-lfs names a file by its SHA-256 alone: upstream's LFS batch API gives where its bytes are.
  Wanted wanted{
      .pointer = pointer,
      .commit = std::nullopt,
      .what = pointer.sha256,
      .describe = [] { return Result<UpstreamFile>(UpstreamFile{.status = 200, .xet = std::nullopt}); },
      .download =
          [this, id = repo.id(), pointer](uint64_t offset, const net::HttpClient::Sink& sink) {
            return upstream_.DownloadObject(id, pointer, offset, sink);
          }};
  auto flight = Join(repo, wanted);
  if (!flight.ok()) return flight.error();
  return Settle(**flight);
}

Result<xet::FileHash> MirrorService::Settle(Flight& flight) {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return flight.done; });
  return *flight.result;
}

Result<std::shared_ptr<MirrorService::Flight>> MirrorService::FlightOf(const hub::Repo& repo,
                                                                       const hub::ObjectId& commit,
                                                                       const hub::PathInfo& info) {
  if (info.xet) {
    std::lock_guard lock(mu_);
    ++counters_.file_hits;
    return std::shared_ptr<Flight>();
  }
  if (!info.lfs || !hub::IsMirrored(repo.record)) {
    return Damaged(info.path + " is not a large file of a mirrored repository");
  }
  return Join(repo, FromPath(repo, commit, info));
}

Result<MirrorService::Pending> MirrorService::Begin(const hub::Repo& repo, const hub::ObjectId& commit,
                                                    const hub::PathInfo& info) {
  auto flight = FlightOf(repo, commit, info);
  if (!flight.ok()) return flight.error();
  if (!*flight) return Pending{.xet = info.xet, .held = true, .spool = nullptr};
  std::lock_guard lock(mu_);
  if ((*flight)->done) {
    if (!(*flight)->result->ok()) return (*flight)->result->error();
    return Pending{.xet = **(*flight)->result, .held = true, .spool = nullptr};
  }
  return Pending{.xet = (*flight)->xet, .held = false, .spool = (*flight)->spool};
}

Result<xet::FileHash> MirrorService::Large(const hub::Repo& repo, const hub::ObjectId& commit,
                                           const hub::PathInfo& info) {
  auto flight = FlightOf(repo, commit, info);
  if (!flight.ok()) return flight.error();
  if (!*flight) return *info.xet;
  return Settle(**flight);
}

bool MirrorService::Await(const xet::FileHash& file) {
  std::unique_lock lock(mu_);
  std::shared_ptr<Flight> flight;
  for (const auto& [key, f] : flights_) {
    if (f->xet == file) flight = f;
  }
  if (!flight) return false;
  // Decided from relays_, which RelayPlan reads, under the same lock: a relay that failed is out of it at
  // the moment it stops answering, so a caller told "relayed" finds it (or waits again: see cas_routes).
  cv_.wait(lock, [&] { return flight->done || RelayedLocked(file); });
  return !flight->done || flight->result->ok() || RelayedLocked(file);
}

std::optional<xet::FileHash> MirrorService::Linked(const hub::Repo& repo, const std::string& sha256) {
  auto linked = index_.GetRepoObjects(repo.record.id, {hub::FileLink::Key(sha256)});
  if (!linked.ok() || !(*linked)[0]) return std::nullopt;
  if (auto link = hub::FileLink::Parse(*(*linked)[0])) return link->file;
  return std::nullopt;
}

// One large file's fetch: the steps of MirrorService::Fetch and the state they share.
//
// One transfer across the nodes sharing the index: the node holding the file's lease fetches it, the others
// wait for its link (and take the lease over if it lapses: a node that died mid-transfer). Clients of a node
// waiting for the file are relayed its ranges from the node fetching it, when that node says where it is
// (its lease's holder) and this one has somewhere to spool them.
//
// Threads: Run and every step run on the flight's thread (MirrorService::Join); the callbacks it hands to
// StoreRelayed and ReceiveResolved (GoingOn, ToSpool) are called there too. `receiver_` is the thread that
// receives the current relay's ranges (MirrorService::StartRelay): owned by the job, joined before the relay
// is replaced and when the job ends. The relay is shared with MirrorService::relays_ (RelayPlan and the
// transfer routes read it on request threads).
// Ownership: borrows the mirror, the repository, the wanted file and the flight, which outlive it. The
// destructor, whichever way Run ended: drops the lease when it was taken, tells the relay's ranges waiting
// for the file's check that it failed unless they were told otherwise (Relay::FileChecked: a relay given up
// or a fetch that failed never has its unverified ranges served), and joins the receiver.
// Failures: Run's Error, as MirrorService::Fetch's.
class MirrorService::FetchJob {
 public:
  FetchJob(MirrorService& mirror, const hub::Repo& repo, const Wanted& wanted, Flight& flight)
      : mirror_(mirror),
        repo_(repo),
        wanted_(wanted),
        pointer_(wanted.pointer),
        announced_(flight.xet),
        spool_(flight.spool.get()),
        lease_("mirror:" + std::to_string(repo.record.id) + ":" + wanted.pointer.sha256),
        peer_tried_(mirror.options_.node_url.empty() || !flight.xet || !wanted.commit) {}
  ~FetchJob() {
    if (lease_taken_) (void)mirror_.leases_.DropLease(lease_, mirror_.holder_);
    if (relay_) relay_->FileChecked(false);
    relay_.reset();
    if (receiver_.joinable()) receiver_.join();
  }
  FetchJob(const FetchJob&) = delete;
  FetchJob& operator=(const FetchJob&) = delete;

  // Fetched, checked, stored and linked: the file's Xet hash, or why not.
  Result<xet::FileHash> Run() {
    if (auto ended = WaitForLease()) return std::move(*ended);
    lease_taken_ = true;
    // The lease may have come free because another node finished the file.
    if (auto linked = mirror_.Linked(repo_, pointer_.sha256)) return StoredByPeer(*linked);
    renewed_ = Now();
    RelayFromUpstream();
    std::optional<Result<lfs::Ingested>> done = StoreRelayed();
    if (!done) {
      auto resolved = StoreResolved();
      if (!resolved.ok()) return resolved.error();
      done = std::move(*resolved);
    }
    return CheckAndLink(*done);
  }

 private:
  int64_t Now() const { return mirror_.options_.clock->UnixSeconds(); }

  // Takes or renews the file's lease; an index that cannot answer counts as taken (fetched here rather than
  // not at all).
  bool TakeLease() {
    const int64_t now = Now();
    auto took = mirror_.leases_.TakeLease(lease_, mirror_.holder_, now, now + mirror_.options_.lease_seconds);
    return !took.ok() || *took;
  }

  // Waits until this node holds the lease (nullopt), or another node stored the file, or the server stops.
  std::optional<Result<xet::FileHash>> WaitForLease() {
    while (!TakeLease()) {
      if (!peer_tried_) RelayFromHolder();
      if (auto linked = mirror_.Linked(repo_, pointer_.sha256)) return StoredByPeer(*linked);
      if (mirror_.Stopping()) return Unavailable("the server is stopping");
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    return std::nullopt;
  }

  // Asked once of the node holding the lease (a holder without a URL has none to give later either): its
  // transfer of the file is relayed to this node's clients.
  void RelayFromHolder() {
    auto holder = mirror_.leases_.LeaseHolder(lease_, Now());
    peer_tried_ = holder.ok() && holder->has_value();
    const std::string peer = peer_tried_ ? LeaseHolder::Parse(**holder).url : "";
    if (peer.empty()) return;
    if (peer != mirror_.options_.node_url) {
      relay_ = mirror_.StartRelay(repo_, *wanted_.commit, *announced_, receiver_, peer);
    }
    if (!relay_) return;
    Follow(spool_, relay_);
    std::lock_guard lock(mirror_.mu_);
    ++mirror_.counters_.peer_relays;
  }

  // Another node stored the file (its bytes passed their checks there): the relay from it, if any, is served
  // to the end, its plain readers too.
  xet::FileHash StoredByPeer(const xet::FileHash& linked) {
    if (relay_) {
      relay_->FileChecked(true);
      if (spool_ != nullptr) spool_->Finish(true);
    }
    std::lock_guard lock(mirror_.mu_);
    ++mirror_.counters_.peer_fetches;
    return linked;
  }

  // Called for every block or chunk that arrives: false once the server is stopping; renews the lease.
  bool GoingOn() {
    if (mirror_.Stopping()) return false;
    if (Now() - renewed_ >= mirror_.options_.lease_seconds / 3) {
      renewed_ = Now();
      (void)TakeLease();
    }
    return true;
  }

  // The file's bytes for plain downloads reading them as they arrive; a spool that fails is given up (its
  // readers retry; the fetch goes on). A fetch begun again writes past the bytes spooled so far.
  void ToSpool(uint64_t offset, std::span<const uint8_t> bytes) {
    if (spool_ == nullptr || offset + bytes.size() <= spooled_) return;
    const uint64_t skip = spooled_ - offset;
    if (!spool_->Write(spooled_, bytes.subspan(skip)).ok()) {
      spool_->Finish(false);
      spool_ = nullptr;
      return;
    }
    spooled_ += bytes.size() - skip;
    std::lock_guard lock(mirror_.mu_);
    mirror_.counters_.spooled_bytes += bytes.size() - skip;
  }

  // A Xet file comes through upstream's reconstruction when upstream gives one: its xorb ranges are relayed
  // to hf_xet clients as they arrive, and their chunks, decoded and hashed once, are stored as they are. (A
  // relay from a peer that died is given up: this node fetches from upstream now.)
  void RelayFromUpstream() {
    if (receiver_.joinable()) receiver_.join();
    if (relay_) relay_->FileChecked(false);
    relay_ = nullptr;
    if (announced_ && wanted_.commit)
      relay_ = mirror_.StartRelay(repo_, *wanted_.commit, *announced_, receiver_);
    Follow(spool_, relay_);
  }

  // The file stored from upstream's relay; nullopt when there is none, or it failed (then given up).
  std::optional<Result<lfs::Ingested>> StoreRelayed() {
    if (!relay_) return std::nullopt;
    auto done = mirror_.StoreRelayed(*relay_, repo_, pointer_, [this] { return GoingOn(); });
    if (done.ok()) return done;
    // What the relay could not bring, or bytes that fail their checks (a range altered on the way): its
    // unverified ranges are never served (their readers ask again and wait for this fetch), and the file
    // comes again, whole, through resolve.
    spdlog::warn(
        "mirror: {}: upstream's Xet transfer failed or its bytes fail their check ({}); fetched "
        "again through resolve",
        Printable(wanted_.what, 200), Printable(done.error().message, 300));
    relay_->FileChecked(false);
    mirror_.DropRelay(relay_);  // reconstructions wait for the file again
    relay_ = nullptr;
    Follow(spool_, relay_);  // plain downloads read what resolve brings
    return std::nullopt;
  }

  // The file stored from upstream's resolve: what its ingest made of the bytes, or why they did not come.
  Result<Result<lfs::Ingested>> StoreResolved() {
    auto ingest = lfs::FileIngest::Begin(mirror_.cas_, repo_.record.scope, pointer_.sha256, pointer_.size);
    if (!ingest.ok()) return Damaged(ingest.error().message);
    if (auto st = mirror_.ReceiveResolved(
            wanted_, **ingest, [this] { return GoingOn(); },
            [this](uint64_t offset, std::span<const uint8_t> bytes) { ToSpool(offset, bytes); });
        !st.ok())
      return st.error();
    return (*ingest)->Finish();
  }

  // The stored file checked against what upstream said, then published and linked.
  Result<xet::FileHash> CheckAndLink(const Result<lfs::Ingested>& done) {
    // The bytes are all there and are the pointer's (its SHA-256 and size checked): the spool's readers have
    // the whole file. (A mismatch ends the spool as failed: they are cut short and retry.)
    if (spool_ != nullptr && done.ok()) spool_->Finish(true);
    if (!done.ok()) {
      return Unavailable(wanted_.what +
                         ": upstream's bytes do not match its pointer: " + done.error().message);
    }
    // Upstream's Xet hash is the one clients were told (a resolve answered before the bytes came): stored
    // under another, they could not find it.
    const lfs::Ingested& stored = *done;
    if (announced_ && *announced_ != stored.file) {
      std::lock_guard lock(mirror_.mu_);
      ++mirror_.counters_.xet_hash_differs;
      return Unavailable(wanted_.what + ": upstream's Xet hash " + announced_->hex() +
                         " is not the one its bytes give here (" + stored.file.hex() + ")");
    }
    // The bytes decoded from the relay's spool are the file: its ranges that waited for this are served.
    if (relay_) relay_->FileChecked(true);
    return Link(stored);
  }

  // Readable through the repository's read scope, then linked (as a push links a pointer's file): the link is
  // what other nodes wait for, so the file is published before it appears.
  Result<xet::FileHash> Link(const lfs::Ingested& stored) {
    if (auto st = hub::Publish(mirror_.files_, repo_, {stored.file}); !st.ok()) return st.error();
    const std::vector<index::RepoObject> link = {
        hub::FileLink{.sha256 = pointer_.sha256, .file = stored.file}.ToObject()};
    if (auto st = mirror_.index_.PutRepoObjects(repo_.record.id, link); !st.ok())
      return hub::FromIndex(st.error());
    std::lock_guard lock(mirror_.mu_);
    ++mirror_.counters_.files_fetched;
    mirror_.counters_.new_bytes += stored.new_bytes;
    return stored.file;
  }

  MirrorService& mirror_;
  const hub::Repo& repo_;
  const Wanted& wanted_;
  const hub::LfsPointer& pointer_;
  const std::optional<xet::FileHash>& announced_;  // the Xet hash upstream gave (Flight::xet)
  Spool* spool_;                                   // the flight's spool; null: none, or given up
  const std::string lease_;
  std::thread receiver_;          // receives relay_'s ranges (StartRelay)
  std::shared_ptr<Relay> relay_;  // from the lease's holder, then from upstream; null: none
  bool peer_tried_;               // the lease's holder was asked for its URL (or there is no relay to ask)
  bool lease_taken_ = false;      // this node holds the lease: dropped at the end
  int64_t renewed_ = 0;           // unix seconds the lease was last taken
  uint64_t spooled_ = 0;          // the spool's bytes so far
};

Result<xet::FileHash> MirrorService::Fetch(const hub::Repo& repo, const Wanted& wanted, Flight& flight) {
  return FetchJob(*this, repo, wanted, flight).Run();
}

Result<lfs::Ingested> MirrorService::StoreRelayed(Relay& relay, const hub::Repo& repo,
                                                  const hub::LfsPointer& pointer, const GoingOn& going_on) {
  // Clients read the relay, not what this thread stores: the copy into the CAS yields the CPU to the
  // transfers they wait for.
  (void)::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), 19);
  auto ingest = lfs::FileIngest::Begin(cas_, repo.record.scope, pointer.sha256, pointer.size);
  if (!ingest.ok()) return ingest.error();
  (*ingest)->TakeFilledFrom([this, &relay](const xet::XorbHash& xorb) {
    auto put = relay.TakeFilled(xorb);
    if (put != nullptr) {
      std::lock_guard lock(mu_);
      counters_.stored_in_place_bytes += put->size();
    }
    return put;
  });
  Status fed = Ok{};
  auto st = relay.Produce([&](const Relay::Chunk& c) {
    if (!going_on()) {
      fed = Unavailable("the server is stopping");
      return false;
    }
    fed = (*ingest)->FeedChunk(c.hash, c.decoded, c.record, c.from);
    return fed.ok();
  });
  if (!fed.ok()) return fed.error();
  if (!st.ok()) return st.error();
  return (*ingest)->Finish();
}

Status MirrorService::ReceiveResolved(const Wanted& wanted, lfs::FileIngest& ingest, const GoingOn& going_on,
                                      const ToSpool& to_spool) {
  int idle_tries = 0;  // tries in a row that brought no byte
  for (;;) {
    const uint64_t offset = ingest.received();
    Status fed = Ok{};
    auto got = wanted.download(offset, [&](std::span<const uint8_t> block) {
      if (!going_on()) {
        fed = Unavailable("the server is stopping");
        return false;
      }
      to_spool(ingest.received(), block);
      fed = ingest.Feed(block);
      return fed.ok();
    });
    const uint64_t arrived = ingest.received() - offset;
    {
      std::lock_guard lock(mu_);
      counters_.upstream_bytes += arrived;  // a relay counts what it receives
    }
    if (!fed.ok()) return Unavailable(wanted.what + ": upstream's bytes: " + fed.error().message);
    if (got.ok()) return Status(Ok{});
    if (got.error().code != ErrorCode::kUnavailable) return Failed(got.error(), wanted.what);
    // A try that brought nothing (upstream or the way to it failing for a moment) is made again after a
    // pause, twice: a reader waiting for this file would otherwise be told it does not exist.
    idle_tries = arrived == 0 ? idle_tries + 1 : 0;
    if (idle_tries > 2 || Stopping()) return Failed(got.error(), wanted.what);
    std::this_thread::sleep_for(std::chrono::milliseconds(250 << idle_tries));
  }
}

std::shared_ptr<Relay> MirrorService::StartRelay(const hub::Repo& repo, const hub::ObjectId& commit,
                                                 const xet::FileHash& file, std::thread& receiver,
                                                 const std::string& peer) {
  if (options_.spool_dir.empty()) return nullptr;
  auto access = upstream_.XetReadToken(repo.id(), commit);
  if (!access.ok()) return nullptr;
  auto plan = upstream_.Reconstruction(*access, file);
  if (!plan.ok()) {
    spdlog::warn("mirror: upstream's reconstruction of {}: {}", file.hex(),
                 Printable(plan.error().message, 300));
    return nullptr;
  }
  // hf_xet asks for a file in parts: each part's answer is narrowed to the bytes upstream's own answer for
  // that part names (a direct download's), not the whole ranges the file's answer gives.
  Relay::RangeAsker ask = [this, access = *access, file](uint64_t first, uint64_t last) {
    return upstream_.Reconstruction(access, file, std::make_pair(first, last));
  };
  // Ranges that start a xorb are written straight into puts of the store, where it has files to put them
  // in: stored as they arrived, they are written once. Not on a node relaying another's transfer, which
  // stores nothing.
  Relay::Filler fill;
  if (peer.empty()) {
    fill = [this](const xet::XorbHash& xorb) -> std::unique_ptr<cas::FilledXorb> {
      auto put = cas_.BeginFilledXorb(xorb);
      return put.ok() ? std::move(*put) : nullptr;  // a put that cannot begin: the spool
    };
  }
  auto relay = Relay::Create(options_.spool_dir, file, std::move(*plan),
                             {repo.record.read_scope, repo.record.scope}, std::move(ask), fill);
  if (!relay.ok()) {
    spdlog::warn("mirror: relaying {}: {}", file.hex(), Printable(relay.error().message, 300));
    return nullptr;
  }
  // From a peer: its transfer route, with URLs this node signs for the same ranges (the nodes share the URL
  // keys). Its relay may not be registered yet when this one starts: a refusal before any byte is asked
  // again.
  std::map<std::pair<std::string, uint64_t>, std::string> peer_urls;  // (xorb hex, first byte) → URL
  if (!peer.empty()) {
    const auto answer = cas_.AnswerRelayed((*relay)->Plan(std::nullopt), cas::ApiVersion::kV2);
    auto signed_plan = xet::ParseReconstruction(answer.Text(), /*v2=*/true);
    if (!signed_plan.ok()) return nullptr;
    for (const auto& f : signed_plan->fetches) {
      const size_t path = f.url.find("/v1/transfer/");
      if (path == std::string::npos) return nullptr;
      peer_urls[{f.xorb, f.first}] = peer + f.url.substr(path);
    }
  }
  {
    std::lock_guard lock(mu_);
    PruneRelays();
    relays_.push_back(Relayed{.relay = *relay, .keep_until = INT64_MAX});
  }
  cv_.notify_all();  // reconstructions waiting for the file are answered from the relay now
  receiver = std::thread([this, relay = *relay, peer_urls = std::move(peer_urls)] {
    const auto fetch = [&](const Relay::Fetch& f, uint64_t from, const net::HttpClient::Sink& sink) {
      if (peer_urls.empty()) {
        return upstream_.FetchRange(f.url, f.first + from, f.last, [&](std::span<const uint8_t> block) {
          {
            std::lock_guard lock(mu_);
            counters_.upstream_bytes += block.size();
          }
          return sink(block);
        });
      }
      const auto url = peer_urls.find({f.xorb, f.first});
      if (url == peer_urls.end()) return Status(Malformed("no signed URL for a range of " + f.xorb));
      Status got = Ok{};
      for (int tries = 0; tries < 40 && !Stopping(); ++tries) {
        bool any = false;
        got = upstream_.FetchRange(url->second, f.first + from, f.last, [&](std::span<const uint8_t> block) {
          any = true;
          return sink(block);
        });
        if (got.ok() || any) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(250));
      }
      return got;
    };
    const auto received = relay->Receive(fetch, [this] { return Stopping(); });
    if (!received.ok()) {
      // Answered no more: the file comes through resolve, and readers of its ranges ask again (403).
      DropRelay(relay);
      return;
    }
    std::lock_guard lock(mu_);
    // Kept while clients may still hold its URLs (they expire within kRelayedUrlSeconds of an answer).
    for (auto& r : relays_) {
      if (r.relay == relay && r.keep_until == INT64_MAX)
        r.keep_until = options_.clock->UnixSeconds() + kRelayedUrlSeconds;
    }
  });
  return *relay;
}

void MirrorService::DropRelay(const std::shared_ptr<Relay>& relay) {
  {
    std::lock_guard lock(mu_);
    std::erase_if(relays_, [&](const Relayed& r) { return r.relay == relay; });
  }
  cv_.notify_all();
}

bool MirrorService::RelayedLocked(const xet::FileHash& file) {
  PruneRelays();
  return std::any_of(relays_.begin(), relays_.end(),
                     [&](const Relayed& r) { return r.relay->file() == file; });
}

void MirrorService::PruneRelays() {
  const int64_t now = options_.clock->UnixSeconds();
  std::erase_if(relays_, [now](const Relayed& r) { return r.keep_until < now; });
}

std::optional<cas::ReconstructionPlan> MirrorService::RelayPlan(const xet::FileHash& file,
                                                                const std::string& scope,
                                                                std::optional<cas::ByteRange> range) {
  std::shared_ptr<Relay> relay;
  {
    std::lock_guard lock(mu_);
    PruneRelays();
    for (auto& r : relays_) {
      if (r.relay->file() != file || !r.relay->Readable(scope)) continue;
      relay = r.relay;
      ++counters_.relayed_answers;
      if (r.keep_until != INT64_MAX)
        r.keep_until = std::max(r.keep_until, options_.clock->UnixSeconds() + kRelayedUrlSeconds);
    }
  }
  if (!relay) return std::nullopt;
  return relay->Plan(range);
}

std::shared_ptr<const cas::RelayedRange> MirrorService::RelayOpen(const xet::XorbHash& xorb, uint64_t first,
                                                                  uint64_t last) {
  std::vector<std::shared_ptr<Relay>> relays;
  {
    std::lock_guard lock(mu_);
    PruneRelays();
    for (const auto& r : relays_) relays.push_back(r.relay);
  }
  for (const auto& r : relays) {
    if (auto range = r->Open(xorb, first, last)) return range;
  }
  return nullptr;
}

void MirrorService::NoteRead(const hub::Repo& repo) {
  const int64_t now = options_.clock->UnixSeconds();
  {
    std::lock_guard lock(mu_);
    auto [it, added] = noted_at_.try_emplace(repo.record.id, now);
    if (!added && now - it->second < 60) return;
    it->second = now;
  }
  (void)leases_.NoteMirrorRead(repo.record.id, now);  // best effort: a read is served whatever the index says
}

Result<EvictReport> MirrorService::Evict(uint64_t max_bytes) {
  // Every mirrored repository, with its last read (0 for one never noted) and its large files' bytes.
  struct Held {
    index::RepoRecord record;
    int64_t last_read = 0;
    uint64_t bytes = 0;
  };
  auto reads = leases_.ListMirrorReads();
  if (!reads.ok()) return hub::FromIndex(reads.error());
  std::map<int64_t, int64_t> last_read;
  for (const auto& r : *reads) last_read[r.repo] = r.last_read;
  std::vector<Held> held;
  auto listed = hub::ForEachMirrored(index_, [&](index::RepoRecord&& r) -> Status {
    const auto it = last_read.find(r.id);
    held.push_back(Held{.record = std::move(r), .last_read = it == last_read.end() ? 0 : it->second});
    return Ok{};
  });
  if (!listed.ok()) return hub::FromIndex(listed.error());
  EvictReport report;
  report.repos = held.size();
  for (auto& h : held) {
    // What the repository's read scope sees: the large files it published (small files live in the index).
    auto listing = files_.List(h.record.read_scope, std::nullopt, 1);
    if (!listing.ok()) return hub::FromIndex(listing.error());
    h.bytes = listing->totals ? listing->totals->bytes : 0;
    report.held_bytes += h.bytes;
  }
  report.kept_bytes = report.held_bytes;
  std::sort(held.begin(), held.end(), [](const Held& a, const Held& b) {
    return a.last_read != b.last_read ? a.last_read < b.last_read : a.record.id < b.record.id;
  });
  // The most recently read stays whatever its size: evicting what was just asked for would fetch it again.
  for (size_t i = 0; i + 1 < held.size() && report.kept_bytes > max_bytes && max_bytes > 0; ++i) {
    const Held& h = held[i];
    {
      std::lock_guard lock(mu_);
      const std::string prefix = std::to_string(h.record.id) + ":";
      const bool fetching = std::any_of(flights_.begin(), flights_.end(),
                                        [&](const auto& f) { return f.first.starts_with(prefix); });
      if (fetching) continue;
    }
    auto st = index_.DeleteRepo(h.record.id, nullptr);
    if (!st.ok() && st.error().code != ErrorCode::kNotFound) return hub::FromIndex(st.error());
    report.kept_bytes -= h.bytes;
    report.evicted.push_back(hub::RepoPath(hub::Repo{h.record}.id()));
  }
  std::lock_guard lock(mu_);
  counters_.evicted_repos += report.evicted.size();
  counters_.held_bytes = report.kept_bytes;
  return report;
}

}  // namespace cairn::mirror
