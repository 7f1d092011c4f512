// Refused write attempts in the audit log (index.h's AuditIndex), as `access.refused`: a request that could
// change something (any method but GET and HEAD, and git's push advertisement; not the token exchange, which
// records its own refusals) that the server refused with 401, 403 or 404, made with a credential that names
// someone: a token that verifies (refused for what it covers), or a person's token the directory knows though
// it was revoked, has expired or its owner is disabled. Callers nobody can name (no token, a made-up one) are
// not recorded: anyone could fill the log with them.
//
// Bounded: each actor's events pass a token bucket (kBurst at once, then one each kEverySeconds; what it
// holds back is counted into the next event's detail), and the events are written on the server's workers,
// never on the I/O thread that observed the refusal; when the workers' queue is full the event is dropped
// with a warning in the log. The detail is the method and the status; never a header or a body.
//
// Thread-safety: Observe may be called from any thread. Ownership: borrows the server, the audit index and
// the directory (null: no people), which outlive it and every task it posts.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "common/clock.h"
#include "http/server.h"
#include "index/index.h"
#include "people/directory.h"

namespace cairn::api {

class RefusalAudit {
 public:
  static constexpr double kBurst = 10;
  static constexpr double kEverySeconds = 6;
  static constexpr size_t kMaxActors = 4096;  // actors whose buckets are kept; past it they start afresh

  RefusalAudit(http::Server& server, index::AuditIndex& audit, const people::Directory* people,
               const Clock& clock)
      : server_(server), audit_(audit), people_(people), clock_(clock) {}

  // Records `req`, refused with `status`, when it is a write attempt by someone it can name.
  void Observe(const http::Request& req, unsigned status);

  // Whether `req` could change something: what a refusal of it is recorded for.
  static bool WriteAttempt(const http::Request& req);

 private:
  std::optional<index::AuditActor> ActorOf(const http::Request& req) const;
  // Takes one event from `key`'s bucket at `now`; nullopt when it is empty, else how many were held back
  // since the last one passed.
  std::optional<uint64_t> Pass(const std::string& key, int64_t now);

  struct Bucket {
    double tokens = kBurst;
    int64_t at = 0;
    uint64_t held = 0;
  };
  http::Server& server_;
  index::AuditIndex& audit_;
  const people::Directory* people_;
  const Clock& clock_;
  std::mutex mu_;  // guards buckets_
  std::unordered_map<std::string, Bucket> buckets_;
};

}  // namespace cairn::api
