// The names of namespaces: users, organizations and the repositories under them follow the Hub's rules, and
// a few names are kept for the site's own paths. Pure functions; safe from any thread.
#pragma once

#include <string_view>

namespace cairn::people {

// A namespace or repository name the Hub accepts: letters, digits, '-', '_', '.', at most 96 characters,
// starting and ending with a letter or digit, no "--" or "..", and none of the names the site's own paths
// use ("models", "datasets", "spaces", "buckets", "api", "me").
bool ValidName(std::string_view name);

// A name a new user or organization may take: a ValidName that is not one of the site's pages or services
// either ("settings", "organizations", "oauth", "login", "new", ...: compared without case), so that no
// account can stand for a page of the site.
bool AccountNameAllowed(std::string_view name);

}  // namespace cairn::people
