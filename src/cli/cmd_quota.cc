// `cairn quota set|show|rm`: storage quotas per namespace, kept in the index so that every node enforces the
// same ones (quota/quota_service.h; docs/operations.md "Quotas").
#include <iostream>
#include <optional>
#include <string>

#include "cli/backend.h"
#include "cli/commands.h"
#include "config/config.h"
#include "hub/hub_service.h"
#include "quota/quota_service.h"

namespace cairn::cli {
namespace {

// Runs `fn(service)` with the command's index; prints errors as `cairn quota <verb>`.
template <typename F>
int WithQuotas(const char* verb, const QuotaOptions& opts, F fn) {
  const std::string who = std::string("cairn quota ") + verb + ": ";
  if (!opts.ns.empty() && !hub::ValidName(opts.ns)) {
    std::cerr << who << "not a namespace name: " << opts.ns << "\n";
    return 2;
  }
  auto opened = OpenCommandIndex(who, opts.config_file, opts.data_dir, opts.index);
  if (opened.status != 0) return opened.status;
  quota::QuotaService service(*opened.index, Clock::System());
  auto st = fn(*opened.index, service);
  if (!st) {
    std::cerr << who << st.error().message << "\n";
    return 1;
  }
  return 0;
}

std::string LimitText(const std::optional<uint64_t>& limit) {
  return limit ? quota::FormatBytes(*limit) + " (" + std::to_string(*limit) + " bytes)" : "none";
}

void Print(const quota::Usage& u, bool json) {
  if (json) {
    std::cout << "{\"namespace\":\"" << u.ns
              << "\",\"limit\":" << (u.limit ? std::to_string(*u.limit) : "null") << ",\"used\":" << u.used
              << ",\"exact\":" << (u.exact ? "true" : "false") << ",\"measured_at\":" << u.measured_at
              << ",\"repos\":" << u.repos << ",\"files\":" << u.files << ",\"chunk_bytes\":" << u.chunk_bytes
              << ",\"object_bytes\":" << u.object_bytes << "}\n";
    return;
  }
  std::cout << u.ns << ": " << quota::FormatBytes(u.used) << " (" << u.used << " bytes"
            << (u.exact ? "" : ", at most") << ") used of " << LimitText(u.limit);
  if (u.repos > 0) {
    std::cout << "; " << u.repos << " repositories, " << u.files << " files, " << u.chunk_bytes
              << " bytes of chunks, " << u.object_bytes << " bytes of git objects";
  }
  std::cout << "\n";
}

}  // namespace

int RunQuotaSet(const QuotaOptions& opts) {
  std::optional<uint64_t> limit;
  if (opts.size != "none") {
    auto parsed = config::ParseByteSize(opts.size);
    if (!parsed) {
      std::cerr << "cairn quota set: SIZE: " << parsed.error().message << "\n";
      return 2;
    }
    limit = *parsed;
  }
  return WithQuotas("set", opts, [&](index::Index&, quota::QuotaService& service) -> Status {
    if (auto st = service.SetLimit(CommandActor(), opts.ns, limit); !st) return st;
    auto usage = service.Measure(opts.ns);  // so that the quota holds from the first commit on
    if (!usage) return usage.error();
    Print(*usage, false);
    return Ok{};
  });
}

int RunQuotaShow(const QuotaOptions& opts) {
  return WithQuotas("show", opts, [&](index::Index& index, quota::QuotaService& service) -> Status {
    if (!opts.ns.empty()) {
      auto usage = service.Measure(opts.ns);
      if (!usage) return usage.error();
      Print(*usage, opts.json);
      return Ok{};
    }
    std::optional<std::string> after;
    for (;;) {
      auto page = index.ListQuotas(after, index::QuotaIndex::kMaxListedQuotas);
      if (!page) return page.error();
      for (const auto& q : *page) Print(quota::UsageOf(q), opts.json);
      if (page->size() < index::QuotaIndex::kMaxListedQuotas) return Ok{};
      after = page->back().ns;
    }
  });
}

int RunQuotaRm(const QuotaOptions& opts) {
  return WithQuotas("rm", opts, [&](index::Index& index, quota::QuotaService&) -> Status {
    const auto event =
        CommandActor().Event(Clock::System().UnixSeconds(), "quota.remove", opts.ns, "quota " + opts.ns);
    auto deleted = index.DeleteQuota(opts.ns, &event);
    if (!deleted) return deleted.error();
    if (!*deleted) return NotFound("namespace " + opts.ns + " has no quota");
    std::cout << "removed the quota of " << opts.ns << "\n";
    return Ok{};
  });
}

}  // namespace cairn::cli
