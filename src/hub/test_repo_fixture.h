// Tests' Hub: a HubService over a real SQLite index and local-disk store, with one repository (alice/m)
// created by alice, and uploads of large files for it. Tests only; the hub unit suites start from it.
// Set options_ (say, its clock) in the derived fixture's constructor: SetUp builds the service with it.
#pragma once

#include <gtest/gtest.h>
#include <openssl/sha.h>

#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cas/test_backend.h"
#include "common/hex.h"
#include "common/worker_pool.h"
#include "hub/hub_service.h"
#include "ingest/upload_builder.h"
#include "xet/test_support.h"

namespace cairn::hub::testing {

class RepoFixture : public ::testing::Test {
 protected:
  // `prefix`: the temporary directory's name prefix.
  explicit RepoFixture(std::string prefix) : prefix_(std::move(prefix)) {}

  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(cas::testing::OpenTestBackend(prefix_, &dir_, &store_, &index_));
    cas_ = std::make_unique<cas::CasService>(*index_, *store_, pool_, cas::ServiceOptions{});
    files_ = std::make_unique<files::FileService>(*cas_, *index_, files::FileServiceOptions{});
    hub_ = std::make_unique<HubService>(*index_, *files_, options_);
    auto repo = hub_->CreateRepo(alice_, {RepoType::kModel, "alice", "m"}, false);
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

  // Uploads `size` bytes made from `seed` for the repository and returns their pointer.
  LfsPointer Upload(uint64_t seed, size_t size) {
    const auto data = xet::testing::SplitMix64Bytes(seed, size);
    auto built = ingest::BuildUpload(std::vector<std::span<const uint8_t>>{data});
    for (const auto& x : built.xorbs) EXPECT_TRUE(cas_->PutXorb(x.hash, x.body).ok());
    EXPECT_TRUE(cas_->PutShard(built.shard_bytes, repo_.record.scope).ok());
    uint8_t digest[SHA256_DIGEST_LENGTH];
    SHA256(data.data(), data.size(), digest);
    return LfsPointer{HexEncode(digest), data.size()};
  }

  ObjectId Head(std::string_view ref = "main") { return *hub_->Resolve(repo_, ref); }

  const std::string prefix_;
  std::filesystem::path dir_;
  WorkerPool pool_{1};
  std::unique_ptr<store::LocalDiskStore> store_;
  std::unique_ptr<index::SqliteIndex> index_;
  HubOptions options_;
  std::unique_ptr<cas::CasService> cas_;
  std::unique_ptr<files::FileService> files_;
  std::unique_ptr<HubService> hub_;
  Repo repo_;
  const Caller alice_{"alice", true};
};

}  // namespace cairn::hub::testing
