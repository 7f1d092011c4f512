// The request helpers that have no fuzz target of their own: a renamed repository's redirect target.
#include "api/requests.h"

#include <gtest/gtest.h>

namespace cairn::api {
namespace {

TEST(RenamedTarget, PutsTheNewNameWhereTheOldOneWas) {
  const hub::RepoId from{hub::RepoType::kModel, "alice", "old"};
  const hub::RepoId to{hub::RepoType::kModel, "bob", "new"};
  EXPECT_EQ(RenamedTarget("/api/models/alice/old/revision/main", from, to),
            "/api/models/bob/new/revision/main");
  EXPECT_EQ(RenamedTarget("/api/models/alice/old", from, to), "/api/models/bob/new");
  EXPECT_EQ(RenamedTarget("/api/models/alice/old?expand=sha", from, to), "/api/models/bob/new?expand=sha");
  EXPECT_EQ(RenamedTarget("/alice/old/resolve/main/old/w.bin", from, to), "/bob/new/resolve/main/old/w.bin");
  EXPECT_EQ(RenamedTarget("/datasets/alice/old/resolve/v1/x", from, to), "/datasets/bob/new/resolve/v1/x");
  EXPECT_EQ(RenamedTarget("/alice/old.git/info/refs?service=git-upload-pack", from, to),
            "/bob/new.git/info/refs?service=git-upload-pack");
  // Another repository whose name starts the same is not it.
  EXPECT_EQ(RenamedTarget("/api/models/alice/older/revision/main", from, to), std::nullopt);
  EXPECT_EQ(RenamedTarget("/api/models/carol/m", from, to), std::nullopt);
  // Names are matched as the target encodes them.
  const hub::RepoId dotted{hub::RepoType::kModel, "alice", "m.v1"};
  EXPECT_EQ(RenamedTarget("/alice/m.v1/resolve/main/a", dotted, to), "/bob/new/resolve/main/a");
}

}  // namespace
}  // namespace cairn::api
