// The HTTP layer's names for the one error model (common/error.h): http::Error, http::Result<T>,
// http::Status are the common ones, so a handler's failure and a service's pass between layers unchanged;
// http/status.h gives each code its status.
#pragma once

#include "common/error.h"

namespace cairn::http {

using cairn::Error;
using cairn::ErrorCode;
using cairn::Ok;
using cairn::Result;
using cairn::Status;

}  // namespace cairn::http
