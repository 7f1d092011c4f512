#include "index/index_copy.h"

#include <blake3.h>
#include <sqlite3.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <utility>

#include "index/open_index.h"
#include "index/postgres/pg.h"
#include "index/postgres/postgres_index.h"
#include "index/sqlite/sqlite_index.h"

namespace cairn::index {

namespace {

// ---- The tables, as both backends have them at the current schema version

enum class Type { kBytes, kInt, kText, kBool };

struct Column {
  const char* name;
  Type type;
};

struct Table {
  const char* name;
  std::vector<Column> columns;  // the primary key first
  size_t key_columns;
  size_t page_rows;  // rows per page (and transaction); xorb layouts run to 40 KB each
};

// (Schema 6 added an index only; schema 7 the scopes' totals, which are counters: recomputed, not copied;
// schema 8 the Hub's repositories, whose ids are copied as they are; schema 9 their read scopes; schema 10
// an index only; schema 11 the collector's quarantine, copied so that what was unreferenced keeps the time it
// became so; schema 12 the quarantine of repository objects, copied for the same reason; schema 13 the
// scopes' revocations of files; schema 14 an index only; schema 15 the namespaces' quotas, with what was last
// measured of them; schema 16 the xorbs compaction superseded, so that dedup answers keep leaving them out;
// schema 17 leases, which are held by running processes: not copied; schema 18 the mirrored repositories'
// last reads, copied: the mirror's eviction order; schema 19 people (accounts, members, tokens) with their
// generations, and the newest generation raised to theirs; schema 20 the audit log, copied with its ids;
// schema 21 the trust policies, with their generations like tokens; schema 22 indexes only; schema 23 the
// users' password hashes, their browser sessions and devices' sign-ins, copied so that nobody is signed
// out by a move.)
static_assert(SqliteIndex::kSchemaVersion == 23 && PostgresIndex::kSchemaVersion == 23,
              "a new schema version must be reflected in kTables");

// Each scope's totals from its rows (schema 7's scope_totals), the same SQL on both backends.
constexpr const char kFillScopeTotals[] =
    "INSERT INTO scope_totals(scope, files, bytes) SELECT s.scope, count(*), sum(f.size) "
    "FROM file_scopes s JOIN files f ON f.hash = s.file GROUP BY s.scope";

// People (schema 19): accounts before their members and tokens; the audit log (schema 20); trust policies
// (schema 21); passwords, sessions, devices' grants and linked subjects (schema 23).
std::vector<Table> PeopleTables() {
  return {{"accounts",
           {{"id", Type::kInt},
            {"kind", Type::kInt},
            {"name", Type::kText},
            {"folded", Type::kText},
            {"full_name", Type::kText},
            {"is_operator", Type::kBool},
            {"disabled", Type::kBool},
            {"created_at", Type::kInt},
            {"changed", Type::kInt}},
           1,
           1024},
          {"members",
           {{"org", Type::kInt}, {"member", Type::kInt}, {"role", Type::kInt}, {"changed", Type::kInt}},
           2,
           4096},
          {"tokens",
           {{"id", Type::kText},
            {"owner", Type::kInt},
            {"name", Type::kText},
            {"role", Type::kInt},
            {"grants", Type::kText},
            {"secret_hash", Type::kBytes},
            {"created_at", Type::kInt},
            {"expires_at", Type::kInt},
            {"last_used_at", Type::kInt},
            {"revoked_at", Type::kInt},
            {"changed", Type::kInt}},
           1,
           1024},
          {"publishers",
           {{"id", Type::kText},
            {"owner", Type::kInt},
            {"repo", Type::kText},
            {"issuer", Type::kText},
            {"audience", Type::kText},
            {"claims", Type::kText},
            {"role", Type::kInt},
            {"created_at", Type::kInt},
            {"revoked_at", Type::kInt},
            {"changed", Type::kInt}},
           1,
           1024},
          {"passwords", {{"account", Type::kInt}, {"hash", Type::kText}}, 1, 1024},
          {"sessions",
           {{"id", Type::kText},
            {"secret_hash", Type::kBytes},
            {"user_id", Type::kInt},
            {"created_at", Type::kInt},
            {"expires_at", Type::kInt},
            {"method", Type::kText},
            {"client", Type::kText}},
           1,
           1024},
          {"device_grants",
           {{"device_hash", Type::kBytes},
            {"user_code", Type::kText},
            {"client_id", Type::kText},
            {"created_at", Type::kInt},
            {"expires_at", Type::kInt},
            {"state", Type::kInt},
            {"user_id", Type::kInt},
            {"polled_at", Type::kInt}},
           1,
           1024},
          {"identities",
           {{"issuer", Type::kText},
            {"subject", Type::kText},
            {"user_id", Type::kInt},
            {"created_at", Type::kInt}},
           2,
           1024},
          {"audit_events",
           {{"id", Type::kInt},
            {"at", Type::kInt},
            {"actor", Type::kText},
            {"token_id", Type::kText},
            {"client", Type::kText},
            {"action", Type::kText},
            {"ns", Type::kText},
            {"target", Type::kText},
            {"detail", Type::kText}},
           1,
           4096}};
}

// Parents before the rows that refer to them.
const std::vector<Table>& Tables() {
  static const std::vector<Table> tables = [] {
    std::vector<Table> all = {
        {"xorbs",
         {{"hash", Type::kBytes},
          {"layout", Type::kBytes},
          {"chunk_count", Type::kInt},
          {"region_size", Type::kInt},
          {"unpacked_size", Type::kInt},
          {"stored_at", Type::kInt}},
         1,
         256},
        {"shards", {{"hash", Type::kBytes}, {"size", Type::kInt}, {"registered_at", Type::kInt}}, 1, 4096},
        {"files",
         {{"hash", Type::kBytes},
          {"terms", Type::kBytes},
          {"term_count", Type::kInt},
          {"size", Type::kInt},
          {"sha256", Type::kBytes},
          {"created_at", Type::kInt},
          {"ranges", Type::kBytes}},
         1,
         1024},
        {"file_scopes", {{"file", Type::kBytes}, {"scope", Type::kText}}, 2, 4096},
        {"shard_xorbs",
         {{"shard", Type::kBytes}, {"seq", Type::kInt}, {"xorb", Type::kBytes}, {"listed", Type::kBool}},
         2,
         4096},
        {"dedup",
         {{"chunk", Type::kBytes}, {"scope", Type::kText}, {"xorb", Type::kBytes}, {"shard", Type::kBytes}},
         3,
         4096},
        {"gc_quarantine",
         {{"kind", Type::kInt}, {"hash", Type::kBytes}, {"since", Type::kInt}, {"claimed_at", Type::kInt}},
         2,
         4096},
        {"gc_repo_quarantine", {{"repo", Type::kInt}, {"key", Type::kBytes}, {"since", Type::kInt}}, 2, 4096},
        {"shard_scopes", {{"shard", Type::kBytes}, {"scope", Type::kText}}, 2, 4096},
        {"compacted_xorbs",
         {{"xorb", Type::kBytes}, {"into_xorb", Type::kBytes}, {"compacted_at", Type::kInt}},
         1,
         4096},
        {"revocations", {{"file", Type::kBytes}, {"scope", Type::kText}, {"cleared", Type::kBool}}, 2, 4096},
        {"secrets", {{"name", Type::kText}, {"value", Type::kText}, {"created_at", Type::kInt}}, 1, 64},
        {"quotas",
         {{"namespace", Type::kText},
          {"limit_bytes", Type::kInt},
          {"used_bytes", Type::kInt},
          {"pending_bytes", Type::kInt},
          {"reserved_bytes", Type::kInt},
          {"reserved_at", Type::kInt},
          {"measured_at", Type::kInt},
          {"generation", Type::kInt},
          {"stale", Type::kBool}},
         1,
         1024},
        {"repos",
         {{"id", Type::kInt},
          {"type", Type::kInt},
          {"ns", Type::kText},
          {"name", Type::kText},
          {"private", Type::kBool},
          {"created_at", Type::kInt},
          {"scope", Type::kText},
          {"read_scope", Type::kText}},
         1,
         1024},
        {"repo_refs",
         {{"repo", Type::kInt}, {"kind", Type::kInt}, {"name", Type::kText}, {"target", Type::kBytes}},
         3,
         1024},
        {"mirror_reads", {{"repo", Type::kInt}, {"last_read", Type::kInt}}, 1, 4096},
        {"repo_objects",
         {{"repo", Type::kInt}, {"key", Type::kBytes}, {"kind", Type::kInt}, {"data", Type::kBytes}},
         2,
         256},
        {"bucket_files",
         {{"repo", Type::kInt},
          {"path", Type::kText},
          {"file", Type::kBytes},
          {"size", Type::kInt},
          {"mtime", Type::kInt},
          {"content_type", Type::kText},
          {"uploaded_at", Type::kInt}},
         2,
         1024},
    };
    for (Table& t : PeopleTables()) all.push_back(std::move(t));
    return all;
  }();
  return tables;
}

}  // namespace

// Copied people keep their generations: the newest must be at least theirs, or a node's refresh (which reads
// rows up to the newest generation) would not see them.
constexpr char kPeopleGenerationAfterCopy[] =
    "UPDATE people_generation SET n = (SELECT max(g) FROM (SELECT n AS g FROM people_generation "
    "UNION ALL SELECT max(changed) FROM accounts UNION ALL SELECT max(changed) FROM members "
    "UNION ALL SELECT max(changed) FROM tokens UNION ALL SELECT max(changed) FROM publishers) AS gs)";

std::vector<SchemaTable> SchemaTables() {
  std::vector<SchemaTable> out;
  for (const Table& t : Tables()) {
    SchemaTable s{t.name, {}, true};
    for (const Column& c : t.columns) s.columns.emplace_back(c.name);
    out.push_back(std::move(s));
  }
  // Recomputed by the copy (kFillScopeTotals, and the UPDATE of counters below).
  out.push_back({"scope_totals", {"scope", "files", "bytes"}, false});
  out.push_back({"counters", {}, false});  // each backend's own layout (one row; 64 slots): columns unchecked
  // The newest people generation: at least every copied row's (kPeopleGenerationAfterCopy).
  out.push_back({"people_generation", {"id", "n"}, false});
  // Held by running processes (the mirror's transfers): a copy starts with none.
  out.push_back({"leases", {"name", "holder", "expires"}, false});
  return out;
}

namespace {

// One column's value: bytes and text in `s`, integers and booleans in `i`.
struct Value {
  bool null = false;
  int64_t i = 0;
  std::string s;
};
using Row = std::vector<Value>;

// One backend's tables, read and written row by row.
class TableIo {
 public:
  virtual ~TableIo() = default;
  // Up to `limit` rows after `after` (a key; nullopt: from the start), in key order.
  virtual Result<std::vector<Row>> Page(const Table& t, const std::optional<Row>& after, size_t limit) = 0;
  // The last key present (nullopt: empty table).
  virtual Result<std::optional<Row>> LastKey(const Table& t) = 0;
  // Inserts the rows in one transaction; rows already present are left alone.
  virtual Status Insert(const Table& t, const std::vector<Row>& rows) = 0;
  // Sets the totals (Stats) from the rows.
  virtual Status RecomputeCounters() = 0;
  // Starts the read transaction every later read is made in (CopyIndexOptions::snapshot).
  virtual Status BeginSnapshot() = 0;
};

std::string Join(const Table& t, size_t n, const std::function<std::string(const Column&, size_t)>& f) {
  std::string out;
  for (size_t i = 0; i < n; ++i) {
    if (i > 0) out += ", ";
    out += f(t.columns[i], i);
  }
  return out;
}

// ---- SQLite

class SqliteTables final : public TableIo {
 public:
  static Result<std::unique_ptr<SqliteTables>> Open(const std::string& path, bool read_only = false) {
    sqlite3* db = nullptr;
    const int rc =
        sqlite3_open_v2(path.c_str(), &db, read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE, nullptr);
    std::unique_ptr<SqliteTables> t(new SqliteTables(db));
    if (rc != SQLITE_OK) return t->Err("open " + path);
    sqlite3_busy_timeout(db, 10'000);
    if (read_only) return t;
    if (auto st = t->Exec("PRAGMA foreign_keys = ON; PRAGMA synchronous = FULL"); !st.ok()) return st.error();
    return t;
  }

  Status BeginSnapshot() override {
    // A read transaction takes its snapshot at its first read, and keeps it while the log grows.
    if (auto st = Exec("BEGIN"); !st.ok()) return st;
    return Exec("SELECT count(*) FROM sqlite_master");
  }

  Result<int> UserVersion() {
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v2(db_, "PRAGMA user_version", -1, &s, nullptr) != SQLITE_OK)
      return Err("read the schema version");
    const int rc = sqlite3_step(s);
    const int v = rc == SQLITE_ROW ? sqlite3_column_int(s, 0) : -1;
    sqlite3_finalize(s);
    if (rc != SQLITE_ROW) return Err("read the schema version");
    return v;
  }
  ~SqliteTables() override { sqlite3_close_v2(db_); }
  SqliteTables(const SqliteTables&) = delete;
  SqliteTables& operator=(const SqliteTables&) = delete;

  Result<std::vector<Row>> Page(const Table& t, const std::optional<Row>& after, size_t limit) override {
    const std::string key =
        Join(t, t.key_columns, [](const Column& c, size_t) { return std::string(c.name); });
    std::string sql = "SELECT " +
                      Join(t, t.columns.size(), [](const Column& c, size_t) { return std::string(c.name); }) +
                      " FROM " + t.name;
    if (after)
      sql += " WHERE (" + key + ") > (" +
             Join(t, t.key_columns, [](const Column&, size_t) { return std::string("?"); }) + ")";
    sql += " ORDER BY " + key + " LIMIT " + std::to_string(limit);
    return Select(t, sql, after ? &*after : nullptr, t.columns.size());
  }

  Result<std::optional<Row>> LastKey(const Table& t) override {
    const std::string key =
        Join(t, t.key_columns, [](const Column& c, size_t) { return std::string(c.name); });
    const std::string desc =
        Join(t, t.key_columns, [](const Column& c, size_t) { return std::string(c.name) + " DESC"; });
    auto rows = Select(t, "SELECT " + key + " FROM " + t.name + " ORDER BY " + desc + " LIMIT 1", nullptr,
                       t.key_columns);
    if (!rows.ok()) return rows.error();
    if (rows->empty()) return std::optional<Row>();
    return std::optional<Row>(std::move(rows->front()));
  }

  Status Insert(const Table& t, const std::vector<Row>& rows) override {
    const std::string sql =
        std::string("INSERT INTO ") + t.name + "(" +
        Join(t, t.columns.size(), [](const Column& c, size_t) { return std::string(c.name); }) +
        ") VALUES (" + Join(t, t.columns.size(), [](const Column&, size_t) { return std::string("?"); }) +
        ") ON CONFLICT DO NOTHING";
    if (auto st = Exec("BEGIN IMMEDIATE"); !st.ok()) return st;
    sqlite3_stmt* s = nullptr;
    Status result = Ok{};
    if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &s, nullptr) != SQLITE_OK) result = Err("prepare insert");
    for (size_t r = 0; result.ok() && r < rows.size(); ++r) {
      Bind(s, t, rows[r], t.columns.size());
      if (sqlite3_step(s) != SQLITE_DONE) result = Err(std::string("insert into ") + t.name);
      sqlite3_reset(s);
    }
    sqlite3_finalize(s);
    if (result.ok()) return Exec("COMMIT");
    (void)Exec("ROLLBACK");
    return result;
  }

  Status RecomputeCounters() override {
    if (auto st = Exec((std::string("DELETE FROM scope_totals; ") + kFillScopeTotals).c_str()); !st.ok())
      return st;
    if (auto st = Exec(kPeopleGenerationAfterCopy); !st.ok()) return st;
    return Exec(
        "UPDATE counters SET xorbs = (SELECT count(*) FROM xorbs), files = (SELECT count(*) FROM files), "
        "chunks = (SELECT COALESCE(sum(chunk_count), 0) FROM xorbs), "
        "stored_bytes = (SELECT COALESCE(sum(region_size), 0) FROM xorbs) + "
        "(SELECT COALESCE(sum(size), 0) FROM shards), shards = (SELECT count(*) FROM shards), "
        "unpacked_bytes = (SELECT COALESCE(sum(unpacked_size), 0) FROM xorbs), "
        "file_bytes = (SELECT COALESCE(sum(size), 0) FROM files) WHERE id = 1");
  }

 private:
  explicit SqliteTables(sqlite3* db) : db_(db) {}

  Error Err(const std::string& what) const {
    return IoError("sqlite: " + what + ": " + (db_ != nullptr ? sqlite3_errmsg(db_) : "out of memory"));
  }

  Status Exec(const char* sql) {
    if (sqlite3_exec(db_, sql, nullptr, nullptr, nullptr) != SQLITE_OK) return Err(sql);
    return Ok{};
  }

  // Binds the first `n` values of `row` (SQLITE_STATIC: the row outlives the step).
  static void Bind(sqlite3_stmt* s, const Table& t, const Row& row, size_t n) {
    for (size_t i = 0; i < n; ++i) {
      const int at = static_cast<int>(i) + 1;
      const Value& v = row[i];
      if (v.null) {
        sqlite3_bind_null(s, at);
      } else if (t.columns[i].type == Type::kInt || t.columns[i].type == Type::kBool) {
        sqlite3_bind_int64(s, at, v.i);
      } else if (t.columns[i].type == Type::kText) {
        sqlite3_bind_text(s, at, v.s.data(), static_cast<int>(v.s.size()), SQLITE_STATIC);
      } else {
        sqlite3_bind_blob(s, at, v.s.data(), static_cast<int>(v.s.size()), SQLITE_STATIC);
      }
    }
  }

  Result<std::vector<Row>> Select(const Table& t, const std::string& sql, const Row* params, size_t columns) {
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &s, nullptr) != SQLITE_OK) return Err("prepare " + sql);
    if (params != nullptr) Bind(s, t, *params, t.key_columns);
    std::vector<Row> rows;
    int rc = 0;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
      Row row(columns);
      for (size_t i = 0; i < columns; ++i) {
        const int col = static_cast<int>(i);
        Value& v = row[i];
        v.null = sqlite3_column_type(s, col) == SQLITE_NULL;
        if (v.null) continue;
        if (t.columns[i].type == Type::kInt || t.columns[i].type == Type::kBool) {
          v.i = sqlite3_column_int64(s, col);
        } else {
          const void* p = t.columns[i].type == Type::kText
                              ? static_cast<const void*>(sqlite3_column_text(s, col))
                              : sqlite3_column_blob(s, col);
          const auto n = static_cast<size_t>(sqlite3_column_bytes(s, col));
          if (p != nullptr) v.s.assign(static_cast<const char*>(p), n);
        }
      }
      rows.push_back(std::move(row));
    }
    sqlite3_finalize(s);
    if (rc != SQLITE_DONE) return Err(std::string("read ") + t.name);
    return rows;
  }

  sqlite3* db_;
};

// ---- PostgreSQL

class PostgresTables final : public TableIo {
 public:
  explicit PostgresTables(std::unique_ptr<pg::Conn> conn) : conn_(std::move(conn)) {}

  Status BeginSnapshot() override {
    auto r = conn_->Exec("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY");
    if (!r.ok()) return r.error();
    return Ok{};
  }

  Result<std::vector<Row>> Page(const Table& t, const std::optional<Row>& after, size_t limit) override {
    std::string sql = "SELECT " +
                      Join(t, t.columns.size(), [](const Column& c, size_t) { return std::string(c.name); }) +
                      " FROM " + t.name;
    pg::Params p;
    if (after) {
      sql += " WHERE (" + Key(t) + ") > (" +
             Join(t, t.key_columns,
                  [](const Column& c, size_t i) { return "$" + std::to_string(i + 1) + Cast(c); }) +
             ")";
      for (size_t i = 0; i < t.key_columns; ++i) Add(p, t.columns[i], (*after)[i]);
    }
    sql += " ORDER BY " + Key(t) + " LIMIT " + std::to_string(limit);
    return Select(t, sql, p, t.columns.size());
  }

  Result<std::optional<Row>> LastKey(const Table& t) override {
    const std::string desc =
        Join(t, t.key_columns, [](const Column& c, size_t) { return KeyExpr(c) + " DESC"; });
    auto rows = Select(
        t,
        "SELECT " + Join(t, t.key_columns, [](const Column& c, size_t) { return std::string(c.name); }) +
            " FROM " + t.name + " ORDER BY " + desc + " LIMIT 1",
        {}, t.key_columns);
    if (!rows.ok()) return rows.error();
    if (rows->empty()) return std::optional<Row>();
    return std::optional<Row>(std::move(rows->front()));
  }

  Status Insert(const Table& t, const std::vector<Row>& rows) override {
    // One statement per page: every column as an array, unnest()ed back into rows.
    const std::string sql =
        std::string("INSERT INTO ") + t.name + "(" +
        Join(t, t.columns.size(), [](const Column& c, size_t) { return std::string(c.name); }) +
        ") SELECT * FROM unnest(" +
        Join(t, t.columns.size(),
             [](const Column& c, size_t i) { return "$" + std::to_string(i + 1) + Cast(c) + "[]"; }) +
        ") ON CONFLICT DO NOTHING";
    pg::Params p;
    for (size_t c = 0; c < t.columns.size(); ++c) {
      switch (t.columns[c].type) {
        case Type::kBytes: {
          std::vector<std::optional<std::span<const uint8_t>>> items;
          for (const Row& r : rows) {
            if (r[c].null) {
              items.emplace_back(std::nullopt);
            } else {
              items.emplace_back(std::span(reinterpret_cast<const uint8_t*>(r[c].s.data()), r[c].s.size()));
            }
          }
          p.ByteaArray(items);
          break;
        }
        case Type::kInt: {
          // Nullable columns (a quota's limit, a removed membership's role) keep their NULLs.
          std::vector<std::optional<int64_t>> items;
          for (const Row& r : rows)
            items.push_back(r[c].null ? std::nullopt : std::optional<int64_t>(r[c].i));
          p.Int8Array(std::span<const std::optional<int64_t>>(items));
          break;
        }
        case Type::kBool: {
          std::vector<bool> items;
          for (const Row& r : rows) items.push_back(r[c].i != 0);
          p.BoolArray(items);
          break;
        }
        case Type::kText: {
          std::vector<std::string> items;
          for (const Row& r : rows) items.push_back(r[c].s);
          p.TextArray(items);
          break;
        }
      }
    }
    auto r = conn_->Query(sql, p);
    if (!r.ok()) return r.error();
    return Ok{};
  }

  Status RecomputeCounters() override {
    auto r = conn_->Exec(
        "BEGIN; "
        "UPDATE counters SET xorbs = 0, files = 0, chunks = 0, stored_bytes = 0, shards = 0, unpacked_bytes "
        "= 0, "
        "file_bytes = 0 WHERE slot <> 0; "
        "UPDATE counters SET xorbs = (SELECT count(*) FROM xorbs), files = (SELECT count(*) FROM files), "
        "chunks = (SELECT COALESCE(sum(chunk_count), 0) FROM xorbs), "
        "stored_bytes = (SELECT COALESCE(sum(region_size), 0) FROM xorbs) + "
        "(SELECT COALESCE(sum(size), 0) FROM shards), shards = (SELECT count(*) FROM shards), "
        "unpacked_bytes = (SELECT COALESCE(sum(unpacked_size), 0) FROM xorbs), "
        "file_bytes = (SELECT COALESCE(sum(size), 0) FROM files) WHERE slot = 0; "
        "DELETE FROM scope_totals; " +
        std::string(kFillScopeTotals) +
        "; "
        // Copied repositories keep their ids: new ones must come after them.
        "SELECT setval(pg_get_serial_sequence('repos', 'id'), GREATEST((SELECT max(id) FROM repos), 1)); "
        "SELECT setval(pg_get_serial_sequence('accounts', 'id'), GREATEST((SELECT max(id) FROM accounts), "
        "1)); "
        "SELECT setval(pg_get_serial_sequence('audit_events', 'id'), "
        "GREATEST((SELECT max(id) FROM audit_events), 1)); " +
        std::string(kPeopleGenerationAfterCopy) +
        "; "
        "COMMIT");
    if (!r.ok()) return r.error();
    return Ok{};
  }

 private:
  // Text keys compare byte by byte, as in SQLite, whatever the database's collation.
  static std::string KeyExpr(const Column& c) {
    return c.type == Type::kText ? std::string(c.name) + " COLLATE \"C\"" : std::string(c.name);
  }
  static std::string Key(const Table& t) {
    return Join(t, t.key_columns, [](const Column& c, size_t) { return KeyExpr(c); });
  }
  static const char* Cast(const Column& c) {
    switch (c.type) {
      case Type::kBytes:
        return "::bytea";
      case Type::kInt:
        return "::int8";
      case Type::kBool:
        return "::bool";
      case Type::kText:
        return "::text";
    }
    return "";
  }
  static void Add(pg::Params& p, const Column& c, const Value& v) {
    if (v.null) {
      p.Null();
    } else if (c.type == Type::kInt) {
      p.Int8(v.i);
    } else if (c.type == Type::kBool) {
      p.Bool(v.i != 0);
    } else if (c.type == Type::kText) {
      p.Text(v.s);
    } else {
      p.Bytea(std::span(reinterpret_cast<const uint8_t*>(v.s.data()), v.s.size()));
    }
  }

  Result<std::vector<Row>> Select(const Table& t, const std::string& sql, const pg::Params& p,
                                  size_t columns) {
    auto rows = conn_->Query(sql, p);
    if (!rows.ok()) return rows.error();
    std::vector<Row> out;
    out.reserve(static_cast<size_t>(rows->size()));
    for (int r = 0; r < rows->size(); ++r) {
      Row row(columns);
      for (size_t i = 0; i < columns; ++i) {
        const int col = static_cast<int>(i);
        Value& v = row[i];
        v.null = rows->IsNull(r, col);
        if (v.null) continue;
        switch (t.columns[i].type) {
          case Type::kInt:
            v.i = rows->Int8(r, col);
            break;
          case Type::kBool:
            v.i = rows->Bool(r, col) ? 1 : 0;
            break;
          case Type::kBytes:
          case Type::kText: {
            const auto b = rows->Bytes(r, col);
            v.s.assign(reinterpret_cast<const char*>(b.data()), b.size());
            break;
          }
        }
      }
      out.push_back(std::move(row));
    }
    return out;
  }

  std::unique_ptr<pg::Conn> conn_;
};

Result<std::unique_ptr<TableIo>> OpenTables(std::string_view url, bool read_only = false) {
  auto where = ParseIndexUrl(url);
  if (!where.ok()) return where.error();
  if (where->kind == IndexLocation::Kind::kSqlite) {
    auto t = SqliteTables::Open(where->target, read_only);
    if (!t.ok()) return t.error();
    return std::unique_ptr<TableIo>(std::move(*t));
  }
  if (read_only) return Malformed("index copy: only a SQLite source can be read read-only");
  auto conn = pg::Conn::Connect(where->target);
  if (!conn.ok()) return conn.error();
  return std::unique_ptr<TableIo>(std::make_unique<PostgresTables>(std::move(*conn)));
}

// Canonical bytes of one row for the digest: per value a tag (0 NULL, 1 integer, 2 bytes), then the integer,
// or the length and the bytes.
void HashRow(blake3_hasher& h, const Table& t, const Row& row) {
  for (size_t i = 0; i < row.size(); ++i) {
    const Value& v = row[i];
    const bool number = t.columns[i].type == Type::kInt || t.columns[i].type == Type::kBool;
    const uint8_t tag = v.null ? 0 : (number ? 1 : 2);
    const uint64_t n = v.null ? 0 : (number ? static_cast<uint64_t>(v.i) : v.s.size());
    blake3_hasher_update(&h, &tag, 1);
    blake3_hasher_update(&h, &n, sizeof n);
    if (tag == 2) blake3_hasher_update(&h, v.s.data(), v.s.size());
  }
}

// Row count and digest of a whole table, in key order.
Result<std::pair<uint64_t, std::string>> Digest(TableIo& io, const Table& t) {
  blake3_hasher h;
  blake3_hasher_init(&h);
  uint64_t rows = 0;
  std::optional<Row> after;
  for (;;) {
    auto page = io.Page(t, after, t.page_rows);
    if (!page.ok()) return page.error();
    if (page->empty()) break;
    for (const Row& r : *page) HashRow(h, t, r);
    rows += page->size();
    after = Row(page->back().begin(), page->back().begin() + static_cast<std::ptrdiff_t>(t.key_columns));
  }
  xet::Hash out;
  blake3_hasher_finalize(&h, out.bytes.data(), out.bytes.size());
  return std::pair{rows, out.hex()};
}

}  // namespace

int SchemaVersion() {
  return SqliteIndex::kSchemaVersion;
}

Result<int> SqliteSchemaVersion(const std::string& path) {
  auto t = SqliteTables::Open(path, /*read_only=*/true);
  if (!t.ok()) return t.error();
  return (*t)->UserVersion();
}

Result<CopyReport> CopyIndex(std::string_view from, std::string_view to,
                             const std::function<void(const TableCopyReport&)>& progress) {
  return CopyIndex(from, to, CopyIndexOptions{.progress = progress});
}

Result<CopyReport> CopyIndex(std::string_view from, std::string_view to, const CopyIndexOptions& options) {
  const auto& progress = options.progress;
  if (from == to) return Malformed("index copy: --from and --to are the same index");
  // Open both as indexes first: that migrates them to this cairn's schema (or refuses a newer one).
  for (std::string_view url : {from, to}) {
    if (url == from && options.read_only_source) continue;
    auto ix = OpenIndex(url);
    if (!ix.ok()) return Error{ix.error().code, pg::RedactedUri(url) + ": " + ix.error().message};
  }
  auto src = OpenTables(from, options.read_only_source);
  if (!src.ok()) return src.error();
  if (options.read_only_source) {
    auto version = static_cast<SqliteTables&>(**src).UserVersion();
    if (!version.ok()) return version.error();
    if (*version != SqliteIndex::kSchemaVersion) {
      return Malformed("index copy: " + std::string(from) + " is at schema version " +
                       std::to_string(*version) + ", this cairn's is " +
                       std::to_string(SqliteIndex::kSchemaVersion));
    }
  }
  if (options.snapshot) {
    if (auto st = (*src)->BeginSnapshot(); !st.ok()) return st.error();
  }
  auto dst = OpenTables(to);
  if (!dst.ok()) return dst.error();

  CopyReport report;
  for (const Table& t : Tables()) {
    TableCopyReport tr{.table = t.name, .rows = 0, .copied = 0, .digest = {}};
    // Resume after the last key the destination has: pages commit in key order.
    auto last = (*dst)->LastKey(t);
    if (!last.ok()) return last.error();
    std::optional<Row> after = std::move(*last);
    for (;;) {
      auto page = (*src)->Page(t, after, t.page_rows);
      if (!page.ok())
        return Error{page.error().code, std::string("read ") + t.name + ": " + page.error().message};
      if (page->empty()) break;
      if (auto st = (*dst)->Insert(t, *page); !st.ok()) {
        return Error{st.error().code, std::string("write ") + t.name + ": " + st.error().message};
      }
      tr.copied += page->size();
      after = Row(page->back().begin(), page->back().begin() + static_cast<std::ptrdiff_t>(t.key_columns));
      if (progress) progress(tr);
    }
    report.tables.push_back(std::move(tr));
  }
  if (auto st = (*dst)->RecomputeCounters(); !st.ok()) return st.error();

  // Verify: the same rows on both sides.
  for (auto& tr : report.tables) {
    const Table& t =
        *std::find_if(Tables().begin(), Tables().end(), [&](const Table& x) { return tr.table == x.name; });
    auto a = Digest(**src, t);
    if (!a.ok()) return a.error();
    auto b = Digest(**dst, t);
    if (!b.ok()) return b.error();
    if (*a != *b) {
      return Inconsistent("index copy: table " + tr.table +
                          " differs after the copy: " + std::to_string(a->first) + " rows in the source, " +
                          std::to_string(b->first) + " in the destination (digests " +
                          a->second.substr(0, 16) + "…, " + b->second.substr(0, 16) +
                          "…); the destination must be empty or hold an earlier "
                          "run of this same copy, and nothing may write to either meanwhile");
    }
    tr.rows = a->first;
    tr.digest = a->second;
  }
  return report;
}

}  // namespace cairn::index
