// What a suite run against every backend shares (index_test.cc, people_test.cc): the backends, one private
// PostgreSQL server for the whole test program, and a fixture that gives each test a fresh index of the
// backend it runs on (SQLite in a temporary file; PostgreSQL in a schema of its own on the shared server).
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <random>
#include <string>
#include <utility>

#include "common/clock.h"
#include "common/error.h"
#include "index/index.h"
#include "index/open_index.h"
#include "index/postgres/pg.h"
#include "index/testing/postgres_cluster.h"

namespace cairn::index::fixtures {

enum class Backend { kSqlite, kPostgres };

inline std::string BackendName(const ::testing::TestParamInfo<Backend>& p) {
  return p.param == Backend::kSqlite ? "Sqlite" : "Postgres";
}

// One PostgreSQL server for the whole program, started by the first test that needs it.
inline testing::PostgresCluster& Cluster() {
  static std::unique_ptr<testing::PostgresCluster> cluster = [] {
    auto c = testing::PostgresCluster::Start("index-test");
    if (!c.ok()) {
      std::cerr << "cannot start PostgreSQL: " << c.error().message << "\n";
      std::abort();
    }
    return std::move(*c);
  }();
  return *cluster;
}

// Runs SQL on the test cluster's database as its superuser.
inline void PgExec(const std::string& sql) {
  auto c = pg::Conn::Connect(Cluster().uri());
  ASSERT_TRUE(c.ok()) << c.error().message;
  auto r = (*c)->Exec(sql);
  ASSERT_TRUE(r.ok()) << r.error().message;
}

// A refusal in the code and the words every backend answers it with (failures.h), so the backends cannot
// drift apart in what they tell a caller.
inline ::testing::AssertionResult Refused(const Error& got, const Error& want) {
  if (got.code == want.code && got.message == want.message) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "refused with code " << static_cast<int>(got.code) << " \"" << got.message << "\", not code "
         << static_cast<int>(want.code) << " \"" << want.message << "\"";
}

class BackendTest : public ::testing::TestWithParam<Backend> {
 protected:
  BackendTest() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = info->name();
    std::replace(name.begin(), name.end(), '/', '-');
    dir_ =
        std::filesystem::temp_directory_path() / ("cairn-index-" + std::to_string(::getpid()) + "-" + name);
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    if (GetParam() == Backend::kSqlite) {
      url_ = "sqlite:" + (dir_ / "index.db").string();
    } else {
      // Each test gets a schema of its own in the shared server: as good as a fresh database, cheaper.
      static int next = 0;
      schema_ = "t" + std::to_string(++next);
      PgExec("CREATE SCHEMA " + schema_);
      url_ = Cluster().uri() + "?options=-csearch_path%3D" + schema_;
    }
  }
  ~BackendTest() override {
    index_.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
    if (!schema_.empty()) PgExec("DROP SCHEMA " + schema_ + " CASCADE");
  }
  BackendTest(const BackendTest&) = delete;
  BackendTest& operator=(const BackendTest&) = delete;

  void Open(const OpenIndexOptions& options = {}) {
    index_.reset();
    auto r = OpenIndex(url_, options);
    ASSERT_TRUE(r.ok()) << r.error().message;
    index_ = std::move(r).value();
  }

  std::filesystem::path dir_;
  std::string schema_;  // PostgreSQL only
  std::string url_;
  std::mt19937_64 rng_{42};
  TestClock clock_{1'900'000'000};  // for indexes opened with it (declared before index_: it outlives it)
  std::unique_ptr<Index> index_;
};

}  // namespace cairn::index::fixtures
