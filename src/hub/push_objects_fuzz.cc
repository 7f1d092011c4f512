// Fuzzes what a push's objects are checked by (hub::ParseTree, ParseLfsPointer, StorableObjects and the path
// bound of tree_paths.h): the first byte is how many folders deep (times 8) the input, read as a tree's body,
// is nested under folders named "a"; the rest is the body. Checks, against independent restatements: a tree
// that parses is in git's order, names each name once and encodes back to the same bytes; a pointer that
// parses encodes back to the same bytes; StorableObjects accepts the nested trees exactly when every name is
// a valid segment and the longest path (2 bytes per folder, then the longest name) is at most 4,096 bytes.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "common/fuzz_check.h"
#include "hub/git_object.h"
#include "hub/hub_service.h"
#include "hub/tree_paths.h"

namespace {

using cairn::hub::EntryMode;
using cairn::hub::ObjectKind;
using cairn::hub::RawObject;
using cairn::hub::TreeEntry;

// The same bytes wrapped in `folders` trees of one folder "a" each, innermost first.
std::vector<RawObject> Nested(std::span<const uint8_t> body, size_t folders) {
  std::vector<RawObject> out;
  std::vector<uint8_t> bytes(body.begin(), body.end());
  cairn::hub::ObjectId id = cairn::hub::HashObject(ObjectKind::kTree, bytes);
  out.push_back({ObjectKind::kTree, id, std::move(bytes)});
  for (size_t i = 0; i < folders; ++i) {
    const std::vector<TreeEntry> one = {{EntryMode::kTree, "a", id}};
    bytes = cairn::hub::EncodeTree(one);
    id = cairn::hub::HashObject(ObjectKind::kTree, bytes);
    out.push_back({ObjectKind::kTree, id, std::move(bytes)});
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t folders = static_cast<size_t>(data[0]) * 8;
  const std::span<const uint8_t> body(data + 1, size - 1);

  if (auto pointer = cairn::hub::ParseLfsPointer(body)) {
    const std::string again = cairn::hub::EncodeLfsPointer(*pointer);
    FUZZ_CHECK(std::equal(again.begin(), again.end(), body.begin(), body.end()));
    FUZZ_CHECK(cairn::hub::IsSha256Hex(pointer->sha256));
  }

  auto entries = cairn::hub::ParseTree(body);
  bool all_valid = entries.ok();
  size_t longest = 0;
  if (entries.ok()) {
    FUZZ_CHECK(cairn::hub::EncodeTree(*entries) == std::vector<uint8_t>(body.begin(), body.end()));
    std::set<std::string> names;
    for (const auto& e : *entries) {
      FUZZ_CHECK(names.insert(e.name).second);  // once, whatever the mode
      all_valid = all_valid && cairn::hub::ValidSegment(e.name);
      longest = std::max(longest, e.name.size());
    }
    auto sorted = *entries;
    cairn::hub::SortTree(sorted);
    for (size_t i = 0; i < sorted.size(); ++i) FUZZ_CHECK(sorted[i].name == (*entries)[i].name);
  }
  // The subtrees the input names are not carried: they count as empty.
  const size_t path = longest == 0 ? (folders == 0 ? 0 : 2 * folders - 1) : 2 * folders + longest;
  const bool fits = path <= cairn::hub::kMaxPathBytes;
  auto stored = cairn::hub::StorableObjects(Nested(body, folders));
  FUZZ_CHECK(stored.ok() == (all_valid && fits));
  return 0;
}
