// FileIngest and LfsService over a real CasService (SQLite + local disk): what a git-lfs upload becomes.
#include <gtest/gtest.h>
#include <openssl/sha.h>

#include <algorithm>
#include <functional>
#include <random>

#include "cas/test_backend.h"
#include "common/hex.h"
#include "common/worker_pool.h"
#include "files/file_link.h"
#include "ingest/upload_builder.h"
#include "lfs/file_ingest.h"
#include "lfs/lfs_service.h"

namespace cairn::lfs {
namespace {

std::vector<uint8_t> RandomBytes(size_t n, uint32_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> out(n);
  for (size_t i = 0; i < n; i += 8) {
    const uint64_t v = rng();
    for (size_t k = 0; k < 8 && i + k < n; ++k) out[i + k] = static_cast<uint8_t>(v >> (8 * k));
  }
  return out;
}

// A link's query as the server hands it to Check (these carry nothing that needs percent-decoding).
std::vector<std::pair<std::string, std::string>> QueryOf(const std::string& url) {
  const std::string query = url.substr(url.find('?') + 1);
  std::vector<std::pair<std::string, std::string>> params;
  for (size_t at = 0; at < query.size();) {
    const size_t amp = std::min(query.find('&', at), query.size());
    const std::string kv = query.substr(at, amp - at);
    params.emplace_back(kv.substr(0, kv.find('=')), kv.substr(kv.find('=') + 1));
    at = amp + 1;
  }
  return params;
}

std::string Sha256Hex(std::span<const uint8_t> data) {
  uint8_t digest[32];
  SHA256(data.data(), data.size(), digest);
  return HexEncode(std::span<const uint8_t>(digest, 32));
}

class LfsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(cas::testing::OpenTestBackend("cairn-lfs", &dir_, &store_, &index_));
    cas::ServiceOptions so;
    so.clock = &clock_;
    cas_ = std::make_unique<cas::CasService>(*index_, *store_, pool_, so);
    LfsOptions o;
    o.part_bytes = 1 << 20;
    o.staging_dir = dir_ / "parts";
    o.clock = &clock_;
    lfs_ = std::make_unique<LfsService>(*cas_, *index_, o);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Feeds `data` in blocks of `block` bytes.
  Result<Ingested> Ingest(std::span<const uint8_t> data, size_t block = 100'003,
                          const std::string& scope = "repo-1", const std::string& sha = "") {
    auto ingest = FileIngest::Begin(*cas_, scope, sha.empty() ? Sha256Hex(data) : sha, data.size());
    if (!ingest) return ingest.error();
    for (size_t at = 0; at < data.size(); at += block) {
      if (auto st = (*ingest)->Feed(data.subspan(at, std::min(block, data.size() - at))); !st)
        return st.error();
    }
    return (*ingest)->Finish();
  }

  // Feeds file `f` of `built` chunk by chunk as another server stored it (FeedChunk): each term's chunks
  // with their records and hashes, a xorb `whole` (when `whole_xorbs`) where one term takes all its chunks,
  // as a mirror's relay would have fetched it. `alter` may change a decoded chunk.
  Result<Ingested> IngestChunks(const ingest::BuiltUpload& built, size_t f, const std::string& sha,
                                bool whole_xorbs = true,
                                const std::function<void(std::vector<uint8_t>&)>& alter = nullptr) {
    const xet::FileRecord& record = built.shard.files[f];
    auto ingest = FileIngest::Begin(*cas_, "repo-1", sha, record.size());
    if (!ingest) return ingest.error();
    xet::ChunkDecoder decoder;
    for (const auto& t : record.terms) {
      const auto x = std::find_if(built.xorbs.begin(), built.xorbs.end(),
                                  [&](const ingest::BuiltXorb& b) { return b.hash == t.xorb; });
      for (uint32_t c = t.chunk_start; c < t.chunk_end; ++c) {
        const auto& chunk = x->layout.chunks[c];
        const auto rec = std::span(x->body).subspan(x->layout.begin_offset(c),
                                                    chunk.end_offset - x->layout.begin_offset(c));
        auto header = xet::ChunkHeader::Parse(rec);
        std::vector<uint8_t> decoded(chunk.unpacked_size);
        if (!header || !decoder.Decode(*header, rec.subspan(xet::kChunkHeaderSize), decoded))
          return Malformed("the test's own xorb does not decode");
        if (alter) alter(decoded);
        const bool all = t.chunk_start == 0 && t.chunk_end == x->layout.chunks.size();
        const std::optional<xet::XorbHash> whole =
            whole_xorbs && all ? std::optional<xet::XorbHash>(x->hash) : std::nullopt;
        if (auto st = (*ingest)->FeedChunk(chunk.hash, decoded, rec, whole); !st) return st.error();
      }
    }
    return (*ingest)->Finish();
  }

  bool Visible(std::span<const uint8_t> data, const std::string& scope = "repo-1") {
    auto found = lfs_->Stored(scope, Sha256Hex(data), data.size());
    EXPECT_TRUE(found.ok());
    return found.ok() && found->has_value();
  }

  TestClock clock_;
  WorkerPool pool_{0};
  std::filesystem::path dir_;
  std::unique_ptr<store::LocalDiskStore> store_;
  std::unique_ptr<index::SqliteIndex> index_;
  std::unique_ptr<cas::CasService> cas_;
  std::unique_ptr<LfsService> lfs_;
};

TEST_F(LfsTest, AnIngestedFileIsTheXetFileTheStockClientWouldMake) {
  const auto data = RandomBytes(3 << 20, 1);
  auto done = Ingest(data);
  ASSERT_TRUE(done.ok()) << done.error().message;
  // The same chunks as hf_xet's chunker cuts, so the same file hash as a client upload of these bytes.
  const std::span<const uint8_t> files[] = {data};
  EXPECT_EQ(done->file, ingest::BuildUpload(files).file_hashes[0]);
  EXPECT_EQ(done->size, data.size());
  EXPECT_EQ(done->new_bytes, data.size());
  EXPECT_EQ(done->chunks_deduped, 0u);
  EXPECT_TRUE(done->registered);
  EXPECT_TRUE(Visible(data));
  EXPECT_FALSE(Visible(data, "repo-2"));  // registered for its scope alone
  auto entry = index_->GetVisibleFile(done->file, "repo-1");
  ASSERT_TRUE(entry.ok());
  EXPECT_EQ((*entry)->sha256, xet::Hash::FromHex(Sha256Hex(data)));
}

TEST_F(LfsTest, TheSameBytesAgainStoreNothingNew) {
  const auto data = RandomBytes(3 << 20, 2);
  ASSERT_TRUE(Ingest(data).ok());
  auto again = Ingest(data, 65'536);
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_EQ(again->new_bytes, 0u);
  EXPECT_EQ(again->xorbs, 0u);
  EXPECT_EQ(again->chunks_deduped, again->chunks);
}

TEST_F(LfsTest, AnEditedCopyStoresLittleMoreThanTheEdit) {
  auto data = RandomBytes(4 << 20, 3);
  ASSERT_TRUE(Ingest(data).ok());
  for (size_t i = 0; i < 4096; ++i) data[(2 << 20) + i] ^= 0x5a;
  auto edited = Ingest(data);
  ASSERT_TRUE(edited.ok()) << edited.error().message;
  EXPECT_GT(edited->new_bytes, 0u);
  EXPECT_LT(edited->new_bytes, 256u << 10);  // the chunks around the edit (64 KiB on average each)
}

TEST_F(LfsTest, WhatAClientUploadedIsNotStoredAgain) {
  const auto data = RandomBytes(2 << 20, 4);
  const std::span<const uint8_t> files[] = {data};
  auto built = ingest::BuildUpload(files);
  for (const auto& x : built.xorbs) ASSERT_TRUE(cas_->PutXorb(x.hash, x.body).ok());
  ASSERT_TRUE(cas_->PutShard(built.shard_bytes, "repo-1").ok());
  auto done = Ingest(data);
  ASSERT_TRUE(done.ok()) << done.error().message;
  EXPECT_EQ(done->new_bytes, 0u);
  EXPECT_EQ(done->file, built.file_hashes[0]);
}

TEST_F(LfsTest, BytesThatDoNotMatchTheirNameRegisterNothing) {
  const auto data = RandomBytes(1 << 20, 5);
  const auto other = RandomBytes(1 << 20, 6);
  auto wrong = Ingest(data, 100'003, "repo-1", Sha256Hex(other));
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.error().code, ErrorCode::kHashMismatch);
  EXPECT_FALSE(Visible(data));

  auto ingest = FileIngest::Begin(*cas_, "repo-1", Sha256Hex(data), data.size() - 1);
  ASSERT_TRUE(ingest.ok());
  EXPECT_EQ((*ingest)->Feed(data).error().code, ErrorCode::kMalformed);  // more than announced

  auto short_one = FileIngest::Begin(*cas_, "repo-1", Sha256Hex(data), data.size() + 1);
  ASSERT_TRUE(short_one.ok());
  ASSERT_TRUE((*short_one)->Feed(data).ok());
  EXPECT_EQ((*short_one)->Finish().error().code, ErrorCode::kMalformed);  // fewer
  EXPECT_FALSE(Visible(data));

  EXPECT_FALSE(FileIngest::Begin(*cas_, "repo-1", "not-a-sha", 1).ok());
}

// A file fed as the chunks another Xet server stored keeps that server's file hash and, where its xorbs
// arrived whole and the site held none of their chunks, its very xorbs; chunks the site holds are not stored
// again; bytes that are not what the file is named by register nothing.
TEST_F(LfsTest, ChunksFedAsAnotherServerStoredThemAreKeptAsTheyAre) {
  const auto data = RandomBytes(3 << 20, 7);
  std::vector<uint8_t> text(2 << 20);
  for (size_t i = 0; i < text.size(); ++i) text[i] = static_cast<uint8_t>('a' + (i * 7 + i / 977) % 23);
  const std::span<const uint8_t> files[] = {data, text};
  ingest::BuildOptions o;
  o.max_xorb_bytes = 1 << 20;  // several xorbs, LZ4 records in the text's
  const auto built = ingest::BuildUpload(files, o);
  ASSERT_GT(built.xorbs.size(), 3u);

  auto done = IngestChunks(built, 0, Sha256Hex(data));
  ASSERT_TRUE(done.ok()) << done.error().message;
  EXPECT_EQ(done->file, built.file_hashes[0]);
  EXPECT_EQ(done->new_bytes, data.size());
  EXPECT_TRUE(Visible(data));
  auto text_done = IngestChunks(built, 1, Sha256Hex(text));
  ASSERT_TRUE(text_done.ok()) << text_done.error().message;
  EXPECT_EQ(text_done->file, built.file_hashes[1]);
  // A xorb one term took whole is stored as it arrived: the same hash, the same records.
  size_t kept = 0;
  for (const auto& f : built.shard.files) {
    for (const auto& t : f.terms) {
      const auto x = std::find_if(built.xorbs.begin(), built.xorbs.end(),
                                  [&](const ingest::BuiltXorb& b) { return b.hash == t.xorb; });
      if (t.chunk_start != 0 || t.chunk_end != x->layout.chunks.size()) continue;
      auto layout = cas_->Layout(x->hash);
      ASSERT_TRUE(layout.ok()) << "xorb " << x->hash.hex() << " kept";
      EXPECT_EQ((*layout)->chunk_region_size(), x->body.size());
      ++kept;
    }
  }
  EXPECT_GE(kept, 3u);

  // Again, and as partial ranges (packed by this server): nothing new.
  auto again = IngestChunks(built, 0, Sha256Hex(data), /*whole_xorbs=*/false);
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_EQ(again->new_bytes, 0u);
  EXPECT_EQ(again->chunks_deduped, again->chunks);

  // A decoded chunk that is not what the file is named by: refused by its SHA-256, nothing registered.
  const auto other = RandomBytes(1 << 20, 8);
  const std::span<const uint8_t> other_files[] = {other};
  const auto other_built = ingest::BuildUpload(other_files);
  auto altered =
      IngestChunks(other_built, 0, Sha256Hex(other), true, [](std::vector<uint8_t>& d) { d[0] ^= 1; });
  ASSERT_FALSE(altered.ok());
  EXPECT_EQ(altered.error().code, ErrorCode::kHashMismatch);
  EXPECT_FALSE(Visible(other));

  // One file is fed one way.
  auto mixed = FileIngest::Begin(*cas_, "repo-1", Sha256Hex(other), other.size());
  ASSERT_TRUE(mixed.ok());
  ASSERT_TRUE((*mixed)->Feed(std::span(other).first(1000)).ok());
  const auto& x0 = other_built.xorbs[0];
  const auto rec0 = std::span(x0.body).first(x0.layout.chunks[0].end_offset);
  EXPECT_EQ((*mixed)
                ->FeedChunk(x0.layout.chunks[0].hash,
                            std::span(other).first(x0.layout.chunks[0].unpacked_size), rec0, std::nullopt)
                .error()
                .code,
            ErrorCode::kInconsistent);
}

TEST_F(LfsTest, UploadLinksGrantOneObjectForOneScopeUntilTheyExpire) {
  const auto data = RandomBytes(1000, 7);
  const std::string oid = Sha256Hex(data);
  auto plan = lfs_->PlanUpload("repo-1", oid, data.size(), 600, /*multipart=*/true);
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  EXPECT_TRUE(plan->header.empty());  // small: basic
  const auto params = QueryOf(plan->href);
  EXPECT_EQ(QueryOf(plan->verify_href), params);
  auto grant = lfs_->Check(oid, params);
  ASSERT_TRUE(grant.ok()) << grant.error().message;
  EXPECT_EQ(grant->scope, "repo-1");
  EXPECT_EQ(grant->size, data.size());
  // Another object, another scope, or a download link's signature: refused.
  EXPECT_FALSE(lfs_->Check(Sha256Hex(RandomBytes(10, 8)), params).ok());
  auto other_scope = params;
  for (auto& [k, v] : other_scope) {
    if (k == "scope") v = "repo-2";
  }
  EXPECT_EQ(lfs_->Check(oid, other_scope).error().code, ErrorCode::kDenied);
  files::LinkSigner downloads(cas::UrlKeys::Single(xet::Hash{}), 3600, clock_);
  auto download = downloads.Sign(*xet::Hash::FromHex(oid), "repo-1", 600,
                                 std::to_string(data.size()) + "." + grant->upload);
  ASSERT_TRUE(download.ok());
  EXPECT_EQ(lfs_->Check(oid, QueryOf("?" + download->query)).error().code, ErrorCode::kDenied);
  clock_.Advance(601);
  EXPECT_EQ(lfs_->Check(oid, params).error().code, ErrorCode::kDenied);
}

TEST_F(LfsTest, PartsAreStagedThenIngestedInOrder) {
  const auto data = RandomBytes((5 << 19) + 1234, 9);  // 2.5 MiB and a bit: parts of 1 MiB, 1 MiB, 0.5 MiB+
  const std::string oid = Sha256Hex(data);
  auto plan = lfs_->PlanUpload("repo-1", oid, data.size(), 600, /*multipart=*/true);
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  ASSERT_EQ(plan->header.size(), 4u);
  EXPECT_EQ(plan->header[0], (std::pair<std::string, std::string>{"chunk_size", std::to_string(1 << 20)}));
  EXPECT_EQ(plan->header[1].first, "00001");
  EXPECT_EQ(plan->header[3].first, "00003");
  auto grant = lfs_->Check(oid, QueryOf(plan->header[2].second));
  ASSERT_TRUE(grant.ok()) << grant.error().message;
  EXPECT_FALSE(lfs_->BeginPart(*grant, 0).ok());
  EXPECT_FALSE(lfs_->BeginPart(*grant, 4).ok());

  std::vector<std::pair<uint32_t, std::string>> parts;
  // Parts may arrive in any order; a part of the wrong size is refused and leaves nothing behind.
  for (uint32_t n : {3u, 1u, 2u}) {
    const size_t start = size_t{n - 1} << 20;
    const auto bytes =
        std::span<const uint8_t>(data).subspan(start, std::min<size_t>(1 << 20, data.size() - start));
    auto writer = lfs_->BeginPart(*grant, n);
    ASSERT_TRUE(writer.ok()) << writer.error().message;
    if (n == 3) {
      ASSERT_TRUE((*writer)->Write(bytes.first(10)).ok());
      EXPECT_EQ((*writer)->Finish().error().code, ErrorCode::kMalformed);
      writer = lfs_->BeginPart(*grant, n);
      ASSERT_TRUE(writer.ok());
    }
    ASSERT_TRUE((*writer)->Write(bytes.first(1000)).ok());
    ASSERT_TRUE((*writer)->Write(bytes.subspan(1000)).ok());
    auto etag = (*writer)->Finish();
    ASSERT_TRUE(etag.ok()) << etag.error().message;
    parts.emplace_back(n, *etag);
  }
  std::sort(parts.begin(), parts.end());
  auto wrong_etag = parts;
  wrong_etag[1].second = "\"0\"";
  EXPECT_EQ(lfs_->CompleteParts(*grant, wrong_etag).error().code, ErrorCode::kMalformed);
  EXPECT_FALSE(lfs_->CompleteParts(*grant, {parts[0], parts[1]}).ok());
  EXPECT_FALSE(Visible(data));

  auto done = lfs_->CompleteParts(*grant, parts);
  ASSERT_TRUE(done.ok()) << done.error().message;
  EXPECT_TRUE(Visible(data));
  const std::span<const uint8_t> files[] = {data};
  EXPECT_EQ(done->file, ingest::BuildUpload(files).file_hashes[0]);
  EXPECT_TRUE(std::filesystem::is_empty(dir_ / "parts"));  // the parts are gone
  // Completed again (a retry after a lost answer): the parts are gone, so it says so.
  EXPECT_EQ(lfs_->CompleteParts(*grant, parts).error().code, ErrorCode::kNotFound);
}

}  // namespace
}  // namespace cairn::lfs
