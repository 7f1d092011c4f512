// The one table from a failure to its HTTP answer. Every route answers every error through here, so one code
// has one status wherever it comes from (common/error.h says what each code means), and the Hub's errors
// carry the headers huggingface_hub reads. Pure functions; safe from any thread.
#pragma once

#include <boost/json/object.hpp>
#include <string_view>

#include "common/error.h"
#include "http/handler.h"
#include "http/result.h"
#include "http/status.h"

namespace cairn::api {

// Each code's status: http/status.h's one table.
using http::HttpStatusOf;

// The JSON error answer ({"error": message}) with e's status.
http::Response ErrorResponse(const Error& e);

// huggingface_hub shows X-Error-Message and tells 404s apart by X-Error-Code. The message may echo what the
// client sent (a path): in the header it is printable ASCII (common/printable.h), so no control character,
// C1 included, reaches a header or the terminal that shows it; the JSON body has it exactly.
http::Response HubErrorResponse(unsigned status, std::string_view code, std::string_view message);
// An error's reason, when it has one, is its X-Error-Code.
http::Response HubErrorResponse(const Error& e);
// git-lfs's error answer: {"message"} as application/vnd.git-lfs+json (git-lfs docs/api/batch.md).
http::Response LfsError(unsigned status, std::string_view message);
// The same with more fields in the JSON body beside "error" (a create_repo 409 names the repository that
// exists, which huggingface_hub reads).
http::Response HubErrorResponse(const Error& e, boost::json::object body);

}  // namespace cairn::api
