// A private PostgreSQL server for tests and benchmarks: a fresh cluster (initdb) in a temporary directory,
// started with pg_ctl on a free loopback port, with a database `cairn` owned by the superuser `cairn` (trust
// authentication, loopback only). Nothing depends on a system service. PostgreSQL refuses to run as root, so
// when the caller is root the server runs as the `postgres` system user, which then owns the directory.
//
// Binaries: CAIRN_PG_BINDIR, else the newest /usr/lib/postgresql/<version>/bin (Debian's postgresql-15).
// Settings are PostgreSQL's defaults (fsync and synchronous_commit on): durability is part of what is tested.
//
// Ownership: the object owns the server and its directory; the destructor stops the server (immediate
// shutdown) and removes the directory. Thread-safety: create and destroy on one thread; the accessors are
// const. Failures: Start returns kIo naming the step and quoting its output (no binaries, initdb, start,
// createdb).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "common/error.h"

namespace cairn::index::testing {

class PostgresCluster {
 public:
  // `name` labels the temporary directory (the test's name, say).
  static Result<std::unique_ptr<PostgresCluster>> Start(const std::string& name);
  ~PostgresCluster();
  PostgresCluster(const PostgresCluster&) = delete;
  PostgresCluster& operator=(const PostgresCluster&) = delete;

  // postgres://cairn@127.0.0.1:PORT/cairn, for libpq.
  std::string uri() const;
  uint16_t port() const { return port_; }
  const std::filesystem::path& directory() const { return dir_; }

  // Stops and starts the server again on the same port and data (a PostgreSQL restart under load). Stop is
  // PostgreSQL's fast shutdown: its checkpoint fsyncs every file written since the last one, about 300 per
  // database created, which on a slow disk takes a minute or more once dozens of databases exist.
  Status Stop();
  Status Restart();

 private:
  PostgresCluster(std::filesystem::path bin, std::filesystem::path dir, uint16_t port, bool as_postgres)
      : bin_(std::move(bin)), dir_(std::move(dir)), port_(port), as_postgres_(as_postgres) {}
  // Runs a PostgreSQL program from bin_ (as the postgres user when needed); output is appended to `output`.
  Status Run(const std::string& program, const std::string& args, std::string* output = nullptr) const;

  std::filesystem::path bin_;
  std::filesystem::path dir_;
  uint16_t port_;
  bool as_postgres_;
  bool running_ = false;
};

}  // namespace cairn::index::testing
