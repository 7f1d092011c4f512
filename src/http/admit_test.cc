// The admission step without sockets: each refusal the server makes from a request's header alone, in its
// order, and what an admitted request carries to its handler.
#include "http/admit.h"

#include <gtest/gtest.h>

#include <boost/asio/ip/address.hpp>

namespace cairn::http {
namespace {

namespace bhttp = boost::beast::http;

const std::string kAdmitKey(64, 'k');

class AdmitTest : public ::testing::Test {
 protected:
  AdmitTest() {
    router_.Handle(Verb::get, "/open/{name}", RouteOptions().Name("open").MaxBody(10), [](const auto&) {});
    router_.Handle(Verb::put, "/private/{name}", RouteOptions().Name("private").Auth(Permission::kWrite),
                   [](const auto&) {});
    router_.Handle(Verb::post, "/gated", RouteOptions().Name("gated").Admit(gate_), [](const auto&) {});
    router_.Handle(Verb::get, "/small", RouteOptions().Name("small").MaxHeader(200), [](const auto&) {});
    router_.Handle(Verb::get, "/stored/{name}", RouteOptions().Name("stored").UserContent(),
                   [](const auto&) {});
    // A route that reads its own credentials (a header "X-Key: open"), before its gate.
    router_.Handle(Verb::post, "/checked",
                   RouteOptions()
                       .Name("checked")
                       .Check([](Request& req) -> std::optional<Response> {
                         if (req.Header("X-Key") != "open") return Response::ErrorJson(401, "no key");
                         req.principal = Principal{.scope = "checked"};
                         return std::nullopt;
                       })
                       .Admit(gate_),
                   [](const auto&) {});
  }

  Admitted Admit(const bhttp::request<bhttp::empty_body>& h, Arrival a = {}) {
    if (a.peer.is_unspecified()) a.peer = boost::asio::ip::make_address("192.0.2.7");
    if (a.peer_remote.empty()) a.peer_remote = a.peer.to_string() + ":40000";
    a.request_id = "rid";
    return AdmitRequest(AdmitContext{&router_, auth_.get(), &forwarded_, &proxies_, content_host_}, h, a);
  }
  static bhttp::request<bhttp::empty_body> Get(const std::string& target, bhttp::verb v = bhttp::verb::get) {
    return {v, target, 11};
  }
  static unsigned Status(const Admitted& a) { return a.refusal ? a.refusal->status : 0; }
  static Arrival Chunked(bool chunked) {
    Arrival a;
    a.chunked = chunked;
    return a;
  }
  static Arrival Length(uint64_t n) {
    Arrival a;
    a.content_length = n;
    return a;
  }

  Router router_;
  std::shared_ptr<AdmissionGate> gate_ = std::make_shared<AdmissionGate>(1);
  std::unique_ptr<Authenticator> auth_ = std::make_unique<Authenticator>(kAdmitKey);
  PerKeyLimiter forwarded_{1};
  AddressSet proxies_ = *AddressSet::Parse({"192.0.2.0/24"});
  std::string content_host_;
};

// On the user-content origin only the routes marked for it answer; the others are 404 there, and every route
// answers on cairn's own host.
TEST_F(AdmitTest, TheUserContentHostReachesOnlyItsRoutes) {
  const auto on = [&](const std::string& host, const std::string& target) {
    auto h = Get(target);
    h.set(bhttp::field::host, host);
    return Admit(h);
  };
  EXPECT_EQ(Status(on("files.example:8080", "/open/x")), 0u) << "no content host configured";
  content_host_ = "files.example:8080";
  const Admitted refused = on("FILES.example:8080", "/open/x");
  EXPECT_EQ(Status(refused), 404u);
  EXPECT_EQ(refused.request.route, "") << "refused before the route is taken";
  EXPECT_EQ(Status(on("files.example:8080", "/stored/x")), 0u);
  EXPECT_EQ(Status(on("hub.example:8080", "/open/x")), 0u);
  EXPECT_EQ(Status(on("hub.example:8080", "/stored/x")), 0u);
  EXPECT_EQ(Status(on("files.example:8080", "/nowhere")), 404u);
}

TEST_F(AdmitTest, AnAdmittedRequestCarriesWhatItsHandlerSees) {
  auto h = Get("/open/x%20y?a=1&b=%2F&a=2");
  h.set("X-Thing", "v");
  h.set(bhttp::field::expect, "100-Continue");
  const Admitted a = Admit(h);
  ASSERT_FALSE(a.refusal) << a.refusal->status;
  ASSERT_NE(a.route, nullptr);
  EXPECT_EQ(a.request.route, "open");
  EXPECT_EQ(a.request.path, "/open/x y");
  EXPECT_EQ(a.request.Param("name"), "x y");
  ASSERT_EQ(a.request.query.size(), 3u);
  EXPECT_EQ(a.request.query[1], (std::pair<std::string, std::string>{"b", "/"}));
  EXPECT_EQ(a.request.Header("X-Thing"), "v");
  EXPECT_EQ(a.request.request_id, "rid");
  EXPECT_EQ(a.request.remote, "192.0.2.7:40000");
  EXPECT_EQ(a.body_limit, 10u);
  EXPECT_TRUE(a.expect_continue);
  EXPECT_FALSE(a.close);
  EXPECT_TRUE(a.client.empty()) << "no proxy: nothing taken";
}

TEST_F(AdmitTest, TransferCodingsOtherThanChunkedCloseTheConnection) {
  auto h = Get("/open/x");
  h.set(bhttp::field::transfer_encoding, "gzip, chunked");
  Admitted a = Admit(h, Chunked(true));
  EXPECT_EQ(Status(a), 501u);
  EXPECT_TRUE(a.close);
  h.set(bhttp::field::transfer_encoding, "chunked");
  a = Admit(h, Chunked(false));  // the parser framed it otherwise
  EXPECT_EQ(Status(a), 400u);
  EXPECT_TRUE(a.close);
  EXPECT_EQ(Status(Admit(h, Chunked(true))), 0u);
  EXPECT_EQ(TransferEncodingStatus(h, 10, true), 400u) << "HTTP/1.0 has no transfer codings";
}

TEST_F(AdmitTest, RoutingRefusesUnknownPathsAndMethodsAndBadTargets) {
  EXPECT_EQ(Status(Admit(Get("/nowhere"))), 404u);
  const Admitted a = Admit(Get("/open/x", bhttp::verb::delete_));
  EXPECT_EQ(Status(a), 405u);
  EXPECT_EQ(a.refusal->headers.size(), 2u);  // Content-Type and Allow
  EXPECT_EQ(Status(Admit(Get("http://example.com/open/x"))), 400u) << "not origin-form";
}

TEST_F(AdmitTest, TheRoutesHeaderLimitCountsEveryField) {
  auto h = Get("/small");
  EXPECT_EQ(Status(Admit(h)), 0u);
  h.set("X-Padding", std::string(200, 'p'));
  const Admitted a = Admit(h);
  EXPECT_EQ(Status(a), 431u);
  EXPECT_NE(a.route, nullptr) << "refused after the match: counted under the route";
}

TEST_F(AdmitTest, TokensAreCheckedBeforeTheBody) {
  auto h = Get("/private/x", bhttp::verb::put);
  EXPECT_EQ(Status(Admit(h)), 401u);
  auto read = MintToken(kAdmitKey, {"s", Permission::kRead}, std::chrono::hours(1));
  h.set(bhttp::field::authorization, "Bearer " + *read);
  EXPECT_EQ(Status(Admit(h)), 403u);
  auto write = MintToken(kAdmitKey, {"s", Permission::kWrite}, std::chrono::hours(1));
  h.set(bhttp::field::authorization, "Bearer " + *write);
  const Admitted a = Admit(h);
  ASSERT_EQ(Status(a), 0u);
  ASSERT_TRUE(a.request.principal);
  EXPECT_EQ(a.request.principal->scope, "s");
  auth_.reset();
  EXPECT_EQ(Status(Admit(h)), 500u) << "a route that needs a token, and no authenticator";
}

TEST_F(AdmitTest, TheGateAdmitsUpToItsLimitAndTheTicketHoldsTheSlot) {
  Admitted first = Admit(Get("/gated", bhttp::verb::post));
  ASSERT_EQ(Status(first), 0u);
  ASSERT_NE(first.ticket, nullptr);
  EXPECT_EQ(first.request.admission, first.ticket);
  const Admitted second = Admit(Get("/gated", bhttp::verb::post));
  EXPECT_EQ(Status(second), 503u);
  first = Admitted{};  // the first request ends
  EXPECT_EQ(Status(Admit(Get("/gated", bhttp::verb::post))), 0u);
}

TEST_F(AdmitTest, ARoutesOwnCheckRefusesBeforeItsGate) {
  auto h = Get("/checked", bhttp::verb::post);
  Admitted held = Admit(Get("/gated", bhttp::verb::post));  // the shared gate is full
  ASSERT_EQ(Status(held), 0u);
  EXPECT_EQ(Status(Admit(h)), 401u) << "the check's refusal, not the gate's 503";
  h.set("X-Key", "open");
  EXPECT_EQ(Status(Admit(h)), 503u);
  held = Admitted{};
  const Admitted a = Admit(h);
  ASSERT_EQ(Status(a), 0u);
  ASSERT_TRUE(a.request.principal);
  EXPECT_EQ(a.request.principal->scope, "checked");
}

TEST_F(AdmitTest, ADeclaredBodyOverTheRoutesLimitIsRefusedUpFront) {
  EXPECT_EQ(Status(Admit(Get("/open/x"), Length(10))), 0u);
  EXPECT_EQ(Status(Admit(Get("/open/x"), Length(11))), 413u);
}

TEST_F(AdmitTest, BehindATrustedProxyTheClientIsNamedAndCapped) {
  auto h = Get("/open/x");
  h.set("X-Forwarded-For", "203.0.113.9, 192.0.2.50");
  Arrival via;
  via.via_proxy = true;
  via.peer = boost::asio::ip::make_address("192.0.2.1");
  Admitted first = Admit(h, via);
  ASSERT_EQ(Status(first), 0u);
  EXPECT_EQ(first.client, "203.0.113.9");
  EXPECT_EQ(first.request.remote, "203.0.113.9");
  EXPECT_EQ(first.remote, "203.0.113.9 via=192.0.2.1:40000");
  // The cap is 1: a second request of the same client while the first holds its unit.
  const Admitted second = Admit(h, via);
  EXPECT_EQ(Status(second), 429u);
  EXPECT_TRUE(second.per_client_refused);
  EXPECT_TRUE(second.client.empty()) << "nothing taken, nothing to release";
  forwarded_.Release(first.client);
  EXPECT_EQ(Status(Admit(h, via)), 0u);
  // Refused later (no such route), the unit is still handed back to be released.
  forwarded_.Release("203.0.113.9");
  const Admitted lost = Admit(Get("/nowhere"), via);
  EXPECT_EQ(Status(lost), 404u);
  EXPECT_EQ(forwarded_.held("192.0.2.1"), 1u) << "no X-Forwarded-For: the proxy itself is the client";
  EXPECT_EQ(lost.client, "192.0.2.1");
}

}  // namespace
}  // namespace cairn::http
