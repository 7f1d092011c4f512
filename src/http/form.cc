#include "http/form.h"

#include <boost/url/parse_query.hpp>
#include <utility>

namespace cairn::http {

namespace {

// Calls `each(name, value)` for every field of `body`, decoded, in order, until it returns false; false when
// `body` is no form (or `each` stopped).
template <typename Each>
bool ForEachField(std::string_view body, Each each) {
  if (body.empty()) return true;
  // Boost.URL 1.81's parse_query reads past the end of a view that is not NUL-terminated: a string of its
  // own.
  const std::string terminated(body);
  auto query = boost::urls::parse_query(terminated);
  if (!query) return false;
  const boost::urls::encoding_opts plus_is_space(/*space_as_plus=*/true);
  for (const auto& p : *query) {
    if (!each(p.key.decode(plus_is_space), p.value.decode(plus_is_space))) return false;
  }
  return true;
}

}  // namespace

std::optional<FormFields> ParseForm(std::string_view body) {
  FormFields fields;
  const bool ok = ForEachField(body, [&](std::string name, std::string value) {
    return fields.emplace(std::move(name), std::move(value)).second;
  });
  if (!ok) return std::nullopt;
  return fields;
}

std::optional<std::vector<std::string>> FormValues(std::string_view body, std::string_view name) {
  std::vector<std::string> values;
  const bool ok = ForEachField(body, [&](const std::string& key, std::string value) {
    if (key == name) values.push_back(std::move(value));
    return true;
  });
  if (!ok) return std::nullopt;
  return values;
}

std::string_view FormField(const FormFields& fields, std::string_view name) {
  auto it = fields.find(name);
  return it == fields.end() ? std::string_view() : std::string_view(it->second);
}

}  // namespace cairn::http
