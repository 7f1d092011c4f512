// The protocol layer's names for the one error model (common/error.h): xet::Error, xet::Result<T>,
// xet::Status and the constructors are the common ones, so errors pass between layers unchanged.
#pragma once

#include "common/error.h"

namespace cairn::xet {

using cairn::Error;
using cairn::ErrorCode;
using cairn::Ok;
using cairn::Result;
using cairn::Status;

using cairn::Conflict;
using cairn::Damaged;
using cairn::Denied;
using cairn::HashMismatch;
using cairn::Inconsistent;
using cairn::IoError;
using cairn::LimitExceeded;
using cairn::Malformed;
using cairn::NotFound;
using cairn::QuotaExceeded;
using cairn::Retryable;
using cairn::Unavailable;
using cairn::UnknownReference;
using cairn::Unsatisfiable;

}  // namespace cairn::xet
