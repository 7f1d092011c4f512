// A line diff of two small texts, for a commit's page: the lines each side holds, kept, removed or added,
// in order (a longest common subsequence of lines after the common start and end are set aside). Pure.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

namespace cairn::web {

struct DiffLine {
  enum class Kind { kKeep, kDel, kAdd } kind;
  std::string_view text;  // a line of one of the inputs, without its end of line
};

// The differing lines of `before` and `after` with up to `context` unchanged lines around each change
// (a skipped run is given as one kKeep line "…"); nullopt when the differing middles pass `max_cells`
// line pairs (the table's size) — too large to show.
std::optional<std::vector<DiffLine>> DiffLines(std::string_view before, std::string_view after,
                                               size_t context = 3, size_t max_cells = 4'000'000);

}  // namespace cairn::web
