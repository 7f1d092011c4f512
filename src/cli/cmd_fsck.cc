// `cairn fsck` and `cairn index rebuild`: the index checked against the store, and rebuilt from it.
#include <boost/json.hpp>
#include <iostream>
#include <string>

#include "cli/backend.h"
#include "cli/commands.h"
#include "common/clock.h"
#include "common/worker_pool.h"
#include "config/config.h"
#include "gc/collector.h"
#include "hub/hub_check.h"
#include "people/people_check.h"
#include "repair/fsck.h"

namespace cairn::cli {
namespace {

namespace json = boost::json;

// Stored Hub data today's rules refuse (served safely): reported, not damage.
json::object HubJson(const hub::HubCheckReport& h) {
  json::array findings;
  for (const auto& f : h.findings) {
    findings.push_back(
        json::object{{"kind", "unsafe"}, {"object", f.what}, {"repo", f.repo}, {"detail", f.detail}});
  }
  return json::object{{"repos", h.repos},
                      {"refs", h.refs},
                      {"commits", h.commits},
                      {"trees", h.trees},
                      {"bucket_files", h.bucket_files},
                      {"findings", std::move(findings)}};
}

// Accounts, memberships, tokens and trust policies (people/people_check.h): damage, or notices.
json::object PeopleJson(const people::PeopleCheckReport& p) {
  json::array findings;
  for (const auto& f : p.findings) {
    findings.push_back(json::object{
        {"kind", f.damage ? "damage" : "notice"}, {"object", f.what}, {"id", f.id}, {"detail", f.detail}});
  }
  return json::object{{"accounts", p.accounts},     {"members", p.members},
                      {"tokens", p.tokens},         {"publishers", p.publishers},
                      {"generation", p.generation}, {"findings", std::move(findings)}};
}

void PrintPeople(const people::PeopleCheckReport& p) {
  for (const auto& f : p.findings)
    std::cout << (f.damage ? "damaged " : "notice ") << f.what << " " << f.id << ": " << f.detail << "\n";
  std::cout << "people: " << p.accounts << " accounts, " << p.members << " memberships, " << p.tokens
            << " tokens, " << p.publishers << " trust policies; " << p.findings.size() << " finding(s)\n";
}

// The collector's quarantine: never damage (docs/operations.md).
json::object LifecycleJson(const gc::Lifecycle& l) {
  return json::object{{"quarantined_files", l.quarantined_files}, {"quarantined_xorbs", l.quarantined_xorbs},
                      {"quarantined_bytes", l.quarantined_bytes}, {"reclaimable_xorbs", l.reclaimable_xorbs},
                      {"reclaimable_bytes", l.reclaimable_bytes}, {"claimed_xorbs", l.claimed_xorbs},
                      {"claimed_shards", l.claimed_shards}};
}

void Print(const repair::FsckReport& r, const hub::HubCheckReport* hub, const gc::Lifecycle* life,
           const people::PeopleCheckReport* people, bool as_json) {
  const bool damaged = r.damaged() || (people != nullptr && people->damaged());
  if (as_json) {
    json::array findings;
    for (const auto& f : r.findings) {
      findings.push_back(json::object{{"kind", std::string(repair::FindingKindName(f.kind))},
                                      {"object", f.what},
                                      {"hash", f.hash.hex()},
                                      {"detail", f.detail},
                                      {"repaired", f.repaired}});
    }
    std::cout << json::serialize(
                     json::object{{"indexed_xorbs", r.indexed_xorbs},
                                  {"stored_xorbs", r.stored_xorbs},
                                  {"indexed_shards", r.indexed_shards},
                                  {"stored_shards", r.stored_shards},
                                  {"stored_grants", r.stored_grants},
                                  {"stored_revocations", r.stored_revocations},
                                  {"checked_files", r.checked_files},
                                  {"checked_terms", r.checked_terms},
                                  {"verified_bytes", r.verified_bytes},
                                  {"repaired", r.repaired},
                                  {"damaged", damaged},
                                  {"findings", std::move(findings)},
                                  {"hub", hub != nullptr ? json::value(HubJson(*hub)) : nullptr},
                                  {"gc", life != nullptr ? json::value(LifecycleJson(*life)) : nullptr},
                                  {"people", people != nullptr ? json::value(PeopleJson(*people)) : nullptr}})
              << "\n";
    return;
  }
  if (hub != nullptr) {
    for (const auto& f : hub->findings)
      std::cout << "unsafe " << f.what << " " << f.repo << ": " << f.detail << "\n";
    std::cout << "hub: " << hub->repos << " repositories, " << hub->refs << " refs, " << hub->commits
              << " commits, " << hub->trees << " trees, " << hub->bucket_files << " bucket files; "
              << hub->findings.size()
              << " stored value(s) today's rules refuse (served safely, not damage)\n";
  }
  if (people != nullptr) PrintPeople(*people);
  if (life != nullptr && (life->quarantined_files + life->quarantined_xorbs) > 0) {
    std::cout << "gc: " << life->quarantined_files << " files and " << life->quarantined_xorbs << " xorbs ("
              << life->quarantined_bytes << " bytes) unreferenced, kept for the grace; "
              << life->reclaimable_xorbs << " xorbs (" << life->reclaimable_bytes
              << " bytes) past it, freed by the next `cairn gc`";
    if (life->claimed_xorbs + life->claimed_shards > 0)
      std::cout << "; " << life->claimed_xorbs << " xorbs and " << life->claimed_shards
                << " shards claimed by an unfinished sweep";
    std::cout << " (not damage)\n";
  }
  for (const auto& f : r.findings) {
    std::cout << repair::FindingKindName(f.kind) << " " << f.what << " " << f.hash.hex() << ": " << f.detail
              << (f.repaired ? " [repaired]" : "") << "\n";
  }
  std::cout << "index: " << r.indexed_xorbs << " xorbs, " << r.indexed_shards
            << " shards; store: " << r.stored_xorbs << " xorbs, " << r.stored_shards << " shards, "
            << r.stored_grants << " grants, " << r.stored_revocations << " revocations";
  if (r.checked_files > 0)
    std::cout << "; " << r.checked_files << " files, " << r.checked_terms << " terms checked";
  if (r.verified_bytes > 0) std::cout << "; " << r.verified_bytes << " bytes verified";
  std::cout << "\n"
            << r.findings.size() << " finding(s), " << r.repaired
            << " repaired: " << (damaged ? "DAMAGED" : "no damage") << "\n";
}

// Opens what the configuration names and runs `run` on it.
template <typename Run>
int WithBackend(const char* name, const FsckCommandOptions& opts, bool check_hub, Run run) {
  auto cfg = LoadBackendConfig(opts.config_file, opts.data_dir, opts.index, opts.store);
  if (!cfg) {
    std::cerr << name << ": " << cfg.error().message << "\n";
    return 2;
  }
  auto backend = OpenConfiguredBackend(*cfg);
  if (!backend) {
    std::cerr << name << ": " << backend.error().message << "\n";
    return 2;
  }
  auto& index = backend->index;
  auto& store = backend->store;
  WorkerPool workers(1);
  cas::CasService cas(*index, *store, workers, {});  // registers repaired shards; signs nothing
  repair::FsckOptions fo;
  fo.deep = opts.deep;
  fo.repair = opts.repair;
  fo.default_scope = opts.default_scope;
  fo.threads = std::max<size_t>(1, opts.threads);
  fo.progress = [](const std::string& line) { std::cerr << line << "\n"; };
  auto swept = gc::BeingSwept(*index);
  if (!swept) {
    std::cerr << name << ": " << swept.error().message << "\n";
    return 2;
  }
  fo.being_swept = std::move(*swept);
  fo.read_being_swept = [&index] { return gc::BeingSwept(*index); };
  auto report = run(cas, *index, *store, fo);
  if (!report) {
    std::cerr << name << ": " << report.error().message << "\n";
    return 2;
  }
  std::optional<hub::HubCheckReport> hub_report;
  std::optional<gc::Lifecycle> lifecycle;
  std::optional<people::PeopleCheckReport> people_report;
  if (check_hub) {
    auto life = gc::ReadLifecycle(*index, Clock::System().UnixSeconds(),
                                  static_cast<uint64_t>(cfg->gc_grace.count()));
    if (!life) {
      std::cerr << name << ": " << life.error().message << "\n";
      return 2;
    }
    lifecycle = *life;
    auto checked = hub::CheckHub(*index, fo.progress);
    if (!checked) {
      std::cerr << name << ": " << checked.error().message << "\n";
      return 2;
    }
    hub_report = std::move(*checked);
    auto people = people::CheckPeople(*index);
    if (!people) {
      std::cerr << name << ": " << people.error().message << "\n";
      return 2;
    }
    people_report = std::move(*people);
  }
  Print(*report, hub_report ? &*hub_report : nullptr, lifecycle ? &*lifecycle : nullptr,
        people_report ? &*people_report : nullptr, opts.json);
  return report->damaged() || (people_report && people_report->damaged()) ? 1 : 0;
}

}  // namespace

int RunFsck(const FsckCommandOptions& opts) {
  return WithBackend("cairn fsck", opts, true,
                     [](cas::CasService& cas, index::Index& index, store::BlobStore& store,
                        const repair::FsckOptions& fo) { return repair::Fsck(cas, index, store, fo); });
}

int RunIndexRebuild(const FsckCommandOptions& opts) {
  return WithBackend(
      "cairn index rebuild", opts, false,
      [](cas::CasService& cas, index::Index& index, store::BlobStore& store, const repair::FsckOptions& fo) {
        return repair::RebuildIndex(cas, index, store, fo);
      });
}

}  // namespace cairn::cli
