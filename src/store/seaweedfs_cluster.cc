#include "store/seaweedfs_cluster.h"

#include <curl/curl.h>
#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>
#include <vector>

#include "common/local_servers.h"

#ifndef CAIRN_SEAWEEDFS_VERSION
#error "CAIRN_SEAWEEDFS_VERSION must name the pinned SeaweedFS version (src/store/CMakeLists.txt)"
#endif

namespace cairn::store::testing {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr int kGrpcOffset = 10000;  // every weed server also listens on its port + 10000 (gRPC)
constexpr int kPorts = 5;           // master, volume, filer, s3, admin

std::string Env(const char* name) {
  const char* v = std::getenv(name);  // NOLINT(concurrency-mt-unsafe): test set-up
  return v == nullptr ? std::string() : std::string(v);
}

std::string RandomText(size_t n) {
  static constexpr char kChars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  std::random_device rd;
  std::string out;
  for (size_t i = 0; i < n; ++i) out += kChars[rd() % (sizeof(kChars) - 1)];
  return out;
}

// A base port such that base..base+kPorts-1, and each + kGrpcOffset, are free. All of them below Linux's
// ephemeral range (32768 up by default), where any connection or port-0 listener of a test running beside
// this one could take a port between this check and weed's bind.
std::optional<uint16_t> FreePortRun() {
  std::mt19937 rng(std::random_device{}());
  std::uniform_int_distribution<int> pick(10000, 32768 - kGrpcOffset - kPorts);
  for (int attempt = 0; attempt < 200; ++attempt) {
    const int base = pick(rng);
    bool free = true;
    for (int i = 0; i < kPorts && free; ++i) {
      free = LoopbackPortFree(static_cast<uint16_t>(base + i)) &&
             LoopbackPortFree(static_cast<uint16_t>(base + i + kGrpcOffset));
    }
    if (free) return static_cast<uint16_t>(base);
  }
  return std::nullopt;
}

long HttpStatus(const std::string& url) {
  CURL* c = curl_easy_init();
  if (c == nullptr) return 0;
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 2000L);
  curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
  long status = 0;
  if (curl_easy_perform(c) == CURLE_OK) curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  curl_easy_cleanup(c);
  return status;
}

std::string Tail(const fs::path& file, size_t bytes) {
  std::ifstream in(file);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string s = ss.str();
  return s.size() > bytes ? s.substr(s.size() - bytes) : s;
}

}  // namespace

Result<fs::path> FindWeed() {
  if (const std::string env = Env("CAIRN_WEED_BIN"); !env.empty()) {
    if (::access(env.c_str(), X_OK) == 0) return fs::path(env);
    return IoError("CAIRN_WEED_BIN=" + env + " is not an executable");
  }
  fs::path cache;
  if (const std::string c = Env("CAIRN_CACHE_DIR"); !c.empty()) {
    cache = c;
  } else if (const std::string x = Env("XDG_CACHE_HOME"); !x.empty()) {
    cache = fs::path(x) / "cairn";
  } else {
    cache = fs::path(Env("HOME")) / ".cache" / "cairn";
  }
  const fs::path bin = cache / "seaweedfs" / CAIRN_SEAWEEDFS_VERSION / "weed";
  if (::access(bin.c_str(), X_OK) == 0) return bin;
  return IoError("no SeaweedFS binary at " + bin.string() +
                 " (scripts/seaweedfs.sh builds it; make test's bootstrap runs it; or set CAIRN_WEED_BIN)");
}

Result<std::unique_ptr<SeaweedCluster>> SeaweedCluster::Start(const std::string& name) {
  auto bin = FindWeed();
  if (!bin) return bin.error();
  curl_global_init(CURL_GLOBAL_DEFAULT);
  std::error_code ec;
  const fs::path dir = FreshTempDir("cairn-weed", name, ec);
  if (!ec) fs::create_directories(dir / "data", ec);
  if (ec) return IoError("create " + dir.string() + ": " + ec.message());
  std::unique_ptr<SeaweedCluster> cluster(new SeaweedCluster(*bin, dir));
  cluster->access_key_ = "cairn" + RandomText(15);
  cluster->secret_key_ = RandomText(40);
  {
    std::ofstream id(dir / "identities.json");
    id << R"({"identities":[{"name":"cairn","credentials":[{"accessKey":")" << cluster->access_key_
       << R"(","secretKey":")" << cluster->secret_key_
       << R"("}],"actions":["Admin","Read","Write","List","Tagging"]}]})";
    if (!id) return IoError("write " + (dir / "identities.json").string());
  }
  Status started = IoError("not started");
  for (int attempt = 0; attempt < 3 && !started.ok(); ++attempt) {
    if (attempt > 0) {
      // A start that failed (a port taken meanwhile by another process, say) may have left a master's state
      // naming its own ports: a server started on that data waited for volumes that never came.
      fs::remove_all(dir / "data", ec);
      fs::create_directories(dir / "data", ec);
      if (ec) return IoError("recreate " + (dir / "data").string() + ": " + ec.message());
    }
    auto base = FreePortRun();
    if (!base) return IoError("no run of free loopback ports for SeaweedFS");
    cluster->base_port_ = *base;
    started = cluster->Launch();
  }
  if (!started.ok()) return started.error();
  return cluster;
}

SeaweedCluster::~SeaweedCluster() {
  (void)Stop();
  std::error_code ec;
  fs::remove_all(dir_, ec);
}

std::string SeaweedCluster::endpoint() const {
  return "http://127.0.0.1:" + std::to_string(base_port_ + 3);
}

S3Options SeaweedCluster::Options(const std::string& bucket) const {
  S3Options o;
  o.endpoint = endpoint();
  o.region = "us-east-1";
  o.bucket = bucket;
  o.path_style = true;
  o.access_key = access_key_;
  o.secret_key = secret_key_;
  return o;
}

Status SeaweedCluster::CreateBucket(const std::string& bucket) const {
  auto client = S3Client::Create(Options(bucket));
  if (!client) return client.error();
  // The gateway answers before the filer behind it is ready: retry for a while.
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  std::string last;
  while (Clock::now() < deadline) {
    S3Request req;
    req.method = "PUT";
    auto res = (*client)->Send(req);
    if (res.ok() && (res->status == 200 || res->error_code == "BucketAlreadyOwnedByYou" ||
                     res->error_code == "BucketAlreadyExists"))
      return Ok{};
    last = res.ok() ? "HTTP " + std::to_string(res->status) + " " + res->error_code : res.error().message;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return IoError("SeaweedFS: create bucket " + bucket + ": " + last);
}

Status SeaweedCluster::Launch() {
  const auto port = [&](int i) { return std::to_string(base_port_ + i); };
  const std::vector<std::string> args = {
      bin_.string(),
      "-logdir=" + dir_.string(),
      "mini",
      "-dir=" + (dir_ / "data").string(),
      "-ip=127.0.0.1",
      "-ip.bind=127.0.0.1",
      "-master.port=" + port(0),
      "-master.peers=none",
      "-master.telemetry=false",
      "-volume.port=" + port(1),
      "-filer.port=" + port(2),
      "-s3.port=" + port(3),
      "-s3.config=" + (dir_ / "identities.json").string(),
      "-s3.port.iceberg=0",
      "-s3.port.lance=0",
      "-webdav=false",
      "-admin.ui=false",
      "-admin.port=" + port(4),
      "-admin.port.grpc=" + std::to_string(base_port_ + 4 + kGrpcOffset),
      "-admin.port.legacy=0",
  };
  const fs::path log = dir_ / "weed.log";
  const pid_t pid = ::fork();
  if (pid < 0) return IoError("fork for weed failed");
  if (pid == 0) {
    // The child: its own process group (killed whole), gone with the test process if that dies first.
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
    }
    if (::chdir(dir_.c_str()) != 0) ::_exit(126);
    // Its logs and sockets go to the cluster's directory, not /tmp.
    ::setenv("TMPDIR", dir_.c_str(), 1);  // NOLINT(concurrency-mt-unsafe): the child, before exec
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));  // NOLINT: execv's signature
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  pid_ = pid;
  // Ready when the S3 gateway answers its health check.
  const auto deadline = Clock::now() + std::chrono::seconds(90);
  while (Clock::now() < deadline) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return IoError("weed exited at start (see " + log.string() + "): " + Tail(log, 2000));
    }
    if (HttpStatus(endpoint() + "/healthz") == 200) return Ok{};
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  (void)Stop();
  return IoError("SeaweedFS did not answer on " + endpoint() + " within 90 s (see " + log.string() +
                 "): " + Tail(log, 2000));
}

Status SeaweedCluster::Stop() {
  if (pid_ <= 0) return Ok{};
  // Killed outright (weed takes ~10 s to stop on SIGTERM): what is acknowledged must survive that anyway.
  ::kill(-pid_, SIGKILL);
  int status = 0;
  ::waitpid(pid_, &status, 0);
  pid_ = -1;
  return Ok{};
}

Status SeaweedCluster::Restart() {
  if (auto st = Stop(); !st.ok()) return st;
  return Launch();
}

}  // namespace cairn::store::testing
