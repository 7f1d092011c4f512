// cairn-test-postgres: a private PostgreSQL server for test harnesses outside C++ (the stock-client interop
// suite), with the same guarantees as PostgresCluster. Prints the server's URI on its first line, then
// answers commands read from stdin, one per line, with "ok ..." or "error: ...":
//   createdb NAME   a fresh database; answers "ok URI" (the URI of that database)
//   stop / start    stops the server, starts it again (same port and data)
// At end of input it stops the server and removes its directory.
#include <chrono>
#include <iostream>
#include <string>

#include "index/postgres/pg.h"
#include "index/testing/postgres_cluster.h"

int main() {
  using cairn::index::testing::PostgresCluster;
  auto cluster = PostgresCluster::Start("interop");
  if (!cluster.ok()) {
    std::cerr << "cairn-test-postgres: " << cluster.error().message << "\n";
    return 1;
  }
  std::cout << (*cluster)->uri() << std::endl;
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line.starts_with("createdb ")) {
      const std::string name = line.substr(9);
      const bool valid = !name.empty() &&
                         name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") == std::string::npos;
      if (!valid) {
        std::cout << "error: database names are [a-z0-9_]+" << std::endl;
        continue;
      }
      auto conn = cairn::index::pg::Conn::Connect((*cluster)->uri());
      auto made = conn.ok() ? (*conn)->Exec("CREATE DATABASE " + name) : conn.error();
      if (!made.ok()) {
        std::cout << "error: " << made.error().message << std::endl;
        continue;
      }
      const std::string base = (*cluster)->uri();
      std::cout << "ok " << base.substr(0, base.rfind('/') + 1) << name << std::endl;
    } else if (line == "stop" || line == "start") {
      auto st = line == "stop" ? (*cluster)->Stop() : (*cluster)->Restart();
      std::cout << (st.ok() ? std::string("ok") : "error: " + st.error().message) << std::endl;
    } else {
      std::cout << "error: unknown command" << std::endl;
    }
  }
  // A slow teardown is reported (on stderr, which the harness shows with it), so that its cause can be told.
  const auto started = std::chrono::steady_clock::now();
  cluster->reset();
  const auto took =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - started);
  if (took.count() >= 10)
    std::cerr << "cairn-test-postgres: stopping and removing took " << took.count() << " s\n";
  return 0;
}
