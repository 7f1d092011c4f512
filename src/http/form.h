// A form's fields (application/x-www-form-urlencoded, as browsers post them): names to values, decoded
// ('+' is a space). Pure; any thread.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace cairn::http {

using FormFields = std::map<std::string, std::string, std::less<>>;

// The fields of `body`; nullopt when it is no form or gives a field twice. An empty body is a form of none.
std::optional<FormFields> ParseForm(std::string_view body);

// The value of `name` ("" when absent).
std::string_view FormField(const FormFields& fields, std::string_view name);

}  // namespace cairn::http
