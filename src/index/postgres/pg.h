// A thin layer over libpq for PostgresIndex: one connection with its prepared statements, parameters in
// PostgreSQL's binary format (hashes as bytea, numbers as int4/int8, arrays for the many rows of one shard),
// binary results, pipelined batches, and errors mapped onto the index's error codes.
//
// Ownership and threads: a Conn owns its PGconn and is used by one thread at a time (the pool hands it out).
// Failures: every call returns an Error whose code says what the caller may do:
//   kInconsistent  a constraint refused the request (SQLSTATE class 23): the request contradicts the index;
//   kUnavailable   the server cannot be reached or the connection broke, or a write named a xorb the garbage
//                  collector is deleting (cairn's SQLSTATE CR001): retry later (HTTP 503);
//   kUnknownReference  a write named a xorb that is not stored (cairn's SQLSTATE CR002);
//   kIo            anything else the database reported.
// Retryable() tells a deadlock or serialization failure (SQLSTATE 40P01, 40001), after which the whole
// transaction may simply be run again.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include "common/error.h"
#include "xet/hash.h"

struct pg_conn;
struct pg_result;

namespace cairn::index::pg {

// Binary parameters of one statement. Values are copied in, so a Params may outlive what it was built from.
class Params {
 public:
  Params& Bytea(std::span<const uint8_t> b);
  Params& Bytea(const xet::Hash& h) { return Bytea(std::span<const uint8_t>(h.bytes)); }
  Params& Int8(int64_t v);
  Params& Bool(bool v);
  Params& Text(std::string_view t);
  Params& Null();
  // One-dimensional arrays. Elements of ByteaArray may be absent (SQL NULL).
  Params& ByteaArray(std::span<const std::optional<std::span<const uint8_t>>> items);
  Params& HashArray(std::span<const xet::Hash> items);
  Params& Int8Array(std::span<const int64_t> items);
  Params& Int8Array(std::span<const std::optional<int64_t>> items);  // nullopt: NULL
  Params& BoolArray(const std::vector<bool>& items);
  Params& TextArray(std::span<const std::string> items);

  int count() const { return static_cast<int>(values_.size()); }
  // Views for libpq, valid until the next change.
  std::vector<const char*> values() const;
  std::vector<int> lengths() const;
  std::vector<int> formats() const { return std::vector<int>(values_.size(), 1); }

 private:
  Params& Add(std::string bytes);
  Params& Array(uint32_t element_oid, size_t n, const std::function<bool(std::string&, size_t)>& put);

  std::vector<std::optional<std::string>> values_;
};

// A statement result; owns the PGresult. Columns are read in binary.
class Rows {
 public:
  explicit Rows(pg_result* r = nullptr) : r_(r) {}
  ~Rows();
  Rows(Rows&& o) noexcept : r_(std::exchange(o.r_, nullptr)) {}
  Rows& operator=(Rows&& o) noexcept;
  Rows(const Rows&) = delete;
  Rows& operator=(const Rows&) = delete;

  int size() const;
  bool IsNull(int row, int col) const;
  std::span<const uint8_t> Bytes(int row, int col) const;
  std::string_view Text(int row, int col) const;
  int64_t Int8(int row, int col) const;  // an int8 column (0 when NULL or of another size)
  bool Bool(int row, int col) const;
  // A 32-byte bytea; nullopt for anything else (a corrupt row must not crash a reader).
  std::optional<xet::Hash> Hash(int row, int col) const;
  const pg_result* raw() const { return r_; }

 private:
  pg_result* r_;
};

// A statement to prepare once per connection: its name is its identity, `sql` its text.
struct Statement {
  const char* name;
  const char* sql;
};

class Conn {
 public:
  // Connects to `conninfo` (a postgres:// URI or key=value string). Fails with kUnavailable when the server
  // cannot be reached, kIo when it refuses (authentication, unknown database).
  static Result<std::unique_ptr<Conn>> Connect(const std::string& conninfo);
  ~Conn();
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;

  // Whether the connection broke (it must then be dropped or reset).
  bool broken() const;

  // Runs SQL text without parameters (DDL, several statements); result rows are text.
  Result<Rows> Exec(const std::string& sql);
  // Runs SQL text once with binary parameters and results (no prepared statement: tools, not hot paths).
  Result<Rows> Query(const std::string& sql, const Params& p = {});
  // Runs a statement, preparing it on this connection first if needed.
  Result<Rows> Run(const Statement& s, const Params& p = {});

  // One pipelined round trip: BEGIN, every statement, COMMIT, then a sync; results in order. All commit or
  // none does: on failure the error of the first failing statement is returned together with its position
  // (failed_at), and the transaction was rolled back.
  struct BatchItem {
    const Statement* statement;
    const Params* params;
  };
  struct BatchFailure {
    Error error;
    size_t failed_at = 0;  // index of the failing item; items.size() when BEGIN/COMMIT or the link failed
    bool retryable = false;
  };
  BasicResult<std::vector<Rows>, BatchFailure> RunBatch(std::span<const BatchItem> items);

 private:
  explicit Conn(pg_conn* c) : c_(c) {}
  Status Prepare(const Statement& s);
  Error ErrorOf(const pg_result* r, std::string_view what) const;
  bool RetryableResult(const pg_result* r) const;
  // Reads results up to and including the pipeline's sync; used after a failure.
  void DrainToSync();

  pg_conn* c_;
  std::unordered_set<const char*> prepared_;
};

// Whether libpq can parse `uri` (kMalformed with its reason otherwise). Nothing is contacted.
Status CheckUri(const std::string& uri);

// The connection URI without its password, for messages and logs.
std::string RedactedUri(std::string_view uri);

}  // namespace cairn::index::pg
