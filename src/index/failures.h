// The index's refusals, worded once for every backend: each backend returns these, so a caller (and a log
// reader) meets the same code and the same words whichever database is underneath, and the shared suite
// (index_test.cc) holds both to it. A refusal PostgreSQL raises inside a statement (the CR00x states, pg.h)
// is answered with the same function as SQLite's check in C++, so neither can name more than the other knows.
// Pure functions; safe from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/error.h"
#include "xet/hash.h"

namespace cairn::index {

// UpdateRef: the ref is not at the target the update expected (moved, or deleted meanwhile)...
inline Error RefMoved(std::string_view name) {
  return Conflict("ref " + std::string(name) + " has moved");
}
// ...or the update expected no ref and one exists.
inline Error RefExists(std::string_view name) {
  return Conflict("ref " + std::string(name) + " exists");
}
// UpdateRef: the object the ref would name is gone (a collector swept it meanwhile).
inline Error RefTargetGone(std::string_view name) {
  return UnknownReference("ref " + std::string(name) + ": its target is gone");
}

inline Error RepoExists(std::string_view ns, std::string_view name) {
  return Conflict("repository " + std::string(ns) + "/" + std::string(name) + " exists");
}
inline Error RepoNotIndexed(int64_t id) {
  return NotFound("repository " + std::to_string(id) + " is not in the index");
}

// People (PeopleIndex). Account names are compared without case, and said as the caller gave them.
inline Error AccountExists(std::string_view name) {
  return Conflict("the name " + std::string(name) + " is taken by a user or organization");
}
inline Error AccountNotIndexed(std::string_view name) {
  return NotFound("no user or organization " + std::string(name));
}
inline Error AccountIdNotIndexed(int64_t id) {
  return NotFound("account " + std::to_string(id) + " is not in the index");
}
// SetMember: `org` must be an organization and `user` a user.
inline Error NoSuchMembership() {
  return NotFound("a membership joins an organization and a user in the index");
}
// SetMember: the change would take the organization's last admin away.
inline Error LastAdmin() {
  return Conflict("the organization keeps an admin: make another member admin first");
}
inline Error TokenExists(std::string_view id) {
  return Conflict("token " + std::string(id) + " exists");
}
inline Error TokenNotIndexed(std::string_view id) {
  return NotFound("token " + std::string(id) + " is not in the index");
}
// CreateToken: the owner is no user in the index.
inline Error TokenOwnerNotIndexed(int64_t owner) {
  return NotFound("token owner " + std::to_string(owner) + " is no user in the index");
}
inline Error PublisherExists(std::string_view id) {
  return Conflict("trust policy " + std::string(id) + " exists");
}
inline Error PublisherNotIndexed(std::string_view id) {
  return NotFound("trust policy " + std::string(id) + " is not in the index");
}
inline Error PublisherOwnerNotIndexed(int64_t owner) {
  return NotFound("trust policy owner " + std::to_string(owner) + " is no account in the index");
}

inline Error XorbNotIndexed(const xet::Hash& hash) {
  return NotFound("xorb " + hash.hex() + " is not in the index");
}
inline Error FileNotIndexed(const xet::Hash& hash) {
  return NotFound("file " + hash.hex() + " is not in the index");
}
inline Error ShardNotIndexed(const xet::Hash& hash) {
  return NotFound("shard " + hash.hex() + " is not in the index");
}
// ShareFiles: one of the files is not registered (the whole call changes nothing).
inline Error SharedFileNotIndexed() {
  return NotFound("a file shared is not in the index");
}

// A write names a xorb, file or shard the collector has claimed for deletion: retried, it finds it gone or
// kept.
inline Error NamedBeingDeleted() {
  return Unavailable("a xorb, file or shard named is being deleted by the garbage collector; retry");
}
// A write names a xorb that is not (or no longer) registered.
inline Error NamedXorbNotStored() {
  return UnknownReference("a xorb named is not stored");
}
// A write carrying a quota charge (QuotaCharge) that the namespace's limit has no room for.
inline Error QuotaHasNoRoom() {
  return QuotaExceeded("the namespace's storage quota has no room for this");
}
// A listing asked for more records a page than the slice gives (PeopleIndex::kMaxListed, AuditIndex's).
inline Status CheckPageLimit(size_t limit, size_t max) {
  if (limit > max) return Malformed("at most " + std::to_string(max) + " records a page");
  return Ok{};
}
// Repoint: a file changed between the compaction's read and its step.
inline Error FileChangedSinceCompaction() {
  return Conflict("a file changed since the compaction read it");
}

}  // namespace cairn::index
