// Deployments for the lifecycle's benchmarks (the collector's, compaction's, the backup's): an empty SQLite
// index and local-disk store under a directory, or a schema of its own on one PostgreSQL and a prefix of its
// own in one SeaweedFS bucket, both started once per benchmark program. Benchmarks only: a failure ends the
// program (OrDie), as a benchmark cannot go on without its deployment.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <utility>

#include "common/error.h"
#include "index/postgres/pg.h"
#include "index/testing/postgres_cluster.h"
#include "store/local_disk_store.h"
#include "store/s3_store.h"
#include "store/seaweedfs_cluster.h"

namespace cairn::gc::testing {

template <typename R>
void Check(const R& r, const char* what) {
  if (!r.ok()) {
    std::cerr << what << ": " << r.error().message << "\n";
    std::abort();
  }
}

template <typename T>
T OrDie(Result<T>&& r, const char* what) {
  Check(r, what);
  return std::move(r).value();
}

// The program's PostgreSQL and SeaweedFS, started at their first use.
struct BenchServers {
  std::unique_ptr<index::testing::PostgresCluster> pg;
  std::unique_ptr<store::testing::SeaweedCluster> seaweed;
  index::testing::PostgresCluster& Postgres() {
    if (!pg) pg = OrDie(index::testing::PostgresCluster::Start("lifecycle-bench"), "postgres");
    return *pg;
  }
  store::testing::SeaweedCluster& Seaweed() {
    if (!seaweed) seaweed = OrDie(store::testing::SeaweedCluster::Start("lifecycle-bench"), "seaweedfs");
    return *seaweed;
  }
};
inline BenchServers& SharedServers() {
  static BenchServers s;
  return s;
}

// $CAIRN_BENCH_DIR (else the current directory) / <what>-<pid>, absolute.
inline std::filesystem::path BenchDir(const std::string& what) {
  const char* env = std::getenv("CAIRN_BENCH_DIR");  // NOLINT(concurrency-mt-unsafe): before threads start
  return std::filesystem::absolute(std::filesystem::path(env ? env : ".") /
                                   (what + "-" + std::to_string(::getpid())));
}

// A PostgreSQL index URL of its own: schema `name` (created) on the program's server.
inline std::string FreshPostgres(const std::string& name) {
  auto& pg = SharedServers().Postgres();
  auto conn = OrDie(index::pg::Conn::Connect(pg.uri()), "postgres");
  Check(conn->Exec("CREATE SCHEMA " + name), "create schema");
  return pg.uri() + "?options=-csearch_path%3D" + name;
}

struct BenchDeployment {
  std::string url;
  std::unique_ptr<store::BlobStore> store;
};

// An empty deployment named `name` (a valid SQL identifier): SQLite + a directory under `dir`, or a schema
// and a bucket prefix of its own.
inline BenchDeployment FreshDeployment(bool s3, const std::filesystem::path& dir, const std::string& name) {
  BenchDeployment d;
  if (!s3) {
    std::filesystem::create_directories(dir);
    d.url = "sqlite:" + (dir / (name + ".db")).string();
    d.store = OrDie(store::LocalDiskStore::Open(dir / (name + "-blobs")), "disk");
    return d;
  }
  d.url = FreshPostgres(name);
  auto& seaweed = SharedServers().Seaweed();
  Check(seaweed.CreateBucket("lifecycle-bench"), "bucket");
  store::S3StoreOptions so;
  so.s3 = seaweed.Options("lifecycle-bench");
  so.prefix = name + "/";
  d.store = OrDie(store::S3Store::Open(so), "s3");
  return d;
}

}  // namespace cairn::gc::testing
