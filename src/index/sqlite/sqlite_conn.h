// Inside the SQLite backend, shared by its sources (sqlite_index.cc: opening, migrations, the writer,
// secrets; sqlite_cas.cc, sqlite_repo.cc, sqlite_gc.cc, sqlite_quota.cc, sqlite_mirror.cc and
// sqlite_people.cc: one slice each): the statement borrowed from a connection's cache, the connection, the
// lease of a reader. Nothing outside src/index/sqlite_*.cc includes it.
#pragma once

#include <sqlite3.h>

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "index/sqlite/sqlite_index.h"

namespace cairn::index::sqlite_internal {

// A prepared statement borrowed from a connection's cache; reset (and unbound) when the borrow ends.
// Bound blobs and texts are not copied (SQLITE_STATIC): they must outlive the last Step.
class Stmt {
 public:
  explicit Stmt(sqlite3_stmt* s) : s_(s) {}
  ~Stmt() {
    if (s_ == nullptr) return;
    sqlite3_reset(s_);
    sqlite3_clear_bindings(s_);
  }
  Stmt(Stmt&& o) noexcept : s_(std::exchange(o.s_, nullptr)) {}
  Stmt& operator=(Stmt&&) = delete;
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

  Stmt& Bind(int i, std::span<const uint8_t> b) {
    // A null pointer would bind SQL NULL; an empty file's terms are an empty blob, not NULL.
    if (b.empty()) {
      sqlite3_bind_zeroblob(s_, i, 0);
    } else {
      sqlite3_bind_blob(s_, i, b.data(), static_cast<int>(b.size()), SQLITE_STATIC);
    }
    return *this;
  }
  Stmt& Bind(int i, const Hash& h) { return Bind(i, std::span<const uint8_t>(h.bytes)); }
  Stmt& Bind(int i, int64_t v) {
    sqlite3_bind_int64(s_, i, v);
    return *this;
  }
  Stmt& Bind(int i, std::string_view t) {
    sqlite3_bind_text(s_, i, t.data(), static_cast<int>(t.size()), SQLITE_STATIC);
    return *this;
  }
  // A scan's lower bound: `after`, or the empty blob (every hash sorts after it) from the first.
  Stmt& BindAfter(int i, const std::optional<Hash>& after) {
    return after ? Bind(i, *after) : Bind(i, std::span<const uint8_t>());
  }
  Stmt& BindNull(int i) {
    sqlite3_bind_null(s_, i);
    return *this;
  }

  int Step() { return sqlite3_step(s_); }
  int64_t Int(int col) const { return sqlite3_column_int64(s_, col); }
  std::span<const uint8_t> Blob(int col) const {
    const void* p = sqlite3_column_blob(s_, col);
    return {static_cast<const uint8_t*>(p), static_cast<size_t>(sqlite3_column_bytes(s_, col))};
  }
  std::string_view Text(int col) const {
    const unsigned char* p = sqlite3_column_text(s_, col);
    if (p == nullptr) return {};
    return {reinterpret_cast<const char*>(p), static_cast<size_t>(sqlite3_column_bytes(s_, col))};
  }
  bool IsNull(int col) const { return sqlite3_column_type(s_, col) == SQLITE_NULL; }
  // A 32-byte column; nullopt for anything else (a corrupt row must not crash a reader).
  std::optional<Hash> HashCol(int col) const {
    auto b = Blob(col);
    if (b.size() != 32) return std::nullopt;
    return Hash::FromBytes(b.data());
  }

 private:
  sqlite3_stmt* s_;
};

// Statements more than one slice runs, written once (their addresses key each connection's statement cache).
inline constexpr char kFileSize[] = "SELECT size FROM files WHERE hash = ?1";
inline constexpr char kReleaseObject[] = "DELETE FROM gc_repo_quarantine WHERE repo = ?1 AND key = ?2";
inline constexpr char kDeleteObject[] = "DELETE FROM repo_objects WHERE repo = ?1 AND key = ?2";

}  // namespace cairn::index::sqlite_internal

namespace cairn::index {

// ---- Connection

class SqliteIndex::Conn {
 public:
  Conn() = default;

  // Opens the database; on failure the connection is unusable and only its destruction remains.
  Status Open(const std::string& path, bool read_only, int busy_timeout_ms) {
    // NOMUTEX: a connection is used by one thread at a time (the writer, or one leased reader).
    const int flags =
        (read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE) | SQLITE_OPEN_NOMUTEX;
    const int rc = sqlite3_open_v2(path.c_str(), &db_, flags, nullptr);
    if (rc != SQLITE_OK) return Err("open " + path, rc);
    sqlite3_extended_result_codes(db_, 1);
    sqlite3_busy_timeout(db_, busy_timeout_ms);
    return Ok{};
  }

  ~Conn() {
    for (auto& [sql, stmt] : stmts_) sqlite3_finalize(stmt);
    sqlite3_close_v2(db_);  // also after a failed open, which may still allocate a handle
  }
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;

  sqlite3* db() const { return db_; }

  Error Err(std::string_view what, int rc) const {
    std::string msg =
        "sqlite: " + std::string(what) + ": " + (db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc));
    // A constraint names a request that contradicts the index; anything else is the database failing.
    if ((rc & 0xff) == SQLITE_CONSTRAINT) return Inconsistent(std::move(msg));
    return IoError(std::move(msg));
  }

  Status Exec(const char* sql) {
    const int rc = sqlite3_exec(db_, sql, nullptr, nullptr, nullptr);
    if (rc != SQLITE_OK) return Err(sql, rc);
    return Ok{};
  }

  // A cached prepared statement for `sql`, which must be one of the constants above.
  Result<sqlite_internal::Stmt> Prepare(const char* sql) {
    auto it = stmts_.find(sql);
    if (it == stmts_.end()) {
      sqlite3_stmt* s = nullptr;
      const int rc = sqlite3_prepare_v3(db_, sql, -1, SQLITE_PREPARE_PERSISTENT, &s, nullptr);
      if (rc != SQLITE_OK) return Err(sql, rc);
      it = stmts_.emplace(sql, s).first;
    }
    return sqlite_internal::Stmt(it->second);
  }

  // Steps a statement that returns no rows.
  Status Run(sqlite_internal::Stmt& s, const char* what) {
    const int rc = s.Step();
    if (rc != SQLITE_DONE) return Err(what, rc);
    return Ok{};
  }

  // Runs one of the cached statements that take no parameters and return no rows.
  Status Step(const char* sql) {
    auto s = Prepare(sql);
    if (!s.ok()) return s.error();
    return Run(*s, sql);
  }

  int changes() const { return sqlite3_changes(db_); }

 private:
  sqlite3* db_ = nullptr;
  std::unordered_map<const char*, sqlite3_stmt*> stmts_;
};

class SqliteIndex::ReaderLease {
 public:
  ReaderLease(SqliteIndex* owner, std::unique_ptr<Conn> conn) : owner_(owner), conn_(std::move(conn)) {}
  ReaderLease(ReaderLease&&) noexcept = default;
  ReaderLease& operator=(ReaderLease&&) = delete;
  ReaderLease(const ReaderLease&) = delete;
  ReaderLease& operator=(const ReaderLease&) = delete;
  ~ReaderLease() {
    if (conn_) owner_->ReleaseReader(std::move(conn_));
  }
  Conn* operator->() const { return conn_.get(); }
  Conn& operator*() const { return *conn_; }

 private:
  SqliteIndex* owner_;
  std::unique_ptr<Conn> conn_;
};

}  // namespace cairn::index
