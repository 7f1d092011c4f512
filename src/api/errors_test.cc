// The one error table (http/status.h, through api/errors.h): every code and every Hub kind has exactly the
// status the routes answer.
#include "api/errors.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <string_view>

namespace cairn::api {
namespace {

std::string HeaderOf(const http::Response& r, std::string_view name) {
  for (const auto& [n, v] : r.headers)
    if (n == name) return v;
  return "";
}

TEST(ErrorTable, EveryCodeHasOneStatus) {
  const std::map<ErrorCode, unsigned> want = {
      {ErrorCode::kMalformed, 400},
      {ErrorCode::kHashMismatch, 400},
      {ErrorCode::kLimit, 400},
      {ErrorCode::kInconsistent, 400},
      {ErrorCode::kUnknownReference, 400},
      {ErrorCode::kUnauthorized, 401},
      {ErrorCode::kDenied, 403},
      {ErrorCode::kQuota, 403},
      {ErrorCode::kNotFound, 404},
      {ErrorCode::kConflict, 409},
      {ErrorCode::kUnsatisfiable, 416},
      {ErrorCode::kDamaged, 500},
      {ErrorCode::kIo, 500},
      {ErrorCode::kUnavailable, 503},
  };
  // Every enumerator, the last one included, is in the table above (a new code must be given its status).
  for (int c = 0; c <= static_cast<int>(ErrorCode::kUnavailable); ++c) {
    const auto code = static_cast<ErrorCode>(c);
    ASSERT_TRUE(want.contains(code)) << "code " << c << " has no expected status";
    EXPECT_EQ(HttpStatusOf(code), want.at(code)) << "code " << c;
    const http::Response r = ErrorResponse(Error{code, "why"});
    EXPECT_EQ(r.status, want.at(code));
  }
  // Only failures of the machine are worth retrying.
  EXPECT_TRUE(Retryable(IoError("disk")));
  EXPECT_TRUE(Retryable(Unavailable("db")));
  EXPECT_FALSE(Retryable(Damaged("gone")));
  EXPECT_FALSE(Retryable(NotFound("no")));
}

TEST(ErrorTable, HubKindsAndTheirHeaders) {
  EXPECT_EQ(HttpStatusOf(hub::ErrorKind::kBadRequest), 400u);
  EXPECT_EQ(HttpStatusOf(hub::ErrorKind::kUnauthorized), 401u);
  EXPECT_EQ(HttpStatusOf(hub::ErrorKind::kForbidden), 403u);
  EXPECT_EQ(HttpStatusOf(hub::ErrorKind::kNotFound), 404u);
  EXPECT_EQ(HttpStatusOf(hub::ErrorKind::kConflict), 409u);
  EXPECT_EQ(HttpStatusOf(hub::ErrorKind::kStale), 412u);
  EXPECT_EQ(HttpStatusOf(hub::ErrorKind::kInternal), 500u);
  EXPECT_EQ(HttpStatusOf(hub::ErrorKind::kUnavailable), 503u);
  const http::Response r =
      HubErrorResponse(hub::Error{hub::ErrorKind::kNotFound, "RepoNotFound", "no repo a\r\nb"});
  EXPECT_EQ(r.status, 404u);
  EXPECT_EQ(HeaderOf(r, "X-Error-Code"), "RepoNotFound");
  EXPECT_EQ(HeaderOf(r, "X-Error-Message"), "no repo a\\x0d\\x0ab");
  const http::Response plain = HubErrorResponse(hub::Error{hub::ErrorKind::kInternal, "", "x"});
  EXPECT_EQ(HeaderOf(plain, "X-Error-Code"), "");
}

}  // namespace
}  // namespace cairn::api
