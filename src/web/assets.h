// The pages' templates and stylesheet (src/web/assets/), compiled into the binary by embed.cmake: a page
// needs nothing from another host or from the disk. Immutable, so any thread reads them.
#pragma once

#include <optional>
#include <span>
#include <string_view>

namespace cairn::web {

struct Asset {
  std::string_view name;  // its file name: "layout.html", "cairn.css"
  std::string_view text;
};

std::span<const Asset> Assets();

// The asset of that file name; nullopt when there is none.
std::optional<std::string_view> FindAsset(std::string_view name);

}  // namespace cairn::web
