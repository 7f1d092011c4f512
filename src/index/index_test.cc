// The Index contract, one suite run against every backend (SQLite in a temporary file, PostgreSQL in a
// private server started by the suite): roundtrips, idempotency, scopes, dedup, persistence and migrations,
// shared secrets, group commit under concurrency (including a failing request inside a batch), and two
// index instances on one database registering the same records at once (two nodes).
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <numeric>
#include <random>
#include <span>
#include <thread>

#include "common/clock.h"
#include "index/failures.h"
#include "index/index_copy.h"
#include "index/open_index.h"
#include "index/postgres/pg.h"
#include "index/postgres/postgres_index.h"
#include "index/sqlite/sqlite_index.h"
#include "index/testing/backend_suite.h"
#include "index/testing/postgres_cluster.h"
#include "index/testing/test_support.h"

namespace cairn::index {
namespace {

namespace fs = std::filesystem;

using fixtures::Backend;
using fixtures::BackendName;
using fixtures::BackendTest;
using fixtures::Cluster;
using fixtures::PgExec;
using fixtures::RandomHash;
using fixtures::Refused;

xet::XorbLayout MakeLayout(std::mt19937_64& rng, size_t chunks) {
  xet::XorbLayout layout;
  uint32_t end = 0;
  for (size_t i = 0; i < chunks; ++i) {
    const auto unpacked = static_cast<uint32_t>(1000 + i);
    end += unpacked / 2 + 8;
    layout.chunks.push_back({RandomHash(rng), unpacked, end});
  }
  return layout;
}

// A file of one term per entry of `ranges` over `xorb`, with its terms' byte ranges (as the service commits).
FileCommit MakeFile(const Hash& hash, const XorbHash& xorb, const xet::XorbLayout& layout,
                    const std::vector<std::pair<uint32_t, uint32_t>>& ranges, std::optional<Hash> sha = {}) {
  xet::FileRecord rec;
  rec.hash = hash;
  rec.sha256 = sha;
  for (auto [b, e] : ranges) {
    uint32_t bytes = 0;
    for (uint32_t i = b; i < e; ++i) bytes += layout.chunks[i].unpacked_size;
    rec.terms.push_back(
        {.xorb = xorb, .xorb_flags = 0, .unpacked_bytes = bytes, .chunk_start = b, .chunk_end = e});
  }
  auto made = MakeFileCommit(rec, [&](const XorbHash& h) { return h == xorb ? &layout : nullptr; });
  EXPECT_TRUE(made.ok());
  return made.ok() ? std::move(*made) : MakeFileCommit(rec);
}

constexpr int kSchemaVersion = SqliteIndex::kSchemaVersion;
static_assert(PostgresIndex::kSchemaVersion == kSchemaVersion, "version N means the same on both backends");

class IndexTest : public BackendTest {
 protected:
  // Registers a xorb of `chunks` chunks and returns it.
  std::pair<XorbHash, xet::XorbLayout> AddXorb(size_t chunks = 8) {
    const XorbHash h = RandomHash(rng_);
    auto layout = MakeLayout(rng_, chunks);
    auto put = index_->PutXorb(h, layout);
    EXPECT_TRUE(put.ok() && *put);
    return {h, layout};
  }

  // Registers `files` for `scope` in a shard of their own (no dedup entries, no xorbs listed).
  Status CommitFiles(std::vector<FileCommit> files, const std::string& scope) {
    auto out = index_->CommitShard({.shard = RandomHash(rng_),
                                    .shard_size = 1,
                                    .files = std::move(files),
                                    .dedup = {},
                                    .scope = scope,
                                    .xorbs = {}});
    if (!out.ok()) return out.error();
    return Ok{};
  }

  // Runs SQL on the index's database behind its back (the index should be closed): the SQLite text or the
  // PostgreSQL text, whichever backend this is.
  void ExecRaw(const std::string& sqlite_sql, const std::string& pg_sql) {
    if (GetParam() == Backend::kSqlite) {
      sqlite3* db = nullptr;
      ASSERT_EQ(sqlite3_open((dir_ / "index.db").c_str(), &db), SQLITE_OK);
      char* err = nullptr;
      const int rc = sqlite3_exec(db, sqlite_sql.c_str(), nullptr, nullptr, &err);
      const std::string msg = err != nullptr ? err : "";
      sqlite3_free(err);
      sqlite3_close(db);
      ASSERT_EQ(rc, SQLITE_OK) << msg;
    } else {
      PgExec("SET search_path TO " + schema_ + "; " + pg_sql);
    }
  }

  // Takes the database back to schema `version` as far as its version number goes (and what schemas 6 to 16
  // added: indexes, tables, the columns and rows that migrations 7 and 9 fill from the rows, and schema 11's
  // functions).
  void SetSchemaVersion(int version) {
    if (version < 23) {
      const std::string drop =
          "DROP TABLE identities; DROP TABLE device_grants; DROP TABLE sessions; DROP TABLE passwords";
      ExecRaw(drop, drop);
    }
    if (version >= 20 && version < 22) {
      // Schema 20's log, its rows kept (AUTOINCREMENT, an index by actor).
      ExecRaw(
          "CREATE TABLE audit_events_20(id INTEGER PRIMARY KEY AUTOINCREMENT, at INTEGER NOT NULL, actor "
          "TEXT NOT "
          "NULL, token_id TEXT NOT NULL, client TEXT NOT NULL, action TEXT NOT NULL, ns TEXT NOT NULL, "
          "target TEXT "
          "NOT NULL, detail TEXT NOT NULL); INSERT INTO audit_events_20 SELECT * FROM audit_events; DROP "
          "TABLE "
          "audit_events; ALTER TABLE audit_events_20 RENAME TO audit_events; CREATE INDEX audit_events_at ON "
          "audit_events(at); CREATE INDEX audit_events_actor ON audit_events(actor, id); CREATE INDEX "
          "audit_events_ns ON audit_events(ns, id)",
          "CREATE INDEX audit_events_actor ON audit_events(actor, id)");
    }
    if (version < 21) ExecRaw("DROP TABLE publishers", "DROP TABLE publishers");
    if (version < 20) ExecRaw("DROP TABLE audit_events", "DROP TABLE audit_events");
    if (version < 19) {
      const std::string drop =
          "DROP TABLE tokens; DROP TABLE members; DROP TABLE accounts; DROP TABLE people_generation";
      ExecRaw(drop, drop);
    }
    if (version < 18) ExecRaw("DROP TABLE mirror_reads", "DROP TABLE mirror_reads");
    if (version < 17) ExecRaw("DROP TABLE leases", "DROP TABLE leases");
    if (version < 16) {
      ExecRaw("DROP TABLE compacted_xorbs",
              "DROP TABLE compacted_xorbs; DROP FUNCTION cairn_refuse_changed(int8)");
    }
    if (version < 15)
      ExecRaw("DROP TABLE quotas", "DROP TABLE quotas; DROP FUNCTION cairn_refuse_quota(int8)");
    if (version < 14) ExecRaw("DROP INDEX revocations_cleared", "DROP INDEX revocations_cleared");
    if (version < 13) ExecRaw("DROP TABLE revocations", "DROP TABLE revocations");
    if (version < 12) {
      ExecRaw("DROP TABLE gc_repo_quarantine; DROP TABLE shard_scopes",
              "DROP TABLE gc_repo_quarantine; DROP TABLE shard_scopes");
    }
    if (version < 11) {
      const std::string drop =
          "DROP TABLE gc_quarantine; DROP INDEX IF EXISTS dedup_by_xorb; DROP INDEX IF EXISTS "
          "shard_xorbs_by_xorb; DROP INDEX IF EXISTS bucket_files_by_file";
      ExecRaw(drop,
              drop + "; DROP FUNCTION cairn_refuse_claimed(int8); DROP FUNCTION cairn_refuse_missing(int8)");
    }
    if (version == 8 || version == 9) ExecRaw("DROP INDEX repos_by_scope", "DROP INDEX repos_by_scope");
    if (version == 8) {
      const std::string drop = "DROP INDEX repos_by_read_scope; ALTER TABLE repos DROP COLUMN read_scope";
      ExecRaw(drop, drop);
    }
    if (version < 8) {
      const std::string drop =
          "DROP TABLE repos; DROP TABLE repo_objects; DROP TABLE repo_refs; DROP TABLE bucket_files";
      ExecRaw(drop, drop);
    }
    if (version < 7) ExecRaw("DROP TABLE scope_totals", "DROP TABLE scope_totals");
    if (version < 6)
      ExecRaw("DROP INDEX file_scopes_by_scope", "DROP INDEX file_scopes_by_scope");  // added by 6
    ExecRaw("PRAGMA user_version = " + std::to_string(version),
            "UPDATE cairn_schema SET version = " + std::to_string(version));
  }

  // The first column of every row `sqlite_sql` (or `pg_sql`) gives, read behind the index's back.
  std::vector<std::string> Strings(const std::string& sqlite_sql, const std::string& pg_sql) {
    std::vector<std::string> out;
    if (GetParam() == Backend::kSqlite) {
      sqlite3* db = nullptr;
      EXPECT_EQ(sqlite3_open((dir_ / "index.db").c_str(), &db), SQLITE_OK);
      sqlite3_stmt* st = nullptr;
      EXPECT_EQ(sqlite3_prepare_v2(db, sqlite_sql.c_str(), -1, &st, nullptr), SQLITE_OK)
          << sqlite3_errmsg(db);
      while (sqlite3_step(st) == SQLITE_ROW)
        out.emplace_back(reinterpret_cast<const char*>(sqlite3_column_text(st, 0)));
      sqlite3_finalize(st);
      sqlite3_close(db);
      return out;
    }
    auto c = pg::Conn::Connect(url_);
    EXPECT_TRUE(c.ok());
    auto r = (*c)->Exec(pg_sql);
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
    if (!r.ok()) return out;
    for (int i = 0; i < r->size(); ++i) out.emplace_back(r->Text(i, 0));
    return out;
  }

  int64_t SchemaVersion() {
    if (GetParam() == Backend::kSqlite) {
      sqlite3* db = nullptr;
      EXPECT_EQ(sqlite3_open((dir_ / "index.db").c_str(), &db), SQLITE_OK);
      sqlite3_stmt* s = nullptr;
      EXPECT_EQ(sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &s, nullptr), SQLITE_OK);
      EXPECT_EQ(sqlite3_step(s), SQLITE_ROW);
      const int64_t v = sqlite3_column_int64(s, 0);
      sqlite3_finalize(s);
      sqlite3_close(db);
      return v;
    }
    auto c = pg::Conn::Connect(url_);
    EXPECT_TRUE(c.ok());
    auto r = (*c)->Exec("SELECT version FROM cairn_schema");
    EXPECT_TRUE(r.ok() && r->size() == 1);
    return std::stoll(std::string(r->Text(0, 0)));
  }
};

TEST_P(IndexTest, SeveralXorbsInOneRead) {
  Open();
  std::vector<XorbHash> stored;
  for (uint32_t n : {3u, 5u, 7u}) {
    stored.push_back(RandomHash(rng_));
    ASSERT_TRUE(index_->PutXorb(stored.back(), MakeLayout(rng_, n)).ok());
  }
  ASSERT_TRUE(index_->GetXorb(stored[1]).ok());  // one of them cached already, the others not
  const XorbHash unknown = RandomHash(rng_);
  const std::vector<XorbHash> asked = {stored[2], unknown, stored[0], stored[1], stored[2]};
  auto got = index_->GetXorbs(asked);
  ASSERT_TRUE(got.ok()) << got.error().message;
  ASSERT_EQ(got->size(), asked.size());
  EXPECT_EQ((*got)[0]->chunk_count, 7u);
  EXPECT_EQ((*got)[1], nullptr);
  EXPECT_EQ((*got)[2]->chunk_count, 3u);
  EXPECT_EQ((*got)[3]->chunk_count, 5u);
  EXPECT_EQ((*got)[4]->hash, stored[2]);
  EXPECT_TRUE(index_->GetXorbs({})->empty());
  const std::vector<XorbHash> too_many(Index::kMaxXorbsPerRead + 1, stored[0]);
  EXPECT_EQ(index_->GetXorbs(too_many).error().code, ErrorCode::kMalformed);
}

// OpenIndex puts every backend behind CachedIndex: a record read once is served from memory after that (the
// same object), a miss or a failure is never remembered, and with no cache every read reaches the backend.
TEST_P(IndexTest, RecordsAreCachedAboveTheBackend) {
  Open();
  const XorbHash later = RandomHash(rng_);
  const auto later_layout = MakeLayout(rng_, 4);
  EXPECT_EQ(index_->GetXorb(later).error().code, ErrorCode::kNotFound);
  EXPECT_FALSE(*index_->HasXorb(later));
  ASSERT_TRUE(index_->PutXorb(later, later_layout).ok());
  auto first = index_->GetXorb(later);
  ASSERT_TRUE(first.ok()) << "a miss was remembered";
  EXPECT_TRUE(*index_->HasXorb(later));
  EXPECT_EQ(index_->GetXorb(later)->get(), first->get());
  auto [other, other_layout] = AddXorb(2);
  auto many = index_->GetXorbs(std::vector<XorbHash>{other, later, other});
  ASSERT_TRUE(many.ok());
  EXPECT_EQ((*many)[1].get(), first->get());
  EXPECT_EQ((*many)[0].get(), (*many)[2].get());
  EXPECT_EQ(index_->GetXorb(other)->get(), (*many)[0].get()) << "GetXorbs fills the cache too";

  ShardCommit c{.shard = RandomHash(rng_),
                .shard_size = 1,
                .files = {},
                .dedup = {},
                .scope = "s",
                .xorbs = {.listed = {later}, .referenced = {}}};
  ASSERT_TRUE(index_->CommitShard(c).ok());
  auto xs = index_->GetShardXorbs(c.shard);
  ASSERT_TRUE(xs.ok());
  EXPECT_EQ(index_->GetShardXorbs(c.shard)->get(), xs->get());

  OpenIndexOptions none;
  none.cache_bytes = 0;
  Open(none);
  auto a = index_->GetXorb(later);
  auto b = index_->GetXorb(later);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(a->get(), b->get()) << "no cache: each read is the backend's own";
  EXPECT_EQ((*a)->packed, (*b)->packed);
  EXPECT_EQ((*index_->GetShardXorbs(c.shard))->listed, std::vector<XorbHash>{later});
}

TEST_P(IndexTest, XorbRoundtripAndIdempotency) {
  Open();
  const XorbHash h = RandomHash(rng_);
  const auto layout = MakeLayout(rng_, 100);
  auto put = index_->PutXorb(h, layout);
  ASSERT_TRUE(put.ok()) << put.error().message;
  EXPECT_TRUE(*put);
  EXPECT_FALSE(*index_->PutXorb(h, layout));  // idempotent: first write wins
  auto got = index_->GetXorb(h);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ((*got)->chunk_count, 100u);
  EXPECT_EQ((*got)->region_size, layout.chunk_region_size());
  EXPECT_EQ((*got)->unpacked_size, layout.unpacked_size());
  EXPECT_GT((*got)->stored_at, 0);
  const auto back = (*got)->ToLayout();
  ASSERT_EQ(back.chunks.size(), layout.chunks.size());
  for (size_t i = 0; i < back.chunks.size(); ++i) {
    EXPECT_EQ(back.chunks[i].hash, layout.chunks[i].hash);
    EXPECT_EQ(back.chunks[i].unpacked_size, layout.chunks[i].unpacked_size);
    EXPECT_EQ(back.chunks[i].end_offset, layout.chunks[i].end_offset);
  }
  EXPECT_EQ(index_->GetXorb(h)->get(), got->get());  // served from the cache
  EXPECT_TRUE(*index_->HasXorb(h));
  const Hash unknown = RandomHash(rng_);
  EXPECT_FALSE(*index_->HasXorb(unknown));
  EXPECT_EQ(index_->GetXorb(unknown).error().code, ErrorCode::kNotFound);
  EXPECT_TRUE(Refused(index_->GetXorb(unknown).error(), XorbNotIndexed(unknown)));
  auto stats = index_->Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->xorbs, 1u);
  EXPECT_EQ(stats->chunks, 100u);
  EXPECT_EQ(stats->stored_bytes, layout.chunk_region_size());
}

TEST_P(IndexTest, PackedTermsFindByteOffsets) {
  Open();
  auto [xorb, layout] = AddXorb(10);
  const FileCommit f = MakeFile(RandomHash(rng_), xorb, layout, {{0, 3}, {3, 4}, {4, 10}});
  FileEntry e{.hash = f.hash,
              .packed_terms = f.packed_terms,
              .term_count = f.term_count,
              .size = f.size,
              .sha256 = {},
              .packed_ranges = f.packed_ranges};
  const uint64_t end0 = e.term(0).end_offset, end1 = e.term(1).end_offset;
  EXPECT_EQ(end0, 1000u + 1001 + 1002);
  EXPECT_EQ(e.term(1).begin_offset(), end0);
  EXPECT_EQ(e.term(2).end_offset, e.size);
  EXPECT_EQ(e.FindTerm(0), 0u);
  EXPECT_EQ(e.FindTerm(end0 - 1), 0u);
  EXPECT_EQ(e.FindTerm(end0), 1u);
  EXPECT_EQ(e.FindTerm(end1 - 1), 1u);
  EXPECT_EQ(e.FindTerm(end1), 2u);
  EXPECT_EQ(e.FindTerm(e.size - 1), 2u);
  EXPECT_EQ(e.FindTerm(e.size), 3u);
  EXPECT_EQ(e.term(2).chunk_start, 4u);
  EXPECT_EQ(e.term(2).chunk_end, 10u);
  EXPECT_EQ(e.term(2).xorb, xorb);
  // Each term's bytes in its xorb, from the layout: chunks [4, 10) start where chunk 3 ends.
  ASSERT_TRUE(e.has_ranges());
  EXPECT_EQ(e.range(0).start, 0u);
  EXPECT_EQ(e.range(0).end, layout.chunks[2].end_offset);
  EXPECT_EQ(e.range(2).start, layout.chunks[3].end_offset);
  EXPECT_EQ(e.range(2).end, layout.chunks[9].end_offset);
  // A term outside its xorb, or in a xorb without a layout, has no range to record.
  xet::FileRecord bad;
  bad.terms.push_back(
      {.xorb = xorb, .xorb_flags = 0, .unpacked_bytes = 1, .chunk_start = 9, .chunk_end = 11});
  const XorbHash known = xorb;  // structured bindings cannot be captured before C++20 as clang 14 reads it
  const xet::XorbLayout* known_layout = &layout;
  const auto lookup = [&](const XorbHash& h) { return h == known ? known_layout : nullptr; };
  EXPECT_EQ(MakeFileCommit(bad, lookup).error().code, ErrorCode::kInconsistent);
  bad.terms[0].xorb = RandomHash(rng_);
  EXPECT_EQ(MakeFileCommit(bad, lookup).error().code, ErrorCode::kUnknownReference);
}

// The three descriptions of the schema (SQLite's DDL, PostgreSQL's, the copy's table list) agree: every table
// and column a backend creates is one the copy carries or recomputes, and the other way round.
TEST_P(IndexTest, TheCopysTablesAreEachBackendsLiveSchema) {
  Open();
  index_.reset();
  std::vector<std::string> live = Strings(
      "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name",
      "SELECT table_name::text FROM information_schema.tables WHERE table_schema = current_schema() "
      "AND table_name <> 'cairn_schema' ORDER BY table_name");
  std::vector<std::string> described;
  for (const SchemaTable& t : SchemaTables()) described.push_back(t.name);
  std::sort(described.begin(), described.end());
  EXPECT_EQ(live, described);
  for (const SchemaTable& t : SchemaTables()) {
    if (t.columns.empty()) continue;
    SCOPED_TRACE(t.name);
    std::vector<std::string> columns = Strings(
        "SELECT name FROM pragma_table_info('" + t.name + "') ORDER BY name",
        "SELECT column_name::text FROM information_schema.columns WHERE table_schema = current_schema() AND "
        "table_name = '" +
            t.name + "' ORDER BY column_name");
    std::vector<std::string> want = t.columns;
    std::sort(want.begin(), want.end());
    EXPECT_EQ(columns, want);
  }
}

TEST_P(IndexTest, StoredTimesComeFromTheInjectedClock) {
  OpenIndexOptions options;
  options.clock = &clock_;
  Open(options);
  auto [xorb, layout] = AddXorb(4);
  clock_.Advance(3600);
  ShardCommit c{.shard = RandomHash(rng_),
                .shard_size = 10,
                .files = {MakeFile(RandomHash(rng_), xorb, layout, {{0, 4}})},
                .dedup = {},
                .scope = "org/model",
                .xorbs = {}};
  ASSERT_TRUE(index_->CommitShard(c).ok());
  clock_.Advance(60);
  ASSERT_TRUE(index_->AddSecret("clock-test", std::string(64, 'a')).ok());

  auto entry = index_->GetXorb(xorb);
  ASSERT_TRUE(entry.ok()) << entry.error().message;
  EXPECT_EQ((*entry)->stored_at, 1'900'000'000);
  auto shard = index_->GetShard(c.shard);
  ASSERT_TRUE(shard.ok() && shard->has_value());
  EXPECT_EQ((*shard)->registered_at, 1'900'003'600);
  auto secrets = index_->ListSecrets();
  ASSERT_TRUE(secrets.ok());
  const auto it =
      std::find_if(secrets->begin(), secrets->end(), [](const auto& s) { return s.name == "clock-test"; });
  ASSERT_NE(it, secrets->end());
  EXPECT_EQ(it->created_at, 1'900'003'660);
}

TEST_P(IndexTest, ShardCommitRoundtripScopesAndDedup) {
  Open();
  auto [xorb, layout] = AddXorb(16);
  const Hash sha = RandomHash(rng_);
  ShardCommit c{.shard = RandomHash(rng_),
                .shard_size = 4321,
                .files = {MakeFile(RandomHash(rng_), xorb, layout, {{0, 16}}, sha),
                          MakeFile(RandomHash(rng_), xorb, layout, {{2, 5}, {0, 1}})},
                .dedup = {{layout.chunks[0].hash, xorb}, {layout.chunks[7].hash, xorb}},
                .scope = "org/model",
                .xorbs = {}};
  auto out = index_->CommitShard(c);
  ASSERT_TRUE(out.ok()) << out.error().message;
  EXPECT_FALSE(out->already_existed);

  auto f = index_->GetFile(c.files[1].hash);
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_EQ((*f)->term_count, 2u);
  EXPECT_EQ((*f)->size, c.files[1].size);
  EXPECT_EQ((*f)->packed_terms, c.files[1].packed_terms);
  EXPECT_EQ((*f)->packed_ranges, c.files[1].packed_ranges);
  EXPECT_EQ((*f)->range(0).start, layout.chunks[1].end_offset);
  EXPECT_FALSE((*f)->sha256.has_value());
  EXPECT_EQ(*index_->GetFile(c.files[0].hash).value()->sha256, sha);
  EXPECT_EQ(index_->GetFile(RandomHash(rng_)).error().code, ErrorCode::kNotFound);

  EXPECT_TRUE(*index_->FileVisibleTo(c.files[0].hash, "org/model"));
  EXPECT_FALSE(*index_->FileVisibleTo(c.files[0].hash, "org/other"));
  auto visible = index_->GetVisibleFile(c.files[1].hash, "org/model");
  ASSERT_TRUE(visible.ok()) << visible.error().message;
  EXPECT_EQ((*visible)->packed_terms, c.files[1].packed_terms);
  EXPECT_EQ((*visible)->packed_ranges, c.files[1].packed_ranges);
  // Not visible to another scope, and answered as an unknown file is.
  EXPECT_EQ(index_->GetVisibleFile(c.files[1].hash, "org/other").error().code, ErrorCode::kNotFound);
  EXPECT_EQ(index_->GetVisibleFile(c.files[1].hash, "org/mode").error().code, ErrorCode::kNotFound);
  EXPECT_EQ(index_->GetVisibleFile(RandomHash(rng_), "org/model").error().code, ErrorCode::kNotFound);
  EXPECT_EQ(*index_->FileBySha256(sha, std::nullopt), c.files[0].hash);
  EXPECT_EQ(*index_->FileBySha256(sha, "org/model"), c.files[0].hash);
  EXPECT_FALSE(index_->FileBySha256(sha, "org/other")->has_value());
  EXPECT_FALSE(index_->FileBySha256(RandomHash(rng_), std::nullopt)->has_value());

  auto hits = index_->LookupDedup(layout.chunks[7].hash, "org/model");
  ASSERT_TRUE(hits.ok());
  ASSERT_EQ(hits->size(), 1u);
  EXPECT_EQ((*hits)[0].xorb, xorb);
  EXPECT_EQ((*hits)[0].shard, c.shard);
  EXPECT_TRUE(index_->LookupDedup(layout.chunks[7].hash, "org/other")->empty());
  EXPECT_EQ(index_->LookupDedup(layout.chunks[7].hash, std::nullopt)->size(), 1u);
  EXPECT_TRUE(index_->LookupDedup(layout.chunks[1].hash, std::nullopt)->empty());

  auto shard = index_->GetShard(c.shard);
  ASSERT_TRUE(shard.ok() && shard->has_value());
  EXPECT_EQ((*shard)->size, 4321u);
  EXPECT_FALSE(index_->GetShard(RandomHash(rng_))->has_value());

  // The same shard from another scope: no new records, but its files and dedup entries become that
  // scope's too.
  c.scope = "org/other";
  out = index_->CommitShard(c);
  ASSERT_TRUE(out.ok());
  EXPECT_TRUE(out->already_existed);
  EXPECT_TRUE(*index_->FileVisibleTo(c.files[0].hash, "org/other"));
  EXPECT_TRUE(index_->GetVisibleFile(c.files[0].hash, "org/other").ok());  // a scope added later
  EXPECT_EQ(index_->LookupDedup(layout.chunks[7].hash, "org/other")->size(), 1u);
  EXPECT_EQ(index_->LookupDedup(layout.chunks[7].hash, std::nullopt)->size(), 1u);  // distinct locations

  auto stats = index_->Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->files, 2u);
  EXPECT_EQ(stats->shards, 1u);
  EXPECT_EQ(stats->stored_bytes, layout.chunk_region_size() + 4321u);
  // Each distinct file counts once, however many scopes registered it.
  EXPECT_EQ(stats->file_bytes, c.files[0].size + c.files[1].size);
  EXPECT_EQ(stats->unpacked_bytes, layout.unpacked_size());
  EXPECT_DOUBLE_EQ(stats->dedup_ratio(),
                   static_cast<double>(stats->file_bytes) / static_cast<double>(layout.unpacked_size()));
}

TEST_P(IndexTest, RejectsRequestsItCannotStore) {
  Open();
  auto [xorb, layout] = AddXorb(4);
  ShardCommit c{.shard = RandomHash(rng_),
                .shard_size = 1,
                .files = {MakeFile(RandomHash(rng_), xorb, layout, {{0, 4}})},
                .dedup = {},
                .scope = "s",
                .xorbs = {}};
  c.files[0].size += 1;  // disagrees with the terms
  auto out = index_->CommitShard(c);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.error().code, ErrorCode::kMalformed);
  c.files[0].size -= 1;
  c.dedup.push_back({layout.chunks[0].hash, RandomHash(rng_)});  // a xorb the index does not know
  out = index_->CommitShard(c);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.error().code, ErrorCode::kInconsistent) << out.error().message;
  // All or nothing: neither the shard nor its file was registered.
  EXPECT_FALSE(index_->GetShard(c.shard)->has_value());
  EXPECT_EQ(index_->GetFile(c.files[0].hash).error().code, ErrorCode::kNotFound);
  EXPECT_EQ(index_->Stats()->files, 0u);
}

TEST_P(IndexTest, MigratesFreshDatabaseAndPersistsAcrossReopen) {
  Open();
  EXPECT_EQ(SchemaVersion(), kSchemaVersion);
  auto [xorb, layout] = AddXorb(3);
  const ShardCommit c{.shard = RandomHash(rng_),
                      .shard_size = 10,
                      .files = {MakeFile(RandomHash(rng_), xorb, layout, {{0, 3}})},
                      .dedup = {{layout.chunks[0].hash, xorb}},
                      .scope = "s",
                      .xorbs = {}};
  ASSERT_TRUE(index_->CommitShard(c).ok());
  Open();  // reopen: no migration runs again, everything is still there
  EXPECT_EQ(SchemaVersion(), kSchemaVersion);
  EXPECT_EQ(index_->GetXorb(xorb).value()->chunk_count, 3u);
  EXPECT_EQ(index_->GetFile(c.files[0].hash).value()->size, c.files[0].size);
  EXPECT_TRUE(*index_->FileVisibleTo(c.files[0].hash, "s"));
  EXPECT_EQ(index_->LookupDedup(layout.chunks[0].hash, "s")->size(), 1u);
  EXPECT_EQ(index_->Stats()->files, 1u);
}

// A database of schema 1 (no byte counters) gains them, filled from its records.
TEST_P(IndexTest, MigratesSchemaOneAndFillsTheByteCounters) {
  Open();
  auto [xorb, layout] = AddXorb(5);
  const ShardCommit c{.shard = RandomHash(rng_),
                      .shard_size = 10,
                      .files = {MakeFile(RandomHash(rng_), xorb, layout, {{0, 5}})},
                      .dedup = {},
                      .scope = "s",
                      .xorbs = {}};
  ASSERT_TRUE(index_->CommitShard(c).ok());
  index_.reset();
  ExecRaw(
      "ALTER TABLE counters DROP COLUMN unpacked_bytes; ALTER TABLE counters DROP COLUMN file_bytes; "
      "DROP TABLE shard_xorbs; DROP TABLE secrets; ALTER TABLE files DROP COLUMN ranges",
      "ALTER TABLE counters DROP COLUMN unpacked_bytes, DROP COLUMN file_bytes; "
      "DROP TABLE shard_xorbs; DROP TABLE secrets; ALTER TABLE files DROP COLUMN ranges");
  SetSchemaVersion(1);
  Open();
  EXPECT_EQ(SchemaVersion(), kSchemaVersion);
  auto stats = index_->Stats();
  ASSERT_TRUE(stats.ok()) << stats.error().message;
  EXPECT_EQ(stats->unpacked_bytes, layout.unpacked_size());
  EXPECT_EQ(stats->file_bytes, c.files[0].size);
  EXPECT_EQ(stats->files, 1u);
}

// A scope's files, in hash order and in pages; other scopes' files are not listed.
// Several files in one read: each where it is asked (repeats too), null for an unknown one, bounded.
TEST_P(IndexTest, SeveralFilesInOneRead) {
  Open();
  auto [xorb, layout] = AddXorb(6);
  const FileCommit a = MakeFile(RandomHash(rng_), xorb, layout, {{0, 3}}, RandomHash(rng_));
  const FileCommit b = MakeFile(RandomHash(rng_), xorb, layout, {{2, 6}});
  ASSERT_TRUE(CommitFiles({a, b}, "s").ok());
  const FileHash unknown = RandomHash(rng_);
  const std::vector<FileHash> asked = {b.hash, unknown, a.hash, b.hash};
  auto got = index_->GetFiles(asked);
  ASSERT_TRUE(got.ok()) << got.error().message;
  ASSERT_EQ(got->size(), 4u);
  ASSERT_TRUE((*got)[0] && (*got)[2] && (*got)[3]);
  EXPECT_EQ((*got)[1], nullptr);
  EXPECT_EQ((*got)[0]->hash, b.hash);
  EXPECT_EQ((*got)[0]->size, b.size);
  EXPECT_EQ((*got)[0]->packed_terms, b.packed_terms);
  EXPECT_EQ((*got)[2]->sha256, a.sha256);
  EXPECT_EQ((*got)[3]->hash, b.hash);
  EXPECT_EQ((*got)[2]->created_at, index_->GetFile(a.hash).value()->created_at);
  EXPECT_TRUE(index_->GetFiles({})->empty());
  const std::vector<FileHash> too_many(Index::kMaxFilesPerRead + 1, a.hash);
  EXPECT_EQ(index_->GetFiles(too_many).error().code, ErrorCode::kMalformed);
}

TEST_P(IndexTest, SharedFilesBecomeVisibleToAnotherScopeOnce) {
  Open();
  auto [xorb, layout] = AddXorb(4);
  const FileCommit f = MakeFile(RandomHash(rng_), xorb, layout, {{0, 3}}, RandomHash(rng_));
  ASSERT_TRUE(CommitFiles({f}, "hub:a").ok());
  EXPECT_FALSE(*index_->FileVisibleTo(f.hash, "hub:b"));
  ASSERT_TRUE(index_->ShareFile(f.hash, "hub:b").ok());
  ASSERT_TRUE(index_->ShareFile(f.hash, "hub:b").ok());  // again: no change
  EXPECT_TRUE(*index_->FileVisibleTo(f.hash, "hub:b"));
  EXPECT_TRUE(index_->FileBySha256(*f.sha256, "hub:b")->has_value());
  auto totals = index_->ScopeStats("hub:b");
  ASSERT_TRUE(totals.ok());
  EXPECT_EQ(totals->files, 1u);
  EXPECT_EQ(totals->bytes, f.size);
  EXPECT_EQ(index_->ShareFile(RandomHash(rng_), "hub:b").error().code, ErrorCode::kNotFound);
  EXPECT_TRUE(Refused(index_->ShareFile(RandomHash(rng_), "hub:b").error(), SharedFileNotIndexed()));
  EXPECT_EQ(index_->ScopeStats("hub:b")->files, 1u);
}

// Unregistering takes a file from one scope's view and totals, once; other scopes keep it, and so does the
// index (its record stays for a garbage collector to judge).
TEST_P(IndexTest, UnregisteringAFileTakesItFromOneScopeOnly) {
  Open();
  auto [xorb, layout] = AddXorb(8);
  const FileCommit gone = MakeFile(RandomHash(rng_), xorb, layout, {{0, 5}}, RandomHash(rng_));
  const FileCommit kept = MakeFile(RandomHash(rng_), xorb, layout, {{0, 3}});
  for (const char* scope : {"team/a", "team/b"}) {
    ASSERT_TRUE(CommitFiles({gone, kept}, scope).ok());
  }
  const auto totals = [&](const char* scope) {
    auto t = index_->ScopeStats(scope);
    EXPECT_TRUE(t.ok()) << t.error().message;
    return t.ok() ? std::pair{t->files, t->bytes} : std::pair<uint64_t, uint64_t>{};
  };
  ASSERT_EQ(totals("team/a"), std::pair(uint64_t{2}, gone.size + kept.size));

  auto removed = index_->UnregisterFile(gone.hash, "team/a");
  ASSERT_TRUE(removed.ok()) << removed.error().message;
  EXPECT_EQ(*removed, Unregistered::kRemoved);
  EXPECT_FALSE(*index_->FileVisibleTo(gone.hash, "team/a"));
  EXPECT_EQ(index_->GetVisibleFile(gone.hash, "team/a").error().code, ErrorCode::kNotFound);
  EXPECT_FALSE(index_->FileBySha256(*gone.sha256, "team/a")->has_value());
  auto listed = index_->ListFiles("team/a", std::nullopt, 10);
  ASSERT_TRUE(listed.ok()) << listed.error().message;
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].hash, kept.hash);
  EXPECT_EQ(totals("team/a"), std::pair(uint64_t{1}, kept.size));

  // Again (removed before), a file the scope never saw, an unknown file: nothing changes.
  EXPECT_EQ(*index_->UnregisterFile(gone.hash, "team/a"), Unregistered::kRemovedBefore);
  EXPECT_EQ(*index_->UnregisterFile(kept.hash, "team/c"), Unregistered::kNotVisible);
  EXPECT_EQ(*index_->UnregisterFile(RandomHash(rng_), "team/a"), Unregistered::kNotVisible);
  EXPECT_EQ(totals("team/a"), std::pair(uint64_t{1}, kept.size));
  EXPECT_EQ(totals("team/c"), std::pair(uint64_t{0}, uint64_t{0}));

  // The other scope still sees both; the record and the index's counts stay.
  EXPECT_TRUE(*index_->FileVisibleTo(gone.hash, "team/b"));
  EXPECT_EQ(index_->ListFiles("team/b", std::nullopt, 10)->size(), 2u);
  EXPECT_EQ(totals("team/b"), std::pair(uint64_t{2}, gone.size + kept.size));
  auto record = index_->GetFile(gone.hash);
  ASSERT_TRUE(record.ok()) << record.error().message;
  EXPECT_EQ((*record)->size, gone.size);
  EXPECT_EQ(index_->Stats()->files, 2u);

  // The scope's last file: nothing left to list or count; sharing it back counts it again.
  EXPECT_EQ(*index_->UnregisterFile(kept.hash, "team/a"), Unregistered::kRemoved);
  EXPECT_TRUE(index_->ListFiles("team/a", std::nullopt, 10)->empty());
  EXPECT_EQ(totals("team/a"), std::pair(uint64_t{0}, uint64_t{0}));
  ASSERT_TRUE(index_->ShareFile(gone.hash, "team/a").ok());
  EXPECT_TRUE(*index_->FileVisibleTo(gone.hash, "team/a"));
  EXPECT_EQ(totals("team/a"), std::pair(uint64_t{1}, gone.size));

  Open();  // durable
  EXPECT_FALSE(*index_->FileVisibleTo(kept.hash, "team/a"));
  EXPECT_TRUE(*index_->FileVisibleTo(kept.hash, "team/b"));
  EXPECT_EQ(totals("team/a"), std::pair(uint64_t{1}, gone.size));
}

// A removal is recorded with it (for a rebuild from the store, cas/grant.h); a registration that gives the
// file back clears the record and says so; forgetting takes only what is still cleared.
TEST_P(IndexTest, ARemovalIsRecordedUntilARegistrationClearsIt) {
  Open();
  auto [xorb, layout] = AddXorb(8);
  const FileCommit a = MakeFile(RandomHash(rng_), xorb, layout, {{0, 5}});
  const FileCommit b = MakeFile(RandomHash(rng_), xorb, layout, {{0, 3}});
  ASSERT_TRUE(CommitFiles({a, b}, "team/a").ok());
  ASSERT_TRUE(CommitFiles({a}, "team/b").ok());
  const auto all = [&] {
    auto r = index_->ListRevocations(std::nullopt, 100);
    EXPECT_TRUE(r.ok()) << r.error().message;
    return r.ok() ? *r : std::vector<RevocationRecord>{};
  };
  EXPECT_TRUE(all().empty());
  ASSERT_EQ(*index_->UnregisterFile(a.hash, "team/a"), Unregistered::kRemoved);
  ASSERT_EQ(*index_->UnregisterFile(b.hash, "team/a"), Unregistered::kRemoved);
  ASSERT_EQ(*index_->UnregisterFile(a.hash, "team/b"), Unregistered::kRemoved);
  auto recorded = all();
  ASSERT_EQ(recorded.size(), 3u);
  EXPECT_TRUE(std::is_sorted(recorded.begin(), recorded.end(),
                             [](const auto& x, const auto& y) { return x.key < y.key; }));
  for (const auto& r : recorded) EXPECT_FALSE(r.cleared);
  // Paged: one at a time gives the same three.
  std::vector<RevocationKey> paged;
  std::optional<RevocationKey> after;
  while (paged.size() <= 3) {
    auto page = index_->ListRevocations(after, 1);
    ASSERT_TRUE(page.ok()) << page.error().message;
    if (page->empty()) break;
    paged.push_back((*page)[0].key);
    after = paged.back();
  }
  ASSERT_EQ(paged.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(paged[i], recorded[i].key);

  // Forgetting what is not cleared changes nothing.
  const std::vector<RevocationKey> keys{{a.hash, "team/a"}, {b.hash, "team/a"}, {a.hash, "team/b"}};
  ASSERT_TRUE(index_->ForgetRevocations(keys).ok());
  EXPECT_EQ(all().size(), 3u);

  // A shard giving a back to team/a clears that one (and says so); b's and team/b's stay.
  auto out = index_->CommitShard({.shard = RandomHash(rng_),
                                  .shard_size = 1,
                                  .files = {a, b},
                                  .dedup = {},
                                  .scope = "team/a",
                                  .xorbs = {}});
  ASSERT_TRUE(out.ok()) << out.error().message;
  std::vector<Hash> cleared = out->cleared_revocations;
  std::sort(cleared.begin(), cleared.end());
  std::vector<Hash> expected{a.hash, b.hash};
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(cleared, expected);
  // The cleared listing has those two alone, in order and in pages.
  const auto cleared_listed = [&](std::optional<RevocationKey> from, size_t limit) {
    auto r = index_->ListClearedRevocations(std::move(from), limit);
    EXPECT_TRUE(r.ok()) << r.error().message;
    return r.ok() ? *r : std::vector<RevocationKey>{};
  };
  std::vector<RevocationKey> expected_keys{{a.hash, "team/a"}, {b.hash, "team/a"}};
  std::sort(expected_keys.begin(), expected_keys.end());
  EXPECT_EQ(cleared_listed(std::nullopt, 10), expected_keys);
  EXPECT_EQ(cleared_listed(std::nullopt, 1), std::vector<RevocationKey>{expected_keys[0]});
  EXPECT_EQ(cleared_listed(expected_keys[0], 10), std::vector<RevocationKey>{expected_keys[1]});
  EXPECT_FALSE(index_->ListClearedRevocations(std::nullopt, CasIndex::kMaxListedFiles + 1).ok());
  // A registration again clears nothing more.
  auto again = index_->CommitShard({.shard = RandomHash(rng_),
                                    .shard_size = 1,
                                    .files = {a},
                                    .dedup = {},
                                    .scope = "team/a",
                                    .xorbs = {}});
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->cleared_revocations.empty());
  // Sharing clears too.
  ASSERT_TRUE(index_->ShareFile(a.hash, "team/b").ok());
  for (const auto& r : all()) EXPECT_TRUE(r.cleared) << r.key.scope;

  // Removed again before the forget: recorded anew, so the forget leaves it.
  ASSERT_EQ(*index_->UnregisterFile(b.hash, "team/a"), Unregistered::kRemoved);
  ASSERT_TRUE(index_->ForgetRevocations(keys).ok());
  auto left = all();
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0].key, (RevocationKey{b.hash, "team/a"}));
  EXPECT_FALSE(left[0].cleared);
  Open();  // durable
  EXPECT_EQ(all().size(), 1u);
}

TEST_P(IndexTest, ListsAScopesFilesInPages) {
  Open();
  auto [xorb, layout] = AddXorb(16);
  std::vector<FileCommit> mine;
  for (int i = 0; i < 25; ++i)
    mine.push_back(MakeFile(RandomHash(rng_), xorb, layout, {{0, static_cast<uint32_t>(1 + i % 16)}},
                            i % 2 == 0 ? std::optional<Hash>(RandomHash(rng_)) : std::nullopt));
  ASSERT_TRUE(CommitFiles(mine, "team/a").ok());
  // Another scope: one file of its own and one shared with team/a.
  ASSERT_TRUE(CommitFiles({MakeFile(RandomHash(rng_), xorb, layout, {{0, 2}}), mine[3]}, "team/b").ok());
  std::sort(mine.begin(), mine.end(),
            [](const FileCommit& a, const FileCommit& b) { return a.hash < b.hash; });
  std::vector<ListedFile> listed;
  std::optional<FileHash> after;
  for (;;) {
    auto page = index_->ListFiles("team/a", after, 10);
    ASSERT_TRUE(page.ok()) << page.error().message;
    ASSERT_LE(page->size(), 10u);
    listed.insert(listed.end(), page->begin(), page->end());
    if (page->size() < 10) break;
    after = page->back().hash;
  }
  ASSERT_EQ(listed.size(), mine.size());
  uint64_t bytes = 0;
  for (size_t i = 0; i < mine.size(); ++i) {
    EXPECT_EQ(listed[i].hash, mine[i].hash) << i;
    EXPECT_EQ(listed[i].size, mine[i].size) << i;
    EXPECT_EQ(listed[i].sha256, mine[i].sha256) << i;
    EXPECT_GT(listed[i].created_at, 0) << i;
    bytes += mine[i].size;
  }
  auto totals = index_->ScopeStats("team/a");
  ASSERT_TRUE(totals.ok()) << totals.error().message;
  EXPECT_EQ(totals->files, mine.size());
  EXPECT_EQ(totals->bytes, bytes);
  EXPECT_EQ(index_->ListFiles("team/b", std::nullopt, 100)->size(), 2u);
  EXPECT_EQ(index_->ScopeStats("team/b")->files, 2u);
  EXPECT_TRUE(index_->ListFiles("nobody", std::nullopt, 100)->empty());
  EXPECT_EQ(index_->ScopeStats("nobody")->files, 0u);
  EXPECT_EQ(index_->ListFiles("team/a", std::nullopt, Index::kMaxListedFiles + 1).error().code,
            ErrorCode::kMalformed);
  // A file joining its scope again, or named twice in one shard, is counted once; a new one is added.
  const FileCommit extra = MakeFile(RandomHash(rng_), xorb, layout, {{0, 7}});
  ASSERT_TRUE(CommitFiles({mine[0], mine[0], mine[5], extra, extra}, "team/a").ok());
  EXPECT_EQ(index_->ScopeStats("team/a")->files, mine.size() + 1);
  EXPECT_EQ(index_->ScopeStats("team/a")->bytes, bytes + extra.size);
  EXPECT_EQ(index_->ScopeStats("team/b")->files, 2u);
  // A database from before schema 7 gets its totals from the rows.
  index_.reset();
  SetSchemaVersion(6);
  Open();
  EXPECT_EQ(SchemaVersion(), kSchemaVersion);
  EXPECT_EQ(index_->ScopeStats("team/a")->files, mine.size() + 1);
  EXPECT_EQ(index_->ScopeStats("team/a")->bytes, bytes + extra.size);
  EXPECT_EQ(index_->ScopeStats("team/b")->files, 2u);
  EXPECT_EQ(index_->ScopeStats("nobody")->bytes, 0u);
}

// The xorbs a shard brought together, in order: listed ones, then those only its files use.
TEST_P(IndexTest, ScansEveryRecordOfAKindInHashOrder) {
  Open();
  std::vector<Hash> xorbs, files, shards;
  for (int i = 0; i < 7; ++i) xorbs.push_back(AddXorb(4).first);
  auto [xorb, layout] = AddXorb(4);
  xorbs.push_back(xorb);
  for (int s = 0; s < 3; ++s) {
    std::vector<FileCommit> batch;
    for (int f = 0; f < 4; ++f) {
      batch.push_back(MakeFile(RandomHash(rng_), xorb, layout, {{0, 2}}));
      files.push_back(batch.back().hash);
    }
    shards.push_back(RandomHash(rng_));
    ASSERT_TRUE(index_
                    ->CommitShard({.shard = shards.back(),
                                   .shard_size = 1,
                                   .files = batch,
                                   .dedup = {},
                                   .scope = "s",
                                   .xorbs = {}})
                    .ok());
  }
  const auto scan_all = [&](Index::Scanned what) {
    std::vector<Hash> out;
    std::optional<Hash> after;
    for (;;) {
      auto page = index_->Scan(what, after, 3);
      EXPECT_TRUE(page.ok()) << page.error().message;
      if (!page.ok() || page->empty()) return out;
      EXPECT_LE(page->size(), 3u);
      out.insert(out.end(), page->begin(), page->end());
      after = page->back();
    }
  };
  for (auto* v : {&xorbs, &files, &shards}) std::sort(v->begin(), v->end());
  EXPECT_EQ(scan_all(Index::Scanned::kXorbs), xorbs);
  EXPECT_EQ(scan_all(Index::Scanned::kFiles), files);
  EXPECT_EQ(scan_all(Index::Scanned::kShards), shards);
  EXPECT_EQ(index_->Scan(Index::Scanned::kFiles, std::nullopt, Index::kMaxScanned + 1).error().code,
            ErrorCode::kMalformed);
}

// The collector's slice: marks see liveness by registration; every sweep step acts only on the record it was
// given, still unclaimed (compare and delete), and takes what it removed off the counters.
TEST_P(IndexTest, TheCollectorsStepsCompareBeforeTheyDelete) {
  Open();
  auto [shared, shared_layout] = AddXorb(4);
  auto [alone, alone_layout] = AddXorb(4);
  const FileCommit live = MakeFile(RandomHash(rng_), shared, shared_layout, {{0, 4}});
  FileCommit dead = MakeFile(RandomHash(rng_), alone, alone_layout, {{0, 4}});
  ASSERT_TRUE(CommitFiles({live}, "plain").ok());
  NewRepo nr;
  nr.ns = "a";
  nr.name = "r";
  nr.scope = "w";
  nr.read_scope = "r";
  ASSERT_TRUE(index_->CreateRepo(nr).ok());
  ASSERT_TRUE(CommitFiles({dead}, "w").ok());  // uploaded to a repository, never committed

  auto files = index_->ScanFileXorbs(std::nullopt, 10);
  ASSERT_TRUE(files.ok()) << files.error().message;
  ASSERT_EQ(files->size(), 2u);
  for (const auto& f : *files) {
    EXPECT_EQ(f.registered, f.hash == live.hash);
    EXPECT_EQ(f.xorbs, std::vector<XorbHash>{f.hash == live.hash ? shared : alone});
  }

  // Quarantine keeps the first time; ScanQuarantine reports it with the bytes.
  ASSERT_TRUE(index_->Quarantine(GcKind::kFile, std::vector<Hash>{dead.hash}, 100).ok());
  ASSERT_TRUE(index_->Quarantine(GcKind::kFile, std::vector<Hash>{dead.hash}, 200).ok());
  ASSERT_TRUE(index_->Quarantine(GcKind::kXorb, std::vector<Hash>{alone}, 100).ok());
  auto q = index_->ScanQuarantine(GcKind::kFile, std::nullopt, 10);
  ASSERT_TRUE(q.ok());
  ASSERT_EQ(q->size(), 1u);
  EXPECT_EQ((*q)[0].since, 100);
  EXPECT_EQ((*q)[0].bytes, dead.size);
  auto qx = index_->ScanQuarantine(GcKind::kXorb, std::nullopt, 10);
  ASSERT_TRUE(qx.ok());
  ASSERT_EQ(qx->size(), 1u);
  EXPECT_EQ((*qx)[0].bytes, alone_layout.chunk_region_size());

  // A stale record (another since) is not swept; the right one is, with its scopes and counters.
  Quarantined stale = (*q)[0];
  stale.since = 99;
  auto swept = index_->SweepFiles(std::vector{stale});
  ASSERT_TRUE(swept.ok());
  EXPECT_EQ(swept->objects, 0u);
  swept = index_->SweepFiles(*q);
  ASSERT_TRUE(swept.ok());
  EXPECT_EQ(swept->objects, 1u);
  EXPECT_EQ(swept->bytes, dead.size);
  EXPECT_EQ(index_->GetFile(dead.hash).error().code, ErrorCode::kNotFound);
  EXPECT_EQ(index_->ScopeStats("w")->files, 0u);
  EXPECT_EQ(index_->Stats()->files, 1u);

  // A revived xorb cannot be claimed; a claimed one cannot be revived, and is dropped with its counters.
  auto uses = index_->ReviveXorbs(std::vector{alone, shared, RandomHash(rng_)});
  ASSERT_TRUE(uses.ok());
  EXPECT_EQ(*uses, (std::vector{XorbUse::kStored, XorbUse::kStored, XorbUse::kAbsent}));
  auto claimed = index_->ClaimXorbs(*qx, 300);
  ASSERT_TRUE(claimed.ok());
  EXPECT_TRUE(claimed->empty());  // revived by the ReviveXorbs above
  ASSERT_TRUE(index_->Quarantine(GcKind::kXorb, std::vector<Hash>{alone}, 400).ok());
  qx = index_->ScanQuarantine(GcKind::kXorb, std::nullopt, 10);
  ASSERT_TRUE(qx.ok());
  claimed = index_->ClaimXorbs(*qx, 500);
  ASSERT_TRUE(claimed.ok());
  EXPECT_EQ(*claimed, std::vector<XorbHash>{alone});
  uses = index_->ReviveXorbs(std::vector{alone});
  ASSERT_TRUE(uses.ok());
  EXPECT_EQ((*uses)[0], XorbUse::kBeingSwept);
  // A shard naming it now is refused for a retry, and nothing of it is stored.
  const FileCommit again = MakeFile(RandomHash(rng_), alone, alone_layout, {{0, 2}});
  auto refused = index_->CommitShard({.shard = RandomHash(rng_),
                                      .shard_size = 1,
                                      .files = {again},
                                      .dedup = {},
                                      .scope = "plain",
                                      .xorbs = {.listed = {alone}, .referenced = {}}});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, ErrorCode::kUnavailable) << refused.error().message;
  EXPECT_TRUE(Refused(refused.error(), NamedBeingDeleted()));
  EXPECT_EQ(index_->GetFile(again.hash).error().code, ErrorCode::kNotFound);
  EXPECT_TRUE(Refused(index_->GetFile(again.hash).error(), FileNotIndexed(again.hash)));
  // Releasing leaves a claim alone; dropping an unclaimed xorb does nothing.
  ASSERT_TRUE(index_->Release(GcKind::kXorb, std::vector<Hash>{alone}).ok());
  auto dropped = index_->DropXorbs(std::vector{shared});
  ASSERT_TRUE(dropped.ok());
  EXPECT_EQ(dropped->objects, 0u);
  dropped = index_->DropXorbs(std::vector{alone});
  ASSERT_TRUE(dropped.ok());
  EXPECT_EQ(dropped->objects, 1u);
  EXPECT_EQ(dropped->bytes, alone_layout.chunk_region_size());
  EXPECT_FALSE(*index_->HasXorb(alone));
  auto stats = index_->Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->xorbs, 1u);
  EXPECT_EQ(stats->chunks, 4u);
  EXPECT_EQ(stats->unpacked_bytes, shared_layout.unpacked_size());
  EXPECT_TRUE(index_->ScanQuarantine(GcKind::kXorb, std::nullopt, 10)->empty());
  // Then a shard naming it is refused as naming what is not stored.
  refused = index_->CommitShard({.shard = RandomHash(rng_),
                                 .shard_size = 1,
                                 .files = {},
                                 .dedup = {},
                                 .scope = "plain",
                                 .xorbs = {.listed = {alone}, .referenced = {}}});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, ErrorCode::kUnknownReference) << refused.error().message;
  EXPECT_TRUE(Refused(refused.error(), NamedXorbNotStored()));
}

// A shard goes when the claim of its last xorb goes: quarantined claimed in that transaction, refused for a
// retry until dropped, its scopes known so that its grants can be deleted, and dropped with its counters.
TEST_P(IndexTest, AShardWhoseXorbsAreAllClaimedIsClaimedWithThem) {
  Open();
  auto [a, a_layout] = AddXorb(4);
  auto [b, b_layout] = AddXorb(4);
  const Hash dying = RandomHash(rng_), living = RandomHash(rng_);
  const auto commit = [&](const Hash& shard, std::vector<XorbHash> listed, const std::string& scope) {
    return index_->CommitShard({.shard = shard,
                                .shard_size = 100,
                                .files = {},
                                .dedup = {},
                                .scope = scope,
                                .xorbs = {.listed = std::move(listed), .referenced = {}}});
  };
  ASSERT_TRUE(commit(dying, {a}, "s1").ok());
  ASSERT_TRUE(commit(dying, {a}, "s2").ok());  // the same shard for a second scope
  ASSERT_TRUE(commit(living, {a, b}, "s1").ok());
  auto scopes = index_->ShardScopes(std::vector{dying, living});
  ASSERT_TRUE(scopes.ok()) << scopes.error().message;
  std::set<std::pair<std::string, std::string>> got;
  for (const auto& s : *scopes) got.emplace(s.shard.hex(), s.scope);
  EXPECT_EQ(got, (std::set<std::pair<std::string, std::string>>{
                     {dying.hex(), "s1"}, {dying.hex(), "s2"}, {living.hex(), "s1"}}));

  ASSERT_TRUE(index_->Quarantine(GcKind::kXorb, std::vector<Hash>{a}, 100).ok());
  auto q = index_->ScanQuarantine(GcKind::kXorb, std::nullopt, 10);
  ASSERT_TRUE(q.ok());
  ASSERT_TRUE(index_->ClaimXorbs(*q, 200).ok());
  // `dying` named only `a`; `living` still has `b`.
  auto shards = index_->ScanQuarantine(GcKind::kShard, std::nullopt, 10);
  ASSERT_TRUE(shards.ok());
  ASSERT_EQ(shards->size(), 1u);
  EXPECT_EQ((*shards)[0].hash, dying);
  EXPECT_EQ((*shards)[0].claimed_at, 200);
  EXPECT_EQ((*shards)[0].bytes, 100u);
  auto refused = commit(dying, {b}, "s3");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, ErrorCode::kUnavailable) << refused.error().message;
  EXPECT_TRUE(Refused(refused.error(), NamedBeingDeleted()));

  auto dropped = index_->DropShards(std::vector{living});
  ASSERT_TRUE(dropped.ok());
  EXPECT_EQ(dropped->objects, 0u) << "an unclaimed shard is left alone";
  dropped = index_->DropShards(std::vector{dying});
  ASSERT_TRUE(dropped.ok());
  EXPECT_EQ(dropped->objects, 1u);
  EXPECT_EQ(dropped->bytes, 100u);
  EXPECT_FALSE(index_->GetShard(dying)->has_value());
  EXPECT_TRUE(index_->GetShard(living)->has_value());
  EXPECT_TRUE(index_->ShardScopes(std::vector{dying})->empty());
  EXPECT_TRUE(index_->ScanQuarantine(GcKind::kShard, std::nullopt, 10)->empty());
  EXPECT_EQ(index_->Stats()->shards, 1u);
  // Registered anew once gone (its xorbs stored again).
  ASSERT_TRUE(index_->DropXorbs(std::vector{a}).ok());
  ASSERT_TRUE(index_->PutXorb(a, a_layout).ok());
  auto again = commit(dying, {a}, "s1");
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_FALSE(again->already_existed);
}

// A bucket's files are live while it names them, whatever its read scope saw (files do not leave it).
TEST_P(IndexTest, ABucketsFilesAreLiveWhileItNamesThem) {
  Open();
  auto [xorb, layout] = AddXorb(4);
  const FileCommit f = MakeFile(RandomHash(rng_), xorb, layout, {{0, 4}});
  NewRepo nr;
  nr.type = RepoType::kBucket;
  nr.ns = "a";
  nr.name = "b";
  nr.scope = "bw";
  nr.read_scope = "br";
  auto bucket = index_->CreateRepo(nr);
  ASSERT_TRUE(bucket.ok()) << bucket.error().message;
  ASSERT_TRUE(CommitFiles({f}, "bw").ok());
  ASSERT_TRUE(index_->ShareFile(f.hash, "br").ok());
  const auto live = [&] {
    auto files = index_->ScanFileXorbs(std::nullopt, 10);
    EXPECT_TRUE(files.ok());
    return files.ok() && files->size() == 1 && (*files)[0].registered;
  };
  EXPECT_FALSE(live());  // shared into the bucket's read scope, named by no path: not live
  const BucketFile at{"x.bin", f.hash, f.size, 0, std::nullopt, 1};
  ASSERT_TRUE(index_->ChangeBucket(bucket->id, {{"x.bin", at}}, nullptr).ok());
  EXPECT_TRUE(live());
  ASSERT_TRUE(index_->ChangeBucket(bucket->id, {{"x.bin", std::nullopt}}, nullptr).ok());
  EXPECT_FALSE(live());
}

// Two collectors: one holds the lock, the other waits for it.
TEST_P(IndexTest, OneCollectorAtATime) {
  Open();
  auto first = index_->LockGc();
  ASSERT_TRUE(first.ok()) << first.error().message;
  EXPECT_TRUE((*first)->Check().ok());
  auto other = OpenIndex(url_);
  ASSERT_TRUE(other.ok());
  std::atomic<bool> got{false};
  std::thread t([&] {
    auto second = (*other)->LockGc();
    EXPECT_TRUE(second.ok());
    got = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_FALSE(got.load());  // still waiting
  first->reset();
  t.join();
  EXPECT_TRUE(got.load());
}

// Backups share the deletion hold; a collector's deletions take it alone, from any process on the index.
TEST_P(IndexTest, BackupsShareTheDeletionHoldAndACollectorTakesItAlone) {
  Open();
  using Hold = GcIndex::DeletionHold;
  auto other = OpenIndex(url_);
  ASSERT_TRUE(other.ok());
  auto backup1 = index_->HoldDeletions(Hold::kShared, false);
  ASSERT_TRUE(backup1.ok() && *backup1 != nullptr);
  auto backup2 = (*other)->HoldDeletions(Hold::kShared, false);
  ASSERT_TRUE(backup2.ok() && *backup2 != nullptr);
  auto collector = (*other)->HoldDeletions(Hold::kExclusive, false);
  ASSERT_TRUE(collector.ok());
  EXPECT_EQ(*collector, nullptr);  // held by the backups
  backup1->reset();
  collector = (*other)->HoldDeletions(Hold::kExclusive, false);
  ASSERT_TRUE(collector.ok());
  EXPECT_EQ(*collector, nullptr);  // the second backup still runs
  backup2->reset();
  collector = (*other)->HoldDeletions(Hold::kExclusive, false);
  ASSERT_TRUE(collector.ok() && *collector != nullptr);
  EXPECT_TRUE((*collector)->Check().ok());
  auto backup3 = index_->HoldDeletions(Hold::kShared, false);
  ASSERT_TRUE(backup3.ok());
  EXPECT_EQ(*backup3, nullptr);  // a collector is deleting
  std::atomic<bool> got{false};
  std::thread t([&] {
    auto waited = index_->HoldDeletions(Hold::kShared, true);
    EXPECT_TRUE(waited.ok() && *waited != nullptr);
    got = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_FALSE(got.load());  // waits for the collector
  collector->reset();
  t.join();
  EXPECT_TRUE(got.load());
}

TEST_P(IndexTest, ShardXorbsRoundtrip) {
  Open();
  auto [a, la] = AddXorb(3);
  auto [b, lb] = AddXorb(3);
  auto [old, lo] = AddXorb(3);
  ShardCommit c{.shard = RandomHash(rng_),
                .shard_size = 10,
                .files = {MakeFile(RandomHash(rng_), old, lo, {{0, 3}})},
                .dedup = {{lo.chunks[0].hash, old}},
                .scope = "s",
                .xorbs = {.listed = {b, a}, .referenced = {old}}};
  ASSERT_TRUE(index_->CommitShard(c).ok());
  auto got = index_->GetShardXorbs(c.shard);
  ASSERT_TRUE(got.ok()) << got.error().message;
  EXPECT_EQ((*got)->listed, (std::vector<XorbHash>{b, a}));
  EXPECT_EQ((*got)->referenced, std::vector<XorbHash>{old});
  EXPECT_EQ(index_->GetShardXorbs(RandomHash(rng_)).error().code, ErrorCode::kNotFound);

  // Committed again (another scope): the first registration stands. Reopened: still there.
  c.scope = "t";
  c.xorbs.listed = {a};
  ASSERT_TRUE(index_->CommitShard(c).ok());
  Open();
  got = index_->GetShardXorbs(c.shard);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ((*got)->listed, (std::vector<XorbHash>{b, a}));

  // A shard naming a xorb the index does not know is refused whole, as naming what it does not hold.
  ShardCommit bad{.shard = RandomHash(rng_),
                  .shard_size = 1,
                  .files = {},
                  .dedup = {},
                  .scope = "s",
                  .xorbs = {.listed = {a, RandomHash(rng_)}, .referenced = {}}};
  auto out = index_->CommitShard(bad);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.error().code, ErrorCode::kUnknownReference) << out.error().message;
  EXPECT_TRUE(Refused(out.error(), NamedXorbNotStored()));
  EXPECT_FALSE(index_->GetShard(bad.shard)->has_value());
  EXPECT_EQ(index_->GetShardXorbs(bad.shard).error().code, ErrorCode::kNotFound);
  EXPECT_TRUE(Refused(index_->GetShardXorbs(bad.shard).error(), ShardNotIndexed(bad.shard)));
}

// Shards registered before schema 3 recorded their xorbs get those of their dedup entries.
TEST_P(IndexTest, MigratesSchemaTwoAndFillsShardXorbsFromDedupEntries) {
  Open();
  auto [a, la] = AddXorb(4);
  auto [b, lb] = AddXorb(4);
  const ShardCommit c{.shard = RandomHash(rng_),
                      .shard_size = 10,
                      .files = {},
                      .dedup = {{la.chunks[0].hash, a}, {la.chunks[2].hash, a}, {lb.chunks[1].hash, b}},
                      .scope = "s",
                      .xorbs = {.listed = {a, b}, .referenced = {}}};
  ASSERT_TRUE(index_->CommitShard(c).ok());
  const ShardCommit empty{
      .shard = RandomHash(rng_), .shard_size = 1, .files = {}, .dedup = {}, .scope = "s", .xorbs = {}};
  ASSERT_TRUE(index_->CommitShard(empty).ok());
  index_.reset();
  ExecRaw("DROP TABLE shard_xorbs; DROP TABLE secrets; ALTER TABLE files DROP COLUMN ranges",
          "DROP TABLE shard_xorbs; DROP TABLE secrets; ALTER TABLE files DROP COLUMN ranges");
  SetSchemaVersion(2);
  Open();
  EXPECT_EQ(SchemaVersion(), kSchemaVersion);
  auto got = index_->GetShardXorbs(c.shard);
  ASSERT_TRUE(got.ok()) << got.error().message;
  auto listed = (*got)->listed;
  std::sort(listed.begin(), listed.end());
  auto want = std::vector<XorbHash>{a, b};
  std::sort(want.begin(), want.end());
  EXPECT_EQ(listed, want);
  EXPECT_TRUE((*got)->referenced.empty());
  got = index_->GetShardXorbs(empty.shard);
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE((*got)->listed.empty());
}

// Files registered before schema 5 have no term ranges (readers fall back to layouts); new ones do.
// Schema 22 trims what an audited change writes (SQLite: ids without AUTOINCREMENT; both: no index by actor):
// the events stay, with their ids, and ids only grow after it, even when pruning finds every event old.
TEST_P(IndexTest, MigratesSchemaTwentyOneAndKeepsTheAuditLog) {
  Open();
  const AuditActor by{.actor = "alice", .token_id = "", .client = ""};
  ASSERT_TRUE(index_->AppendAudit(by.Event(100, "gc.run", "", "")).ok());
  ASSERT_TRUE(index_->AppendAudit(by.Event(101, "repo.create", "alice", "alice/m")).ok());
  auto before = index_->ListAudit({}, std::nullopt, 10);
  ASSERT_TRUE(before.ok());
  index_.reset();
  SetSchemaVersion(21);
  Open();
  EXPECT_EQ(SchemaVersion(), kSchemaVersion);
  auto after = index_->ListAudit({}, std::nullopt, 10);
  ASSERT_TRUE(after.ok()) << after.error().message;
  EXPECT_EQ(*after, *before);
  auto by_actor =
      index_->ListAudit({.since = std::nullopt, .actor = "alice", .ns = std::nullopt, .target = std::nullopt},
                        std::nullopt, 10);
  ASSERT_TRUE(by_actor.ok());
  EXPECT_EQ(by_actor->size(), 2u) << "an actor's events are found without an index";

  EXPECT_EQ(*index_->PruneAudit(1'000), 1u) << "every event is old: all but the newest go";
  ASSERT_TRUE(index_->AppendAudit(by.Event(102, "repo.delete", "alice", "alice/m")).ok());
  auto last = index_->ListAudit({}, std::nullopt, 10);
  ASSERT_TRUE(last.ok());
  ASSERT_EQ(last->size(), 2u);
  EXPECT_GT((*last)[0].id, before->front().id) << "ids only grow";
}

TEST_P(IndexTest, MigratesSchemaFourFilesKeepNoRanges) {
  Open();
  auto [xorb, layout] = AddXorb(6);
  const ShardCommit old{.shard = RandomHash(rng_),
                        .shard_size = 10,
                        .files = {MakeFile(RandomHash(rng_), xorb, layout, {{0, 6}})},
                        .dedup = {},
                        .scope = "s",
                        .xorbs = {}};
  ASSERT_TRUE(index_->CommitShard(old).ok());
  index_.reset();
  ExecRaw("ALTER TABLE files DROP COLUMN ranges", "ALTER TABLE files DROP COLUMN ranges");
  SetSchemaVersion(4);
  Open();
  EXPECT_EQ(SchemaVersion(), kSchemaVersion);
  auto before = index_->GetFile(old.files[0].hash);
  ASSERT_TRUE(before.ok()) << before.error().message;
  EXPECT_FALSE((*before)->has_ranges());
  EXPECT_EQ((*before)->packed_terms, old.files[0].packed_terms);
  const ShardCommit fresh{.shard = RandomHash(rng_),
                          .shard_size = 10,
                          .files = {MakeFile(RandomHash(rng_), xorb, layout, {{2, 4}})},
                          .dedup = {},
                          .scope = "s",
                          .xorbs = {}};
  ASSERT_TRUE(index_->CommitShard(fresh).ok());
  auto after = index_->GetFile(fresh.files[0].hash);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ((*after)->packed_ranges, fresh.files[0].packed_ranges);
  // A commit whose ranges disagree with its terms is refused.
  ShardCommit bad = fresh;
  bad.shard = RandomHash(rng_);
  bad.files[0].hash = RandomHash(rng_);
  bad.files[0].packed_ranges.pop_back();
  EXPECT_EQ(index_->CommitShard(bad).error().code, ErrorCode::kMalformed);
}

TEST_P(IndexTest, RefusesADatabaseFromANewerCairn) {
  Open();
  index_.reset();
  SetSchemaVersion(99);
  auto r = OpenIndex(url_);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("newer"), std::string::npos) << r.error().message;
}

// 32 threads commit shards at once: every commit succeeds, commits share transactions, and everything is
// there after a reopen.
TEST_P(IndexTest, GroupCommitUnderConcurrency) {
  Open();
  auto [xorb, layout] = AddXorb(64);
  constexpr int kThreads = 32, kPerThread = 20;
  std::vector<std::vector<ShardCommit>> commits(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    for (int i = 0; i < kPerThread; ++i) {
      ShardCommit c{.shard = RandomHash(rng_),
                    .shard_size = 100,
                    .files = {},
                    .dedup = {},
                    .scope = "scope" + std::to_string(t % 4),
                    .xorbs = {}};
      for (uint32_t f = 0; f < 4; ++f)
        c.files.push_back(MakeFile(RandomHash(rng_), xorb, layout, {{f, f + 2}}));
      c.dedup.push_back({layout.chunks[static_cast<size_t>(i)].hash, xorb});
      commits[static_cast<size_t>(t)].push_back(std::move(c));
    }
  }
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (const auto& c : commits[static_cast<size_t>(t)]) {
        if (!index_->CommitShard(c).ok()) ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  const auto ws = index_->write_stats();
  EXPECT_EQ(ws.requests, 1u + kThreads * kPerThread);
  EXPECT_LT(ws.transactions, ws.requests);  // some commits shared a transaction
  std::printf("group commit: %llu requests in %llu transactions\n",
              static_cast<unsigned long long>(ws.requests), static_cast<unsigned long long>(ws.transactions));

  Open();
  for (int t = 0; t < kThreads; ++t) {
    for (const auto& c : commits[static_cast<size_t>(t)]) {
      ASSERT_TRUE(index_->GetShard(c.shard)->has_value());
      for (const auto& f : c.files) ASSERT_TRUE(*index_->FileVisibleTo(f.hash, c.scope));
    }
  }
  EXPECT_EQ(index_->Stats()->files, 4u * kThreads * kPerThread);
  EXPECT_EQ(index_->Stats()->shards, 1u * kThreads * kPerThread);
}

// A request that fails inside a batch is rolled back alone; the others in the same transaction commit.
TEST_P(IndexTest, FailingRequestDoesNotFailItsBatch) {
  constexpr size_t kGood = 8;
  std::mutex mu;
  std::condition_variable cv;
  bool release = false, hold = false;
  std::vector<size_t> batches;
  OpenIndexOptions options;
  options.writers = 1;  // one writer, so the held batch holds everything behind it
  options.before_batch = [&](size_t n) {
    std::unique_lock lock(mu);
    if (!hold) return;
    batches.push_back(n);
    if (batches.size() == 1) cv.wait(lock, [&] { return release; });  // hold the first batch
  };
  Open(options);
  auto [xorb, layout] = AddXorb(4);
  {
    std::lock_guard lock(mu);
    hold = true;
  }
  // The blocker occupies the writer while the real batch queues up behind it.
  std::thread blocker([&, x = RandomHash(rng_), l = layout] { EXPECT_TRUE(index_->PutXorb(x, l).ok()); });
  while (true) {
    std::lock_guard lock(mu);
    if (!batches.empty()) break;
  }
  std::vector<ShardCommit> good;
  for (size_t i = 0; i < kGood; ++i) {
    good.push_back({.shard = RandomHash(rng_),
                    .shard_size = 1,
                    .files = {MakeFile(RandomHash(rng_), xorb, layout, {{0, 2}})},
                    .dedup = {{layout.chunks[1].hash, xorb}},
                    .scope = "s",
                    .xorbs = {}});
  }
  const ShardCommit bad{.shard = RandomHash(rng_),
                        .shard_size = 1,
                        .files = {MakeFile(RandomHash(rng_), xorb, layout, {{0, 2}})},
                        .dedup = {{layout.chunks[1].hash, RandomHash(rng_)}},
                        .scope = "s",
                        .xorbs = {}};
  std::atomic<int> good_ok{0};
  std::optional<Error> bad_error;
  std::vector<std::thread> threads;
  for (size_t i = 0; i < kGood; ++i) {
    threads.emplace_back([&, i] { good_ok += index_->CommitShard(good[i]).ok() ? 1 : 0; });
    if (i == kGood / 2) {
      threads.emplace_back([&] {
        auto r = index_->CommitShard(bad);
        if (!r.ok()) bad_error = r.error();
      });
    }
  }
  while (index_->write_stats().queued < kGood + 1) std::this_thread::yield();
  {
    std::lock_guard lock(mu);
    release = true;
  }
  cv.notify_all();
  for (auto& th : threads) th.join();
  blocker.join();
  EXPECT_EQ(good_ok.load(), static_cast<int>(kGood));
  ASSERT_TRUE(bad_error.has_value());
  EXPECT_EQ(bad_error->code, ErrorCode::kInconsistent);
  {
    std::lock_guard lock(mu);
    ASSERT_EQ(batches.size(), 2u);
    EXPECT_EQ(batches[1], kGood + 1);  // one transaction carried them all
  }
  EXPECT_FALSE(index_->GetShard(bad.shard)->has_value());
  EXPECT_EQ(index_->GetFile(bad.files[0].hash).error().code, ErrorCode::kNotFound);
  for (const auto& c : good) EXPECT_TRUE(index_->GetShard(c.shard)->has_value());
}

// A secret is created once: the first value stored wins, for every later caller and after a reopen.
TEST_P(IndexTest, SharedSecretFirstWriterWins) {
  Open();
  auto first = index_->SharedSecret("jwt", "aaaa");
  ASSERT_TRUE(first.ok()) << first.error().message;
  EXPECT_EQ(*first, "aaaa");
  EXPECT_EQ(*index_->SharedSecret("jwt", "bbbb"), "aaaa");
  EXPECT_EQ(*index_->SharedSecret("url", "cccc"), "cccc");  // names are independent
  Open();
  EXPECT_EQ(*index_->SharedSecret("jwt", "dddd"), "aaaa");
  EXPECT_TRUE(index_->Ping().ok());
}

// Keys are added once (a second add of the name changes nothing), listed by name with their time, and
// deleted; every node on the index sees the same rows, after a reopen too.
TEST_P(IndexTest, SecretsAreListedAddedAndDeleted) {
  Open();
  ASSERT_TRUE(index_->SharedSecret("jwt", "legacy-value").ok());
  EXPECT_TRUE(*index_->AddSecret("jwt:k2", "value-2"));
  EXPECT_FALSE(*index_->AddSecret("jwt:k2", "other"));  // exists: unchanged
  EXPECT_FALSE(*index_->AddSecret("jwt", "other"));
  EXPECT_TRUE(*index_->AddSecret("url:k1", "value-u"));
  Open();
  auto rows = index_->ListSecrets();
  ASSERT_TRUE(rows.ok()) << rows.error().message;
  ASSERT_EQ(rows->size(), 3u);
  EXPECT_EQ((*rows)[0].name, "jwt");
  EXPECT_EQ((*rows)[0].value, "legacy-value");
  EXPECT_EQ((*rows)[1].name, "jwt:k2");
  EXPECT_EQ((*rows)[1].value, "value-2");
  EXPECT_EQ((*rows)[2].name, "url:k1");
  const int64_t now =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  for (const auto& r : *rows) EXPECT_LE(std::abs(r.created_at - now), 60) << r.name;
  EXPECT_TRUE(*index_->DeleteSecret("jwt"));
  EXPECT_FALSE(*index_->DeleteSecret("jwt"));
  EXPECT_FALSE(*index_->DeleteSecret("nope"));
  rows = index_->ListSecrets();
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_EQ((*rows)[0].name, "jwt:k2");
}

TEST_P(IndexTest, LeasesAreTakenOnceRenewedAndTakenOverWhenTheyLapse) {
  Open();
  // Free: taken. Held by another: refused until it lapses. The holder renews; a dropped lease is free.
  EXPECT_TRUE(*index_->TakeLease("mirror:1:aa", "node-a", 1000, 1060));
  EXPECT_FALSE(*index_->TakeLease("mirror:1:aa", "node-b", 1010, 1070));
  EXPECT_TRUE(*index_->TakeLease("mirror:1:aa", "node-a", 1050, 1110));   // renewed
  EXPECT_FALSE(*index_->TakeLease("mirror:1:aa", "node-b", 1100, 1160));  // not lapsed yet (1110)
  EXPECT_TRUE(*index_->TakeLease("mirror:1:aa", "node-b", 1110, 1170));   // lapsed: taken over
  EXPECT_FALSE(*index_->TakeLease("mirror:1:aa", "node-a", 1120, 1180));  // a's renewal comes too late
  EXPECT_TRUE(*index_->TakeLease("mirror:1:bb", "node-a", 1120, 1180));   // names are independent
  ASSERT_TRUE(index_->DropLease("mirror:1:aa", "node-a").ok());           // not a's: nothing happens
  EXPECT_FALSE(*index_->TakeLease("mirror:1:aa", "node-c", 1130, 1190));
  ASSERT_TRUE(index_->DropLease("mirror:1:aa", "node-b").ok());
  EXPECT_TRUE(*index_->TakeLease("mirror:1:aa", "node-c", 1130, 1190));
  // Who holds it: asked by a node waiting on another's transfer.
  EXPECT_EQ(*index_->LeaseHolder("mirror:1:aa", 1150), std::optional<std::string>("node-c"));
  EXPECT_EQ(*index_->LeaseHolder("mirror:1:aa", 1190), std::nullopt);  // lapsed
  EXPECT_EQ(*index_->LeaseHolder("mirror:1:none", 1150), std::nullopt);
  EXPECT_FALSE(index_->LeaseHolder("", 1150).ok());
  EXPECT_FALSE(index_->TakeLease("", "node-c", 1, 2).ok());
  EXPECT_FALSE(index_->TakeLease(std::string(257, 'x'), "node-c", 1, 2).ok());
  // Nodes racing for one free lease: exactly one gets it.
  std::atomic<int> winners{0};
  std::vector<std::thread> racers;
  for (int i = 0; i < 8; ++i) {
    racers.emplace_back([&, i] {
      auto got = index_->TakeLease("mirror:2:race", "node-" + std::to_string(i), 2000, 2060);
      if (got.ok() && *got) ++winners;
    });
  }
  for (auto& t : racers) t.join();
  EXPECT_EQ(winners.load(), 1);
}

TEST_P(IndexTest, MirrorReadsKeepTheLatestAndGoWithTheirRepository) {
  Open();
  std::vector<int64_t> ids;
  for (const char* name : {"a", "b", "c"}) {
    NewRepo nr;
    nr.ns = "up";
    nr.name = name;
    nr.scope = std::string("mirror:") + name;
    nr.read_scope = nr.scope + "#read";
    auto repo = index_->CreateRepo(nr);
    ASSERT_TRUE(repo.ok()) << repo.error().message;
    ids.push_back(repo->id);
  }
  ASSERT_TRUE(index_->NoteMirrorRead(ids[0], 300).ok());
  ASSERT_TRUE(index_->NoteMirrorRead(ids[1], 100).ok());
  ASSERT_TRUE(index_->NoteMirrorRead(ids[2], 200).ok());
  ASSERT_TRUE(index_->NoteMirrorRead(ids[1], 50).ok());  // earlier than recorded: kept at 100
  auto reads = index_->ListMirrorReads();
  ASSERT_TRUE(reads.ok()) << reads.error().message;
  ASSERT_EQ(reads->size(), 3u);
  EXPECT_EQ((*reads)[0].repo, ids[1]);  // least recently read first
  EXPECT_EQ((*reads)[0].last_read, 100);
  EXPECT_EQ((*reads)[1].repo, ids[2]);
  EXPECT_EQ((*reads)[2].repo, ids[0]);
  ASSERT_TRUE(index_->NoteMirrorRead(ids[1], 400).ok());
  ASSERT_TRUE(index_->DeleteRepo(ids[2], nullptr).ok());
  reads = index_->ListMirrorReads();
  ASSERT_EQ(reads->size(), 2u);
  EXPECT_EQ((*reads)[0].repo, ids[0]);
  EXPECT_EQ((*reads)[1].repo, ids[1]);
  EXPECT_EQ((*reads)[1].last_read, 400);
  EXPECT_EQ(index_->NoteMirrorRead(ids[2], 500).error().code, ErrorCode::kNotFound);  // deleted
  EXPECT_EQ(index_->NoteMirrorRead(999999, 500).error().code, ErrorCode::kNotFound);
}

TEST_P(IndexTest, QuotasAreSetChargedMeasuredAndMarkedStale) {
  Open();
  // Charges ride a repository's object writes (a commit's first write) and file shares.
  NewRepo nr;
  nr.ns = "alice";
  nr.name = "m";
  nr.created_at = 1700000000;
  nr.scope = "hub:alice-m";
  nr.read_scope = "hub:alice-m#read";
  auto repo = index_->CreateRepo(nr);
  ASSERT_TRUE(repo.ok()) << repo.error().message;
  int n = 0;
  std::vector<uint8_t> last_key;
  const auto charge = [&](const QuotaCharge& c) {
    const std::string key = "k" + std::to_string(n++);
    last_key.assign(key.begin(), key.end());
    return index_->PutRepoObjects(repo->id, {{last_key, 3, {'x'}}}, &c);
  };
  const auto reserve = [&](const std::string& ns, uint64_t bytes) {
    return charge({.ns = ns, .publish = 0, .reserve = bytes, .settle = 0, .check = true});
  };
  const auto stored = [&] { return index_->GetRepoObjects(repo->id, {last_key})->at(0).has_value(); };
  EXPECT_FALSE(index_->GetQuota("alice")->has_value());
  EXPECT_TRUE(reserve("alice", 1u << 30).ok());  // no record: no quota to keep, nothing recorded
  EXPECT_TRUE(stored());
  EXPECT_FALSE(index_->GetQuota("alice")->has_value());
  ASSERT_TRUE(index_->SetQuotaLimit("alice", 1000, nullptr).ok());
  ASSERT_TRUE(index_->SetQuotaLimit("bob", std::nullopt, nullptr).ok());
  auto alice = index_->GetQuota("alice");
  ASSERT_TRUE(alice.ok() && alice->has_value());
  EXPECT_EQ((*alice)->limit, 1000u);
  EXPECT_TRUE((*alice)->stale);
  EXPECT_FALSE((*alice)->exact());
  // A measure from the generation it read; a second one from the same generation is refused.
  const QuotaMeasure m{600, 0, (*alice)->generation, 1700000000};
  EXPECT_TRUE(*index_->RecordQuotaMeasure("alice", m, 0));
  EXPECT_FALSE(*index_->RecordQuotaMeasure("alice", m, 0));
  alice = index_->GetQuota("alice");
  EXPECT_EQ((*alice)->used, 600u);
  EXPECT_TRUE((*alice)->exact());
  // Reservations fit up to the limit and not past it (refused, the write stores nothing); settled, they are
  // published (pending) or dropped.
  EXPECT_TRUE(reserve("alice", 300).ok());
  const auto refused = reserve("alice", 101);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, ErrorCode::kQuota);
  EXPECT_TRUE(Refused(refused.error(), QuotaHasNoRoom()));
  EXPECT_FALSE(stored());
  EXPECT_TRUE(reserve("alice", 100).ok());
  alice = index_->GetQuota("alice");
  EXPECT_EQ((*alice)->reserved, 400u);
  EXPECT_EQ((*alice)->charged(), 1000u);
  EXPECT_FALSE((*alice)->exact());
  ASSERT_TRUE(index_->SettleQuota("alice", 300, true).ok());
  ASSERT_TRUE(index_->SettleQuota("alice", 100, false).ok());
  alice = index_->GetQuota("alice");
  EXPECT_EQ((*alice)->pending, 300u);
  EXPECT_EQ((*alice)->reserved, 0u);
  EXPECT_TRUE(reserve("alice", 100).ok());
  // A measure that began when 300 was published counts it in `used`; the reservation made since stays, and
  // the measure's own charge is added only when that fits.
  alice = index_->GetQuota("alice");
  const int64_t now = (*alice)->reserved_at;
  const QuotaMeasure later{700, 300, (*alice)->generation, now};
  EXPECT_FALSE(*index_->RecordQuotaMeasure("alice", later, 201));  // 700 + 100 + 201 > 1000
  EXPECT_TRUE(*index_->RecordQuotaMeasure("alice", later, 200));
  alice = index_->GetQuota("alice");
  EXPECT_EQ((*alice)->used, 700u);
  EXPECT_EQ((*alice)->pending, 0u);
  EXPECT_EQ((*alice)->reserved, 300u);
  EXPECT_EQ((*alice)->measured_at, now);
  // Reservations older than their life (a commit that died before settling) go with the next measure.
  const QuotaMeasure much_later{700, 0, (*alice)->generation, now + Index::kQuotaReservationLife + 1};
  EXPECT_TRUE(*index_->RecordQuotaMeasure("alice", much_later, 0));
  alice = index_->GetQuota("alice");
  EXPECT_EQ((*alice)->reserved, 0u);
  EXPECT_TRUE((*alice)->exact());
  // Marked stale: a new generation, so a measure begun before does not land.
  ASSERT_TRUE(index_->MarkQuotaStale("alice").ok());
  EXPECT_FALSE(*index_->RecordQuotaMeasure("alice", {1, 0, (*alice)->generation, now}, 0));
  EXPECT_TRUE((*index_->GetQuota("alice"))->stale);
  // A share publishes and checks (a bucket's files), or settles a reservation unchecked (a commit's files);
  // refused, the file stays unseen.
  auto [xorb, layout] = AddXorb(3);
  const FileCommit f = MakeFile(RandomHash(rng_), xorb, layout, {{0, 3}});
  ASSERT_TRUE(CommitFiles({f}, nr.scope).ok());
  const QuotaCharge too_much{.ns = "alice", .publish = 1000, .reserve = 0, .settle = 0, .check = true};
  EXPECT_EQ(index_->ShareFiles(std::span(&f.hash, 1), nr.read_scope, &too_much).error().code,
            ErrorCode::kQuota);
  EXPECT_FALSE(*index_->FileVisibleTo(f.hash, nr.read_scope));
  alice = index_->GetQuota("alice");
  const uint64_t pending = (*alice)->pending;
  const QuotaCharge settle{.ns = "alice", .publish = 0, .reserve = 0, .settle = 5000, .check = false};
  ASSERT_TRUE(index_->ShareFiles(std::span(&f.hash, 1), nr.read_scope, &settle).ok());
  EXPECT_TRUE(*index_->FileVisibleTo(f.hash, nr.read_scope));
  EXPECT_EQ((*index_->GetQuota("alice"))->pending, pending + 5000);
  // Without a limit every charge fits.
  EXPECT_TRUE(reserve("bob", uint64_t{1} << 62).ok());
  EXPECT_FALSE(reserve("bob", uint64_t{1} << 63).ok());  // past what the column holds
  ASSERT_TRUE(index_->MarkQuotaStale(std::nullopt).ok());
  Open();  // durable
  auto list = index_->ListQuotas(std::nullopt, 10);
  ASSERT_TRUE(list.ok()) << list.error().message;
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0].ns, "alice");
  EXPECT_EQ((*list)[1].ns, "bob");
  EXPECT_FALSE((*list)[1].limit.has_value());
  for (const auto& q : *list) EXPECT_TRUE(q.stale) << q.ns;
  EXPECT_EQ(index_->ListQuotas(std::string_view("alice"), 10)->size(), 1u);
  EXPECT_FALSE(index_->ListQuotas(std::nullopt, Index::kMaxListedQuotas + 1).ok());
  ASSERT_TRUE(index_->SetQuotaLimit("alice", 5000, nullptr).ok());  // a new limit keeps what was measured
  EXPECT_EQ((*index_->GetQuota("alice"))->used, 700u);
  EXPECT_TRUE(*index_->DeleteQuota("alice", nullptr));
  EXPECT_FALSE(*index_->DeleteQuota("alice", nullptr));
  EXPECT_EQ(index_->ListQuotas(std::nullopt, 10)->size(), 1u);
}

std::vector<uint8_t> Key(std::string_view s) {
  return {s.begin(), s.end()};
}

NewRepo MakeRepo(std::string ns, std::string name, RepoType type = RepoType::kModel) {
  NewRepo r;
  r.type = type;
  r.ns = std::move(ns);
  r.name = std::move(name);
  r.created_at = 1700000000;
  r.scope = "hub:" + r.ns + "/" + r.name;
  r.read_scope = r.scope + "#read";  // unique, as every repository's is
  if (type != RepoType::kModel) r.read_scope += std::to_string(static_cast<int>(type));
  r.objects = {{Key("commit-1"), 3, Key("first commit")}};
  r.refs = {{RefKind::kBranch, "main", Key("commit-1")}};
  return r;
}

TEST_P(IndexTest, ReposAreCreatedFoundListedChangedAndDeleted) {
  Open();
  auto a = index_->CreateRepo(MakeRepo("alice", "model"));
  ASSERT_TRUE(a.ok()) << a.error().message;
  EXPECT_GT(a->id, 0);
  auto again = index_->CreateRepo(MakeRepo("alice", "model"));
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.error().code, ErrorCode::kConflict);
  EXPECT_TRUE(Refused(again.error(), RepoExists("alice", "model")));
  // The same name of another type is another repository.
  auto data = index_->CreateRepo(MakeRepo("alice", "model", RepoType::kDataset));
  ASSERT_TRUE(data.ok()) << data.error().message;
  EXPECT_NE(data->id, a->id);
  NewRepo priv = MakeRepo("bob", "secret");
  priv.is_private = true;
  ASSERT_TRUE(index_->CreateRepo(priv).ok());
  ASSERT_TRUE(index_->CreateRepo(MakeRepo("alice", "a-first")).ok());

  auto found = index_->FindRepo(RepoType::kModel, "alice", "model");
  ASSERT_TRUE(found.ok()) << found.error().message;
  EXPECT_EQ(found->id, a->id);
  EXPECT_FALSE(found->is_private);
  EXPECT_EQ(found->created_at, 1700000000);
  EXPECT_EQ(index_->FindRepo(RepoType::kModel, "alice", "Model").error().code, ErrorCode::kNotFound);
  EXPECT_TRUE(index_->FindRepo(RepoType::kModel, "bob", "secret")->is_private);

  // Listings: by (namespace, name), filtered by namespace, in pages.
  auto all = index_->ListRepos(RepoType::kModel, std::nullopt, std::nullopt, 10);
  ASSERT_TRUE(all.ok()) << all.error().message;
  ASSERT_EQ(all->size(), 3U);
  EXPECT_EQ((*all)[0].name, "a-first");
  EXPECT_EQ((*all)[1].name, "model");
  EXPECT_EQ((*all)[2].ns, "bob");
  auto alices = index_->ListRepos(RepoType::kModel, "alice", std::nullopt, 10);
  ASSERT_EQ(alices->size(), 2U);
  auto page = index_->ListRepos(RepoType::kModel, std::nullopt,
                                std::pair{std::string("alice"), std::string("model")}, 10);
  ASSERT_EQ(page->size(), 1U);
  EXPECT_EQ((*page)[0].ns, "bob");
  EXPECT_EQ(index_->ListRepos(RepoType::kDataset, std::nullopt, std::nullopt, 10)->size(), 1U);
  EXPECT_EQ(*index_->CountRepos(RepoType::kModel, "alice"), 2U);
  EXPECT_EQ(*index_->CountRepos(RepoType::kDataset, "alice"), 1U);
  EXPECT_EQ(*index_->CountRepos(RepoType::kModel, "nobody"), 0U);
  EXPECT_EQ(index_->ListRepos(RepoType::kModel, std::nullopt, std::nullopt, Index::kMaxListedRepos + 1)
                .error()
                .code,
            ErrorCode::kMalformed);

  // Settings and moves; a move onto a taken name changes nothing.
  ASSERT_TRUE(
      index_->UpdateRepo(a->id, RepoChange{.is_private = true, .ns = {}, .name = {}, .read_scope = {}}).ok());
  EXPECT_TRUE(index_->FindRepo(RepoType::kModel, "alice", "model")->is_private);
  auto taken = index_->UpdateRepo(
      a->id, RepoChange{.is_private = false, .ns = "bob", .name = "secret", .read_scope = {}});
  ASSERT_FALSE(taken.ok());
  EXPECT_EQ(taken.error().code, ErrorCode::kConflict);
  EXPECT_TRUE(Refused(taken.error(), RepoExists("bob", "secret")));
  EXPECT_TRUE(index_->FindRepo(RepoType::kModel, "alice", "model")->is_private);
  ASSERT_TRUE(
      index_
          ->UpdateRepo(a->id, RepoChange{.is_private = {}, .ns = "carol", .name = "moved", .read_scope = {}})
          .ok());
  EXPECT_EQ(index_->FindRepo(RepoType::kModel, "carol", "moved")->id, a->id);
  EXPECT_EQ(index_->FindRepo(RepoType::kModel, "alice", "model").error().code, ErrorCode::kNotFound);
  EXPECT_EQ(index_->UpdateRepo(999999, RepoChange{.is_private = true, .ns = {}, .name = {}, .read_scope = {}})
                .error()
                .code,
            ErrorCode::kNotFound);
  // The refs and objects moved with it.
  auto refs = index_->ListRefs(a->id);
  ASSERT_TRUE(refs.ok());
  ASSERT_EQ(refs->size(), 1U);
  EXPECT_EQ((*refs)[0].target, Key("commit-1"));

  // Deleting takes the refs and objects too; the id is never given again.
  ASSERT_TRUE(index_->DeleteRepo(a->id, nullptr).ok());
  EXPECT_EQ(index_->DeleteRepo(a->id, nullptr).error().code, ErrorCode::kNotFound);
  EXPECT_EQ(index_->FindRepo(RepoType::kModel, "carol", "moved").error().code, ErrorCode::kNotFound);
  EXPECT_TRUE(index_->ListRefs(a->id)->empty());
  EXPECT_FALSE((*index_->GetRepoObjects(a->id, {Key("commit-1")}))[0].has_value());
  auto reborn = index_->CreateRepo(MakeRepo("carol", "moved"));
  ASSERT_TRUE(reborn.ok());
  EXPECT_GT(reborn->id, data->id);

  Open();  // durable
  EXPECT_EQ(index_->FindRepo(RepoType::kModel, "carol", "moved")->id, reborn->id);
}

// A repository's read scope sees what is shared into it; replacing it moves every file and the totals, so
// the old scope sees nothing; deleting the repository leaves neither scope anything.
TEST_P(IndexTest, ReadScopesMoveWhenReplacedAndDieWithTheirRepository) {
  Open();
  auto repo = index_->CreateRepo(MakeRepo("alice", "model"));
  ASSERT_TRUE(repo.ok()) << repo.error().message;
  EXPECT_EQ(repo->read_scope, "hub:alice/model#read");
  EXPECT_EQ(index_->FindRepo(RepoType::kModel, "alice", "model")->read_scope, "hub:alice/model#read");
  NewRepo same_scopes = MakeRepo("alice", "other");
  same_scopes.read_scope = same_scopes.scope;
  EXPECT_EQ(index_->CreateRepo(same_scopes).error().code, ErrorCode::kMalformed);

  auto [xorb, layout] = AddXorb(4);
  std::vector<FileCommit> files;
  for (int i = 0; i < 3; ++i) files.push_back(MakeFile(RandomHash(rng_), xorb, layout, {{0, 4}}));
  ASSERT_TRUE(CommitFiles(files, repo->scope).ok());
  // All or nothing: one unknown file shares none.
  const std::vector<FileHash> with_unknown = {files[0].hash, RandomHash(rng_)};
  EXPECT_EQ(index_->ShareFiles(with_unknown, repo->read_scope).error().code, ErrorCode::kNotFound);
  EXPECT_FALSE(*index_->FileVisibleTo(files[0].hash, repo->read_scope));
  const std::vector<FileHash> two = {files[0].hash, files[1].hash, files[0].hash};
  ASSERT_TRUE(index_->ShareFiles(two, repo->read_scope).ok());
  ASSERT_TRUE(index_->ShareFiles(two, repo->read_scope).ok());  // again: no change
  EXPECT_EQ(index_->ScopeStats(repo->read_scope)->files, 2u);
  EXPECT_EQ(index_->ScopeStats(repo->read_scope)->bytes, files[0].size + files[1].size);
  EXPECT_FALSE(*index_->FileVisibleTo(files[2].hash, repo->read_scope));  // uploaded, never shared
  const std::vector<FileHash> too_many(Index::kMaxSharedFiles + 1, files[0].hash);
  EXPECT_EQ(index_->ShareFiles(too_many, repo->read_scope).error().code, ErrorCode::kMalformed);

  const std::string fresh = "hub:fresh";
  ASSERT_TRUE(
      index_->UpdateRepo(repo->id, RepoChange{.is_private = true, .ns = {}, .name = {}, .read_scope = fresh})
          .ok());
  auto found = index_->FindRepo(RepoType::kModel, "alice", "model");
  EXPECT_EQ(found->read_scope, fresh);
  EXPECT_TRUE(found->is_private);
  EXPECT_FALSE(*index_->FileVisibleTo(files[0].hash, repo->read_scope));
  EXPECT_TRUE(index_->ListFiles(repo->read_scope, std::nullopt, 10)->empty());
  EXPECT_EQ(index_->ScopeStats(repo->read_scope)->files, 0u);
  EXPECT_TRUE(*index_->FileVisibleTo(files[0].hash, fresh));
  EXPECT_TRUE(*index_->FileVisibleTo(files[1].hash, fresh));
  EXPECT_EQ(index_->ListFiles(fresh, std::nullopt, 10)->size(), 2u);
  EXPECT_EQ(index_->ScopeStats(fresh)->files, 2u);
  EXPECT_TRUE(*index_->FileVisibleTo(files[2].hash, repo->scope));  // the write scope keeps its uploads

  ASSERT_TRUE(index_->DeleteRepo(repo->id, nullptr).ok());
  for (const std::string& scope : {repo->scope, fresh}) {
    EXPECT_TRUE(index_->ListFiles(scope, std::nullopt, 10)->empty()) << scope;
    EXPECT_EQ(index_->ScopeStats(scope)->files, 0u) << scope;
    EXPECT_FALSE(*index_->FileVisibleTo(files[0].hash, scope)) << scope;
  }
  EXPECT_TRUE(index_->GetFile(files[0].hash).ok());  // the file itself stays (GC frees it, not this)
}

// A scope names its repository whether it is the write scope or the read scope, under a new read scope too;
// other scopes, and a deleted repository's, name none. A database of schema 9 gains the index of write
// scopes.
TEST_P(IndexTest, ReposAreFoundByEitherOfTheirScopes) {
  Open();
  auto model = index_->CreateRepo(MakeRepo("alice", "model"));
  auto bucket = index_->CreateRepo(MakeRepo("alice", "files", RepoType::kBucket));
  ASSERT_TRUE(model.ok() && bucket.ok());
  for (const std::string& scope : {model->scope, model->read_scope}) {
    auto found = index_->FindRepoByScope(scope);
    ASSERT_TRUE(found.ok()) << scope << ": " << found.error().message;
    EXPECT_EQ(found->id, model->id);
    EXPECT_EQ(found->type, RepoType::kModel);
    EXPECT_EQ(found->ns, "alice");
    EXPECT_EQ(found->name, "model");
    EXPECT_EQ(found->scope, model->scope);
    EXPECT_EQ(found->read_scope, model->read_scope);
  }
  auto b = index_->FindRepoByScope(bucket->read_scope);
  ASSERT_TRUE(b.ok()) << b.error().message;
  EXPECT_EQ(b->id, bucket->id);
  EXPECT_EQ(b->type, RepoType::kBucket);
  for (const std::string& scope : {std::string("team/a"), std::string(""), model->scope + "x"})
    EXPECT_EQ(index_->FindRepoByScope(scope).error().code, ErrorCode::kNotFound) << scope;

  const std::string fresh = "hub:fresh";
  ASSERT_TRUE(
      index_->UpdateRepo(model->id, RepoChange{.is_private = true, .ns = {}, .name = {}, .read_scope = fresh})
          .ok());
  EXPECT_EQ(index_->FindRepoByScope(fresh)->id, model->id);
  EXPECT_EQ(index_->FindRepoByScope(model->read_scope).error().code, ErrorCode::kNotFound);

  index_.reset();
  SetSchemaVersion(9);
  EXPECT_TRUE(Strings("SELECT name FROM sqlite_master WHERE type = 'index' AND name = 'repos_by_scope'",
                      "SELECT indexname::text FROM pg_indexes WHERE schemaname = current_schema() "
                      "AND indexname = 'repos_by_scope'")
                  .empty());
  Open();
  EXPECT_EQ(SchemaVersion(), kSchemaVersion);
  EXPECT_EQ(Strings("SELECT name FROM sqlite_master WHERE type = 'index' AND name = 'repos_by_scope'",
                    "SELECT indexname::text FROM pg_indexes WHERE schemaname = current_schema() "
                    "AND indexname = 'repos_by_scope'"),
            std::vector<std::string>{"repos_by_scope"});
  EXPECT_EQ(index_->FindRepoByScope(model->scope)->id, model->id);

  ASSERT_TRUE(index_->DeleteRepo(model->id, nullptr).ok());
  for (const std::string& scope : {model->scope, fresh})
    EXPECT_EQ(index_->FindRepoByScope(scope).error().code, ErrorCode::kNotFound) << scope;
  EXPECT_EQ(index_->FindRepoByScope(bucket->scope)->id, bucket->id);
}

// Schema 9 gives every repository a read scope that sees what it committed (its LFS links, its bucket's
// files) and nothing it merely uploaded.
TEST_P(IndexTest, MigratesSchemaEightAndPublishesWhatRepositoriesCommitted) {
  Open();
  auto [xorb, layout] = AddXorb(4);
  std::vector<FileCommit> files;
  for (int i = 0; i < 3; ++i) files.push_back(MakeFile(RandomHash(rng_), xorb, layout, {{0, 4}}));
  auto repo = index_->CreateRepo(MakeRepo("alice", "model"));
  auto bucket = index_->CreateRepo(MakeRepo("alice", "files", RepoType::kBucket));
  ASSERT_TRUE(repo.ok() && bucket.ok());
  for (const auto& scope : {repo->scope, bucket->scope}) {
    ASSERT_TRUE(CommitFiles(files, scope).ok());
  }
  const auto& f0 = files[0].hash;
  ASSERT_TRUE(index_
                  ->PutRepoObjects(repo->id, {{Key("sha-of-f0"), kFileLinkKind,
                                               std::vector<uint8_t>(f0.bytes.begin(), f0.bytes.end())}})
                  .ok());
  ASSERT_TRUE(
      index_
          ->ChangeBucket(bucket->id,
                         {{"a.bin", BucketFile{"a.bin", files[1].hash, files[1].size, 0, std::nullopt, 1}}},
                         nullptr)
          .ok());
  index_.reset();
  SetSchemaVersion(8);
  Open();
  EXPECT_EQ(SchemaVersion(), kSchemaVersion);
  auto r = index_->FindRepo(RepoType::kModel, "alice", "model");
  auto b = index_->FindRepo(RepoType::kBucket, "alice", "files");
  ASSERT_TRUE(r.ok() && b.ok());
  EXPECT_EQ(r->read_scope, r->scope + ":read");
  EXPECT_EQ(b->read_scope, b->scope + ":read");
  EXPECT_TRUE(*index_->FileVisibleTo(f0, r->read_scope));
  EXPECT_FALSE(*index_->FileVisibleTo(files[1].hash, r->read_scope));
  EXPECT_FALSE(*index_->FileVisibleTo(files[2].hash, r->read_scope));
  EXPECT_TRUE(*index_->FileVisibleTo(files[1].hash, b->read_scope));
  EXPECT_FALSE(*index_->FileVisibleTo(f0, b->read_scope));
  EXPECT_EQ(index_->ScopeStats(r->read_scope)->files, 1u);
  EXPECT_EQ(index_->ScopeStats(b->read_scope)->bytes, files[1].size);
}

// A bounded read of an object: its first bytes and its whole size, never more.
TEST_P(IndexTest, ObjectHeadsAreBounded) {
  Open();
  auto repo = index_->CreateRepo(MakeRepo("alice", "model"));
  ASSERT_TRUE(repo.ok());
  std::vector<uint8_t> big(100000);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<uint8_t>(i * 7);
  ASSERT_TRUE(index_->PutRepoObjects(repo->id, {{Key("big"), 3, big}}).ok());
  auto head = index_->GetRepoObjectHead(repo->id, Key("big"), 1000);
  ASSERT_TRUE(head.ok()) << head.error().message;
  ASSERT_TRUE(head->has_value());
  EXPECT_EQ((*head)->kind, 3);
  EXPECT_EQ((*head)->size, big.size());
  EXPECT_EQ((*head)->data, std::vector<uint8_t>(big.begin(), big.begin() + 1000));
  auto whole = index_->GetRepoObjectHead(repo->id, Key("big"), 1 << 20);
  EXPECT_EQ((*whole)->data, big);
  EXPECT_FALSE(index_->GetRepoObjectHead(repo->id, Key("none"), 10)->has_value());
}

TEST_P(IndexTest, RepoObjectsRoundtrip) {
  Open();
  auto repo = index_->CreateRepo(MakeRepo("alice", "model"));
  ASSERT_TRUE(repo.ok());
  auto other = index_->CreateRepo(MakeRepo("alice", "other"));
  std::vector<RepoObject> objects = {{Key("tree-1"), 2, Key("a tree")},
                                     {std::vector<uint8_t>(32, 7), 4, std::vector<uint8_t>(40, 1)},
                                     {Key("empty"), 1, {}}};
  ASSERT_TRUE(index_->PutRepoObjects(repo->id, objects).ok());
  ASSERT_TRUE(index_->PutRepoObjects(repo->id, {{Key("tree-1"), 2, Key("other bytes")}}).ok());  // first wins
  auto got = index_->GetRepoObjects(
      repo->id, {Key("tree-1"), Key("missing"), std::vector<uint8_t>(32, 7), Key("empty"), Key("commit-1")});
  ASSERT_TRUE(got.ok()) << got.error().message;
  ASSERT_EQ(got->size(), 5U);
  EXPECT_EQ((*got)[0]->data, Key("a tree"));
  EXPECT_EQ((*got)[0]->kind, 2);
  EXPECT_FALSE((*got)[1].has_value());
  EXPECT_EQ((*got)[2]->data, std::vector<uint8_t>(40, 1));
  EXPECT_TRUE((*got)[3]->data.empty());
  EXPECT_EQ((*got)[4]->data, Key("first commit"));
  // Objects belong to their repository.
  EXPECT_FALSE((*index_->GetRepoObjects(other->id, {Key("tree-1")}))[0].has_value());
  EXPECT_EQ(index_->PutRepoObjects(repo->id, {{{}, 1, {}}}).error().code, ErrorCode::kMalformed);
  EXPECT_EQ(index_->PutRepoObjects(repo->id, {{std::vector<uint8_t>(33, 1), 1, {}}}).error().code,
            ErrorCode::kMalformed);
  EXPECT_EQ(index_->PutRepoObjects(999999, objects).error().code, ErrorCode::kNotFound);
  EXPECT_EQ(index_->GetRepoObjects(repo->id, std::vector<std::vector<uint8_t>>(Index::kMaxObjectsPerRead + 1))
                .error()
                .code,
            ErrorCode::kMalformed);
}

TEST_P(IndexTest, RefsChangeOnlyFromTheStateExpected) {
  Open();
  auto repo = index_->CreateRepo(MakeRepo("alice", "model"));
  ASSERT_TRUE(repo.ok());
  const auto update = [&](RefKind kind, std::string name, std::optional<std::string> expected,
                          std::optional<std::string> target) {
    RefUpdate u{kind, std::move(name), {}, {}};
    if (expected) u.expected = Key(*expected);
    if (target) u.target = Key(*target);
    return index_->UpdateRef(repo->id, u);
  };
  // A ref names objects of its repository only (RefsNameOnlyObjectsThatAreThere).
  std::vector<RepoObject> commits;
  for (std::string c : {"commit-2", "commit-3"}) commits.push_back({Key(c), 3, Key(c)});
  for (int i = 0; i < 8; ++i) commits.push_back({Key("racer-" + std::to_string(i)), 3, Key("racer")});
  ASSERT_TRUE(index_->PutRepoObjects(repo->id, commits).ok());
  EXPECT_TRUE(update(RefKind::kBranch, "main", "commit-1", "commit-2").ok());
  auto stale = update(RefKind::kBranch, "main", "commit-1", "commit-3");
  ASSERT_FALSE(stale.ok());
  EXPECT_EQ(stale.error().code, ErrorCode::kConflict);
  EXPECT_TRUE(Refused(stale.error(), RefMoved("main")));
  EXPECT_EQ(update(RefKind::kBranch, "main", std::nullopt, "commit-3").error().code, ErrorCode::kConflict);
  EXPECT_TRUE(Refused(update(RefKind::kBranch, "main", std::nullopt, "commit-3").error(), RefExists("main")));
  // A delete that expects no ref refuses to pass over one, leaving it.
  EXPECT_TRUE(
      Refused(update(RefKind::kBranch, "main", std::nullopt, std::nullopt).error(), RefExists("main")));
  EXPECT_TRUE(update(RefKind::kBranch, "dev", std::nullopt, "commit-1").ok());
  EXPECT_TRUE(update(RefKind::kTag, "v1", std::nullopt, "commit-2").ok());
  EXPECT_TRUE(update(RefKind::kTag, "main", std::nullopt, "commit-1").ok());  // kinds are separate
  EXPECT_EQ(update(RefKind::kBranch, "dev", "commit-2", std::nullopt).error().code, ErrorCode::kConflict);
  EXPECT_EQ(update(RefKind::kBranch, "gone", "commit-2", std::nullopt).error().code, ErrorCode::kConflict);
  EXPECT_TRUE(Refused(update(RefKind::kBranch, "gone", "commit-2", std::nullopt).error(), RefMoved("gone")));
  EXPECT_TRUE(update(RefKind::kBranch, "dev", "commit-1", std::nullopt).ok());
  EXPECT_EQ(index_->UpdateRef(999999, RefUpdate{RefKind::kBranch, "main", {}, Key("x")}).error().code,
            ErrorCode::kNotFound);
  EXPECT_TRUE(Refused(index_->UpdateRef(999999, RefUpdate{RefKind::kBranch, "main", {}, Key("x")}).error(),
                      RepoNotIndexed(999999)));
  auto refs = index_->ListRefs(repo->id);
  ASSERT_TRUE(refs.ok());
  ASSERT_EQ(refs->size(), 3U);
  EXPECT_EQ((*refs)[0].kind, RefKind::kBranch);
  EXPECT_EQ((*refs)[0].target, Key("commit-2"));
  EXPECT_EQ((*refs)[1].kind, RefKind::kTag);
  EXPECT_EQ((*refs)[1].name, "main");
  EXPECT_EQ((*refs)[2].name, "v1");

  // Writers racing from the same state: exactly one of them moves the branch.
  constexpr int kWriters = 8;
  std::atomic<int> won{0};
  std::atomic<int> refused{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kWriters; ++i) {
    threads.emplace_back([&, i] {
      auto st = update(RefKind::kBranch, "main", "commit-2", "racer-" + std::to_string(i));
      if (st.ok()) {
        ++won;
      } else if (st.error().code == ErrorCode::kConflict) {
        ++refused;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(won.load(), 1);
  EXPECT_EQ(refused.load(), kWriters - 1);
}

// ---- Repository objects and the collector (GcIndex's repository half)

// The keys of `marks`, and `marks` themselves by key.
std::map<std::vector<uint8_t>, RepoObjectMark> ByKey(const std::vector<RepoObjectMark>& marks) {
  std::map<std::vector<uint8_t>, RepoObjectMark> out;
  for (const RepoObjectMark& m : marks) out[m.key] = m;
  return out;
}

// Every object of the repository as a scan sees it, by key.
std::map<std::vector<uint8_t>, RepoObjectMark> ScanAll(Index& index, int64_t repo) {
  auto marks = index.ScanRepoObjects(repo, std::nullopt, Index::kMaxScanned);
  EXPECT_TRUE(marks.ok()) << marks.error().message;
  return marks.ok() ? ByKey(*marks) : std::map<std::vector<uint8_t>, RepoObjectMark>{};
}

// A scan reads keys, sizes and quarantine times in key order, in pages.
TEST_P(IndexTest, RepoObjectScansReadSizesAndQuarantineInKeyOrder) {
  Open();
  auto repo = index_->CreateRepo(MakeRepo("alice", "scan"));
  ASSERT_TRUE(repo.ok()) << repo.error().message;
  ASSERT_TRUE(index_
                  ->PutRepoObjects(repo->id, {{Key("b"), 2, std::vector<uint8_t>(100000, 9)},
                                              {{0xff, 0x00}, 3, Key("xyz")},
                                              {Key("a"), 1, {}}})
                  .ok());
  ASSERT_TRUE(index_->QuarantineRepoObjects(repo->id, {Key("b")}, 100).ok());
  auto page = index_->ScanRepoObjects(repo->id, std::nullopt, 2);
  ASSERT_TRUE(page.ok()) << page.error().message;
  ASSERT_EQ(page->size(), 2U);
  EXPECT_EQ((*page)[0].key, Key("a"));
  EXPECT_EQ((*page)[0].size, 0U);
  EXPECT_EQ((*page)[0].since, 0);
  EXPECT_EQ((*page)[1].key, Key("b"));
  EXPECT_EQ((*page)[1].size, 100000U);
  EXPECT_EQ((*page)[1].since, 100);
  auto rest = index_->ScanRepoObjects(repo->id, (*page)[1].key, 10);
  ASSERT_TRUE(rest.ok());
  ASSERT_EQ(rest->size(), 2U);
  EXPECT_EQ((*rest)[0].key, Key("commit-1"));
  EXPECT_EQ((*rest)[1].key, (std::vector<uint8_t>{0xff, 0x00}));  // bytewise: after every ASCII key
  EXPECT_EQ((*rest)[1].size, 3U);
  EXPECT_TRUE(index_->ScanRepoObjects(repo->id, (*rest)[1].key, 10)->empty());
  EXPECT_TRUE(index_->ScanRepoObjects(repo->id + 1000, std::nullopt, 10)->empty());
  EXPECT_EQ(index_->ScanRepoObjects(repo->id, std::nullopt, Index::kMaxScanned + 1).error().code,
            ErrorCode::kMalformed);
}

// A quarantine keeps the time of the first mark that found the object unreachable, and is only ever of
// objects that exist; a release ends it.
TEST_P(IndexTest, RepoObjectQuarantineKeepsTheFirstTimeAndOnlyObjects) {
  Open();
  auto repo = index_->CreateRepo(MakeRepo("alice", "quarantine"));
  ASSERT_TRUE(repo.ok()) << repo.error().message;
  ASSERT_TRUE(index_->PutRepoObjects(repo->id, {{Key("a"), 3, Key("1")}, {Key("b"), 3, Key("2")}}).ok());
  ASSERT_TRUE(index_->QuarantineRepoObjects(repo->id, {Key("a"), Key("missing")}, 100).ok());
  ASSERT_TRUE(index_->QuarantineRepoObjects(repo->id, {Key("a"), Key("b")}, 200).ok());
  auto marks = ScanAll(*index_, repo->id);
  EXPECT_EQ(marks[Key("a")].since, 100);
  EXPECT_EQ(marks[Key("b")].since, 200);
  EXPECT_EQ(marks[Key("commit-1")].since, 0);
  EXPECT_EQ(Strings("SELECT count(*) FROM gc_repo_quarantine", "SELECT count(*) FROM gc_repo_quarantine"),
            std::vector<std::string>{"2"});  // nothing for "missing"
  // Another repository's objects of the same key are not this one's.
  auto other = index_->CreateRepo(MakeRepo("alice", "other"));
  ASSERT_TRUE(other.ok());
  ASSERT_TRUE(index_->QuarantineRepoObjects(other->id, {Key("a")}, 300).ok());
  EXPECT_EQ(ScanAll(*index_, repo->id)[Key("a")].since, 100);

  ASSERT_TRUE(index_->ReleaseRepoObjects(repo->id, {Key("a"), Key("missing")}).ok());
  marks = ScanAll(*index_, repo->id);
  EXPECT_EQ(marks[Key("a")].since, 0);
  EXPECT_EQ(marks[Key("b")].since, 200);
  ASSERT_TRUE(index_->QuarantineRepoObjects(repo->id, {Key("a")}, 400).ok());  // a new quarantine, a new time
  EXPECT_EQ(ScanAll(*index_, repo->id)[Key("a")].since, 400);
  EXPECT_TRUE(index_->QuarantineRepoObjects(repo->id, {}, 1).ok());
  EXPECT_TRUE(index_->ReleaseRepoObjects(repo->id, {}).ok());
  const std::vector<std::vector<uint8_t>> too_many(Index::kMaxScanned + 1, Key("a"));
  EXPECT_EQ(index_->QuarantineRepoObjects(repo->id, too_many, 1).error().code, ErrorCode::kMalformed);
  EXPECT_EQ(index_->ReleaseRepoObjects(repo->id, too_many).error().code, ErrorCode::kMalformed);
}

// What a new commit names again, or a ref is about to, is wanted: a put or a revival ends its quarantine.
TEST_P(IndexTest, PutsAndRevivalsReleaseQuarantinedObjects) {
  Open();
  auto repo = index_->CreateRepo(MakeRepo("alice", "revive"));
  ASSERT_TRUE(repo.ok()) << repo.error().message;
  ASSERT_TRUE(index_
                  ->PutRepoObjects(repo->id, {{Key("a"), 3, Key("first a")},
                                              {Key("b"), 3, Key("b")},
                                              {Key("c"), 2, Key("c")},
                                              {Key("d"), 2, Key("d")}})
                  .ok());
  ASSERT_TRUE(index_->QuarantineRepoObjects(repo->id, {Key("a"), Key("b"), Key("c")}, 100).ok());

  // A put releases every key it is given, new or not (the first value stays).
  ASSERT_TRUE(
      index_->PutRepoObjects(repo->id, {{Key("a"), 3, Key("second a")}, {Key("e"), 1, Key("e")}}).ok());
  auto marks = ScanAll(*index_, repo->id);
  EXPECT_EQ(marks[Key("a")].since, 0);
  EXPECT_EQ(marks[Key("b")].since, 100);
  EXPECT_EQ(marks[Key("e")].since, 0);
  EXPECT_EQ((*index_->GetRepoObjects(repo->id, {Key("a")}))[0]->data, Key("first a"));

  // A revival answers for each key, and releases the quarantined ones.
  auto revived = index_->ReviveRepoObjects(repo->id, {Key("b"), Key("d"), Key("missing"), Key("c")});
  ASSERT_TRUE(revived.ok()) << revived.error().message;
  EXPECT_EQ(*revived, (std::vector<ObjectRevival>{ObjectRevival::kRevived, ObjectRevival::kPresent,
                                                  ObjectRevival::kAbsent, ObjectRevival::kRevived}));
  for (const auto& [key, mark] : ScanAll(*index_, repo->id)) EXPECT_EQ(mark.since, 0);
  EXPECT_EQ(Strings("SELECT count(*) FROM gc_repo_quarantine", "SELECT count(*) FROM gc_repo_quarantine"),
            std::vector<std::string>{"0"});
  // Revived once is present from then on; nothing is another repository's.
  EXPECT_EQ(*index_->ReviveRepoObjects(repo->id, {Key("b")}),
            std::vector<ObjectRevival>{ObjectRevival::kPresent});
  EXPECT_EQ(*index_->ReviveRepoObjects(repo->id + 1000, {Key("b")}),
            std::vector<ObjectRevival>{ObjectRevival::kAbsent});
  EXPECT_TRUE(index_->ReviveRepoObjects(repo->id, {})->empty());
  EXPECT_EQ(index_
                ->ReviveRepoObjects(
                    repo->id, std::vector<std::vector<uint8_t>>(Index::kMaxObjectsPerRead + 1, Key("a")))
                .error()
                .code,
            ErrorCode::kMalformed);
}

// A sweep deletes what is still quarantined as the mark read it, and nothing a write wanted since: revived,
// put again, or released and quarantined anew by a later mark (another time).
TEST_P(IndexTest, RepoObjectSweepsCompareBeforeTheyDelete) {
  Open();
  auto repo = index_->CreateRepo(MakeRepo("alice", "sweep"));
  ASSERT_TRUE(repo.ok()) << repo.error().message;
  std::vector<RepoObject> objects;
  for (const char* k : {"a", "b", "c", "d", "e"}) {
    objects.push_back({Key(k), 3, std::vector<uint8_t>(static_cast<size_t>(10 * (k[0] - 'a' + 1)), 1)});
  }
  ASSERT_TRUE(index_->PutRepoObjects(repo->id, objects).ok());
  ASSERT_TRUE(index_->QuarantineRepoObjects(repo->id, {Key("a"), Key("b"), Key("c"), Key("d")}, 100).ok());
  auto scanned = index_->ScanRepoObjects(repo->id, std::nullopt, 100);
  ASSERT_TRUE(scanned.ok()) << scanned.error().message;
  std::vector<RepoObjectMark> marks;
  for (const RepoObjectMark& m : *scanned) {
    if (m.since != 0) marks.push_back(m);
  }
  ASSERT_EQ(marks.size(), 4U);

  // Meanwhile: b revived, c released and quarantined again by a later mark, d put again.
  EXPECT_EQ((*index_->ReviveRepoObjects(repo->id, {Key("b")}))[0], ObjectRevival::kRevived);
  ASSERT_TRUE(index_->ReleaseRepoObjects(repo->id, {Key("c")}).ok());
  ASSERT_TRUE(index_->QuarantineRepoObjects(repo->id, {Key("c")}, 200).ok());
  ASSERT_TRUE(index_->PutRepoObjects(repo->id, {{Key("d"), 3, Key("d")}}).ok());

  auto swept = index_->SweepRepoObjects(repo->id, marks);
  ASSERT_TRUE(swept.ok()) << swept.error().message;
  EXPECT_EQ(swept->objects, 1U);
  EXPECT_EQ(swept->bytes, 10U);  // a
  auto got = index_->GetRepoObjects(repo->id, {Key("a"), Key("b"), Key("c"), Key("d"), Key("e")});
  ASSERT_TRUE(got.ok());
  EXPECT_FALSE((*got)[0].has_value());
  for (size_t i = 1; i < 5; ++i) EXPECT_TRUE((*got)[i].has_value()) << i;
  auto after = ScanAll(*index_, repo->id);
  EXPECT_EQ(after.count(Key("a")), 0U);
  EXPECT_EQ(after[Key("c")].since, 200);

  // The same marks again delete nothing; neither does a mark of an object that is not quarantined, nor one
  // given for another repository.
  EXPECT_EQ(index_->SweepRepoObjects(repo->id, marks)->objects, 0U);
  const RepoObjectMark e{Key("e"), 50, 0};
  EXPECT_EQ(index_->SweepRepoObjects(repo->id, std::span(&e, 1))->objects, 0U);
  const RepoObjectMark c{Key("c"), 30, 200};
  EXPECT_EQ(index_->SweepRepoObjects(repo->id + 1000, std::span(&c, 1))->objects, 0U);
  EXPECT_TRUE(index_->SweepRepoObjects(repo->id, {}).ok());
  // c as the later mark read it goes.
  swept = index_->SweepRepoObjects(repo->id, std::span(&c, 1));
  ASSERT_TRUE(swept.ok());
  EXPECT_EQ(swept->objects, 1U);
  EXPECT_EQ(swept->bytes, 30U);
  EXPECT_FALSE((*index_->GetRepoObjects(repo->id, {Key("c")}))[0].has_value());
  EXPECT_EQ(Strings("SELECT count(*) FROM gc_repo_quarantine", "SELECT count(*) FROM gc_repo_quarantine"),
            std::vector<std::string>{"0"});
  // A swept object is absent to a revival, and may be put again.
  EXPECT_EQ((*index_->ReviveRepoObjects(repo->id, {Key("a")}))[0], ObjectRevival::kAbsent);
  ASSERT_TRUE(index_->PutRepoObjects(repo->id, {{Key("a"), 3, Key("again")}}).ok());
  EXPECT_EQ((*index_->GetRepoObjects(repo->id, {Key("a")}))[0]->data, Key("again"));
  const std::vector<RepoObjectMark> too_many(Index::kMaxScanned + 1, c);
  EXPECT_EQ(index_->SweepRepoObjects(repo->id, too_many).error().code, ErrorCode::kMalformed);
}

// Sweeps, revivals and puts of the same objects at once, from two nodes: whatever the order, an object
// answered present or revived is still there afterwards, so is one put again, and every other one is swept.
TEST_P(IndexTest, RepoObjectSweepsAndRevivalsAtOnce) {
  Open();
  auto second = OpenIndex(url_);
  ASSERT_TRUE(second.ok()) << second.error().message;
  auto repo = index_->CreateRepo(MakeRepo("alice", "race"));
  ASSERT_TRUE(repo.ok());
  for (int round = 0; round < 10; ++round) {
    constexpr size_t kObjects = 60;
    std::vector<RepoObject> objects;
    std::vector<std::vector<uint8_t>> keys;
    for (size_t i = 0; i < kObjects; ++i) {
      keys.push_back(Key("r" + std::to_string(round) + "-" + std::to_string(100 + i)));
      objects.push_back({keys.back(), 3, Key("an object")});
    }
    ASSERT_TRUE(index_->PutRepoObjects(repo->id, objects).ok());
    ASSERT_TRUE(index_->QuarantineRepoObjects(repo->id, keys, 100).ok());
    // The sweep takes them in key order, a few at a time; the revivals come from the other end, in pairs of
    // every other key, so that the two meet somewhere in the middle; the objects of every fifth key are put
    // again meanwhile.
    std::vector<std::vector<uint8_t>> wanted;
    for (size_t i = kObjects; i >= 2; i -= 2) wanted.push_back(keys[i - 1]);
    std::vector<ObjectRevival> revived;
    std::mutex failure_mu;
    std::string failure;
    const auto fail = [&](const std::string& message) {
      std::lock_guard lock(failure_mu);
      failure = message;
    };
    uint64_t swept = 0;
    std::thread sweeper([&] {
      for (size_t i = 0; i < kObjects; i += 3) {
        std::vector<RepoObjectMark> marks;
        for (size_t j = i; j < std::min(kObjects, i + 3); ++j) marks.push_back({keys[j], 9, 100});
        auto r = index_->SweepRepoObjects(repo->id, marks);
        if (!r.ok()) {
          fail(r.error().message);
          return;
        }
        swept += r->objects;
      }
    });
    std::thread putter([&] {
      for (size_t i = kObjects; i >= 5; i -= 5) {
        if (auto st = (*second)->PutRepoObjects(repo->id, {objects[i - 1]}); !st.ok()) {
          fail(st.error().message);
          return;
        }
      }
    });
    std::thread reviver([&] {
      for (size_t i = 0; i < wanted.size(); i += 2) {
        auto r = (*second)->ReviveRepoObjects(repo->id, {wanted[i], wanted[i + 1]});
        if (!r.ok()) {
          fail(r.error().message);
          return;
        }
        revived.insert(revived.end(), r->begin(), r->end());
      }
    });
    sweeper.join();
    reviver.join();
    putter.join();
    ASSERT_EQ(failure, "");
    ASSERT_EQ(revived.size(), wanted.size());
    auto got = index_->GetRepoObjects(repo->id, wanted);
    ASSERT_TRUE(got.ok());
    // Revived objects that were put again may have been found either way; the others exactly as answered.
    const auto put_again = [&](size_t k) { return k % 5 == 4; };
    for (size_t i = 0; i < wanted.size(); ++i) {
      const size_t k = kObjects - 1 - 2 * i;
      if (put_again(k)) continue;
      EXPECT_EQ((*got)[i].has_value(), revived[i] != ObjectRevival::kAbsent)
          << "round " << round << " key " << k;
      EXPECT_NE(revived[i], ObjectRevival::kPresent) << "round " << round << " key " << k;
    }
    auto all = index_->GetRepoObjects(repo->id, keys);
    ASSERT_TRUE(all.ok());
    uint64_t gone = 0;
    for (size_t k = 0; k < kObjects; ++k) {
      if (put_again(k)) {
        EXPECT_TRUE((*all)[k].has_value()) << "round " << round << " key " << k;
      }
      if (!(*all)[k].has_value()) ++gone;
    }
    // Whatever is gone was swept (and what was put again may have been swept before).
    EXPECT_GE(swept, gone) << "round " << round;
    EXPECT_GE(gone, kObjects / 2 - kObjects / 10) << "round " << round;  // no revival or put named those
  }
}

// Deleting objects (the links a purge removes) takes their quarantine with them.
TEST_P(IndexTest, DeletedRepoObjectsTakeTheirQuarantine) {
  Open();
  auto repo = index_->CreateRepo(MakeRepo("alice", "purge"));
  ASSERT_TRUE(repo.ok()) << repo.error().message;
  ASSERT_TRUE(index_->PutRepoObjects(repo->id, {{Key("a"), 16, Key("1")}, {Key("b"), 16, Key("2")}}).ok());
  ASSERT_TRUE(index_->QuarantineRepoObjects(repo->id, {Key("a")}, 100).ok());
  auto deleted = index_->DeleteRepoObjects(repo->id, {Key("a"), Key("b"), Key("missing")});
  ASSERT_TRUE(deleted.ok()) << deleted.error().message;
  EXPECT_EQ(*deleted, 2U);
  auto got = index_->GetRepoObjects(repo->id, {Key("a"), Key("b"), Key("commit-1")});
  ASSERT_TRUE(got.ok());
  EXPECT_FALSE((*got)[0].has_value());
  EXPECT_FALSE((*got)[1].has_value());
  EXPECT_TRUE((*got)[2].has_value());
  EXPECT_EQ(Strings("SELECT count(*) FROM gc_repo_quarantine", "SELECT count(*) FROM gc_repo_quarantine"),
            std::vector<std::string>{"0"});
  EXPECT_EQ(*index_->DeleteRepoObjects(repo->id, {Key("a")}), 0U);
  EXPECT_EQ(*index_->DeleteRepoObjects(repo->id, {}), 0U);
  EXPECT_EQ(index_->DeleteRepoObjects(999999, {Key("a")}).error().code, ErrorCode::kNotFound);
  EXPECT_EQ(index_
                ->DeleteRepoObjects(
                    repo->id, std::vector<std::vector<uint8_t>>(Index::kMaxObjectsPerRead + 1, Key("a")))
                .error()
                .code,
            ErrorCode::kMalformed);
}

// A listing of one kind of object, in key order (bytewise), in pages.
TEST_P(IndexTest, RepoObjectsAreListedByKindInPages) {
  Open();
  auto repo = index_->CreateRepo(MakeRepo("alice", "list"));
  ASSERT_TRUE(repo.ok()) << repo.error().message;
  ASSERT_TRUE(index_
                  ->PutRepoObjects(repo->id, {{Key("link-b"), 16, Key("B")},
                                              {{0xc3, 0xa9}, 16, Key("high")},
                                              {Key("link-a"), 16, Key("A")},
                                              {Key("link-c"), 16, Key("C")},
                                              {Key("tree"), 2, Key("T")}})
                  .ok());
  std::vector<RepoObject> all;
  std::optional<std::vector<uint8_t>> after;
  for (int pages = 0; pages < 10; ++pages) {
    auto page = index_->ListRepoObjects(repo->id, 16, after, 2);
    ASSERT_TRUE(page.ok()) << page.error().message;
    ASSERT_LE(page->size(), 2U);
    if (page->empty()) break;
    after = page->back().key;
    for (auto& o : *page) all.push_back(std::move(o));
  }
  ASSERT_EQ(all.size(), 4U);
  EXPECT_EQ(all[0].key, Key("link-a"));
  EXPECT_EQ(all[0].data, Key("A"));
  EXPECT_EQ(all[0].kind, 16);
  EXPECT_EQ(all[1].key, Key("link-b"));
  EXPECT_EQ(all[2].key, Key("link-c"));
  EXPECT_EQ(all[3].key, (std::vector<uint8_t>{0xc3, 0xa9}));
  EXPECT_EQ(all[3].data, Key("high"));
  auto trees = index_->ListRepoObjects(repo->id, 2, std::nullopt, 10);
  ASSERT_TRUE(trees.ok());
  ASSERT_EQ(trees->size(), 1U);
  EXPECT_EQ((*trees)[0].key, Key("tree"));
  EXPECT_EQ((*trees)[0].data, Key("T"));
  auto commits = index_->ListRepoObjects(repo->id, 3, std::nullopt, 10);
  ASSERT_TRUE(commits.ok());
  ASSERT_EQ(commits->size(), 1U);  // MakeRepo's
  EXPECT_TRUE(index_->ListRepoObjects(repo->id, 16, std::nullopt, 0)->empty());
  EXPECT_TRUE(index_->ListRepoObjects(repo->id + 1000, 16, std::nullopt, 10)->empty());
  EXPECT_EQ(index_->ListRepoObjects(repo->id, 16, std::nullopt, Index::kMaxObjectsPerRead + 1).error().code,
            ErrorCode::kMalformed);
}

// A ref never names what is not an object of its repository (a collector may have swept it); a stale
// expectation is still a conflict first.
TEST_P(IndexTest, RefsNameOnlyObjectsThatAreThere) {
  Open();
  auto repo = index_->CreateRepo(MakeRepo("alice", "refs"));
  ASSERT_TRUE(repo.ok()) << repo.error().message;
  auto other = index_->CreateRepo(MakeRepo("alice", "other"));
  ASSERT_TRUE(other.ok());
  ASSERT_TRUE(index_->PutRepoObjects(other->id, {{Key("theirs"), 3, Key("c")}}).ok());
  const auto update = [&](std::string name, std::optional<std::string> expected,
                          std::optional<std::string> target) {
    RefUpdate u{RefKind::kBranch, std::move(name), {}, {}};
    if (expected) u.expected = Key(*expected);
    if (target) u.target = Key(*target);
    return index_->UpdateRef(repo->id, u);
  };
  EXPECT_EQ(update("main", "commit-1", "gone").error().code, ErrorCode::kUnknownReference);
  EXPECT_TRUE(Refused(update("main", "commit-1", "gone").error(), RefTargetGone("main")));
  EXPECT_EQ(update("dev", std::nullopt, "gone").error().code, ErrorCode::kUnknownReference);
  EXPECT_EQ(update("dev", std::nullopt, "theirs").error().code, ErrorCode::kUnknownReference);
  EXPECT_EQ(update("main", "commit-0", "gone").error().code,
            ErrorCode::kConflict);  // stale: a conflict first
  EXPECT_EQ(update("main", std::nullopt, "gone").error().code, ErrorCode::kConflict);
  auto refs = index_->ListRefs(repo->id);
  ASSERT_TRUE(refs.ok());
  ASSERT_EQ(refs->size(), 1U);
  EXPECT_EQ((*refs)[0].target, Key("commit-1"));

  // A commit swept by the collector can no longer be named; one put again can.
  ASSERT_TRUE(index_->PutRepoObjects(repo->id, {{Key("old"), 3, Key("old")}}).ok());
  ASSERT_TRUE(index_->QuarantineRepoObjects(repo->id, {Key("old")}, 100).ok());
  const RepoObjectMark old{Key("old"), 3, 100};
  ASSERT_EQ(index_->SweepRepoObjects(repo->id, std::span(&old, 1))->objects, 1U);
  EXPECT_EQ(update("main", "commit-1", "old").error().code, ErrorCode::kUnknownReference);
  ASSERT_TRUE(index_->PutRepoObjects(repo->id, {{Key("old"), 3, Key("old")}}).ok());
  EXPECT_TRUE(update("main", "commit-1", "old").ok());
  // Deleting a ref names no target.
  EXPECT_TRUE(update("main", "old", std::nullopt).ok());
  EXPECT_TRUE(index_->ListRefs(repo->id)->empty());
}

// Deleting a repository takes its quarantine too: nothing of it is left for a sweep.
TEST_P(IndexTest, DeletedReposLeaveNoQuarantine) {
  Open();
  auto repo = index_->CreateRepo(MakeRepo("alice", "doomed"));
  ASSERT_TRUE(repo.ok()) << repo.error().message;
  auto kept = index_->CreateRepo(MakeRepo("alice", "kept"));
  ASSERT_TRUE(kept.ok());
  ASSERT_TRUE(index_->PutRepoObjects(repo->id, {{Key("a"), 3, Key("a")}}).ok());
  ASSERT_TRUE(index_->QuarantineRepoObjects(repo->id, {Key("a"), Key("commit-1")}, 100).ok());
  ASSERT_TRUE(index_->QuarantineRepoObjects(kept->id, {Key("commit-1")}, 100).ok());
  ASSERT_TRUE(index_->DeleteRepo(repo->id, nullptr).ok());
  EXPECT_TRUE(index_->ScanRepoObjects(repo->id, std::nullopt, 100)->empty());
  const std::string count =
      "SELECT count(*) FROM gc_repo_quarantine WHERE repo = " + std::to_string(repo->id);
  EXPECT_EQ(Strings(count, count), std::vector<std::string>{"0"});
  EXPECT_EQ(ScanAll(*index_, kept->id)[Key("commit-1")].since, 100);  // another repository's stays
}

// Scrubbing after deletes succeeds, with and without a vacuum, and leaves what is stored readable. On SQLite
// the deleted bytes are then in no file of the database.
TEST_P(IndexTest, ScrubbingDeletedRowsKeepsTheRest) {
  Open();
  auto repo = index_->CreateRepo(MakeRepo("alice", "scrub"));
  ASSERT_TRUE(repo.ok()) << repo.error().message;
  const std::string secret = "a secret no file may keep: 7f3a9c1e";
  std::vector<uint8_t> big;
  for (int i = 0; i < 200; ++i) big.insert(big.end(), secret.begin(), secret.end());
  ASSERT_TRUE(index_
                  ->PutRepoObjects(repo->id, {{Key("small"), 3, Key(secret)},
                                              {Key("big"), 3, big},
                                              {Key("kept"), 3, Key("kept bytes")}})
                  .ok());
  ASSERT_EQ(*index_->DeleteRepoObjects(repo->id, {Key("small"), Key("big")}), 2U);
  const auto in_files = [&] {
    for (const char* name : {"index.db", "index.db-wal"}) {
      std::ifstream in(dir_ / name, std::ios::binary);
      const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      if (bytes.find(secret) != std::string::npos) return true;
    }
    return false;
  };
  for (bool vacuum : {false, true}) {
    SCOPED_TRACE(vacuum);
    auto done = index_->ScrubDeleted(vacuum);
    ASSERT_TRUE(done.ok()) << done.error().message;
    EXPECT_FALSE(done->empty());
    if (GetParam() == Backend::kSqlite) {
      EXPECT_FALSE(in_files());
    }
    auto got = index_->GetRepoObjects(repo->id, {Key("kept"), Key("big"), Key("commit-1")});
    ASSERT_TRUE(got.ok()) << got.error().message;
    EXPECT_EQ((*got)[0]->data, Key("kept bytes"));
    EXPECT_FALSE((*got)[1].has_value());
    EXPECT_TRUE((*got)[2].has_value());
    ASSERT_TRUE(index_->PutRepoObjects(repo->id, {{Key(vacuum ? "v1" : "v0"), 3, Key("after")}}).ok());
  }
}

TEST_P(IndexTest, BucketFilesChangeInPlaceAndListByPrefix) {
  Open();
  NewRepo b = MakeRepo("alice", "bucket", RepoType::kBucket);
  b.objects.clear();
  b.refs.clear();
  auto repo = index_->CreateRepo(b);
  ASSERT_TRUE(repo.ok());
  const auto file = [&](std::string path, uint64_t size, std::optional<std::string> type = {}) {
    BucketFile f{std::move(path), RandomHash(rng_), size, 1700000000123, std::move(type), 1700000001};
    return BucketChange{f.path, f};
  };
  ASSERT_TRUE(index_
                  ->ChangeBucket(repo->id,
                                 {file("a.txt", 1, "text/plain"), file("dir/b.bin", 2), file("dir/c/d", 3),
                                  file("dir0", 4), file("z\xc3\xa9", 5)},
                                 nullptr)
                  .ok());
  auto all = index_->ListBucket(repo->id, "", std::nullopt, 100);
  ASSERT_TRUE(all.ok()) << all.error().message;
  ASSERT_EQ(all->size(), 5U);
  EXPECT_EQ((*all)[0].path, "a.txt");
  EXPECT_EQ((*all)[0].content_type, "text/plain");
  EXPECT_EQ((*all)[0].mtime_ms, 1700000000123);
  EXPECT_FALSE((*all)[1].content_type.has_value());
  auto dir = index_->ListBucket(repo->id, "dir/", std::nullopt, 100);
  ASSERT_EQ(dir->size(), 2U);  // not dir0
  EXPECT_EQ((*dir)[1].path, "dir/c/d");
  auto page = index_->ListBucket(repo->id, "", std::string_view("dir/c"), 2);  // from dir/c on
  ASSERT_EQ(page->size(), 2U);
  EXPECT_EQ((*page)[0].path, "dir/c/d");
  EXPECT_EQ(index_->ListBucket(repo->id, "z\xc3\xa9", std::nullopt, 10)->size(),
            1U);  // a prefix with no upper bound
  // Replace one, delete another, all at once.
  ASSERT_TRUE(index_
                  ->ChangeBucket(repo->id,
                                 {file("a.txt", 10), {"dir0", std::nullopt}, {"missing", std::nullopt}},
                                 nullptr)
                  .ok());
  auto got = index_->GetBucketFiles(repo->id, {"a.txt", "dir0", "dir/b.bin"});
  ASSERT_TRUE(got.ok());
  EXPECT_EQ((*got)[0]->size, 10U);
  EXPECT_FALSE((*got)[1].has_value());
  EXPECT_EQ((*got)[2]->size, 2U);
  auto totals = index_->GetBucketTotals(repo->id);
  ASSERT_TRUE(totals.ok());
  EXPECT_EQ(totals->files, 4U);
  EXPECT_EQ(totals->bytes, 10U + 2 + 3 + 5);
  EXPECT_EQ(index_->ChangeBucket(999999, {file("x", 1)}, nullptr).error().code, ErrorCode::kNotFound);
  // Deleting the bucket takes its files.
  ASSERT_TRUE(index_->DeleteRepo(repo->id, nullptr).ok());
  EXPECT_TRUE(index_->ListBucket(repo->id, "", std::nullopt, 10)->empty());
}

// Nodes starting at once against a fresh database: every one opens, the schema is created once.
TEST_P(IndexTest, ConcurrentOpensMigrateOnce) {
  constexpr int kNodes = 4;
  std::vector<std::unique_ptr<Index>> nodes(kNodes);
  std::vector<std::string> errors(kNodes);
  std::vector<std::thread> threads;
  for (int i = 0; i < kNodes; ++i) {
    threads.emplace_back([&, i] {
      auto r = OpenIndex(url_);
      if (r.ok()) {
        nodes[static_cast<size_t>(i)] = std::move(r).value();
      } else {
        errors[static_cast<size_t>(i)] = r.error().message;
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < kNodes; ++i)
    ASSERT_TRUE(nodes[static_cast<size_t>(i)]) << errors[static_cast<size_t>(i)];
  EXPECT_EQ(SchemaVersion(), kSchemaVersion);
  // And they agree on the secrets, whoever stored them first.
  std::vector<std::string> secrets(kNodes);
  threads.clear();
  for (int i = 0; i < kNodes; ++i) {
    threads.emplace_back([&, i] {
      auto s = nodes[static_cast<size_t>(i)]->SharedSecret("jwt", "node" + std::to_string(i));
      if (s.ok()) secrets[static_cast<size_t>(i)] = *s;
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& s : secrets) EXPECT_EQ(s, secrets[0]);
  EXPECT_TRUE(secrets[0].starts_with("node"));
}

// Two nodes on one database receive the same uploads at the same moment: every registration succeeds, each
// record is stored once, the counters count it once, and a file sent by two scopes is visible to both.
// Two nodes moving one branch at once, round after round: in each round every writer starts from the same
// head, and exactly one of them moves it (the others are refused and change nothing), whichever node it is
// on.
TEST_P(IndexTest, TwoNodesMovingOneBranchAtOnce) {
  Open();
  auto second = OpenIndex(url_);
  ASSERT_TRUE(second.ok()) << second.error().message;
  std::array<Index*, 2> nodes{index_.get(), second->get()};
  auto repo = index_->CreateRepo(MakeRepo("alice", "race"));
  ASSERT_TRUE(repo.ok());
  std::string head = "commit-1";
  for (int round = 0; round < 10; ++round) {
    constexpr int kWriters = 6;  // 3 on each node
    std::atomic<int> won{0};
    std::atomic<int> refused{0};
    std::vector<std::string> winner(kWriters);
    std::vector<RepoObject> commits;
    for (int i = 0; i < kWriters; ++i) {
      commits.push_back({Key("r" + std::to_string(round) + "-w" + std::to_string(i)), 3, Key("a commit")});
    }
    ASSERT_TRUE(index_->PutRepoObjects(repo->id, commits).ok());
    std::vector<std::thread> threads;
    for (int i = 0; i < kWriters; ++i) {
      threads.emplace_back([&, i] {
        const std::string mine = "r" + std::to_string(round) + "-w" + std::to_string(i);
        auto st = nodes[i % 2]->UpdateRef(repo->id, {RefKind::kBranch, "main", Key(head), Key(mine)});
        if (st.ok()) {
          ++won;
          winner[i] = mine;
        } else if (st.error().code == ErrorCode::kConflict) {
          ++refused;
        }
      });
    }
    for (auto& t : threads) t.join();
    ASSERT_EQ(won.load(), 1) << "round " << round;
    ASSERT_EQ(refused.load(), kWriters - 1) << "round " << round;
    for (const auto& w : winner) {
      if (!w.empty()) head = w;
    }
    for (Index* node : nodes) {
      auto refs = node->ListRefs(repo->id);
      ASSERT_TRUE(refs.ok());
      ASSERT_EQ(refs->size(), 1u);
      EXPECT_EQ((*refs)[0].target, Key(head)) << "round " << round;
    }
  }
}

TEST_P(IndexTest, TwoNodesRegisteringTheSameRecordsAtOnce) {
  Open();
  auto second = OpenIndex(url_);
  ASSERT_TRUE(second.ok()) << second.error().message;
  std::array<Index*, 2> nodes{index_.get(), second->get()};
  constexpr int kRecords = 40;
  std::vector<std::pair<XorbHash, xet::XorbLayout>> xorbs;
  for (int i = 0; i < kRecords; ++i) xorbs.emplace_back(RandomHash(rng_), MakeLayout(rng_, 6));
  std::vector<ShardCommit> commits;
  for (int i = 0; i < kRecords; ++i) {
    const auto& [x, l] = xorbs[static_cast<size_t>(i)];
    const auto& [y, m] = xorbs[static_cast<size_t>((i + 1) % kRecords)];
    commits.push_back(
        {.shard = RandomHash(rng_),
         .shard_size = 100,
         .files = {MakeFile(RandomHash(rng_), x, l, {{0, 6}}), MakeFile(RandomHash(rng_), y, m, {{1, 3}})},
         .dedup = {{l.chunks[0].hash, x}, {m.chunks[1].hash, y}},
         .scope = "",
         .xorbs = {.listed = {x}, .referenced = {y}}});
  }
  // Each node: 4 threads, each registering every xorb then every shard, in its own order.
  std::atomic<int> failures{0};
  std::atomic<int> new_xorbs{0};
  std::atomic<int> new_shards{0};
  std::vector<std::thread> threads;
  std::mutex err_mu;
  std::string first_error;
  for (int node = 0; node < 2; ++node) {
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, node, t] {
        std::mt19937_64 order(static_cast<uint64_t>(node * 10 + t));
        std::vector<size_t> idx(kRecords);
        std::iota(idx.begin(), idx.end(), 0);
        std::shuffle(idx.begin(), idx.end(), order);
        const auto fail = [&](const Error& e) {
          ++failures;
          std::lock_guard lock(err_mu);
          if (first_error.empty()) first_error = e.message;
        };
        for (size_t i : idx) {
          auto put = nodes[static_cast<size_t>(node)]->PutXorb(xorbs[i].first, xorbs[i].second);
          if (!put.ok())
            fail(put.error());
          else if (*put)
            ++new_xorbs;
        }
        std::shuffle(idx.begin(), idx.end(), order);
        for (size_t i : idx) {
          ShardCommit c = commits[i];
          c.scope = "scope" + std::to_string(node);
          auto out = nodes[static_cast<size_t>(node)]->CommitShard(c);
          if (!out.ok())
            fail(out.error());
          else if (!out->already_existed)
            ++new_shards;
        }
      });
    }
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0) << first_error;
  EXPECT_EQ(new_xorbs.load(), kRecords);   // one "new" per xorb, however many sent it
  EXPECT_EQ(new_shards.load(), kRecords);  // and per shard
  for (Index* node : nodes) {
    auto stats = node->Stats();
    ASSERT_TRUE(stats.ok());
    EXPECT_EQ(stats->xorbs, static_cast<uint64_t>(kRecords));
    EXPECT_EQ(stats->shards, static_cast<uint64_t>(kRecords));
    EXPECT_EQ(stats->files, static_cast<uint64_t>(2 * kRecords));
    for (const char* scope : {"scope0", "scope1"}) {  // each file counted once per scope, however sent
      auto totals = node->ScopeStats(scope);
      ASSERT_TRUE(totals.ok()) << totals.error().message;
      EXPECT_EQ(totals->files, static_cast<uint64_t>(2 * kRecords)) << scope;
      EXPECT_EQ(totals->bytes, stats->file_bytes) << scope;
    }
    for (const auto& c : commits) {
      for (const auto& f : c.files) {
        EXPECT_TRUE(*node->FileVisibleTo(f.hash, "scope0"));
        EXPECT_TRUE(*node->FileVisibleTo(f.hash, "scope1"));
      }
      EXPECT_EQ(node->LookupDedup(c.dedup[0].chunk, "scope0")->size(), 1u);
      EXPECT_EQ(node->LookupDedup(c.dedup[0].chunk, std::nullopt)->size(), 1u);
      auto sx = node->GetShardXorbs(c.shard);
      ASSERT_TRUE(sx.ok());
      EXPECT_EQ((*sx)->listed, c.xorbs.listed);
      EXPECT_EQ((*sx)->referenced, c.xorbs.referenced);
    }
  }
}

// Threads of two nodes unregistering the same files from one scope at once: each file leaves it once (one
// call says so), the scope's totals come to nothing, and another scope keeps every file.
TEST_P(IndexTest, TwoNodesUnregisteringTheSameFilesAtOnce) {
  Open();
  auto second = OpenIndex(url_);
  ASSERT_TRUE(second.ok()) << second.error().message;
  std::array<Index*, 2> nodes{index_.get(), second->get()};
  constexpr int kFiles = 40;
  auto [xorb, layout] = AddXorb(8);
  std::vector<FileCommit> files;
  uint64_t bytes = 0;
  for (int i = 0; i < kFiles; ++i) {
    files.push_back(MakeFile(RandomHash(rng_), xorb, layout, {{0, static_cast<uint32_t>(1 + i % 8)}}));
    bytes += files.back().size;
  }
  for (const char* scope : {"s", "t"}) {
    ASSERT_TRUE(CommitFiles(files, scope).ok());
  }
  std::atomic<int> failures{0};
  std::atomic<int> removed{0};
  std::vector<std::thread> threads;
  for (int node = 0; node < 2; ++node) {
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, node, t] {
        std::mt19937_64 order(static_cast<uint64_t>(node * 10 + t));
        std::vector<size_t> idx(kFiles);
        std::iota(idx.begin(), idx.end(), 0);
        std::shuffle(idx.begin(), idx.end(), order);
        for (size_t i : idx) {
          auto r = nodes[static_cast<size_t>(node)]->UnregisterFile(files[i].hash, "s");
          if (!r.ok()) {
            ++failures;
          } else if (*r == Unregistered::kRemoved) {
            ++removed;
          }
        }
      });
    }
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(removed.load(), kFiles);
  for (Index* node : nodes) {
    EXPECT_TRUE(node->ListFiles("s", std::nullopt, 10)->empty());
    EXPECT_EQ(node->ScopeStats("s")->files, 0u);
    EXPECT_EQ(node->ScopeStats("s")->bytes, 0u);
    EXPECT_EQ(node->ListFiles("t", std::nullopt, 100)->size(), static_cast<size_t>(kFiles));
    EXPECT_EQ(node->ScopeStats("t")->files, static_cast<uint64_t>(kFiles));
    EXPECT_EQ(node->ScopeStats("t")->bytes, bytes);
  }
}

// PostgreSQL restarts under a node that is writing: requests fail as unavailable while it is down, and
// succeed again once it is back, on the same index object; nothing acknowledged is lost.
TEST(PostgresIndexTest, SurvivesAServerRestart) {
  PgExec("DROP SCHEMA IF EXISTS restart CASCADE; CREATE SCHEMA restart");
  const std::string url = Cluster().uri() + "?options=-csearch_path%3Drestart";
  auto opened = OpenIndex(url);
  ASSERT_TRUE(opened.ok()) << opened.error().message;
  Index& index = **opened;
  std::mt19937_64 rng(7);
  std::vector<XorbHash> acknowledged;
  std::atomic<bool> stop{false};
  std::atomic<int> unavailable{0};
  std::atomic<int> other_errors{0};
  std::mutex mu;
  std::string other_error;
  std::thread writer([&] {
    std::mt19937_64 local(8);
    while (!stop) {
      const XorbHash h = RandomHash(local);
      auto put = index.PutXorb(h, MakeLayout(local, 4));
      if (put.ok()) {
        std::lock_guard lock(mu);
        acknowledged.push_back(h);
      } else if (put.error().code == ErrorCode::kUnavailable) {
        ++unavailable;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      } else {
        ++other_errors;
        std::lock_guard lock(mu);
        other_error = put.error().message;
      }
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ASSERT_TRUE(Cluster().Stop().ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(index.Ping().error().code, ErrorCode::kUnavailable);
  EXPECT_EQ(index.GetXorb(RandomHash(rng)).error().code, ErrorCode::kUnavailable);
  ASSERT_TRUE(Cluster().Restart().ok());
  size_t before_restart_done = 0;
  {
    std::lock_guard lock(mu);
    before_restart_done = acknowledged.size();
  }
  // Writes go through again without reopening the index.
  for (int i = 0; i < 200; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::lock_guard lock(mu);
    if (acknowledged.size() > before_restart_done + 20) break;
  }
  stop = true;
  writer.join();
  EXPECT_GT(unavailable.load(), 0);
  EXPECT_EQ(other_errors.load(), 0) << other_error;
  EXPECT_GT(acknowledged.size(), before_restart_done + 20);
  EXPECT_TRUE(index.Ping().ok());
  auto stats = index.Stats();
  ASSERT_TRUE(stats.ok()) << stats.error().message;
  // A write cut off after its COMMIT was sent may have been stored without the caller hearing so.
  EXPECT_GE(stats->xorbs, acknowledged.size());
  EXPECT_LE(stats->xorbs, acknowledged.size() + 2);
  for (const auto& h : acknowledged) ASSERT_TRUE(*index.HasXorb(h)) << h.hex();
  opened->reset();
  PgExec("DROP SCHEMA restart CASCADE");
}

// Index URLs: the two forms, and one clear error for anything else.
TEST(OpenIndexTest, ParsesUrls) {
  auto s = ParseIndexUrl("sqlite:/srv/cairn/index.db");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->kind, IndexLocation::Kind::kSqlite);
  EXPECT_EQ(s->target, "/srv/cairn/index.db");
  EXPECT_EQ(ParseIndexUrl("sqlite:relative.db")->target, "relative.db");
  auto p = ParseIndexUrl("postgres://cairn:secret@db.example:5433/cairn?sslmode=require");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->kind, IndexLocation::Kind::kPostgres);
  EXPECT_TRUE(ParseIndexUrl("postgresql://db/cairn").ok());
  for (const char* bad : {"", "mysql://db/x", "sqlite:", "/srv/index.db", "postgres://db/x?nosuchoption=1"}) {
    auto r = ParseIndexUrl(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.error().code, ErrorCode::kMalformed);
  }
  // A password never appears in a message.
  auto bad = ParseIndexUrl("postgres://u:hunter2@db/x?nosuchoption=1");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message.find("hunter2"), std::string::npos) << bad.error().message;
  EXPECT_EQ(pg::RedactedUri("postgres://u:hunter2@h/db"), "postgres://u:***@h/db");
  EXPECT_EQ(pg::RedactedUri("postgres://h/db?password=hunter2&x=1"), "postgres://h/db?password=***&x=1");
}

// An unreachable server is one clear error at open, saying it may come back.
TEST(OpenIndexTest, UnreachableServerIsUnavailable) {
  auto r = OpenIndex("postgres://cairn@127.0.0.1:1/cairn?connect_timeout=2");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kUnavailable) << r.error().message;
  EXPECT_NE(r.error().message.find("127.0.0.1"), std::string::npos) << r.error().message;
}

// `cairn index copy`: SQLite to PostgreSQL and back, every record and total the same; an interrupted copy
// (the destination holding a prefix of the tables) resumes; a destination with rows of its own is refused.
TEST(IndexCopyTest, SqliteToPostgresAndBackResumesAndVerifies) {
  const fs::path dir = fs::temp_directory_path() / ("cairn-index-copy-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string sqlite_url = "sqlite:" + (dir / "a.db").string();
  std::mt19937_64 rng(99);
  std::vector<ShardCommit> commits;
  {
    auto src = OpenIndex(sqlite_url);
    ASSERT_TRUE(src.ok()) << src.error().message;
    std::vector<std::pair<XorbHash, xet::XorbLayout>> xorbs;
    for (int i = 0; i < 300; ++i) {  // more than one page of xorbs
      xorbs.emplace_back(RandomHash(rng), MakeLayout(rng, 3));
      ASSERT_TRUE((*src)->PutXorb(xorbs.back().first, xorbs.back().second).ok());
    }
    for (int i = 0; i < 40; ++i) {
      const auto& [x, l] = xorbs[static_cast<size_t>(i)];
      const auto& [y, m] = xorbs[static_cast<size_t>(i) + 100];
      commits.push_back({.shard = RandomHash(rng),
                         .shard_size = 1000 + static_cast<uint64_t>(i),
                         .files = {MakeFile(RandomHash(rng), x, l, {{0, 3}}, RandomHash(rng)),
                                   MakeFile(RandomHash(rng), y, m, {{1, 2}})},
                         .dedup = {{l.chunks[0].hash, x}, {m.chunks[2].hash, y}},
                         .scope = i % 3 == 0 ? "org/a" : "org/b",
                         .xorbs = {.listed = {x}, .referenced = {y}}});
      ASSERT_TRUE((*src)->CommitShard(commits.back()).ok());
    }
    commits[0].scope = "org/c";  // a second scope for one shard's files and entries
    ASSERT_TRUE((*src)->CommitShard(commits[0]).ok());
    ASSERT_TRUE((*src)->SharedSecret("jwt", std::string(64, 'j')).ok());
    // Repositories, one deleted (its id must not come back on the destination).
    ASSERT_TRUE((*src)->CreateRepo(MakeRepo("org", "a")).ok());
    auto gone = (*src)->CreateRepo(MakeRepo("org", "gone"));
    ASSERT_TRUE(gone.ok());
    ASSERT_TRUE((*src)->CreateRepo(MakeRepo("org", "b", RepoType::kDataset)).ok());
    ASSERT_TRUE((*src)->DeleteRepo(gone->id, nullptr).ok());
    NewRepo bucket = MakeRepo("org", "files", RepoType::kBucket);
    bucket.refs.clear();
    auto made = (*src)->CreateRepo(bucket);
    ASSERT_TRUE(made.ok());
    BucketFile f{"dir/x.bin", RandomHash(rng), 42, 1700000000123, "application/octet-stream", 1700000001};
    ASSERT_TRUE((*src)->ChangeBucket(made->id, {{f.path, f}}, nullptr).ok());
    // People, with a revoked token and a removed membership.
    auto alice = (*src)->CreateAccount({.kind = AccountKind::kUser, .name = "Alice"});
    auto bob = (*src)->CreateAccount({.kind = AccountKind::kUser, .name = "bob"});
    auto acme = (*src)->CreateAccount({.kind = AccountKind::kOrg, .name = "acme"});
    ASSERT_TRUE(alice.ok() && bob.ok() && acme.ok());
    ASSERT_TRUE((*src)->SetMember(acme->id, alice->id, OrgRole::kAdmin, nullptr).ok());
    ASSERT_TRUE((*src)->SetMember(acme->id, bob->id, OrgRole::kRead, nullptr).ok());
    ASSERT_TRUE((*src)->SetMember(acme->id, bob->id, std::nullopt, nullptr).ok());
    for (const char* id : {"tok-a", "tok-b"}) {
      ASSERT_TRUE((*src)
                      ->CreateToken({.id = id,
                                     .owner = alice->id,
                                     .name = "ci",
                                     .role = TokenRole::kWrite,
                                     .grants = "",
                                     .secret_hash = std::vector<uint8_t>(32, 1),
                                     .created_at = 1700000000,
                                     .expires_at = 1800000000},
                                    nullptr)
                      .ok());
    }
    ASSERT_TRUE((*src)->RevokeToken("tok-b", 1750000000, nullptr).ok());
    // A password and a session.
    ASSERT_TRUE((*src)->SetPassword(alice->id, "$argon2id$copied", nullptr).ok());
    ASSERT_TRUE((*src)
                    ->CreateSession({.id = std::string(32, 'a'),
                                     .secret_hash = std::vector<uint8_t>(32, 2),
                                     .user = alice->id,
                                     .created_at = 1700000000,
                                     .expires_at = 1800000000,
                                     .method = "password",
                                     .client = "127.0.0.1"},
                                    nullptr)
                    .ok());
    // A quota measured only (no limit: NULL) stays one: a limit of 0 would refuse every write.
    ASSERT_TRUE((*src)->SetQuotaLimit("org", std::nullopt, nullptr).ok());
  }
  PgExec("DROP SCHEMA IF EXISTS copy1 CASCADE; CREATE SCHEMA copy1");
  const std::string pg_url = Cluster().uri() + "?options=-csearch_path%3Dcopy1";

  auto report = CopyIndex(sqlite_url, pg_url);
  ASSERT_TRUE(report.ok()) << report.error().message;
  std::map<std::string, uint64_t> rows;
  for (const auto& t : report->tables) rows[t.table] = t.rows;
  EXPECT_EQ(rows["xorbs"], 300u);
  EXPECT_EQ(rows["shards"], 40u);
  EXPECT_EQ(rows["files"], 80u);
  EXPECT_EQ(rows["file_scopes"], 82u);
  EXPECT_EQ(rows["shard_xorbs"], 80u);
  EXPECT_EQ(rows["dedup"], 82u);
  EXPECT_EQ(rows["secrets"], 1u);

  const auto same = [&](const std::string& a_url, const std::string& b_url) {
    auto a = OpenIndex(a_url);
    auto b = OpenIndex(b_url);
    ASSERT_TRUE(a.ok() && b.ok());
    auto sa = (*a)->Stats();
    auto sb = (*b)->Stats();
    ASSERT_TRUE(sa.ok() && sb.ok());
    EXPECT_EQ(sa->xorbs, sb->xorbs);
    EXPECT_EQ(sa->files, sb->files);
    EXPECT_EQ(sa->chunks, sb->chunks);
    EXPECT_EQ(sa->stored_bytes, sb->stored_bytes);
    EXPECT_EQ(sa->shards, sb->shards);
    EXPECT_EQ(sa->unpacked_bytes, sb->unpacked_bytes);
    EXPECT_EQ(sa->file_bytes, sb->file_bytes);
    for (const char* scope : {"org/a", "org/b", "org/c"}) {  // recomputed on the destination
      auto ta = (*a)->ScopeStats(scope);
      auto tb = (*b)->ScopeStats(scope);
      ASSERT_TRUE(ta.ok() && tb.ok());
      EXPECT_GT(ta->files, 0u) << scope;
      EXPECT_EQ(ta->files, tb->files) << scope;
      EXPECT_EQ(ta->bytes, tb->bytes) << scope;
    }
    for (const auto& c : commits) {
      for (const auto& f : c.files) {
        auto fa = (*a)->GetFile(f.hash);
        auto fb = (*b)->GetFile(f.hash);
        ASSERT_TRUE(fa.ok() && fb.ok());
        EXPECT_EQ((*fa)->packed_terms, (*fb)->packed_terms);
        EXPECT_EQ((*fa)->packed_ranges, (*fb)->packed_ranges);
        EXPECT_TRUE((*fb)->has_ranges());
        EXPECT_EQ((*fa)->sha256, (*fb)->sha256);
        EXPECT_TRUE(*(*b)->FileVisibleTo(f.hash, c.scope));
      }
      EXPECT_EQ((*b)->LookupDedup(c.dedup[1].chunk, c.scope)->size(), 1u);
      EXPECT_EQ((*b)->GetShardXorbs(c.shard).value()->referenced, c.xorbs.referenced);
    }
    EXPECT_TRUE(*(*b)->FileVisibleTo(commits[0].files[0].hash, "org/a"));
    EXPECT_EQ(*(*b)->SharedSecret("jwt", "other"), std::string(64, 'j'));
    for (auto [type, name] : {std::pair{RepoType::kModel, "a"}, std::pair{RepoType::kDataset, "b"}}) {
      auto ra = (*a)->FindRepo(type, "org", name);
      auto rb = (*b)->FindRepo(type, "org", name);
      ASSERT_TRUE(ra.ok() && rb.ok()) << name;
      EXPECT_EQ(ra->id, rb->id);
      EXPECT_EQ(ra->scope, rb->scope);
      EXPECT_EQ((*b)->ListRefs(rb->id)->size(), 1u);
      EXPECT_EQ((*(*b)->GetRepoObjects(rb->id, {Key("commit-1")}))[0]->data, Key("first commit"));
    }
    auto bucket = (*b)->FindRepo(RepoType::kBucket, "org", "files");
    ASSERT_TRUE(bucket.ok());
    auto files = (*b)->ListBucket(bucket->id, "", std::nullopt, 10);
    ASSERT_TRUE(files.ok() && files->size() == 1);
    EXPECT_EQ((*files)[0].size, 42U);
    EXPECT_EQ((*files)[0].content_type, "application/octet-stream");
    // People keep their ids and generations, and a refresh from nothing reads them all on the copy.
    auto pa = (*a)->PeopleChangedSince(0);
    auto pb = (*b)->PeopleChangedSince(0);
    ASSERT_TRUE(pa.ok() && pb.ok());
    EXPECT_EQ(pb->generation, pa->generation);
    ASSERT_EQ(pb->accounts.size(), 3u);
    EXPECT_EQ(pb->members.size(), 2u);
    ASSERT_EQ(pb->tokens.size(), 2u);
    EXPECT_EQ((*b)->FindAccount("alice")->id, (*a)->FindAccount("alice")->id);
    EXPECT_EQ((*b)->FindToken("tok-b")->revoked_at, 1750000000);
    const int64_t alice_b = (*b)->FindAccount("alice")->id;
    EXPECT_EQ((*b)->GetPassword(alice_b).value(), std::optional<std::string>("$argon2id$copied"));
    auto session = (*b)->FindSession(std::string(32, 'a'));
    ASSERT_TRUE(session.ok() && session->has_value());
    EXPECT_EQ(**session, *(*a)->FindSession(std::string(32, 'a')).value());
    EXPECT_EQ((*b)->ListMembers(AccountKind::kOrg, (*b)->FindAccount("acme")->id)->size(), 1u);
    auto quota = (*b)->GetQuota("org");
    ASSERT_TRUE(quota.ok() && quota->has_value());
    EXPECT_FALSE((*quota)->limit.has_value());
  };
  same(sqlite_url, pg_url);
  {
    // A repository created on the destination gets an id after every copied one.
    auto b = OpenIndex(pg_url);
    ASSERT_TRUE(b.ok());
    auto fresh = (*b)->CreateRepo(MakeRepo("org", "fresh"));
    ASSERT_TRUE(fresh.ok()) << fresh.error().message;
    EXPECT_GT(fresh->id, (*b)->FindRepo(RepoType::kDataset, "org", "b")->id);
    ASSERT_TRUE((*b)->DeleteRepo(fresh->id, nullptr).ok());
  }

  // Interrupted: the destination lost the tail of some tables (as if the copy had stopped there).
  PgExec(
      "SET search_path TO copy1; DELETE FROM secrets; DELETE FROM dedup WHERE chunk > "
      "(SELECT chunk FROM dedup ORDER BY chunk LIMIT 1 OFFSET 40); DELETE FROM shard_xorbs");
  report = CopyIndex(sqlite_url, pg_url);
  ASSERT_TRUE(report.ok()) << report.error().message;
  std::map<std::string, uint64_t> copied;
  for (const auto& t : report->tables) copied[t.table] = t.copied;
  EXPECT_EQ(copied["dedup"], 41u);
  EXPECT_EQ(copied["shard_xorbs"], 80u);
  EXPECT_EQ(copied["secrets"], 1u);
  EXPECT_EQ(copied["xorbs"], 0u);  // nothing to do again
  same(sqlite_url, pg_url);

  // And back into a fresh SQLite file.
  const std::string back_url = "sqlite:" + (dir / "b.db").string();
  ASSERT_TRUE(CopyIndex(pg_url, back_url).ok());
  same(pg_url, back_url);

  // A destination with rows the source lacks is not a copy of it.
  PgExec("SET search_path TO copy1; INSERT INTO secrets VALUES ('zzz', 'x', 0)");
  auto refused = CopyIndex(sqlite_url, pg_url);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, ErrorCode::kInconsistent);
  EXPECT_NE(refused.error().message.find("secrets"), std::string::npos) << refused.error().message;
  EXPECT_EQ(CopyIndex(sqlite_url, sqlite_url).error().code, ErrorCode::kMalformed);

  // An account made on a copy gets an id and a generation after every copied one.
  for (const std::string& url : {pg_url, back_url}) {
    auto b = OpenIndex(url);
    ASSERT_TRUE(b.ok());
    auto carol = (*b)->CreateAccount({.kind = AccountKind::kUser, .name = "carol"});
    ASSERT_TRUE(carol.ok()) << carol.error().message;
    EXPECT_GT(carol->id, (*b)->FindAccount("acme")->id) << url;
    EXPECT_GT(carol->changed, (*b)->FindToken("tok-b")->changed) << url;
  }

  PgExec("DROP SCHEMA copy1 CASCADE");
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Backends, IndexTest, ::testing::Values(Backend::kSqlite, Backend::kPostgres),
                         BackendName);

}  // namespace
}  // namespace cairn::index
