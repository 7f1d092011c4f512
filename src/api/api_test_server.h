// The route tests' fixture base: a fresh SQLite index and local-disk store, a CasService on them with a test
// clock and fixed URL secret, and an HTTP server on a free loopback port. A fixture calls OpenServer,
// registers its routes, then Start()s the server; TearDown stops the server before anything its routes use
// goes.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <memory>
#include <string>

#include "cas/service.h"
#include "cas/test_backend.h"
#include "common/worker_pool.h"
#include "files/file_service.h"
#include "http/server.h"

namespace cairn::api::testing {

inline const std::string kTestJwtKey(64, 'j');

class ApiServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { (void)std::signal(SIGPIPE, SIG_IGN); }

  // The backend (under a temporary directory named after `name`), the service and a listening server.
  // The service's URL key, and a signer of URLs as the service signs them.
  static xet::Hash UrlKey() {
    xet::Hash h;
    h.bytes.fill(7);
    return h;
  }
  cas::TransferUrlSigner Signer() const { return cas::TransferUrlSigner(base_, UrlKey()); }

  void OpenServer(const std::string& name, http::ServerOptions o = {}) {
    ASSERT_NO_FATAL_FAILURE(cas::testing::OpenTestBackend(name, &dir_, &store_, &index_));
    o.host = "127.0.0.1";
    o.port = 0;
    auth_ = std::make_shared<http::Authenticator>(kTestJwtKey, &clock_);
    server_ = std::make_unique<http::Server>(o, auth_);
    ASSERT_TRUE(server_->Listen().ok());
    port_ = server_->port();
    ASSERT_NE(port_, 0);
    base_ = "http://127.0.0.1:" + std::to_string(port_);
    service_ = std::make_unique<cas::CasService>(*index_, *store_, pool_, CasOptions());
  }

  // What the fixture's services are made with: its URL key, its base and its clock.
  cas::ServiceOptions CasOptions() const {
    cas::ServiceOptions so;
    so.public_url = base_;
    so.url_keys = cas::UrlKeys::Single(UrlKey());
    so.clock = &clock_;
    return so;
  }
  files::FileServiceOptions FileOptions() const {
    files::FileServiceOptions fo;
    fo.url_keys = cas::UrlKeys::Single(UrlKey());
    fo.log = [](const std::string&) {};
    fo.clock = &clock_;
    return fo;
  }

  void StopServer() {
    if (!server_) return;
    server_->Stop(std::chrono::seconds(2));
    server_->Wait();
    server_.reset();
  }

  void TearDown() override {
    StopServer();
    service_.reset();
    index_.reset();
    store_.reset();
    std::filesystem::remove_all(dir_);
  }

  // A token signed with the test key, minted now by the fixture's clock: the one the server checks tokens
  // with and the services count from.
  std::string MintToken(const std::string& scope, http::Permission perm,
                        std::chrono::seconds ttl = std::chrono::hours(1)) const {
    auto t = http::MintToken(kTestJwtKey, {scope, perm}, ttl, clock_.UnixSeconds());
    EXPECT_TRUE(t.ok());
    return t.ok() ? *t : std::string();
  }

  // The services' and the authenticator's clock (declared first: it outlives them); tests move it.
  TestClock clock_{1'800'000'000};
  uint64_t Now() const { return static_cast<uint64_t>(clock_.UnixSeconds()); }
  std::filesystem::path dir_;
  WorkerPool pool_{2};
  std::unique_ptr<store::LocalDiskStore> store_;
  std::unique_ptr<index::SqliteIndex> index_;
  std::unique_ptr<cas::CasService> service_;
  std::shared_ptr<http::Authenticator> auth_;  // the server's: tests hand it a verifier of people's tokens
  std::unique_ptr<http::Server> server_;
  uint16_t port_ = 0;
  std::string base_;
};

}  // namespace cairn::api::testing
