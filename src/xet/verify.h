// Checks a shard's claims against the xorbs the server holds (protocol §4.7). Pure functions: the caller
// supplies the layouts, so the same code serves `cairn shard verify`, the ingest path and the tests.
#pragma once

#include <functional>

#include "xet/shard.h"
#include "xet/xorb.h"

namespace cairn::xet {

// Returns the layout of a stored xorb, or nullptr when the xorb is unknown.
using LayoutLookup = std::function<const XorbLayout*(const XorbHash&)>;

struct FileCheckOptions {
  bool require_verification = true;  // the stock clients always send verification entries
};

// Verifies one file of a shard: every term's xorb exists, its chunk range lies inside the xorb, its byte
// count equals the sum of those chunks' sizes, its verification hash equals the one computed from the stored
// chunk hashes, and the file hash recomputed from all terms equals the file's hash. Errors name the file and
// the term. Returns the file's size.
Result<uint64_t> VerifyFile(const FileRecord& file, const LayoutLookup& lookup,
                            const FileCheckOptions& options = {});

// Verifies a xorb listing of a shard against the stored layout: same chunks, hashes, sizes and offsets.
Status VerifyXorbListing(const XorbRecord& listing, const XorbLayout& stored);

}  // namespace cairn::xet
