// Copying a whole index from one database to another (`cairn index copy`): SQLite to PostgreSQL when a
// one-box deployment grows into several nodes, or back.
//
// Both indexes are opened first (migrated to this cairn's schema; one newer than it is refused). Then every
// table is copied row by row in primary-key order, in pages that each commit on their own, parents before
// children (xorbs, shards, files, then the rows that refer to them, then the secrets). An interrupted copy is
// resumed by running it again: the destination holds a prefix of each table in key order, so each table
// continues after the last key the destination has. Afterwards the destination's totals are recomputed from
// its rows, and the copy is verified table by table: the row counts and a BLAKE3 digest of every row, in key
// order, read back from both sides, must be equal.
//
// The destination must hold nothing but this copy (a fresh database, or an earlier run of the same copy), and
// nothing may write to either index meanwhile (stop the servers), unless the source is read as a snapshot
// (CopyIndexOptions). Verification fails otherwise.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"

namespace cairn::index {

struct TableCopyReport {
  std::string table;
  uint64_t rows = 0;    // in the source, and (verified) in the destination
  uint64_t copied = 0;  // by this run (0 for a table a previous run completed)
  std::string digest;   // BLAKE3 of the rows in key order, hex
};

struct CopyReport {
  std::vector<TableCopyReport> tables;
};

// What a copy knows of the schema: each table it copies with its columns (the primary key first), and the
// tables it recomputes from those rows instead of copying (counters). Together they must be exactly the
// tables and columns both backends create (IndexTest.TheCopysTablesAreEachBackendsLiveSchema checks the live
// schemas against this list, so the SQLite DDL, the PostgreSQL DDL and the copy cannot drift apart).
struct SchemaTable {
  std::string name;
  std::vector<std::string> columns;  // empty: laid out by each backend its own way, only the table is checked
  bool copied = true;                // false: recomputed from the copied rows (or, leases, not carried)
};
std::vector<SchemaTable> SchemaTables();

struct CopyIndexOptions {
  // Reads the whole source, the verification included, inside one read transaction (SQLite: on its
  // write-ahead log; PostgreSQL: REPEATABLE READ, READ ONLY), so that the copy is the index at one moment
  // while servers go on writing to it (`cairn backup`). The destination must then be empty.
  bool snapshot = false;
  // Opens the source, a SQLite file at this cairn's schema version, read-only and never migrates it (a
  // backup's snapshot, which `cairn backup --verify` checks byte for byte); another version is refused.
  bool read_only_source = false;
  std::function<void(const TableCopyReport&)> progress;  // after each page; may be empty
};

// Copies `from` into `to` (index URLs, see open_index.h). `progress` is called after each page.
Result<CopyReport> CopyIndex(std::string_view from, std::string_view to,
                             const std::function<void(const TableCopyReport&)>& progress = {});
Result<CopyReport> CopyIndex(std::string_view from, std::string_view to, const CopyIndexOptions& options);

// This cairn's schema version (both backends').
int SchemaVersion();

// The schema version of the SQLite index at `path`, read without opening it as an index (nothing migrated).
Result<int> SqliteSchemaVersion(const std::string& path);

}  // namespace cairn::index
