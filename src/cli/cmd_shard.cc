#include <boost/json.hpp>
#include <filesystem>
#include <iostream>
#include <map>

#include "cli/commands.h"
#include "cli/file_io.h"
#include "xet/shard.h"
#include "xet/verify.h"

namespace cairn::cli {
namespace {

namespace fs = std::filesystem;

// Xorbs found under a directory (any depth) named by their hash: `<hash>`, `<hash>.xorb`, or hf_xet's local
// layout `default.<hash>`. Each is validated on first use, so
// a corrupt xorb fails the files that reference it.
class XorbDirectory {
 public:
  explicit XorbDirectory(const std::string& dir) {
    if (dir.empty()) return;
    for (const auto& e : fs::recursive_directory_iterator(dir)) {
      if (!e.is_regular_file()) continue;
      if (auto h = HashInName(e.path().filename().string())) paths_[*h] = e.path().string();
    }
  }

  // `<hash>`, `<hash>.xorb` or `<prefix>.<hash>`; anything else (such as `<prefix>.<hash>.tagset`) is not a
  // xorb.
  static std::optional<xet::XorbHash> HashInName(std::string_view name) {
    if (name.ends_with(".xorb")) name.remove_suffix(5);
    if (name.size() > 64 && name[name.size() - 65] == '.') name.remove_prefix(name.size() - 64);
    return xet::Hash::FromHex(name);
  }

  const xet::XorbLayout* Lookup(const xet::XorbHash& hash) {
    if (auto it = layouts_.find(hash); it != layouts_.end()) return &it->second;
    auto p = paths_.find(hash);
    if (p == paths_.end()) return nullptr;
    std::string error;
    auto data = ReadWholeFile(p->second, &error);
    if (!data) return nullptr;
    xet::ValidateOptions vo;
    vo.expected_hash = &hash;
    auto v = xet::ValidateXorb(*data, vo);
    if (!v) {
      std::cerr << "cairn shard verify: xorb " << p->second << ": " << v.error().message << "\n";
      return nullptr;
    }
    return &layouts_.emplace(hash, std::move(v->layout)).first->second;
  }

 private:
  std::map<xet::XorbHash, std::string> paths_;
  std::map<xet::XorbHash, xet::XorbLayout> layouts_;
};

boost::json::value Sha(const xet::FileRecord& f) {
  if (!f.sha256) return nullptr;
  return boost::json::value(f.sha256->hex());
}

int Run(const ShardOptions& o, bool verify) {
  std::string error;
  auto data = ReadWholeFile(o.file, &error);
  if (!data) {
    std::cerr << "cairn shard: " << error << "\n";
    return 1;
  }
  auto shard = xet::ParseShard(*data);
  if (!shard) {
    std::cerr << "cairn shard: " << o.file << ": " << shard.error().message << "\n";
    return 1;
  }
  XorbDirectory xorbs(verify ? o.xorb_dir : "");
  boost::json::array files;
  for (const auto& f : shard->files) {
    if (verify) {
      auto size = xet::VerifyFile(f, [&](const xet::XorbHash& h) { return xorbs.Lookup(h); });
      if (!size) {
        std::cerr << "cairn shard verify: " << o.file << ": " << size.error().message << "\n";
        return 1;
      }
    }
    boost::json::object jf{
        {"hash", f.hash.hex()}, {"size", f.size()}, {"sha256", Sha(f)}, {"num_terms", f.terms.size()}};
    if (!verify) {
      boost::json::array terms;
      for (const auto& t : f.terms) {
        terms.push_back({{"xorb", t.xorb.hex()},
                         {"start", t.chunk_start},
                         {"end", t.chunk_end},
                         {"bytes", t.unpacked_bytes}});
      }
      jf["terms"] = std::move(terms);
    }
    files.push_back(std::move(jf));
  }
  boost::json::array xorb_list;
  for (const auto& x : shard->xorbs) {
    if (verify) {
      const auto* layout = xorbs.Lookup(x.hash);
      if (layout == nullptr) {
        std::cerr << "cairn shard verify: " << o.file << ": listed xorb " << x.hash.hex()
                  << " is not stored\n";
        return 1;
      }
      if (auto s = xet::VerifyXorbListing(x, *layout); !s) {
        std::cerr << "cairn shard verify: " << o.file << ": " << s.error().message << "\n";
        return 1;
      }
    }
    xorb_list.push_back({{"hash", x.hash.hex()}, {"num_chunks", x.chunks.size()}});
  }
  if (o.json || !verify) {
    boost::json::object out{
        {"files", std::move(files)}, {"xorbs", std::move(xorb_list)}, {"footer", shard->footer.has_value()}};
    std::cout << boost::json::serialize(out) << "\n";
  } else {
    std::cout << o.file << ": " << shard->files.size() << " files, " << shard->xorbs.size() << " xorbs  ok\n";
  }
  return 0;
}

}  // namespace

int RunShardVerify(const ShardOptions& opts) {
  return Run(opts, true);
}
int RunShardDump(const ShardOptions& opts) {
  return Run(opts, false);
}

}  // namespace cairn::cli
