// The test PostgreSQL server: starts on its own, answers over libpq with durable defaults, restarts on the
// same port and data, and leaves nothing behind.
#include "index/testing/postgres_cluster.h"

#include <gtest/gtest.h>
#include <libpq-fe.h>

#include <memory>
#include <string>

namespace cairn::index::testing {
namespace {

// One value of a one-row query, or the connection's error.
std::string QueryOne(const std::string& uri, const char* sql) {
  std::unique_ptr<PGconn, decltype(&PQfinish)> conn(PQconnectdb(uri.c_str()), &PQfinish);
  if (PQstatus(conn.get()) != CONNECTION_OK) return std::string("connect: ") + PQerrorMessage(conn.get());
  std::unique_ptr<PGresult, decltype(&PQclear)> res(PQexec(conn.get(), sql), &PQclear);
  if (PQresultStatus(res.get()) != PGRES_TUPLES_OK || PQntuples(res.get()) != 1) {
    return std::string("query: ") + PQerrorMessage(conn.get());
  }
  return PQgetvalue(res.get(), 0, 0);
}

TEST(PostgresCluster, StartsAnswersRestartsAndCleansUp) {
  auto started = PostgresCluster::Start("cluster-test");
  ASSERT_TRUE(started.ok()) << started.error().message;
  auto cluster = std::move(*started);
  EXPECT_GE(std::stoi(QueryOne(cluster->uri(), "SHOW server_version_num")), 150000);
  EXPECT_EQ(QueryOne(cluster->uri(), "SHOW synchronous_commit"), "on");
  EXPECT_EQ(QueryOne(cluster->uri(), "SHOW fsync"), "on");
  EXPECT_EQ(QueryOne(cluster->uri(), "SELECT current_database()"), "cairn");

  // Data survives a restart on the same port.
  EXPECT_EQ(QueryOne(cluster->uri(), "SELECT count(*) FROM (SELECT 1) s"), "1");
  ASSERT_EQ(QueryOne(cluster->uri(), "CREATE TABLE kept AS SELECT 42 AS v; SELECT v FROM kept"), "42");
  ASSERT_TRUE(cluster->Stop().ok());
  EXPECT_NE(QueryOne(cluster->uri(), "SELECT 1").find("connect:"), std::string::npos);
  ASSERT_TRUE(cluster->Restart().ok());
  EXPECT_EQ(QueryOne(cluster->uri(), "SELECT v FROM kept"), "42");

  // Two clusters at once do not share anything.
  auto other = PostgresCluster::Start("cluster-test-other");
  ASSERT_TRUE(other.ok()) << other.error().message;
  EXPECT_NE((*other)->port(), cluster->port());
  EXPECT_NE(QueryOne((*other)->uri(), "SELECT v FROM kept").find("query:"), std::string::npos);

  const auto dir = cluster->directory();
  const std::string uri = cluster->uri();
  cluster.reset();
  EXPECT_FALSE(std::filesystem::exists(dir));
  EXPECT_NE(QueryOne(uri, "SELECT 1").find("connect:"), std::string::npos);
}

}  // namespace
}  // namespace cairn::index::testing
