// Tests' repository: a Hub repository (alice/m) in a real SQLite index, with a short history the Hub wrote,
// for the git services to serve and change.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "cas/test_backend.h"
#include "common/worker_pool.h"
#include "hub/hub_service.h"

namespace cairn::git::testing {

class HubRepoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(cas::testing::OpenTestBackend("cairn-git-repo", &dir_, &store_, &index_));
    cas_ = std::make_unique<cas::CasService>(*index_, *store_, pool_, cas::ServiceOptions{});
    files_ = std::make_unique<files::FileService>(*cas_, *index_, files::FileServiceOptions{});
    hub_ = std::make_unique<hub::HubService>(*index_, *files_, hub::HubOptions{});
    auto repo = hub_->CreateRepo(alice_, {index::RepoType::kModel, "alice", "m"}, false);
    ASSERT_TRUE(repo.ok());
    repo_ = *repo;
  }
  void TearDown() override {
    hub_.reset();
    files_.reset();
    cas_.reset();
    index_.reset();
    store_.reset();
    std::filesystem::remove_all(dir_);
  }

  hub::ObjectId Commit(const std::string& summary, std::vector<hub::Operation> ops) {
    hub::CommitRequest c;
    c.summary = summary;
    c.operations = std::move(ops);
    auto done = hub_->CreateCommit(alice_, repo_, c);
    EXPECT_TRUE(done.ok()) << done.error().message;
    return done->oid;
  }
  static std::vector<uint8_t> Bytes(std::string_view s) { return {s.begin(), s.end()}; }

  // A three-commit history: a folder, an edit, a new file.
  void History() {
    c1_ = Commit("one", {hub::AddInline{"dir/a.txt", Bytes("a\n")}, hub::AddInline{"b.txt", Bytes("b\n")}});
    c2_ = Commit("two", {hub::AddInline{"b.txt", Bytes("b2\n")}});
    c3_ = Commit("three", {hub::AddInline{"dir/c.txt", Bytes("c\n")}});
  }

  TestClock clock_;
  std::filesystem::path dir_;
  WorkerPool pool_{1};
  std::unique_ptr<store::LocalDiskStore> store_;
  std::unique_ptr<index::SqliteIndex> index_;
  std::unique_ptr<cas::CasService> cas_;
  std::unique_ptr<files::FileService> files_;
  std::unique_ptr<hub::HubService> hub_;
  const hub::Caller alice_{"alice", true};
  hub::Repo repo_;
  hub::ObjectId c1_, c2_, c3_;
};

}  // namespace cairn::git::testing
