#include "xet/verify.h"

#include <string>

#include "xet/hashing.h"

namespace cairn::xet {
namespace {

std::string Where(const FileRecord& f, size_t term) {
  return "file " + f.hash.hex() + " term " + std::to_string(term) + ": ";
}

}  // namespace

Result<uint64_t> VerifyFile(const FileRecord& file, const LayoutLookup& lookup,
                            const FileCheckOptions& options) {
  const bool has_verification = !file.verification.empty();
  if (options.require_verification && !has_verification && !file.terms.empty()) {
    return Malformed("file " + file.hash.hex() + ": no verification entries");
  }
  if (has_verification && file.verification.size() != file.terms.size()) {
    return Malformed("file " + file.hash.hex() + ": verification entries do not match its terms");
  }
  std::vector<HashedChunk> leaves;
  uint64_t size = 0;
  for (size_t i = 0; i < file.terms.size(); ++i) {
    const FileTerm& t = file.terms[i];
    const XorbLayout* layout = lookup(t.xorb);
    if (layout == nullptr)
      return UnknownReference(Where(file, i) + "xorb " + t.xorb.hex() + " is not stored");
    if (t.chunk_start >= t.chunk_end || t.chunk_end > layout->chunks.size()) {
      return Inconsistent(Where(file, i) + "chunks [" + std::to_string(t.chunk_start) + ", " +
                          std::to_string(t.chunk_end) + ") are outside xorb " + t.xorb.hex() + " of " +
                          std::to_string(layout->chunks.size()) + " chunks");
    }
    uint64_t bytes = 0;
    for (uint32_t c = t.chunk_start; c < t.chunk_end; ++c) {
      const XorbChunk& chunk = layout->chunks[c];
      bytes += chunk.unpacked_size;
      leaves.push_back({chunk.hash, chunk.unpacked_size});
    }
    if (bytes != t.unpacked_bytes) {
      return Inconsistent(Where(file, i) + "claims " + std::to_string(t.unpacked_bytes) +
                          " bytes, the chunks hold " + std::to_string(bytes));
    }
    if (has_verification) {
      const auto term_leaves = std::span(leaves).last(t.chunk_end - t.chunk_start);
      if (RangeHashOf(term_leaves) != file.verification[i]) {
        return HashMismatch(Where(file, i) + "verification hash does not match the stored chunks");
      }
    }
    size += bytes;
  }
  if (FileHashOf(leaves) != file.hash) {
    return HashMismatch("file " + file.hash.hex() + ": hash recomputed from its terms is " +
                        FileHashOf(leaves).hex());
  }
  return size;
}

Status VerifyXorbListing(const XorbRecord& listing, const XorbLayout& stored) {
  const std::string where = "xorb " + listing.hash.hex() + ": ";
  if (listing.chunks.size() != stored.chunks.size()) {
    return Inconsistent(where + "lists " + std::to_string(listing.chunks.size()) +
                        " chunks, the stored xorb has " + std::to_string(stored.chunks.size()));
  }
  uint64_t offset = 0;
  for (size_t i = 0; i < stored.chunks.size(); ++i) {
    const auto& l = listing.chunks[i];
    const auto& s = stored.chunks[i];
    if (l.hash != s.hash || l.size != s.unpacked_size || l.byte_start != offset) {
      return Inconsistent(where + "chunk " + std::to_string(i) + " differs from the stored xorb");
    }
    offset += s.unpacked_size;
  }
  if (listing.bytes_in_xorb != offset) return Inconsistent(where + "byte count differs from the stored xorb");
  return Ok{};
}

}  // namespace cairn::xet
