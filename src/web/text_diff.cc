#include "web/text_diff.h"

#include <algorithm>
#include <cstdint>

namespace cairn::web {

namespace {

std::vector<std::string_view> Lines(std::string_view text) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (start < text.size()) {
    const size_t end = text.find('\n', start);
    if (end == std::string_view::npos) {
      out.push_back(text.substr(start));
      break;
    }
    out.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

// Every line of a and b in diff order: the longest common subsequence of the two (lengths table from the
// end).
std::vector<DiffLine> Full(const std::vector<std::string_view>& a, const std::vector<std::string_view>& b,
                           size_t start, size_t a_end, size_t b_end) {
  const size_t n = a_end - start;
  const size_t m = b_end - start;
  std::vector<uint32_t> table((n + 1) * (m + 1), 0);
  auto at = [&](size_t i, size_t j) -> uint32_t& { return table[i * (m + 1) + j]; };
  for (size_t i = n; i-- > 0;) {
    for (size_t j = m; j-- > 0;) {
      at(i, j) = a[start + i] == b[start + j] ? at(i + 1, j + 1) + 1 : std::max(at(i + 1, j), at(i, j + 1));
    }
  }
  std::vector<DiffLine> out;
  size_t i = 0;
  size_t j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && a[start + i] == b[start + j]) {
      out.push_back({DiffLine::Kind::kKeep, a[start + i]});
      ++i, ++j;
    } else if (i < n && (j == m || at(i + 1, j) >= at(i, j + 1))) {
      out.push_back({DiffLine::Kind::kDel, a[start + i++]});  // removals before additions, as git shows them
    } else {
      out.push_back({DiffLine::Kind::kAdd, b[start + j++]});
    }
  }
  return out;
}

// `all` with unchanged runs cut to `context` lines around the changes.
std::vector<DiffLine> WithContext(const std::vector<DiffLine>& all, size_t context) {
  std::vector<bool> keep(all.size(), false);
  for (size_t i = 0; i < all.size(); ++i) {
    if (all[i].kind == DiffLine::Kind::kKeep) continue;
    const size_t from = i > context ? i - context : 0;
    const size_t to = std::min(all.size(), i + context + 1);
    std::fill(keep.begin() + static_cast<ptrdiff_t>(from), keep.begin() + static_cast<ptrdiff_t>(to), true);
  }
  std::vector<DiffLine> out;
  bool skipped = false;
  for (size_t i = 0; i < all.size(); ++i) {
    if (keep[i]) {
      out.push_back(all[i]);
      skipped = false;
    } else if (!skipped) {
      out.push_back({DiffLine::Kind::kKeep, "…"});
      skipped = true;
    }
  }
  return out;
}

}  // namespace

std::optional<std::vector<DiffLine>> DiffLines(std::string_view before, std::string_view after,
                                               size_t context, size_t max_cells) {
  const auto a = Lines(before);
  const auto b = Lines(after);
  size_t start = 0;
  while (start < a.size() && start < b.size() && a[start] == b[start]) ++start;
  size_t a_end = a.size();
  size_t b_end = b.size();
  while (a_end > start && b_end > start && a[a_end - 1] == b[b_end - 1]) --a_end, --b_end;
  if ((a_end - start + 1) * (b_end - start + 1) > max_cells) return std::nullopt;
  std::vector<DiffLine> all;
  for (size_t i = 0; i < start; ++i) all.push_back({DiffLine::Kind::kKeep, a[i]});
  for (DiffLine& d : Full(a, b, start, a_end, b_end)) all.push_back(d);
  for (size_t i = a_end; i < a.size(); ++i) all.push_back({DiffLine::Kind::kKeep, a[i]});
  return WithContext(all, context);
}

}  // namespace cairn::web
