#include "http/status.h"

namespace cairn::http {

unsigned HttpStatusOf(ErrorCode code) {
  switch (code) {
    case ErrorCode::kMalformed:
    case ErrorCode::kHashMismatch:
    case ErrorCode::kLimit:
    case ErrorCode::kInconsistent:
    case ErrorCode::kUnknownReference:
      return 400;
    case ErrorCode::kUnauthorized:
      return 401;
    case ErrorCode::kDenied:
    case ErrorCode::kQuota:
      return 403;
    case ErrorCode::kNotFound:
      return 404;
    case ErrorCode::kConflict:
      return 409;
    case ErrorCode::kStale:
      return 412;
    case ErrorCode::kUnsatisfiable:
      return 416;
    case ErrorCode::kDamaged:
    case ErrorCode::kIo:
      return 500;
    case ErrorCode::kUnavailable:
      return 503;
  }
  return 500;
}

}  // namespace cairn::http
