#include "bundle/bundle.h"

#include <blake3.h>
#include <fcntl.h>

#include <algorithm>
#include <charconv>
#include <map>
#include <memory>
#include <set>
#include <unordered_map>

#include "backup/space.h"
#include "common/hex.h"
#include "common/posix_io.h"
#include "common/unique_fd.h"
#include "git/pack.h"
#include "git/pack_reader.h"
#include "hub/file_link.h"
#include "hub/history.h"
#include "ingest/shard_records.h"
#include "repair/fsck.h"
#include "store/local_disk_store.h"
#include "store/store_copy.h"
#include "xet/hashing.h"
#include "xet/shard.h"
#include "xet/verify.h"
#include "xet/xorb.h"

namespace cairn::bundle {
namespace fs = std::filesystem;
namespace {

using hub::ObjectId;
using hub::ObjectIdHash;

constexpr char kManifestFile[] = "manifest";
constexpr char kPackFile[] = "history.pack";
constexpr char kObjectsDir[] = "objects";
// A bundle's shards stay well under the protocol's 64 MiB (xet::kMaxShardBytes), as a compaction's do.
constexpr size_t kShardBudget = 32ULL << 20;

std::string_view KindWord(index::RefKind kind) {
  return kind == index::RefKind::kTag ? "tag" : "branch";
}

std::string Blake3Hex(std::span<const uint8_t> bytes) {
  blake3_hasher h;
  blake3_hasher_init(&h);
  blake3_hasher_update(&h, bytes.data(), bytes.size());
  uint8_t out[32];
  blake3_hasher_finalize(&h, out, sizeof out);
  return HexEncode(out);
}

std::optional<uint64_t> Number(std::string_view s) {
  uint64_t v = 0;
  if (s.empty() || s.size() > 20) return std::nullopt;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

// The git objects of a bundle, by id: what export writes and import reads, checked the same way.
class History {
 public:
  explicit History(const std::vector<index::RepoObject>& objects) {
    for (const auto& o : objects) {
      if (auto id = ObjectId::FromBytes(o.key)) by_id_.emplace(*id, &o);
    }
  }
  const index::RepoObject* Find(const ObjectId& id, hub::ObjectKind kind) const {
    auto it = by_id_.find(id);
    if (it == by_id_.end() || it->second->kind != static_cast<uint8_t>(kind)) return nullptr;
    return it->second;
  }

  // Every commit, tree and blob the commits `heads` reach is here: kMalformed naming the first missing.
  Status CheckComplete(const std::vector<ObjectId>& heads) const {
    std::unordered_map<ObjectId, bool, ObjectIdHash> seen;
    std::vector<std::pair<ObjectId, hub::ObjectKind>> todo;
    for (const auto& h : heads) todo.emplace_back(h, hub::ObjectKind::kCommit);
    while (!todo.empty()) {
      const auto [id, kind] = todo.back();
      todo.pop_back();
      if (!seen.emplace(id, true).second) continue;
      const index::RepoObject* o = Find(id, kind);
      if (o == nullptr)
        return Malformed("the history lacks object " + id.hex() + " (or it is of another kind)");
      if (kind == hub::ObjectKind::kCommit) {
        auto c = hub::ParseCommit(o->data);
        if (!c.ok()) return Malformed("commit " + id.hex() + ": " + c.error().message);
        todo.emplace_back(c->tree, hub::ObjectKind::kTree);
        for (const auto& p : c->parents) todo.emplace_back(p, hub::ObjectKind::kCommit);
      } else if (kind == hub::ObjectKind::kTree) {
        auto entries = hub::ParseTree(o->data);
        if (!entries.ok()) return Malformed("tree " + id.hex() + ": " + entries.error().message);
        for (const auto& e : *entries)
          todo.emplace_back(e.id, e.is_tree() ? hub::ObjectKind::kTree : hub::ObjectKind::kBlob);
      }
    }
    return Ok{};
  }

  // The large files of the revisions `heads` (their trees, not their histories): SHA-256 → a path naming it.
  // The history must be complete (CheckComplete).
  std::map<std::string, std::string> Pointers(const std::vector<ObjectId>& heads) const {
    std::map<std::string, std::string> out;
    std::unordered_map<ObjectId, bool, ObjectIdHash> seen;
    std::vector<std::pair<ObjectId, std::string>> trees;
    for (const auto& h : heads) {
      const index::RepoObject* o = Find(h, hub::ObjectKind::kCommit);
      if (o == nullptr) continue;
      if (auto c = hub::ParseCommit(o->data); c.ok()) trees.emplace_back(c->tree, "");
    }
    while (!trees.empty()) {
      auto [id, path] = std::move(trees.back());
      trees.pop_back();
      if (!seen.emplace(id, true).second) continue;
      const index::RepoObject* t = Find(id, hub::ObjectKind::kTree);
      if (t == nullptr) continue;
      auto entries = hub::ParseTree(t->data);
      if (!entries.ok()) continue;
      for (const auto& e : *entries) {
        std::string at = path.empty() ? e.name : path + "/" + e.name;
        if (e.is_tree()) {
          trees.emplace_back(e.id, std::move(at));
        } else if (const index::RepoObject* b = Find(e.id, hub::ObjectKind::kBlob)) {
          if (auto p = hub::ParseLfsPointer(b->data)) out.emplace(p->sha256, std::move(at));
        }
      }
    }
    return out;
  }

  // Every LFS pointer among the blobs: SHA-256 → size.
  std::map<std::string, uint64_t> AllPointers() const {
    std::map<std::string, uint64_t> out;
    for (const auto& [id, o] : by_id_) {
      if (o->kind != static_cast<uint8_t>(hub::ObjectKind::kBlob)) continue;
      if (auto p = hub::ParseLfsPointer(o->data)) out.emplace(p->sha256, p->size);
    }
    return out;
  }

 private:
  std::unordered_map<ObjectId, const index::RepoObject*, ObjectIdHash> by_id_;
};

// The first of `pointers` (SHA-256 → path) with no link, as "PATH (SHA-256)".
std::optional<std::string> Unlinked(const std::map<std::string, std::string>& pointers,
                                    const std::map<std::string, xet::FileHash>& links) {
  auto it =
      std::find_if(pointers.begin(), pointers.end(), [&](const auto& p) { return !links.contains(p.first); });
  if (it == pointers.end()) return std::nullopt;
  return it->second + " (" + it->first + ")";
}

// A shard's size for one file record (SerializeShard: a header, each term and its verification entry, the
// metadata extension).
size_t FileRecordBytes(const xet::FileRecord& f) {
  return xet::kShardEntrySize * (3 + 2 * f.terms.size());
}

void Report(const Progress& progress, std::string_view what, uint64_t done, uint64_t total) {
  if (progress) progress(what, done, total);
}

// The records of `files` as a shard describes them (terms with their verification hashes, the SHA-256),
// and the listings of the xorbs they use, from the index.
struct Described {
  std::vector<xet::FileRecord> files;
  std::map<xet::XorbHash, xet::XorbRecord> xorbs;
};
Result<Described> Describe(index::CasIndex& cas, const std::vector<xet::FileHash>& files) {
  Described out;
  std::vector<std::shared_ptr<const index::FileEntry>> entries;
  for (size_t at = 0; at < files.size(); at += index::CasIndex::kMaxFilesPerRead) {
    const auto batch =
        std::span(files).subspan(at, std::min(index::CasIndex::kMaxFilesPerRead, files.size() - at));
    auto got = cas.GetFiles(batch);
    if (!got.ok()) return got.error();
    for (size_t k = 0; k < batch.size(); ++k) {
      if ((*got)[k] == nullptr)
        return Inconsistent("file " + batch[k].hex() + " is linked but not in the index");
      entries.push_back((*got)[k]);
    }
  }
  std::vector<xet::XorbHash> xorbs;
  {
    std::set<xet::XorbHash> used;
    for (const auto& e : entries) {
      for (size_t t = 0; t < e->term_count; ++t) used.insert(e->term(t).xorb);
    }
    xorbs.assign(used.begin(), used.end());
  }
  std::map<xet::XorbHash, xet::XorbLayout> layouts;
  for (size_t at = 0; at < xorbs.size(); at += index::CasIndex::kMaxXorbsPerRead) {
    const auto batch =
        std::span(xorbs).subspan(at, std::min(index::CasIndex::kMaxXorbsPerRead, xorbs.size() - at));
    auto got = cas.GetXorbs(batch);
    if (!got.ok()) return got.error();
    for (size_t k = 0; k < batch.size(); ++k) {
      if ((*got)[k] == nullptr)
        return Inconsistent("xorb " + batch[k].hex() + " is used but not in the index");
      layouts.emplace(batch[k], (*got)[k]->ToLayout());
    }
  }
  for (const auto& e : entries) {
    xet::FileRecord rec{e->hash, {}, {}, e->sha256};
    for (size_t t = 0; t < e->term_count; ++t) {
      const index::Term term = e->term(t);
      const xet::XorbLayout& layout = layouts.at(term.xorb);
      if (term.chunk_end > layout.chunks.size() || term.chunk_start >= term.chunk_end)
        return Inconsistent("file " + e->hash.hex() + " has a term outside xorb " + term.xorb.hex());
      std::vector<xet::ChunkHash> hashes;
      for (uint32_t c = term.chunk_start; c < term.chunk_end; ++c) hashes.push_back(layout.chunks[c].hash);
      rec.verification.push_back(xet::RangeHashOf(hashes));
      rec.terms.push_back({term.xorb, 0, term.unpacked_bytes, term.chunk_start, term.chunk_end});
    }
    out.files.push_back(std::move(rec));
  }
  for (const auto& [hash, layout] : layouts)
    out.xorbs.emplace(hash, ingest::XorbRecordOf(hash, layout.hashed_chunks(), /*mark_global_dedup=*/true));
  return out;
}

// Shards holding `d`'s files, each with the listings of the xorbs its files use that no earlier shard
// listed, within kShardBudget each.
std::vector<xet::Shard> ShardsOf(Described& d) {
  std::vector<xet::Shard> out;
  std::set<xet::XorbHash> listed;
  xet::Shard shard;
  size_t bytes = xet::kEmptyShardBytes;
  for (auto& f : d.files) {
    size_t need = FileRecordBytes(f);
    std::vector<xet::XorbHash> fresh;
    for (const auto& t : f.terms) {
      if (!listed.contains(t.xorb) && std::find(fresh.begin(), fresh.end(), t.xorb) == fresh.end()) {
        fresh.push_back(t.xorb);
        need += xet::XorbListingBytes(d.xorbs.at(t.xorb).chunks.size());
      }
    }
    if (!shard.files.empty() && bytes + need > kShardBudget) {
      out.push_back(std::move(shard));
      shard = {};
      bytes = xet::kEmptyShardBytes;
    }
    for (const auto& x : fresh) {
      listed.insert(x);
      shard.xorbs.push_back(d.xorbs.at(x));
    }
    shard.files.push_back(std::move(f));
    bytes += need;
  }
  if (!shard.files.empty()) out.push_back(std::move(shard));
  return out;
}

// Refuses `path` when the way to it from `root` goes through a symbolic link: a bundle's files are its own,
// not another directory's. (Its last component is never followed: OpenRegularFile.)
Status Inside(const fs::path& root, const fs::path& path) {
  std::error_code ec;
  const fs::path real_root = fs::canonical(root, ec);
  if (ec) return PathIoError("resolve", root, ec.value());
  const fs::path dir = fs::canonical(path.parent_path(), ec);
  if (ec == std::errc::no_such_file_or_directory) return Ok{};  // reported as missing where it is read
  if (ec) return PathIoError("resolve", path.parent_path(), ec.value());
  if (dir != (real_root / path.parent_path().lexically_relative(root)).lexically_normal())
    return Malformed(path.string() + " is outside the bundle (a symbolic link leads there)");
  return Ok{};
}

// The large files of a bundle, checked against their bytes before anything is stored: each file rebuilt from
// the xorbs the bundle holds (or this server holds) per its shard's terms, every xorb validated against its
// hash, every term against its chunks, the file hash recomputed, and the SHA-256 and size computed from the
// bytes compared with the pointer's (a shard's claim alone proves nothing: any writer can make one).
class ByteCheck {
 public:
  ByteCheck(store::BlobStore& bundle, const std::set<xet::XorbHash>& in_bundle, cas::CasService& cas)
      : bundle_(bundle), in_bundle_(in_bundle), cas_(cas) {}

  // kHashMismatch when `file`'s bytes are not the large file `sha256` of `size` bytes.
  Status Check(const xet::FileRecord& file, const std::string& sha256, uint64_t size) {
    ingest::Sha256 sha;
    uint64_t bytes = 0;
    for (const auto& term : file.terms) {
      auto xorb = Load(term.xorb);
      if (!xorb.ok()) return xorb.error();
      const xet::XorbLayout& layout = (*xorb)->layout;
      if (term.chunk_end > layout.chunks.size() || term.chunk_start >= term.chunk_end)
        return Malformed("file " + file.hash.hex() + " has a term outside xorb " + term.xorb.hex());
      for (uint32_t c = term.chunk_start; c < term.chunk_end; ++c) {
        auto chunk =
            xet::StoredChunk::Parse(std::span<const uint8_t>((*xorb)->body).subspan(layout.begin_offset(c)));
        if (!chunk.ok()) return chunk.error();
        scratch_.resize(chunk->header.uncompressed_length);
        if (auto st = decoder_.Decode(chunk->header, chunk->payload, scratch_); !st.ok()) return st;
        sha.Update(scratch_);
        bytes += scratch_.size();
      }
    }
    // The terms' sizes, verification hashes and the file hash, against the layouts validated above.
    auto verified = xet::VerifyFile(file, [&](const xet::XorbHash& x) -> const xet::XorbLayout* {
      auto it = layouts_.find(x);
      return it == layouts_.end() ? nullptr : &it->second;
    });
    if (!verified.ok()) return HashMismatch(verified.error().message);
    const xet::Hash digest = sha.Final();
    if (digest.hex() != sha256 || bytes != size || *verified != size)
      return HashMismatch("file " + file.hash.hex() + " is not the large file " + sha256 +
                          " it is linked as: its bytes hash to " + digest.hex() + " (" +
                          std::to_string(bytes) + " bytes)");
    return Ok{};
  }

 private:
  struct Loaded {
    xet::XorbHash hash;
    std::vector<uint8_t> body;
    xet::XorbLayout layout;
  };

  // The xorb's bytes, validated against its hash (the last one read is kept: a file's terms, and files
  // deduplicated against each other, mostly use the same xorb in turn).
  Result<const Loaded*> Load(const xet::XorbHash& hash) {
    if (last_ && last_->hash == hash) return last_.get();
    last_.reset();
    auto body = Read(hash);
    if (!body.ok()) return body.error();
    auto valid = xet::ValidateXorb(*body, {.expected_hash = &hash});
    if (!valid.ok()) return Error{valid.error().code, "xorb " + hash.hex() + ": " + valid.error().message};
    body->resize(valid->chunk_region_size);
    layouts_.insert_or_assign(hash, valid->layout);
    last_ = std::make_unique<Loaded>(Loaded{hash, std::move(*body), std::move(valid->layout)});
    return last_.get();
  }
  Result<std::vector<uint8_t>> Read(const xet::XorbHash& hash) {
    if (in_bundle_.contains(hash)) return bundle_.ReadWhole(store::BlobKind::kXorb, hash);
    auto layout = cas_.Layout(hash);  // held here (Import asked the index)
    if (!layout.ok()) return layout.error();
    std::vector<uint8_t> body((*layout)->chunk_region_size());
    if (auto st = cas_.ReadXorb(hash, 0, body); !st.ok()) return st.error();
    return body;
  }

  store::BlobStore& bundle_;
  const std::set<xet::XorbHash>& in_bundle_;
  cas::CasService& cas_;
  xet::ChunkDecoder decoder_;
  std::vector<uint8_t> scratch_;
  std::unique_ptr<Loaded> last_;
  std::map<xet::XorbHash, xet::XorbLayout> layouts_;
};

}  // namespace

// ---- The manifest

std::string Manifest::Encode() const {
  std::string out = "cairn-bundle 1\n";
  out += "repo " + std::string(hub::Plural(repo.type)) + " " + repo.ns + " " + repo.name + "\n";
  out += "mirrored " + std::string(mirrored ? "1" : "0") + "\n";
  out += "private " + std::string(is_private ? "1" : "0") + "\n";
  out += "exported_at " + std::to_string(exported_at) + "\n";
  for (const auto& r : refs)
    out += "ref " + std::string(KindWord(r.kind)) + " " + r.name + " " + r.target.hex() + "\n";
  out += "pack " + std::to_string(pack_bytes) + " " + pack_blake3 + " " + std::to_string(objects) + "\n";
  for (const auto& l : links) out += "link " + l.sha256 + " " + l.file.hex() + "\n";
  for (const auto& x : xorbs) out += "xorb " + x.hash.hex() + " " + std::to_string(x.bytes) + "\n";
  for (const auto& s : shards) out += "shard " + s.hash.hex() + " " + std::to_string(s.bytes) + "\n";
  return out;
}

Result<Manifest> ParseManifest(std::string_view text) {
  if (text.size() > kMaxManifestBytes) return Malformed("the manifest is too large");
  Manifest m;
  bool head = false, repo = false, mirrored = false, priv = false, exported = false, pack = false;
  size_t line_no = 0;
  const auto once = [&](bool& flag) {
    const bool first = !flag;
    flag = true;
    return first;
  };
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    if (nl == std::string_view::npos) return Malformed("the manifest's last line is not ended");
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl + 1);
    ++line_no;
    std::vector<std::string_view> w;
    while (!line.empty() && w.size() <= 5) {
      const size_t sp = line.find(' ');
      w.push_back(line.substr(0, sp));
      if (sp == std::string_view::npos) break;
      line.remove_prefix(sp + 1);
    }
    const auto bad = [&](const std::string& why) {
      return Malformed("manifest line " + std::to_string(line_no) + ": " + why);
    };
    if (w.empty()) return bad("empty");
    const std::string_view key = w[0];
    if (line_no == 1) {
      if (w.size() != 2 || key != "cairn-bundle" || w[1] != "1")
        return Malformed("not a cairn bundle manifest (version 1)");
      head = true;
      continue;
    }
    if (key == "repo" && w.size() == 4 && once(repo)) {
      auto type = hub::TypeFromPlural(w[1]);
      if (!type || *type == hub::RepoType::kBucket || !hub::ValidName(w[2]) || !hub::ValidName(w[3]))
        return bad("not a repository");
      m.repo = {*type, std::string(w[2]), std::string(w[3])};
    } else if ((key == "mirrored" || key == "private") && w.size() == 2 &&
               once(key == "mirrored" ? mirrored : priv)) {
      if (w[1] != "0" && w[1] != "1") return bad("not 0 or 1");
      (key == "mirrored" ? m.mirrored : m.is_private) = w[1] == "1";
    } else if (key == "exported_at" && w.size() == 2 && once(exported)) {
      auto n = Number(w[1]);
      if (!n || *n > INT64_MAX) return bad("not a time");
      m.exported_at = static_cast<int64_t>(*n);
    } else if (key == "ref" && w.size() == 4) {
      const bool tag = w[1] == "tag";
      auto target = ObjectId::FromHex(w[3]);
      if ((!tag && w[1] != "branch") || !hub::ValidBranchOrTagName(w[2], tag) || !target)
        return bad("not a ref");
      m.refs.push_back({tag ? index::RefKind::kTag : index::RefKind::kBranch, std::string(w[2]), *target});
    } else if (key == "pack" && w.size() == 4 && once(pack)) {
      auto bytes = Number(w[1]);
      auto objects = Number(w[3]);
      uint8_t digest[32];
      if (!bytes || !objects || w[2].size() != 64 || !HexDecode(w[2], digest)) return bad("not a pack");
      m.pack_bytes = *bytes;
      m.pack_blake3 = std::string(w[2]);
      m.objects = *objects;
    } else if (key == "link" && w.size() == 3) {
      auto file = xet::Hash::FromHex(w[2]);
      if (!hub::IsSha256Hex(w[1]) || !file) return bad("not a link");
      m.links.push_back({std::string(w[1]), *file});
    } else if ((key == "xorb" || key == "shard") && w.size() == 3) {
      auto hash = xet::Hash::FromHex(w[1]);
      auto bytes = Number(w[2]);
      if (!hash || !bytes) return bad("not an object");
      (key == "xorb" ? m.xorbs : m.shards).push_back({*hash, *bytes});
    } else {
      return bad("unknown, repeated or malformed");
    }
  }
  if (!head || !repo || !mirrored || !priv || !exported || !pack)
    return Malformed("the manifest lacks a line");
  if (m.refs.empty()) return Malformed("the manifest names no ref");
  return m;
}

// ---- Export

namespace {

// The repository to export: kNotFound when there is none, kMalformed for a bucket (it has no history).
Result<index::RepoRecord> FindExported(index::Index& index, const hub::RepoId& id) {
  auto record = index.FindRepo(id.type, id.ns, id.name);
  if (!record.ok()) {
    if (record.error().code == ErrorCode::kNotFound) return NotFound("no repository " + hub::RepoPath(id));
    return record.error();
  }
  if (record->type == hub::RepoType::kBucket) return Malformed("buckets are not exported (no history)");
  return record;
}

// The refs: every one, or the one asked for (a commit id the revision names: as the default branch).
Status PickRefs(index::Index& index, const index::RepoRecord& record, const hub::RepoId& id,
                const ExportOptions& options, Manifest& m) {
  auto refs = index.ListRefs(record.id);
  if (!refs.ok()) return refs.error();
  for (const auto& r : *refs) {
    auto target = ObjectId::FromBytes(r.target);
    if (!target) continue;
    if (options.revision.empty() || options.revision == r.name) m.refs.push_back({r.kind, r.name, *target});
    if (!options.revision.empty() && !m.refs.empty()) break;  // a branch wins over a tag of the same name
  }
  if (m.refs.empty() && !options.revision.empty()) {
    auto commit = ObjectId::FromHex(options.revision);
    if (!commit) return NotFound("no branch, tag or commit " + options.revision + " in " + hub::RepoPath(id));
    m.refs.push_back({index::RefKind::kBranch, options.default_branch, *commit});
  }
  if (m.refs.empty()) return NotFound(hub::RepoPath(id) + " has no branch or tag");
  return Ok{};
}

// What the heads reach: its git objects, and its large files' links (SHA-256 → Xet file).
struct Reached {
  std::vector<index::RepoObject> git;
  std::map<std::string, xet::FileHash> links;
};

Result<Reached> ReadReached(index::Index& index, const index::RepoRecord& record, const hub::RepoId& id,
                            const std::vector<ObjectId>& heads) {
  auto reach = hub::ReachFrom(index, record.id, heads, {.preload = true, .on_pointer = nullptr});
  if (!reach.ok()) return reach.error();
  if (reach->missing > 0) {
    return Inconsistent(hub::RepoPath(id) + "'s history lacks " + std::to_string(reach->missing) +
                        " objects here (cairn fsck reports them)");
  }
  Reached out;
  for (size_t at = 0; at < reach->keys.size(); at += index::RepoIndex::kMaxObjectsPerRead) {
    const size_t n = std::min(index::RepoIndex::kMaxObjectsPerRead, reach->keys.size() - at);
    std::vector<std::vector<uint8_t>> batch(reach->keys.begin() + static_cast<std::ptrdiff_t>(at),
                                            reach->keys.begin() + static_cast<std::ptrdiff_t>(at + n));
    auto got = index.GetRepoObjects(record.id, batch);
    if (!got.ok()) return got.error();
    for (auto& o : *got) {
      if (!o) continue;  // a link a purge removed meanwhile
      if (hub::FileLink::IsLink(*o)) {
        if (auto link = hub::FileLink::Parse(*o)) out.links.emplace(std::move(link->sha256), link->file);
      } else {
        out.git.push_back(std::move(*o));
      }
    }
  }
  return out;
}

// The history complete and every large file it points to linked; the links into the manifest: their files,
// described (terms and xorbs).
Result<Described> CheckReached(index::Index& index, const hub::RepoId& id, const Reached& reached,
                               const std::vector<ObjectId>& heads, Manifest& m) {
  const History history(reached.git);
  if (auto st = history.CheckComplete(heads); !st.ok()) return st.error();
  if (auto unlinked = Unlinked(history.Pointers(heads), reached.links)) {
    return NotFound("the large file " + *unlinked + " of " + hub::RepoPath(id) + " is not held here" +
                    (m.mirrored
                         ? ": fetch it first (cairn mirror prefetch " + hub::RepoPath(id) + "@REVISION)"
                         : " (purged?)"));
  }
  std::vector<xet::FileHash> files;
  for (const auto& [sha, file] : reached.links) {
    m.links.push_back({sha, file});
    files.push_back(file);
  }
  std::sort(files.begin(), files.end());
  files.erase(std::unique(files.begin(), files.end()), files.end());
  return Describe(index, files);
}

// The bundle's directory, created empty, and the store of its objects.
Result<std::unique_ptr<store::LocalDiskStore>> CreateBundleDir(const fs::path& dest) {
  std::error_code ec;
  fs::create_directories(dest, ec);
  if (ec) return PathIoError("create", dest, ec.value());
  if (!fs::is_empty(dest, ec) || ec) return Conflict(dest.string() + " is not an empty directory");
  return store::LocalDiskStore::Open(dest / kObjectsDir);
}

// The git objects as one pack, synced; its size, BLAKE3 and object count into the manifest.
Status WritePack(const fs::path& dest, const std::vector<index::RepoObject>& git, Manifest& m) {
  const fs::path path = dest / kPackFile;
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
  if (!fd.valid()) return PathIoError("create", path, errno);
  blake3_hasher h;
  blake3_hasher_init(&h);
  int err = 0;
  git::PackWriter pack(static_cast<uint32_t>(git.size()), [&](std::string&& piece) {
    const std::span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(piece.data()), piece.size());
    blake3_hasher_update(&h, bytes.data(), bytes.size());
    m.pack_bytes += bytes.size();
    err = WriteFull(fd.get(), bytes);
    return err == 0;
  });
  for (const auto& o : git) {
    if (auto st = pack.Add(static_cast<hub::ObjectKind>(o.kind), o.data); !st.ok())
      return err != 0 ? PathIoError("write", path, err) : st.error();
  }
  if (auto st = pack.Finish(); !st.ok()) return err != 0 ? PathIoError("write", path, err) : st.error();
  if (::fsync(fd.get()) != 0) return PathIoError("sync", path, errno);
  uint8_t digest[32];
  blake3_hasher_finalize(&h, digest, sizeof digest);
  m.pack_blake3 = HexEncode(digest);
  m.objects = git.size();
  return Ok{};
}

// The shards (one for most repositories), then the xorbs, copied as a backup copies them: verified at the
// source, read back from the bundle.
Status CopyCas(store::BlobStore& store, store::BlobStore& objects, Described& described,
               const ExportOptions& options, ExportReport& report) {
  Manifest& m = report.manifest;
  for (const auto& shard : ShardsOf(described)) {
    const std::vector<uint8_t> body = ingest::ShardUploadForm(shard);
    const xet::Hash hash = xet::ChunkHashOf(body);
    if (auto put = objects.Put(store::BlobKind::kShard, hash, body); !put.ok()) return put.error();
    m.shards.push_back({hash, body.size()});
    report.shard_bytes += body.size();
  }
  std::vector<xet::Hash> xorbs;
  for (const auto& entry : described.xorbs) xorbs.push_back(entry.first);
  store::StoreCopyOptions copy;
  copy.verify = repair::VerifyStoredBlob;
  copy.threads = 2;
  if (options.progress)
    copy.progress = [&](store::BlobKind, uint64_t done, uint64_t total) {
      options.progress("xorbs", done, total);
    };
  const store::KindCopyReport copied = store::CopyBlobs(store, objects, store::BlobKind::kXorb, xorbs, copy);
  if (!copied.failed.empty()) {
    return Damaged(std::to_string(copied.failed.size()) +
                   " xorbs could not be copied, the first: " + copied.failed.front());
  }
  for (const auto& x : xorbs) {
    auto stat = objects.Stat(store::BlobKind::kXorb, x);
    if (!stat.ok()) return stat.error();
    if (!stat->exists) return Damaged("xorb " + x.hex() + " is not in the bundle after its copy");
    m.xorbs.push_back({x, stat->size});
    report.xorb_bytes += stat->size;
  }
  return Ok{};
}

}  // namespace

Result<ExportReport> Export(index::Index& index, store::BlobStore& store, const hub::RepoId& id,
                            const fs::path& dest, const ExportOptions& options) {
  auto record = FindExported(index, id);
  if (!record.ok()) return record.error();
  ExportReport report;
  Manifest& m = report.manifest;
  m.repo = id;
  m.mirrored = hub::IsMirrored(*record);
  m.is_private = record->is_private;
  m.exported_at = options.now;

  if (auto st = PickRefs(index, *record, id, options, m); !st.ok()) return st.error();
  std::vector<ObjectId> heads;
  for (const auto& r : m.refs) heads.push_back(r.target);

  // ---- The history and the links it reaches.
  Report(options.progress, "history", 0, 0);
  auto reached = ReadReached(index, *record, id, heads);
  if (!reached.ok()) return reached.error();
  auto described = CheckReached(index, id, *reached, heads, m);
  if (!described.ok()) return described.error();

  // ---- The bundle's directory, written in the order that leaves the manifest last.
  auto objects = CreateBundleDir(dest);
  if (!objects.ok()) return objects.error();
  if (auto st = WritePack(dest, reached->git, m); !st.ok()) return st.error();
  if (auto st = CopyCas(store, **objects, *described, options, report); !st.ok()) return st.error();
  if (auto st = backup::SyncPath(dest); !st.ok()) return st.error();
  if (auto st = backup::WriteFileDurably(dest / kManifestFile, m.Encode()); !st.ok()) return st.error();
  return report;
}

// ---- Import

namespace {

Result<Manifest> ReadManifest(const fs::path& src) {
  auto text = backup::ReadFileBounded(src / kManifestFile, kMaxManifestBytes);
  if (!text.ok()) {
    if (text.error().code == ErrorCode::kNotFound)
      return NotFound(src.string() + " has no manifest: not a bundle, or one whose export did not finish");
    return text.error();
  }
  return ParseManifest(*text);
}

// The history: the pack the manifest describes, read as a push is.
Result<std::vector<index::RepoObject>> ReadBundledPack(const fs::path& src, const Manifest& m) {
  const git::PackLimits limits;
  if (m.pack_bytes > limits.max_total_bytes)
    return LimitExceeded("the bundle's pack is larger than cairn reads");
  auto pack = backup::ReadFileBounded(src / kPackFile, m.pack_bytes);
  if (!pack.ok()) return pack.error();
  const std::span<const uint8_t> pack_bytes(reinterpret_cast<const uint8_t*>(pack->data()), pack->size());
  if (pack->size() != m.pack_bytes || Blake3Hex(pack_bytes) != m.pack_blake3)
    return HashMismatch(src.string() + "/" + kPackFile + " is not the pack the manifest describes");
  auto read = git::ReadPack(pack_bytes, limits);
  if (!read.ok()) return Malformed("the bundle's pack: " + read.error().message);
  if (read->size() != m.objects)
    return Malformed("the bundle's pack holds another number of objects than its manifest says");
  auto objects = hub::StorableObjects(std::move(*read));
  if (!objects.ok()) return Malformed("the bundle's pack: " + objects.error().message);
  return objects;
}

// A blob of the bundle's store: inside the bundle, there, and of the size the manifest says.
Status CheckSize(const fs::path& src, store::LocalDiskStore& objects_in, store::BlobKind kind,
                 const Manifest::Blob& b) {
  if (auto st = Inside(src, objects_in.PathOf(kind, b.hash)); !st.ok()) return st;
  auto stat = objects_in.Stat(kind, b.hash);
  if (!stat.ok()) return stat.error();
  if (!stat->exists)
    return Malformed("the bundle lacks " + std::string(kind == store::BlobKind::kXorb ? "xorb " : "shard ") +
                     b.hash.hex());
  if (stat->size != b.bytes)
    return HashMismatch("the bundle's " + b.hash.hex() + " is not of the size its manifest says");
  return Ok{};
}

// The files the bundle's shards describe, each shard checked (its size, its hash, its form).
Result<std::map<xet::FileHash, xet::FileRecord>> ReadShards(const fs::path& src,
                                                            store::LocalDiskStore& objects_in,
                                                            const Manifest& m) {
  std::map<xet::FileHash, xet::FileRecord> described;
  for (const auto& s : m.shards) {
    if (auto st = CheckSize(src, objects_in, store::BlobKind::kShard, s); !st.ok()) return st.error();
    auto body = objects_in.ReadWhole(store::BlobKind::kShard, s.hash);
    if (!body.ok()) return body.error();
    if (xet::ChunkHashOf(*body) != s.hash)
      return HashMismatch("the bundle's shard " + s.hash.hex() + " is not what its name says");
    auto shard = xet::ParseShard(*body);
    if (!shard.ok()) return Malformed("the bundle's shard " + s.hash.hex() + ": " + shard.error().message);
    for (auto& f : shard->files) described.emplace(f.hash, std::move(f));
  }
  return described;
}

// Each described file linked, and each link described with its pointer's SHA-256 and size.
Status CheckDescribed(const std::map<xet::FileHash, xet::FileRecord>& described,
                      const std::map<std::string, xet::FileHash>& links,
                      const std::map<std::string, uint64_t>& sizes) {
  std::set<xet::FileHash> linked;
  for (const auto& [sha, file] : links) linked.insert(file);
  for (const auto& [hash, rec] : described) {
    if (!linked.contains(hash))  // registered in the repository's scope, it would be found by its claim
      return Malformed("the bundle's shards describe file " + hash.hex() + ", which it does not link");
  }
  for (const auto& [sha, file] : links) {
    auto rec = described.find(file);
    if (rec == described.end()) return Malformed("no shard of the bundle describes file " + file.hex());
    const auto size = sizes.find(sha);
    if (size == sizes.end() || (rec->second.sha256 && rec->second.sha256->hex() != sha) ||
        rec->second.size() != size->second)
      return Malformed("file " + file.hex() + " is not the large file " + sha + " it is linked as");
  }
  return Ok{};
}

// Each term's xorb in the bundle (`available`) or held here (added to it: asked of the index once).
Status CheckTermsAvailable(index::Index& index, const std::map<xet::FileHash, xet::FileRecord>& described,
                           std::set<xet::XorbHash>& available) {
  for (const auto& [hash, rec] : described) {
    for (const auto& t : rec.terms) {
      if (available.contains(t.xorb)) continue;
      auto held = index.HasXorb(t.xorb);
      if (!held.ok()) return held.error();
      if (!*held)
        return Malformed("file " + hash.hex() + " uses xorb " + t.xorb.hex() + ", which the bundle lacks");
      available.insert(t.xorb);
    }
  }
  return Ok{};
}

// The large files: each of the revisions' linked, each link described by a shard with the pointer's SHA-256
// and size, each term's xorb in the bundle or held here. The files the shards describe.
Result<std::map<xet::FileHash, xet::FileRecord>> CheckLargeFiles(
    index::Index& index, const fs::path& src, store::LocalDiskStore& objects_in, const Manifest& m,
    const std::map<std::string, xet::FileHash>& links, const std::map<std::string, uint64_t>& sizes) {
  std::set<xet::XorbHash> available;  // in the bundle, or held here
  for (const auto& x : m.xorbs) {
    if (auto st = CheckSize(src, objects_in, store::BlobKind::kXorb, x); !st.ok()) return st.error();
    available.insert(x.hash);
  }
  auto described = ReadShards(src, objects_in, m);
  if (!described.ok()) return described.error();
  if (auto st = CheckDescribed(*described, links, sizes); !st.ok()) return st.error();
  if (auto st = CheckTermsAvailable(index, *described, available); !st.ok()) return st.error();
  return described;
}

// The bytes: each linked file rebuilt from them, its SHA-256 and size computed and compared.
Status CheckBytes(store::BlobStore& objects_in, cas::CasService& cas, const Manifest& m,
                  const std::map<std::string, xet::FileHash>& links,
                  const std::map<xet::FileHash, xet::FileRecord>& described,
                  const std::map<std::string, uint64_t>& sizes, const ImportOptions& options) {
  std::set<xet::XorbHash> in_bundle;
  for (const auto& x : m.xorbs) in_bundle.insert(x.hash);
  ByteCheck check(objects_in, in_bundle, cas);
  uint64_t checked = 0;
  for (const auto& [sha, file] : links) {
    Report(options.progress, "large files checked", checked++, links.size());
    if (auto st = check.Check(described.at(file), sha, sizes.at(sha)); !st.ok())
      return Error{st.error().code, "the bundle's large file " + sha + ": " + st.error().message};
  }
  Report(options.progress, "large files checked", checked, links.size());
  return Ok{};
}

// The xorbs, each validated against its hash.
Status StoreXorbs(store::BlobStore& objects_in, cas::CasService& cas, const ImportOptions& options,
                  ImportReport& report) {
  const Manifest& m = report.manifest;
  uint64_t done = 0;
  for (const auto& x : m.xorbs) {
    Report(options.progress, "xorbs", done++, m.xorbs.size());
    auto body = objects_in.ReadWhole(store::BlobKind::kXorb, x.hash);
    if (!body.ok()) return body.error();
    auto added = cas.PutXorb(x.hash, *body);
    if (!added.ok())
      return Error{added.error().code, "the bundle's xorb " + x.hash.hex() + ": " + added.error().message};
    report.new_xorbs += *added ? 1 : 0;
    report.xorb_bytes += body->size();
  }
  Report(options.progress, "xorbs", done, m.xorbs.size());
  return Ok{};
}

// The shards, each file verified against the xorbs, in the new repository's scope.
Status StoreShards(store::BlobStore& objects_in, cas::CasService& cas, const Manifest& m,
                   const std::string& scope) {
  for (const auto& s : m.shards) {
    auto body = objects_in.ReadWhole(store::BlobKind::kShard, s.hash);
    if (!body.ok()) return body.error();
    auto put = cas.PutShard(*body, scope);
    if (!put.ok())
      return Error{put.error().code, "the bundle's shard " + s.hash.hex() + ": " + put.error().message};
  }
  return Ok{};
}

// The repository with its history, its links and its refs, in one transaction.
Status CreateImported(index::Index& index, const ImportReport& report, const ImportOptions& options,
                      const std::string& scope, const std::string& read_scope,
                      std::vector<index::RepoObject> objects,
                      const std::map<std::string, xet::FileHash>& links) {
  const Manifest& m = report.manifest;
  const hub::RepoId& id = report.repo;
  index::NewRepo fresh{.type = id.type,
                       .ns = id.ns,
                       .name = id.name,
                       .is_private = m.is_private,
                       .created_at = options.now,
                       .scope = scope,
                       .read_scope = read_scope,
                       .objects = std::move(objects),
                       .refs = {}};
  for (const auto& [sha, file] : links) {
    fresh.objects.push_back(hub::FileLink{.sha256 = sha, .file = file}.ToObject());
  }
  for (const auto& r : m.refs) fresh.refs.push_back(index::Ref{r.kind, r.name, r.target.key()});
  if (auto created = index.CreateRepo(fresh); !created.ok()) {
    if (created.error().code == ErrorCode::kConflict)
      return Conflict("this server holds " + hub::RepoPath(id) + " already (created during the import)");
    return created.error();
  }
  return Ok{};
}

}  // namespace

Result<ImportReport> Import(index::Index& index, cas::CasService& cas, files::FileService& files,
                            const fs::path& src, const ImportOptions& options) {
  auto parsed = ReadManifest(src);
  if (!parsed.ok()) return parsed.error();
  ImportReport report;
  report.manifest = std::move(*parsed);
  const Manifest& m = report.manifest;
  report.repo = options.as.value_or(m.repo);
  const hub::RepoId& id = report.repo;
  // A mirror's copy stays one only under upstream's name (it is refreshed from upstream by that name).
  report.mirrored = m.mirrored && id.type == m.repo.type && id.ns == m.repo.ns && id.name == m.repo.name;
  if (auto found = index.FindRepo(id.type, id.ns, id.name); found.ok()) {
    return Conflict("this server holds " + hub::RepoPath(id) +
                    " already: delete it first, or import under another name (--as)");
  } else if (found.error().code != ErrorCode::kNotFound) {
    return found.error();
  }

  // ---- The history, complete.
  Report(options.progress, "history", 0, 0);
  auto objects = ReadBundledPack(src, m);
  if (!objects.ok()) return objects.error();
  const History history(*objects);
  std::vector<ObjectId> heads;
  for (const auto& r : m.refs) heads.push_back(r.target);
  if (auto st = history.CheckComplete(heads); !st.ok())
    return Malformed("the bundle's history: " + st.error().message);

  std::map<std::string, xet::FileHash> links;
  for (const auto& l : m.links) links.emplace(l.sha256, l.file);
  if (auto unlinked = Unlinked(history.Pointers(heads), links))
    return Malformed("the bundle lacks the large file " + *unlinked);
  auto bundle_store = store::LocalDiskStore::Open(src / kObjectsDir);
  if (!bundle_store.ok()) return bundle_store.error();
  store::BlobStore& objects_in = **bundle_store;
  const std::map<std::string, uint64_t> sizes = history.AllPointers();
  auto described = CheckLargeFiles(index, src, **bundle_store, m, links, sizes);
  if (!described.ok()) return described.error();
  if (auto st = CheckBytes(objects_in, cas, m, links, *described, sizes, options); !st.ok())
    return st.error();

  // ---- Stored: the xorbs, the shards in the new repository's scope, their files published to its readers;
  // then the repository, in one transaction.
  if (auto st = StoreXorbs(objects_in, cas, options, report); !st.ok()) return st.error();
  const std::string scope = report.mirrored ? hub::NewMirrorScope() : hub::NewRepoScope();
  const std::string read_scope = hub::NewRepoScope();
  if (auto st = StoreShards(objects_in, cas, m, scope); !st.ok()) return st.error();
  std::vector<xet::FileHash> published;
  for (const auto& [sha, file] : links) published.push_back(file);
  if (auto st = files.Share(published, read_scope); !st.ok()) return st.error();
  if (auto st = CreateImported(index, report, options, scope, read_scope, std::move(*objects), links);
      !st.ok())
    return st.error();
  return report;
}

}  // namespace cairn::bundle
