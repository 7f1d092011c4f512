// The one error table (http/status.h, through api/errors.h): every code has exactly the status the routes
// answer, and a Hub failure's reason is its X-Error-Code.
#include "api/errors.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <string_view>

#include "hub/hub_service.h"

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
      {ErrorCode::kStale, 412},
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

TEST(ErrorTable, AHubFailuresReasonIsItsErrorCodeHeader) {
  const http::Response r = HubErrorResponse(hub::RepoNotFound("no repo a\r\nb"));
  EXPECT_EQ(r.status, 404u);
  EXPECT_EQ(HeaderOf(r, "X-Error-Code"), "RepoNotFound");
  EXPECT_EQ(HeaderOf(r, "X-Error-Message"), "no repo a\\x0d\\x0ab");
  EXPECT_EQ(HubErrorResponse(hub::RevisionNotFound("r")).status, 404u);
  EXPECT_EQ(HeaderOf(HubErrorResponse(hub::RevisionNotFound("r")), "X-Error-Code"), "RevisionNotFound");
  EXPECT_EQ(HeaderOf(HubErrorResponse(hub::EntryNotFound("e")), "X-Error-Code"), "EntryNotFound");
  const http::Response exists = HubErrorResponse(hub::RepoExists("taken"));
  EXPECT_EQ(exists.status, 409u);
  EXPECT_EQ(HeaderOf(exists, "X-Error-Code"), "RepoExists");
  const http::Response plain = HubErrorResponse(Damaged("x"));
  EXPECT_EQ(plain.status, 500u);
  EXPECT_EQ(HeaderOf(plain, "X-Error-Code"), "");
}

}  // namespace
}  // namespace cairn::api
