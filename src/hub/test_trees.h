// Tests' git trees: a history as deep as a path may go (or deeper, as an attacker pushes it), and a thread
// with a small stack to walk it on, so that a walk that recursed once per folder would crash the test.
// Tests only.
#pragma once

#include <gtest/gtest.h>
#include <pthread.h>

#include <functional>
#include <string>
#include <vector>

#include "hub/git_object.h"

namespace cairn::hub::testing {

// `folders` nested folders named `name` ("a/a/…/a"), the innermost holding `leaf`: the trees, innermost
// first, and the outermost's id in *root.
inline std::vector<RawObject> NestedTrees(size_t folders, const std::string& name,
                                          std::vector<TreeEntry> leaf, ObjectId* root) {
  std::vector<RawObject> out;
  SortTree(leaf);
  auto body = EncodeTree(leaf);
  ObjectId id = HashObject(ObjectKind::kTree, body);
  out.push_back({ObjectKind::kTree, id, std::move(body)});
  for (size_t i = 0; i < folders; ++i) {
    const std::vector<TreeEntry> one = {{EntryMode::kTree, name, id}};
    body = EncodeTree(one);
    id = HashObject(ObjectKind::kTree, body);
    out.push_back({ObjectKind::kTree, id, std::move(body)});
  }
  *root = id;
  return out;
}

// A commit of `tree` on `parent`, as a push carries it.
inline RawObject CommitObject(const ObjectId& tree, const ObjectId& parent, const std::string& message) {
  Commit c;
  c.tree = tree;
  c.parents = {parent};
  c.author = {"A U Thor", "a@example.com", 1700000000};
  c.committer = c.author;
  c.message = message;
  const std::string text = EncodeCommit(c);
  std::vector<uint8_t> body(text.begin(), text.end());
  return {ObjectKind::kCommit, HashObject(ObjectKind::kCommit, body), std::move(body)};
}

inline RawObject BlobObject(std::string_view text) {
  std::vector<uint8_t> body(text.begin(), text.end());
  return {ObjectKind::kBlob, HashObject(ObjectKind::kBlob, body), std::move(body)};
}

// A stack far smaller than a walk recursing once per folder of a 4,096-byte path needs (2,048 frames), and
// enough for an iterative walk and the index beneath it (sanitizers' frames are larger).
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr size_t kSmallStackBytes = 512 << 10;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
inline constexpr size_t kSmallStackBytes = 512 << 10;
#else
inline constexpr size_t kSmallStackBytes = 128 << 10;
#endif
#else
inline constexpr size_t kSmallStackBytes = 128 << 10;
#endif

// Runs `fn` on a thread of kSmallStackBytes and waits for it.
inline void OnSmallStack(const std::function<void()>& fn) {
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, kSmallStackBytes);
  pthread_t thread;
  auto run = [](void* arg) -> void* {
    (*static_cast<const std::function<void()>*>(arg))();
    return nullptr;
  };
  const int started = pthread_create(&thread, &attr, run, const_cast<std::function<void()>*>(&fn));
  pthread_attr_destroy(&attr);
  ASSERT_EQ(started, 0) << "no thread with a small stack";
  pthread_join(thread, nullptr);
}

}  // namespace cairn::hub::testing
