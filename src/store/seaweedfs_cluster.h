// A private SeaweedFS server for tests and benchmarks: `weed mini` (master, volume, filer and S3 gateway in
// one process) with its data in a temporary directory, on free loopback ports, with one S3 identity whose
// keys are made up per cluster (so unsigned or wrongly signed requests are refused, as on a real deployment).
// Nothing depends on a system service.
//
// Binary: CAIRN_WEED_BIN, else the one scripts/seaweedfs.sh built into its cache
// (${CAIRN_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/cairn}/seaweedfs/<pinned version>/weed; the bootstrap
// builds it once from the Go module proxy).
//
// Ownership: the object owns the server process and its directory; the destructor kills the server and
// removes the directory. Thread-safety: create, stop, restart and destroy on one thread; accessors are const.
// Failures: Start returns kIo naming the step (no binary, the server did not answer, with its log's tail).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "common/error.h"
#include "store/s3_client.h"

namespace cairn::store::testing {

class SeaweedCluster {
 public:
  // `name` labels the temporary directory (the test's name, say).
  static Result<std::unique_ptr<SeaweedCluster>> Start(const std::string& name);
  ~SeaweedCluster();
  SeaweedCluster(const SeaweedCluster&) = delete;
  SeaweedCluster& operator=(const SeaweedCluster&) = delete;

  // http://127.0.0.1:PORT, the S3 endpoint (path-style addressing).
  std::string endpoint() const;
  const std::string& access_key() const { return access_key_; }
  const std::string& secret_key() const { return secret_key_; }
  // S3 options for this cluster and `bucket` (path style, region us-east-1).
  S3Options Options(const std::string& bucket) const;
  // Creates a bucket (idempotent).
  Status CreateBucket(const std::string& bucket) const;

  // Kills the server (SIGKILL: as a crash or a power cut would stop it), and starts it again on the same
  // ports and data.
  Status Stop();
  Status Restart();
  const std::filesystem::path& directory() const { return dir_; }
  pid_t pid() const { return pid_; }  // the weed process (benchmarks read its CPU time), -1 when stopped

 private:
  SeaweedCluster(std::filesystem::path bin, std::filesystem::path dir)
      : bin_(std::move(bin)), dir_(std::move(dir)) {}
  Status Launch();

  std::filesystem::path bin_;
  std::filesystem::path dir_;
  uint16_t base_port_ = 0;  // master; volume, filer, s3, admin follow (each also uses port + 10000)
  std::string access_key_;
  std::string secret_key_;
  pid_t pid_ = -1;
};

// The weed binary the tests run (see above), or kIo saying how to get one.
Result<std::filesystem::path> FindWeed();

}  // namespace cairn::store::testing
