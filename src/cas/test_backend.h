// Test support for the service and API tests: a LocalDiskStore and a SqliteIndex in a fresh directory named
// after the running test.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>

#include "index/sqlite/sqlite_index.h"
#include "store/local_disk_store.h"

namespace cairn::cas::testing {

// Creates <tmp>/<prefix>-<pid>-<test name> (emptied first) with blobs/ and index.db. Use under
// ASSERT_NO_FATAL_FAILURE.
inline void OpenTestBackend(const std::string& prefix, std::filesystem::path* dir,
                            std::unique_ptr<store::LocalDiskStore>* store,
                            std::unique_ptr<index::SqliteIndex>* index) {
  *dir = std::filesystem::temp_directory_path() /
         (prefix + "-" + std::to_string(::getpid()) + "-" +
          ::testing::UnitTest::GetInstance()->current_test_info()->name());
  std::filesystem::remove_all(*dir);
  std::filesystem::create_directories(*dir);
  auto st = store::LocalDiskStore::Open(*dir / "blobs");
  ASSERT_TRUE(st.ok()) << st.error().message;
  *store = std::move(*st);
  index::SqliteOptions io;
  io.path = (*dir / "index.db").string();
  auto ix = index::SqliteIndex::Open(io);
  ASSERT_TRUE(ix.ok()) << ix.error().message;
  *index = std::move(*ix);
}

}  // namespace cairn::cas::testing
