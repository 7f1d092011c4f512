// cairn-test-seaweedfs: a private SeaweedFS server for test harnesses outside C++ (the stock-client interop
// suite), with the same guarantees as SeaweedCluster. Prints "ENDPOINT ACCESS_KEY SECRET_KEY" on its first
// line, then answers commands read from stdin, one per line, with "ok" or "error: ...":
//   bucket NAME     creates a bucket (idempotent)
//   stop / start    stops the server, starts it again (same ports and data)
// At end of input it stops the server and removes its directory.
#include <iostream>
#include <string>

#include "store/seaweedfs_cluster.h"

int main() {
  using cairn::store::testing::SeaweedCluster;
  auto cluster = SeaweedCluster::Start("interop");
  if (!cluster.ok()) {
    std::cerr << "cairn-test-seaweedfs: " << cluster.error().message << "\n";
    return 1;
  }
  std::cout << (*cluster)->endpoint() << " " << (*cluster)->access_key() << " " << (*cluster)->secret_key()
            << std::endl;
  std::string line;
  while (std::getline(std::cin, line)) {
    cairn::Status st = cairn::Ok{};
    if (line.starts_with("bucket ")) {
      st = (*cluster)->CreateBucket(line.substr(7));
    } else if (line == "stop") {
      st = (*cluster)->Stop();
    } else if (line == "start") {
      st = (*cluster)->Restart();
    } else {
      st = cairn::IoError("unknown command");
    }
    std::cout << (st.ok() ? std::string("ok") : "error: " + st.error().message) << std::endl;
  }
  return 0;
}
