#include "people/names.h"

#include <algorithm>
#include <array>

#include "index/people_records.h"

namespace cairn::people {

namespace {

bool Alnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

// Names that would read as something else in a URL or a scope ("datasets/alice" is not a namespace).
constexpr std::array<std::string_view, 6> kPathNames = {"models",  "datasets", "spaces",
                                                        "buckets", "api",      "me"};

// The site's pages and services, now or soon (sign-in, settings, organizations' pages, the operator's page).
constexpr std::array<std::string_view, 22> kSiteNames = {
    "admin",    "anonymous", "assets", "auth",    "cairn",         "docs",    "help", "join",
    "login",    "logout",    "new",    "oauth",   "organizations", "pricing", "root", "search",
    "settings", "signup",    "static", "support", "system",        "user"};

}  // namespace

bool ValidName(std::string_view name) {
  if (name.empty() || name.size() > 96 || !Alnum(name.front()) || !Alnum(name.back())) return false;
  if (name.find("--") != std::string_view::npos || name.find("..") != std::string_view::npos) return false;
  if (std::find(kPathNames.begin(), kPathNames.end(), name) != kPathNames.end()) return false;
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return Alnum(c) || c == '-' || c == '_' || c == '.'; });
}

bool AccountNameAllowed(std::string_view name) {
  if (!ValidName(name)) return false;
  const std::string folded = index::FoldedName(name);
  const auto taken = [&](std::string_view reserved) { return folded == reserved; };
  return std::none_of(kPathNames.begin(), kPathNames.end(), taken) &&
         std::none_of(kSiteNames.begin(), kSiteNames.end(), taken);
}

}  // namespace cairn::people
