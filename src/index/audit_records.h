// The audit log's records: one change each — who made it (a person and their token, a scope token, an
// operator's command), from where, what and when. Written by the index in the transaction of the change it
// records (AuditIndex), so a change that commits is always in the log and one that does not never is. Never a
// secret: tokens appear by id, and nothing a client sent beyond names is kept.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

namespace cairn::index {

struct AuditEvent {
  int64_t id = 0;        // assigned by the index when written: increasing
  int64_t at = 0;        // unix seconds
  std::string actor;     // a user's name; "scope:<scope>" for a scope token; "cli:<account>" for a command
  std::string token_id;  // the person's token that made it ("" for none)
  std::string client;    // the client's address as the server saw it ("" for a command)
  std::string action;    // "repo.create", "ref.update", "token.revoke", ...: docs/operations.md "Audit log"
  std::string ns;        // the namespace it changed in ("" for none)
  std::string target;    // what it changed: "model/acme/m", "token 0123456789abcdef", "member bob"
  std::string detail;    // a short account of the change
  bool operator==(const AuditEvent&) const = default;
};

// Who makes a change, and from where: what every event they cause starts from.
struct AuditActor {
  std::string actor;     // as AuditEvent::actor
  std::string token_id;  // as AuditEvent::token_id
  std::string client;    // as AuditEvent::client
  AuditEvent Event(int64_t at, std::string action, std::string ns, std::string target,
                   std::string detail = {}) const {
    return AuditEvent{.id = 0,
                      .at = at,
                      .actor = actor,
                      .token_id = token_id,
                      .client = client,
                      .action = std::move(action),
                      .ns = std::move(ns),
                      .target = std::move(target),
                      .detail = std::move(detail)};
  }
};

// What ListAudit returns: the events matching every field given.
struct AuditFilter {
  std::optional<int64_t> since = std::nullopt;  // at or after (unix seconds)
  std::optional<std::string> actor = std::nullopt;
  std::optional<std::string> ns = std::nullopt;
  std::optional<std::string> target = std::nullopt;  // exactly
};

}  // namespace cairn::index
