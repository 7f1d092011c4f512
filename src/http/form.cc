#include "http/form.h"

#include <boost/url/parse_query.hpp>

namespace cairn::http {

std::optional<FormFields> ParseForm(std::string_view body) {
  FormFields fields;
  if (body.empty()) return fields;
  // Boost.URL 1.81's parse_query reads past the end of a view that is not NUL-terminated: a string of its
  // own.
  const std::string terminated(body);
  auto query = boost::urls::parse_query(terminated);
  if (!query) return std::nullopt;
  const boost::urls::encoding_opts plus_is_space(/*space_as_plus=*/true);
  for (const auto& p : *query) {
    if (!fields.emplace(p.key.decode(plus_is_space), p.value.decode(plus_is_space)).second)
      return std::nullopt;
  }
  return fields;
}

std::string_view FormField(const FormFields& fields, std::string_view name) {
  auto it = fields.find(name);
  return it == fields.end() ? std::string_view() : std::string_view(it->second);
}

}  // namespace cairn::http
