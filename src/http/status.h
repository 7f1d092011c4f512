// The one table from a failure to its HTTP status. Every answer to an error goes through here (the server's
// own, a handler's, api/errors.h's with the Hub's headers), so one code has one status wherever it comes
// from (common/error.h says what each code means). Pure; safe from any thread.
#pragma once

#include "common/error.h"

namespace cairn::http {

// 400 for what is wrong with the request, 401/403/404/409/416 for the codes that say so, 500 for damage and
// failures of the machine, 503 for a dependency out of reach (the stock clients retry 5xx).
unsigned HttpStatusOf(ErrorCode code);

}  // namespace cairn::http
