// `cairn audit`: the audit log (index.h's AuditIndex), newest first, filtered by age, actor, namespace or
// repository; one line an event, or one JSON object a line. Every string an event holds came from a client
// (names, a commit's branch) or a person: printed escaped.
#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>
#include <iostream>
#include <string>

#include "cli/backend.h"
#include "cli/commands.h"
#include "common/printable.h"
#include "config/config.h"

namespace cairn::cli {
namespace {

void PrintEvent(const index::AuditEvent& e, bool json) {
  if (json) {
    std::cout << boost::json::serialize(boost::json::object{{"id", e.id},
                                                            {"at", e.at},
                                                            {"actor", e.actor},
                                                            {"token_id", e.token_id},
                                                            {"client", e.client},
                                                            {"action", e.action},
                                                            {"ns", e.ns},
                                                            {"target", e.target},
                                                            {"detail", e.detail}})
              << "\n";
    return;
  }
  std::cout << Utc(e.at) << "  " << Printable(e.actor);
  if (!e.token_id.empty()) std::cout << " (token " << Printable(e.token_id) << ")";
  if (!e.client.empty()) std::cout << " from " << Printable(e.client);
  std::cout << "  " << Printable(e.action) << "  " << Printable(e.target);
  if (!e.detail.empty()) std::cout << "  " << Printable(e.detail);
  std::cout << "\n";
}

}  // namespace

int RunAudit(const AuditOptions& opts) {
  const std::string who = "cairn audit: ";
  index::AuditFilter filter;
  if (!opts.since.empty()) {
    auto ago = config::ParseDuration(opts.since);
    if (!ago) {
      std::cerr << who << "--since: " << ago.error().message << "\n";
      return 2;
    }
    filter.since = Clock::System().UnixSeconds() - ago->count();
  }
  if (!opts.user.empty()) filter.actor = opts.user;
  if (!opts.ns.empty()) filter.ns = opts.ns;
  if (!opts.repo.empty()) filter.target = opts.repo;
  if (opts.limit == 0) {
    std::cerr << who << "--limit must be at least 1\n";
    return 2;
  }
  auto opened = OpenCommandIndex(who, opts.config_file, opts.data_dir, opts.index);
  if (opened.status != 0) return opened.status;
  std::optional<int64_t> before;
  size_t left = opts.limit;
  while (left > 0) {
    const size_t page = std::min(left, index::AuditIndex::kMaxListed);
    auto events = opened.index->ListAudit(filter, before, page);
    if (!events) {
      std::cerr << who << Printable(events.error().message) << "\n";
      return 1;
    }
    for (const auto& e : *events) PrintEvent(e, opts.json);
    if (events->size() < page) break;
    left -= page;
    before = events->back().id;
  }
  return 0;
}

}  // namespace cairn::cli
