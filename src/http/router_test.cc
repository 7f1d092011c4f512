#include "http/router.h"

#include <gtest/gtest.h>

namespace cairn::http {
namespace {

TEST(Router, ATailCaptureTakesTheRestOfThePath) {
  Router r;
  r.Handle(Verb::get, "/{ns}/{name}/resolve/{rev}/{path...}", {}, [](const std::shared_ptr<Exchange>&) {});
  auto m = r.Find(Verb::get, {"alice", "model", "resolve", "refs/pr/1", "dir", "sub", "file.bin"});
  ASSERT_NE(m.route, nullptr);
  EXPECT_EQ(m.params.at("rev"), "refs/pr/1");  // a decoded %2F stays inside its segment
  EXPECT_EQ(m.params.at("path"), "dir/sub/file.bin");
  m = r.Find(Verb::get, {"alice", "model", "resolve", "main", "a"});
  ASSERT_NE(m.route, nullptr);
  EXPECT_EQ(m.params.at("path"), "a");
  EXPECT_EQ(r.Find(Verb::get, {"alice", "model", "resolve", "main"}).route, nullptr);  // one segment at least
  EXPECT_EQ(r.Find(Verb::get, {"alice", "model", "resolve", "main", "a", "", "b"}).route, nullptr);
  EXPECT_EQ(r.Find(Verb::get, {"alice", "model", "blob", "main", "a"}).route, nullptr);
}

TEST(Router, MatchesCapturesAndMethods) {
  Router r;
  r.Handle(Verb::post, "/v1/xorbs/{prefix}/{hash}", {}, [](const std::shared_ptr<Exchange>&) {});
  r.Handle(Verb::get, "/v1/reconstructions/{file}", RouteOptions().Name("recon"),
           [](const std::shared_ptr<Exchange>&) {});
  r.Handle(Verb::get, "/v1/reconstructions/special", {}, [](const std::shared_ptr<Exchange>&) {});

  auto m = r.Find(Verb::post, {"v1", "xorbs", "default", "abc"});
  ASSERT_NE(m.route, nullptr);
  EXPECT_EQ(m.params.at("prefix"), "default");
  EXPECT_EQ(m.params.at("hash"), "abc");
  EXPECT_EQ(m.route->options.name, "/v1/xorbs/{prefix}/{hash}");

  m = r.Find(Verb::get, {"v1", "xorbs", "default", "abc"});
  EXPECT_EQ(m.route, nullptr);
  EXPECT_EQ(m.status, 405u);
  EXPECT_EQ(m.allow, "POST");

  m = r.Find(Verb::get, {"v1", "reconstructions", "f00"});
  ASSERT_NE(m.route, nullptr);
  EXPECT_EQ(m.route->options.name, "recon");

  // HEAD: the GET route answers; routes without GET do not, and list what they take.
  m = r.Find(Verb::head, {"v1", "reconstructions", "f00"});
  ASSERT_NE(m.route, nullptr);
  EXPECT_EQ(m.route->options.name, "recon");
  EXPECT_EQ(m.params.at("file"), "f00");
  m = r.Find(Verb::head, {"v1", "xorbs", "default", "abc"});
  EXPECT_EQ(m.route, nullptr);
  EXPECT_EQ(m.status, 405u);
  EXPECT_EQ(m.allow, "POST");
  m = r.Find(Verb::put, {"v1", "reconstructions", "f00"});
  EXPECT_EQ(m.status, 405u);
  EXPECT_EQ(m.allow, "GET, HEAD");

  EXPECT_EQ(r.Find(Verb::get, {"v1", "xorbs", "default"}).status, 404u);
  EXPECT_EQ(r.Find(Verb::post, {"v1", "xorbs", "default", ""}).status, 404u);  // empty capture
  EXPECT_EQ(r.Find(Verb::get, {}).status, 404u);
}

}  // namespace
}  // namespace cairn::http
