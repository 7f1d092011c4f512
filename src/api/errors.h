// The one table from a failure to its HTTP answer. Every route answers every error through here, so one code
// has one status wherever it comes from (common/error.h says what each code means), and the Hub's errors
// carry the headers huggingface_hub reads. Pure functions; safe from any thread.
#pragma once

#include <boost/json/object.hpp>
#include <string_view>

#include "common/error.h"
#include "http/handler.h"
#include "http/result.h"
#include "hub/hub_service.h"

namespace cairn::api {

// 400 for what is wrong with the request, 403/404/409/416 for the codes that say so, 500 for damage and
// failures of the machine, 503 for a dependency out of reach (the stock clients retry 5xx).
unsigned HttpStatusOf(ErrorCode code);
unsigned HttpStatusOf(hub::ErrorKind kind);

// `e` with its status, for a handler that returns http::Result or a stream that fails mid-way.
http::Error ToHttp(const Error& e);
http::Status ToHttp(const Status& st);

// The JSON error answer ({"error": message}) with e's status.
http::Response ErrorResponse(const Error& e);

// huggingface_hub shows X-Error-Message and tells 404s apart by X-Error-Code. The message may echo what the
// client sent (a path): in the header it is printable ASCII (common/printable.h), so no control character,
// C1 included, reaches a header or the terminal that shows it; the JSON body has it exactly.
http::Response HubErrorResponse(unsigned status, std::string_view code, std::string_view message);
http::Response HubErrorResponse(const hub::Error& e);
// git-lfs's error answer: {"message"} as application/vnd.git-lfs+json (git-lfs docs/api/batch.md).
http::Response LfsError(unsigned status, std::string_view message);
// The same with more fields in the JSON body beside "error" (a create_repo 409 names the repository that
// exists, which huggingface_hub reads).
http::Response HubErrorResponse(const hub::Error& e, boost::json::object body);

}  // namespace cairn::api
