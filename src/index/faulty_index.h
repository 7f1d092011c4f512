// Test support: the fault seam for index reads. An index that passes everything through (forwarding_index.h)
// but lets a test fail chosen reads with the error a database gives (kIo, kUnavailable), to prove that
// callers report an index failure instead of taking it for "not found". Writes have their own seam in each
// backend (SqliteOptions::fault_before_commit).
//
// Thread-safety: as the inner index; set `fault` before the reads it should see.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "index/forwarding_index.h"

namespace cairn::index::testing {

class FaultyIndex final : public ForwardingIndex {
 public:
  using ForwardingIndex::ForwardingIndex;

  // Asked before each read below with the method's name and, for reads of repository objects, their keys: an
  // error is answered instead of reading. Null (the default): every read goes through.
  using Fault = std::function<xet::Status(std::string_view call, std::span<const std::vector<uint8_t>> keys)>;
  Fault fault;

  xet::Result<std::shared_ptr<const XorbEntry>> GetXorb(const XorbHash& hash) override {
    if (auto st = Check("GetXorb"); !st.ok()) return st.error();
    return ForwardingIndex::GetXorb(hash);
  }
  xet::Result<std::shared_ptr<const FileEntry>> GetFile(const FileHash& hash) override {
    if (auto st = Check("GetFile"); !st.ok()) return st.error();
    return ForwardingIndex::GetFile(hash);
  }
  xet::Result<std::shared_ptr<const FileEntry>> GetVisibleFile(const FileHash& hash,
                                                               std::string_view scope) override {
    if (auto st = Check("GetVisibleFile"); !st.ok()) return st.error();
    return ForwardingIndex::GetVisibleFile(hash, scope);
  }
  xet::Result<std::optional<FileHash>> FileBySha256(const Hash& sha256,
                                                    std::optional<std::string_view> scope) override {
    if (auto st = Check("FileBySha256"); !st.ok()) return st.error();
    return ForwardingIndex::FileBySha256(sha256, scope);
  }
  xet::Result<RepoRecord> FindRepo(RepoType type, std::string_view ns, std::string_view name) override {
    if (auto st = Check("FindRepo"); !st.ok()) return st.error();
    return ForwardingIndex::FindRepo(type, ns, name);
  }
  xet::Result<std::vector<std::optional<RepoObject>>> GetRepoObjects(
      int64_t repo, const std::vector<std::vector<uint8_t>>& keys) override {
    if (auto st = Check("GetRepoObjects", keys); !st.ok()) return st.error();
    return ForwardingIndex::GetRepoObjects(repo, keys);
  }
  xet::Result<std::vector<Ref>> ListRefs(int64_t repo) override {
    if (auto st = Check("ListRefs"); !st.ok()) return st.error();
    return ForwardingIndex::ListRefs(repo);
  }

 private:
  xet::Status Check(std::string_view call, std::span<const std::vector<uint8_t>> keys = {}) const {
    return fault ? fault(call, keys) : xet::Status(xet::Ok{});
  }
};

}  // namespace cairn::index::testing
