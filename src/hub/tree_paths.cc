#include "hub/tree_paths.h"

#include <algorithm>
#include <string>
#include <unordered_map>

#include "common/printable.h"

namespace cairn::hub {
namespace {

// What the check keeps of a tree: its folders and the longest name of the rest.
struct Shape {
  struct Folder {
    std::string name;
    ObjectId id;
  };
  std::vector<Folder> folders;
  std::string longest_file;
  size_t height = 0;  // the longest path below it, once known
  bool done = false;
};

using Shapes = std::unordered_map<ObjectId, Shape, ObjectIdHash>;

// Reads the trees level by level from the roots; kLimit past kMaxTreeDepth.
Status Discover(const std::vector<ObjectId>& roots, const TreeBodies& bodies, Shapes& shapes) {
  std::vector<ObjectId> level;
  for (const ObjectId& r : roots) {
    if (shapes.try_emplace(r).second) level.push_back(r);
  }
  for (size_t depth = 0; !level.empty(); ++depth) {
    if (depth > kMaxTreeDepth) {
      return LimitExceeded("a path holds more than " + std::to_string(kMaxTreeDepth) +
                           " folders, so it is longer than " + std::to_string(kMaxPathBytes) +
                           " bytes (docs/hub.md, Limits)");
    }
    std::vector<ObjectId> next;
    auto st = bodies(level, [&](size_t i, std::span<const uint8_t> body) {
      auto entries = ParseTree(body);
      if (!entries.ok()) return;
      Shape& shape = shapes[level[i]];
      for (auto& e : *entries) {
        if (!e.is_tree()) {
          if (e.name.size() > shape.longest_file.size()) shape.longest_file = e.name;
          continue;
        }
        if (shapes.try_emplace(e.id).second) next.push_back(e.id);
        shape.folders.push_back({std::move(e.name), e.id});
      }
    });
    if (!st.ok()) return st;
    level = std::move(next);
  }
  return Ok{};
}

// A folder entry's longest path: its name, and below it what its tree holds.
size_t Through(const Shape::Folder& f, const Shapes& shapes) {
  const size_t below = shapes.at(f.id).height;
  return f.name.size() + (below > 0 ? 1 + below : 0);
}

// Each tree's height, children before parents, without recursion.
void Measure(const ObjectId& root, Shapes& shapes) {
  std::vector<std::pair<ObjectId, bool>> stack{{root, false}};
  while (!stack.empty()) {
    auto [id, expanded] = stack.back();
    stack.pop_back();
    Shape& shape = shapes.at(id);
    if (shape.done) continue;
    if (!expanded) {
      stack.emplace_back(id, true);
      for (const auto& f : shape.folders) {
        if (!shapes.at(f.id).done) stack.emplace_back(f.id, false);
      }
      continue;
    }
    size_t height = shape.longest_file.size();
    for (const auto& f : shape.folders) height = std::max(height, Through(f, shapes));
    shape.height = height;
    shape.done = true;
  }
}

// The longest path under a measured tree, for the refusal.
std::string LongestPath(const ObjectId& root, const Shapes& shapes) {
  std::string path;
  const Shape* at = &shapes.at(root);
  while (at->height > 0) {
    const Shape::Folder* best = nullptr;
    for (const auto& f : at->folders) {
      if (Through(f, shapes) == at->height) best = &f;
    }
    if (!path.empty()) path += '/';
    if (best == nullptr) return path + at->longest_file;
    path += best->name;
    if (path.size() > 200) return path;  // enough to say which
    at = &shapes.at(best->id);
  }
  return path;
}

}  // namespace

Status CheckPathLengths(const std::vector<ObjectId>& roots, const TreeBodies& bodies) {
  Shapes shapes;
  if (auto st = Discover(roots, bodies, shapes); !st.ok()) return st;
  for (const ObjectId& root : roots) {
    Measure(root, shapes);
    const size_t height = shapes.at(root).height;
    if (height > kMaxPathBytes) {
      return LimitExceeded("the path \"" + Printable(LongestPath(root, shapes), 120) + "\" is " +
                           std::to_string(height) + " bytes long, more than " +
                           std::to_string(kMaxPathBytes) + " (docs/hub.md, Limits)");
    }
  }
  return Ok{};
}

}  // namespace cairn::hub
