// Git packs (gitformat-pack.txt, version 2) as upload-pack sends them: "PACK", the version, the object count,
// each object as its type and size (git's varint) and its body deflated with zlib, then the SHA-1 of all of
// it. Objects are written whole, never as deltas: a repository's git objects are small here (trees, commits,
// LFS pointers and files under the inline limit), and whole objects cost the server nothing to plan.
//
// A PackWriter is one thread's. Failures: the sink's refusal (the client went away) or zlib's, as values.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>

#include "git/zlib.h"
#include "hub/git_object.h"

namespace cairn::git {

using hub::ObjectKind;

class PackWriter {
 public:
  // `sink` receives the pack's bytes in order, in pieces of about `piece_bytes` (the last one shorter), and
  // answers false when nobody wants them any more. `objects`: how many Add will be called with.
  PackWriter(uint32_t objects, std::function<bool(std::string&&)> sink, size_t piece_bytes = 1 << 20,
             int level = 1);
  ~PackWriter();
  PackWriter(const PackWriter&) = delete;
  PackWriter& operator=(const PackWriter&) = delete;

  Status Add(ObjectKind kind, std::span<const uint8_t> body);
  // The trailer; kInconsistent when Add was called another number of times than announced.
  Status Finish();

 private:
  Status Emit(bool last);

  uint32_t objects_;
  uint32_t added_ = 0;
  std::function<bool(std::string&&)> sink_;
  size_t piece_bytes_;
  Deflater deflater_;
  std::string pending_;
  struct Sha1;
  std::unique_ptr<Sha1> sha1_;
};

// The header of an object in a pack: its type (1 commit, 2 tree, 3 blob) and size.
void AppendObjectHeader(std::string& out, ObjectKind kind, uint64_t size);

}  // namespace cairn::git
