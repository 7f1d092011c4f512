// A form's fields (application/x-www-form-urlencoded, as browsers post them): names to values, decoded
// ('+' is a space). Pure; any thread.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cairn::http {

using FormFields = std::map<std::string, std::string, std::less<>>;

// The fields of `body`; nullopt when it is no form or gives a field twice. An empty body is a form of none.
std::optional<FormFields> ParseForm(std::string_view body);

// Every value of `name` in `body`, in order (a field a form may repeat: paths-info's "paths"); nullopt when
// `body` is no form.
std::optional<std::vector<std::string>> FormValues(std::string_view body, std::string_view name);

// The value of `name` ("" when absent).
std::string_view FormField(const FormFields& fields, std::string_view name);

}  // namespace cairn::http
