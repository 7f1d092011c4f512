#include "index/testing/postgres_cluster.h"

#include <pwd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <system_error>

#include "common/local_servers.h"

namespace cairn::index::testing {
namespace {

namespace fs = std::filesystem;

// The newest /usr/lib/postgresql/<version>/bin holding initdb, unless CAIRN_PG_BINDIR names one.
Result<fs::path> FindBinaries() {
  const char* env = std::getenv("CAIRN_PG_BINDIR");  // NOLINT(concurrency-mt-unsafe): test set-up
  if (env != nullptr && *env != 0) {
    if (fs::exists(fs::path(env) / "initdb")) return fs::path(env);
    return IoError(std::string("CAIRN_PG_BINDIR=") + env + " holds no initdb");
  }
  fs::path best;
  int best_version = -1;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/usr/lib/postgresql", ec)) {
    const std::string version = entry.path().filename().string();
    if (version.empty() ||
        !std::all_of(version.begin(), version.end(), [](char c) { return c >= '0' && c <= '9'; }))
      continue;
    if (!fs::exists(entry.path() / "bin" / "initdb")) continue;
    if (const int v = std::stoi(version); v > best_version) {
      best_version = v;
      best = entry.path() / "bin";
    }
  }
  if (best_version < 0) {
    return IoError(
        "no PostgreSQL server binaries in /usr/lib/postgresql (scripts/bootstrap.sh installs "
        "postgresql-15; or set CAIRN_PG_BINDIR)");
  }
  return best;
}

}  // namespace

Result<std::unique_ptr<PostgresCluster>> PostgresCluster::Start(const std::string& name) {
  auto bin = FindBinaries();
  if (!bin) return bin.error();
  std::error_code ec;
  const fs::path dir = FreshTempDir("cairn-pg", name, ec);
  if (ec) return IoError("create " + dir.string() + ": " + ec.message());
  fs::permissions(dir, fs::perms::owner_all, ec);
  const bool as_postgres = ::geteuid() == 0;
  if (as_postgres) {
    const passwd* pw = ::getpwnam("postgres");  // NOLINT(concurrency-mt-unsafe): test set-up, one thread
    if (pw == nullptr) return IoError("running as root, but there is no postgres user to run the server");
    if (::chown(dir.c_str(), pw->pw_uid, pw->pw_gid) != 0)
      return IoError("chown " + dir.string() + ": " + std::system_category().message(errno));
  }
  std::unique_ptr<PostgresCluster> cluster(new PostgresCluster(*bin, dir, 0, as_postgres));
  std::string out;
  if (auto st = cluster->Run("initdb", "-D " + dir.string() + " -U cairn -A trust -E UTF8 --no-sync", &out);
      !st.ok()) {
    return st.error();
  }
  Status started = IoError("not started");
  for (int attempt = 0; attempt < 3 && !started.ok(); ++attempt) {
    auto port = FreeLoopbackPort();
    if (!port) return IoError("no free loopback port");
    cluster->port_ = *port;
    started = cluster->Restart();
  }
  if (!started.ok()) return started.error();
  if (auto st =
          cluster->Run("createdb", "-h 127.0.0.1 -p " + std::to_string(cluster->port_) + " -U cairn cairn");
      !st.ok()) {
    return st.error();
  }
  return cluster;
}

PostgresCluster::~PostgresCluster() {
  // The data is thrown away: an immediate shutdown, without the checkpoint a fast one would wait for.
  if (running_) (void)Run("pg_ctl", "-D " + dir_.string() + " -m immediate -w -t 240 stop");
  std::error_code ec;
  fs::remove_all(dir_, ec);
}

std::string PostgresCluster::uri() const {
  return "postgres://cairn@127.0.0.1:" + std::to_string(port_) + "/cairn";
}

Status PostgresCluster::Stop() {
  if (!running_) return Ok{};
  running_ = false;
  return Run("pg_ctl", "-D " + dir_.string() + " -m fast -w stop");
}

Status PostgresCluster::Restart() {
  if (auto st = Stop(); !st.ok()) return st;
  // Unix socket in the cluster's own directory (not /var/run/postgresql, which may not exist or be shared).
  const std::string options =
      "-p " + std::to_string(port_) + " -k " + dir_.string() + " -c listen_addresses=127.0.0.1";
  auto st = Run("pg_ctl", "-D " + dir_.string() + " -l " + (dir_ / "server.log").string() + " -w -t 60 -o '" +
                              options + "' start");
  if (st.ok()) running_ = true;
  return st;
}

Status PostgresCluster::Run(const std::string& program, const std::string& args, std::string* output) const {
  const std::string command =
      (as_postgres_ ? "runuser -u postgres -- " : "") + (bin_ / program).string() + " " + args + " 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");  // NOLINT(cert-env33-c): fixed programs, paths we made
  if (pipe == nullptr) return IoError("cannot run " + command);
  std::string text;
  char buf[4096];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof(buf), pipe)) > 0) text.append(buf, n);
  const int status = ::pclose(pipe);
  if (output != nullptr) *output += text;
  if (status != 0) {
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    std::string log;
    if (program == "pg_ctl" && fs::exists(dir_ / "server.log"))
      log = " (see " + (dir_ / "server.log").string() + ")";
    return IoError(program + " failed with exit " + std::to_string(code) + log + ": " +
                   text.substr(text.size() > 2000 ? text.size() - 2000 : 0));
  }
  return Ok{};
}

}  // namespace cairn::index::testing
