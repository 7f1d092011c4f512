// The service end to end in process: uploads built as the stock client builds them, against a real SQLite
// index and a local-disk store in a temporary directory.
#include "cas/service.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <filesystem>

#include "cas/test_backend.h"
#include "index/sqlite/sqlite_index.h"
#include "ingest/upload_builder.h"
#include "store/local_disk_store.h"
#include "xet/shard.h"
#include "xet/test_support.h"

namespace cairn::cas {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;
using Bytes = std::vector<uint8_t>;

class Service : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(cas::testing::OpenTestBackend("cairn-service", &dir_, &store_, &index_));
    service_ = std::make_unique<CasService>(*index_, *store_, pool_, Options());
  }
  // The options every service of these tests starts from (its clock is clock_).
  ServiceOptions Options() {
    ServiceOptions so;
    so.url_keys = cas::UrlKeys::Single([] {
      xet::Hash h;
      h.bytes.fill(7);
      return h;
    }());
    so.clock = &clock_;
    return so;
  }
  void TearDown() override {
    service_.reset();
    index_.reset();
    store_.reset();
    fs::remove_all(dir_);
  }

  ingest::BuiltUpload Build(const std::vector<Bytes>& files,
                            xet::CompressionPolicy policy = xet::CompressionPolicy::kLz4) {
    std::vector<std::span<const uint8_t>> spans(files.begin(), files.end());
    ingest::BuildOptions o;
    o.policy = policy;
    o.max_xorb_bytes = 1 << 20;  // several xorbs per upload
    return ingest::BuildUpload(spans, o);
  }
  void Upload(const ingest::BuiltUpload& up, const std::string& scope = "repo") {
    for (const auto& x : up.xorbs) ASSERT_TRUE(service_->PutXorb(x.hash, x.body).ok());
    auto r = service_->PutShard(up.shard_bytes, scope);
    ASSERT_TRUE(r.ok()) << r.error().message;
  }
  // Downloads a byte range of a file the way the stock client does: reconstruction, then transfer URLs.
  Bytes Download(const xet::FileHash& file, std::optional<ByteRange> range = std::nullopt,
                 ApiVersion v = ApiVersion::kV2, const std::string& scope = "repo") {
    auto answer = service_->Reconstruct(file, scope, range, v);
    EXPECT_TRUE(answer.ok()) << answer.error().message;
    if (!answer.ok() || answer->status != ReconstructionStatus::kOk) return {};
    const auto o = json::parse(answer->Text()).as_object();
    Bytes out;
    xet::ChunkDecoder decoder;
    for (const auto& t : o.at("terms").as_array()) {
      const std::string hex(t.at("hash").as_string());
      const auto start = t.at("range").at("start").to_number<uint32_t>();
      const auto end = t.at("range").at("end").to_number<uint32_t>();
      // Find the fetch entry holding this term and fetch its bytes through the transfer URL.
      for (const auto& f : o.at(v == ApiVersion::kV2 ? "xorbs" : "fetch_info").at(hex).as_array()) {
        std::vector<std::pair<json::value, json::value>> ranges;
        if (v == ApiVersion::kV2) {
          for (const auto& r : f.at("ranges").as_array()) ranges.emplace_back(r.at("chunks"), r.at("bytes"));
        } else {
          ranges.emplace_back(f.at("range"), f.at("url_range"));
        }
        for (const auto& [chunks, bytes] : ranges) {
          const auto cs = chunks.at("start").to_number<uint32_t>();
          if (cs > start || chunks.at("end").to_number<uint32_t>() < end) continue;
          const std::string url(f.at("url").as_string());
          const auto b0 = bytes.at("start").to_number<uint64_t>();
          const auto b1 = bytes.at("end").to_number<uint64_t>();
          const std::string range_header = "bytes=" + std::to_string(b0) + "-" + std::to_string(b1);
          const size_t q = url.find('?');
          const size_t p = url.find("/v1/transfer/") + 13;
          auto plan = service_->Transfer(url.substr(p, q - p), url.substr(q + 1), range_header);
          EXPECT_TRUE(plan.ok()) << plan.error().message;
          if (!plan.ok()) return {};
          Bytes data(b1 - b0 + 1);
          EXPECT_EQ(::pread(plan->blob.fd.get(), data.data(), data.size(), static_cast<off_t>(b0)),
                    static_cast<ssize_t>(data.size()));
          // Walk the fetched chunks; keep [start, end) of the term.
          size_t pos = 0;
          for (uint32_t c = cs; c < end; ++c) {
            auto h = xet::ChunkHeader::Parse(std::span(data).subspan(pos));
            EXPECT_TRUE(h.ok());
            Bytes chunk(h->uncompressed_length);
            EXPECT_TRUE(
                decoder.Decode(*h, std::span(data).subspan(pos + 8, h->compressed_length), chunk).ok());
            if (c >= start) out.insert(out.end(), chunk.begin(), chunk.end());
            pos += 8 + h->compressed_length;
          }
          goto next_term;
        }
      }
      ADD_FAILURE() << "no fetch entry covers a term";
    next_term:;
    }
    const auto offset = o.at("offset_into_first_range").to_number<size_t>();
    out.erase(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(std::min(offset, out.size())));
    if (range) out.resize(std::min<size_t>(out.size(), range->end - range->start + 1));
    return out;
  }

  // The service's clock (declared first: it outlives the service); tests move it.
  TestClock clock_{1'800'000'000};
  uint64_t Now() const { return static_cast<uint64_t>(clock_.UnixSeconds()); }
  fs::path dir_;
  WorkerPool pool_{1};
  std::unique_ptr<store::LocalDiskStore> store_;
  std::unique_ptr<index::SqliteIndex> index_;
  std::unique_ptr<CasService> service_;
};

TEST_F(Service, UploadThenDownloadWholeFilesAndRanges) {
  const std::vector<Bytes> files{xet::testing::TextLikeBytes(1, 3 << 20),
                                 xet::testing::SplitMix64Bytes(2, 700000), Bytes(1, 'x')};
  const auto up = Build(files);
  ASSERT_GT(up.xorbs.size(), 2u);
  Upload(up);
  for (size_t i = 0; i < files.size(); ++i) {
    EXPECT_EQ(Download(up.file_hashes[i]), files[i]) << "file " << i;
    EXPECT_EQ(Download(up.file_hashes[i], std::nullopt, ApiVersion::kV1), files[i]) << "file " << i;
  }
  const ByteRange r{100000, 2'500'000};
  const Bytes want(files[0].begin() + 100000, files[0].begin() + 2'500'001);
  EXPECT_EQ(Download(up.file_hashes[0], r), want);
  EXPECT_EQ(Download(up.file_hashes[0], r, ApiVersion::kV1), want);
}

// Whole-file answers after the first come from the kept plan: the same answer at the same clock, URLs signed
// afresh (new expiry) later, and still downloadable. Scope checks happen before the plan is used (see
// FilesAreVisibleOnlyToTheirScopes).
TEST_F(Service, WholeFileAnswersComeFromAKeptPlanWithFreshUrls) {
  const Bytes data = xet::testing::TextLikeBytes(3, 2 << 20);
  const auto up = Build({data});
  Upload(up);
  const auto& file = up.file_hashes[0];
  const auto first = service_->Reconstruct(file, "repo", std::nullopt, ApiVersion::kV2);
  const auto again = service_->Reconstruct(file, "repo", std::nullopt, ApiVersion::kV2);
  ASSERT_TRUE(first.ok() && again.ok());
  EXPECT_EQ(again->Text(), first->Text());
  clock_.Advance(100);
  const auto later = service_->Reconstruct(file, "repo", std::nullopt, ApiVersion::kV2);
  ASSERT_TRUE(later.ok());
  EXPECT_NE(later->Text(), first->Text());
  EXPECT_NE(later->Text().find(std::to_string(Now() + ServiceOptions{}.transfer_url_ttl_seconds)),
            std::string::npos);
  EXPECT_EQ(Download(file), data);
  EXPECT_EQ(Download(file, std::nullopt, ApiVersion::kV1), data);
  const ByteRange r{1000, 5000};
  EXPECT_EQ(Download(file, r), Bytes(data.begin() + 1000, data.begin() + 5001));
}

TEST_F(Service, EveryCompressionScheme) {
  for (auto policy : {xet::CompressionPolicy::kNone, xet::CompressionPolicy::kLz4,
                      xet::CompressionPolicy::kBg4Lz4, xet::CompressionPolicy::kAuto}) {
    const Bytes file = xet::testing::TextLikeBytes(10 + static_cast<uint64_t>(policy), 1 << 20);
    const auto up = Build({file}, policy);
    Upload(up);
    EXPECT_EQ(Download(up.file_hashes[0]), file);
  }
}

// A registered file records each term's byte range in its xorb, as the xorb's layout gives it.
TEST_F(Service, RegisteredFilesRecordTheirTermsByteRanges) {
  const auto up = Build({xet::testing::TextLikeBytes(21, 3 << 20)});
  Upload(up);
  auto file = index_->GetFile(up.file_hashes[0]);
  ASSERT_TRUE(file.ok()) << file.error().message;
  ASSERT_TRUE((*file)->has_ranges());
  for (size_t i = 0; i < (*file)->term_count; ++i) {
    const index::Term t = (*file)->term(i);
    auto xorb = index_->GetXorb(t.xorb);
    ASSERT_TRUE(xorb.ok());
    const xet::XorbLayout layout = (*xorb)->ToLayout();
    EXPECT_EQ((*file)->range(i).start, layout.begin_offset(t.chunk_start)) << i;
    EXPECT_EQ((*file)->range(i).end, layout.chunks[t.chunk_end - 1].end_offset) << i;
  }
}

// A file registered before cairn recorded byte ranges (schema < 5) reconstructs as one registered now: its
// layouts are read in one index call before planning, and the answers are the same bytes.
TEST_F(Service, FilesWithoutRecordedRangesAnswerTheSame) {
  const Bytes data = xet::testing::TextLikeBytes(22, 3 << 20);
  const auto up = Build({data});
  Upload(up);
  auto shard = xet::ParseShard(up.shard_bytes);
  ASSERT_TRUE(shard.ok());
  xet::FileRecord old = shard->files[0];
  old.hash.bytes[0] ^= 1;  // another file with the same terms, registered without ranges
  index::ShardCommit c;
  c.shard = xet::Hash{};
  c.shard.bytes.fill(9);
  c.shard_size = 1;
  c.scope = "repo";
  c.files.push_back(index::MakeFileCommit(old));
  ASSERT_TRUE(index_->CommitShard(c).ok());
  ASSERT_FALSE(index_->GetFile(old.hash).value()->has_ranges());
  for (const auto& range : {std::optional<ByteRange>(), std::optional<ByteRange>(ByteRange{1, 2'000'000}),
                            std::optional<ByteRange>(ByteRange{2'999'000, 9'999'999})}) {
    auto now = service_->Reconstruct(up.file_hashes[0], "repo", range, ApiVersion::kV2);
    auto before = service_->Reconstruct(old.hash, "repo", range, ApiVersion::kV2);
    ASSERT_TRUE(now.ok() && before.ok());
    EXPECT_EQ(before->Text(), now->Text());
  }
}

TEST_F(Service, XorbUploadIsIdempotentAndValidated) {
  const auto up = Build({xet::testing::TextLikeBytes(3, 200000)});
  const auto& x = up.xorbs[0];
  EXPECT_EQ(*service_->PutXorb(x.hash, x.body), true);
  EXPECT_EQ(*service_->PutXorb(x.hash, x.body), false);
  // A flipped byte in a new xorb's body: refused, nothing stored or indexed.
  const auto fresh = Build({xet::testing::TextLikeBytes(4, 200000)});
  Bytes corrupt = fresh.xorbs[0].body;
  corrupt[corrupt.size() / 2] ^= 1;
  auto bad = service_->PutXorb(fresh.xorbs[0].hash, corrupt);
  ASSERT_FALSE(bad.ok());
  EXPECT_FALSE(*index_->HasXorb(fresh.xorbs[0].hash));
  EXPECT_FALSE(store_->Stat(store::BlobKind::kXorb, fresh.xorbs[0].hash)->exists);
  // A valid body under another xorb's name: refused.
  xet::XorbHash other = x.hash;
  other.bytes[0] ^= 1;
  auto r = service_->PutXorb(other, x.body);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kHashMismatch);
  EXPECT_FALSE(*index_->HasXorb(other));
  EXPECT_FALSE(store_->Stat(store::BlobKind::kXorb, other)->exists);
}

TEST_F(Service, AXorbTheServerHashedIsStoredWithoutDecodingItAgainAndCheckedAgainstItsHash) {
  const auto up = Build({xet::testing::TextLikeBytes(5, 300000)});
  const auto& x = up.xorbs[0];
  xet::ChunkPrehasher prehasher;
  prehasher.Advance(x.body);
  auto hashes = std::vector<xet::PrehashedChunk>(prehasher.hashes().begin(), prehasher.hashes().end());
  auto validated = xet::ValidateXorb(x.body);
  ASSERT_TRUE(validated.ok());
  const std::span<const uint8_t> chunks = std::span(x.body).first(validated->chunk_region_size);
  ASSERT_EQ(hashes.size(), validated->layout.chunks.size());
  // A chunk's hash that is not what its bytes give: the xorb's hash no longer matches; nothing stored.
  auto wrong = hashes;
  wrong[0].hash.bytes[0] ^= 1;
  auto refused = service_->PutHashedXorb(x.hash, chunks, wrong);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, ErrorCode::kHashMismatch);
  // A chunk without its hash: refused rather than decoded.
  auto fewer = service_->PutHashedXorb(x.hash, chunks, std::span(hashes).first(hashes.size() - 1));
  ASSERT_FALSE(fewer.ok());
  EXPECT_EQ(fewer.error().code, ErrorCode::kMalformed);
  EXPECT_FALSE(*index_->HasXorb(x.hash));
  EXPECT_FALSE(store_->Stat(store::BlobKind::kXorb, x.hash)->exists);
  // Stored once, with the footer an upload's would have; a file naming it reads back.
  EXPECT_EQ(*service_->PutHashedXorb(x.hash, chunks, hashes), true);
  EXPECT_EQ(*service_->PutHashedXorb(x.hash, chunks, hashes), false);
  EXPECT_EQ(*service_->PutXorb(x.hash, x.body), false);
  ASSERT_TRUE(service_->PutShard(up.shard_bytes, "repo").ok());
  EXPECT_EQ(Download(up.file_hashes[0]), xet::testing::TextLikeBytes(5, 300000));
}

// A xorb the server filled as it arrived is committed as it is: the chunks are not written a second time, the
// blob holds them and the footer. A put that does not hold exactly the chunks is not taken: they are written
// anew.
TEST_F(Service, AXorbTheServerFilledAsItArrivedIsCommittedWithoutWritingItAgain) {
  const auto up = Build({xet::testing::TextLikeBytes(6, 300000)});
  const auto& x = up.xorbs[0];
  xet::ChunkPrehasher prehasher;
  prehasher.Advance(x.body);
  const auto hashes = std::vector<xet::PrehashedChunk>(prehasher.hashes().begin(), prehasher.hashes().end());
  auto validated = xet::ValidateXorb(x.body);
  ASSERT_TRUE(validated.ok());
  const std::span<const uint8_t> chunks = std::span(x.body).first(validated->chunk_region_size);

  auto short_fill = service_->BeginFilledXorb(x.hash);
  ASSERT_TRUE(short_fill.ok());
  ASSERT_NE(*short_fill, nullptr);  // a local disk store fills a file that can be read back
  ASSERT_TRUE((*short_fill)->Append(chunks.first(chunks.size() - 1)).ok());
  ASSERT_EQ(*service_->PutHashedXorb(x.hash, chunks, hashes, std::move(*short_fill)), true);
  std::vector<uint8_t> stored(x.body.size());
  ASSERT_TRUE(store_->ReadRange(store::BlobKind::kXorb, x.hash, 0, stored).ok());
  EXPECT_TRUE(std::equal(chunks.begin(), chunks.end(), stored.begin()));  // written from `chunks`
  ASSERT_TRUE(service_->PutShard(up.shard_bytes, "repo").ok());
  EXPECT_EQ(Download(up.file_hashes[0]), xet::testing::TextLikeBytes(6, 300000));

  const auto other = Build({xet::testing::TextLikeBytes(7, 300000)});
  const auto& y = other.xorbs[0];
  xet::ChunkPrehasher other_prehasher;
  other_prehasher.Advance(y.body);
  const auto other_hashes =
      std::vector<xet::PrehashedChunk>(other_prehasher.hashes().begin(), other_prehasher.hashes().end());
  const auto y_region = xet::ValidateXorb(y.body)->chunk_region_size;
  auto filled = service_->BeginFilledXorb(y.hash);
  ASSERT_TRUE(filled.ok());
  ASSERT_NE(*filled, nullptr);
  ASSERT_TRUE((*filled)->Append(std::span(y.body).first(y_region)).ok());
  // Handed `chunks` that differ from what was filled in one payload byte (which the hashes, taken as given,
  // do not show): the blob is what was filled, so nothing was written from `chunks`.
  std::vector<uint8_t> decoy(y.body.begin(), y.body.begin() + static_cast<ptrdiff_t>(y_region));
  decoy[xet::kChunkHeaderSize] ^= 1;
  ASSERT_EQ(*service_->PutHashedXorb(y.hash, decoy, other_hashes, std::move(*filled)), true);
  std::vector<uint8_t> blob(y.body.size());
  ASSERT_TRUE(store_->ReadRange(store::BlobKind::kXorb, y.hash, 0, blob).ok());
  EXPECT_EQ(blob, y.body);  // the chunks as filled, then the footer
  ASSERT_TRUE(service_->PutShard(other.shard_bytes, "repo").ok());
  EXPECT_EQ(Download(other.file_hashes[0]), xet::testing::TextLikeBytes(7, 300000));
}

TEST_F(Service, ShardWithUnknownXorbRegistersNothing) {
  const auto up = Build({xet::testing::TextLikeBytes(4, 2 << 20)});
  for (size_t i = 1; i < up.xorbs.size(); ++i)
    ASSERT_TRUE(service_->PutXorb(up.xorbs[i].hash, up.xorbs[i].body).ok());
  auto r = service_->PutShard(up.shard_bytes, "repo");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kUnknownReference);
  EXPECT_NE(r.error().message.find("term 0"), std::string::npos) << r.error().message;
  EXPECT_FALSE(index_->GetFile(up.file_hashes[0]).ok());
}

TEST_F(Service, ShardWithWrongVerificationHashIsRejected) {
  auto up = Build({xet::testing::TextLikeBytes(5, 300000)});
  for (const auto& x : up.xorbs) ASSERT_TRUE(service_->PutXorb(x.hash, x.body).ok());
  up.shard.files[0].verification[0].bytes[3] ^= 1;
  auto r = service_->PutShard(ingest::ShardUploadForm(up.shard), "repo");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kHashMismatch);
}

TEST_F(Service, ShardResultSaysWhetherItWasNew) {
  const auto up = Build({xet::testing::TextLikeBytes(6, 100000)});
  for (const auto& x : up.xorbs) ASSERT_TRUE(service_->PutXorb(x.hash, x.body).ok());
  EXPECT_TRUE(service_->PutShard(up.shard_bytes, "repo")->registered);
  EXPECT_FALSE(service_->PutShard(up.shard_bytes, "repo")->registered);
}

TEST_F(Service, FilesAreVisibleOnlyToTheirScopes) {
  const auto up = Build({xet::testing::TextLikeBytes(7, 100000)});
  Upload(up, "alice/model");
  EXPECT_TRUE(service_->Reconstruct(up.file_hashes[0], "alice/model", std::nullopt, ApiVersion::kV2).ok());
  auto other = service_->Reconstruct(up.file_hashes[0], "bob/model", std::nullopt, ApiVersion::kV2);
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.error().code, ErrorCode::kNotFound);
  // Whatever alice's answers left in the caches: not for a scope named like hers, nor for a range or a batch.
  EXPECT_FALSE(service_->Reconstruct(up.file_hashes[0], "alice/mode", std::nullopt, ApiVersion::kV2).ok());
  EXPECT_FALSE(service_->Reconstruct(up.file_hashes[0], "bob/model", ByteRange{0, 9}, ApiVersion::kV2).ok());
  EXPECT_FALSE(service_->ReconstructBatch(up.file_hashes, "bob/model").ok());
  // Registering the same shard from another scope makes it visible there too.
  ASSERT_TRUE(service_->PutShard(up.shard_bytes, "bob/model").ok());
  EXPECT_TRUE(service_->Reconstruct(up.file_hashes[0], "bob/model", std::nullopt, ApiVersion::kV2).ok());
}

TEST_F(Service, EmptyFileAnd416) {
  auto empty = service_->Reconstruct(xet::Hash{}, "anyone", std::nullopt, ApiVersion::kV2);
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->Text(), R"({"offset_into_first_range":0,"terms":[],"xorbs":{}})");
  const auto up = Build({Bytes(1000, 'a')});
  Upload(up);
  auto past = service_->Reconstruct(up.file_hashes[0], "repo", ByteRange{1000, 2000}, ApiVersion::kV2);
  ASSERT_TRUE(past.ok());
  EXPECT_EQ(past->status, ReconstructionStatus::kRangeNotSatisfiable);
}

// A URL key rotation: answers (kept plans too) are signed with the new key and name it; URLs handed out
// before keep working until their key is retired; the download path works throughout.
TEST_F(Service, UrlKeyRotationKeepsLiveUrlsUntilTheirKeyIsRetired) {
  const Bytes data = xet::testing::TextLikeBytes(5, 500000);
  const auto up = Build({data});
  Upload(up);
  const auto& file = up.file_hashes[0];
  const auto first_url = [&] {
    auto answer = service_->Reconstruct(file, "repo", std::nullopt, ApiVersion::kV1);
    const auto o = json::parse(answer->Text()).as_object();
    return std::string(o.at("fetch_info").as_object().begin()->value().as_array()[0].at("url").as_string());
  };
  const auto transfer = [&](const std::string& url) {
    const size_t q = url.find('?');
    const size_t p = url.find("/v1/transfer/") + 13;
    return service_->Transfer(url.substr(p, q - p), url.substr(q + 1), std::nullopt);
  };
  const std::string before = first_url();  // and the whole-file plan is kept
  EXPECT_EQ(before.find("&k="), std::string::npos);
  xet::Hash legacy;
  legacy.bytes.fill(7);
  xet::Hash next;
  next.bytes.fill(9);
  service_->SetUrlKeys(*UrlKeys::Make({{"legacy", legacy}, {"k2", next}}, "k2"));
  const std::string after = first_url();
  EXPECT_NE(after.find("&k=k2&s="), std::string::npos) << after;  // the kept plan was signed afresh
  EXPECT_TRUE(transfer(before).ok());
  EXPECT_TRUE(transfer(after).ok());
  EXPECT_EQ(Download(file), data);
  service_->SetUrlKeys(*UrlKeys::Make({{"k2", next}}, "k2"));
  EXPECT_EQ(transfer(before).error().code, ErrorCode::kDenied);
  EXPECT_TRUE(transfer(after).ok());
  EXPECT_EQ(Download(file), data);
}

TEST_F(Service, TransferUrlsExpireAndAreBoundToTheirRanges) {
  const auto up = Build({xet::testing::TextLikeBytes(8, 500000)});
  Upload(up);
  auto answer = service_->Reconstruct(up.file_hashes[0], "repo", std::nullopt, ApiVersion::kV1);
  const auto o = json::parse(answer->Text()).as_object();
  const auto& entry = o.at("fetch_info").as_object().begin()->value().as_array()[0];
  const std::string url(entry.at("url").as_string());
  const size_t q = url.find('?');
  const size_t p = url.find("/v1/transfer/") + 13;
  const std::string xorb = url.substr(p, q - p);
  const std::string query = url.substr(q + 1);
  const auto end = entry.at("url_range").at("end").to_number<uint64_t>();
  EXPECT_TRUE(service_->Transfer(xorb, query, "bytes=0-" + std::to_string(end)).ok());
  EXPECT_TRUE(service_->Transfer(xorb, query, "bytes=8-100").ok());  // any sub-range
  EXPECT_FALSE(service_->Transfer(xorb, query, "bytes=0-" + std::to_string(end + 1)).ok());
  clock_.Advance(3601);
  auto expired = service_->Transfer(xorb, query, "bytes=0-100");
  ASSERT_FALSE(expired.ok());
  EXPECT_EQ(expired.error().code, ErrorCode::kDenied);
}

TEST_F(Service, DedupAnswerIsAKeyedShardOfTheScope) {
  const Bytes file = xet::testing::TextLikeBytes(9, 400000);
  const auto up = Build({file});
  Upload(up, "repo");
  const xet::ChunkHash first = up.xorbs[0].layout.chunks[0].hash;
  auto answer = service_->DedupShard(first, "repo");
  ASSERT_TRUE(answer.ok()) << answer.error().message;
  auto shard = xet::ParseShard(*answer);
  ASSERT_TRUE(shard.ok()) << shard.error().message;
  ASSERT_TRUE(shard->footer.has_value());
  EXPECT_FALSE(shard->footer->chunk_hash_hmac_key.is_zero());
  EXPECT_GT(shard->footer->key_expiry, Now());
  ASSERT_EQ(shard->xorbs.size(), 1u);
  EXPECT_EQ(shard->xorbs[0].hash, up.xorbs[0].hash);
  EXPECT_EQ(shard->xorbs[0].chunks[0].hash, xet::HmacChunkHash(shard->footer->chunk_hash_hmac_key, first));
  EXPECT_EQ(service_->DedupShard(first, "elsewhere").error().code, ErrorCode::kNotFound);
  EXPECT_EQ(service_->DedupShard(up.xorbs[0].layout.chunks[1].hash, "repo").error().code,
            ErrorCode::kNotFound);
}

// A hit anywhere in an upload offers every xorb of its shard (the stock client asks about one chunk in
// ~1,024: a xorb without such a chunk is found only as a neighbour), in upload order, within the cap.
TEST_F(Service, DedupAnswerCarriesTheNeighbourhood) {
  const auto up = Build({xet::testing::TextLikeBytes(21, 5'000'000)});
  ASSERT_GE(up.xorbs.size(), 4u);
  Upload(up, "repo");
  const auto listed = [](const std::vector<uint8_t>& bytes) {
    auto shard = xet::ParseShard(bytes);
    EXPECT_TRUE(shard.ok()) << shard.error().message;
    std::vector<xet::XorbHash> out;
    for (const auto& x : shard->xorbs) out.push_back(x.hash);
    return out;
  };
  std::vector<xet::XorbHash> all;
  for (const auto& x : up.xorbs) all.push_back(x.hash);

  auto answer = service_->DedupShard(up.xorbs[0].layout.chunks[0].hash, "repo");
  ASSERT_TRUE(answer.ok()) << answer.error().message;
  EXPECT_EQ(listed(*answer), all);

  // A cap that holds two listings: the hit and the xorb after it (a re-upload reads on from the hit).
  service_.reset();
  ServiceOptions so = Options();
  const size_t two = xet::kEmptyShardBytes + xet::XorbListingBytes(up.xorbs[0].layout.chunks.size()) +
                     xet::XorbListingBytes(up.xorbs[1].layout.chunks.size());
  so.dedup_answer_max_bytes = two;
  service_ = std::make_unique<CasService>(*index_, *store_, pool_, so);
  answer = service_->DedupShard(up.xorbs[0].layout.chunks[0].hash, "repo");
  ASSERT_TRUE(answer.ok()) << answer.error().message;
  EXPECT_EQ(listed(*answer), (std::vector<xet::XorbHash>{all[0], all[1]}));
  EXPECT_EQ(answer->size(), two);
  // The smallest cap still answers with the xorb that holds the chunk.
  service_.reset();
  so.dedup_answer_max_bytes = 1;
  service_ = std::make_unique<CasService>(*index_, *store_, pool_, so);
  answer = service_->DedupShard(up.xorbs[0].layout.chunks[0].hash, "repo");
  ASSERT_TRUE(answer.ok());
  EXPECT_EQ(listed(*answer), std::vector<xet::XorbHash>{all[0]});
}

// Every chunk of one shard gets the same whole-neighbourhood answer in a key window: kept and given again,
// byte for byte what a fresh computation gives; a new window gets a new key.
TEST_F(Service, DedupAnswersOfOneShardAreKeptForTheirWindow) {
  const auto up =
      Build({xet::testing::TextLikeBytes(23, 2'000'000), xet::testing::TextLikeBytes(24, 2'000'000)});
  Upload(up, "repo");
  const auto first_chunk = [&](size_t file) {
    auto terms = service_->Reconstruct(up.file_hashes[file], "repo", std::nullopt, ApiVersion::kV2);
    EXPECT_TRUE(terms.ok());
    const auto o = json::parse(terms->Text()).as_object();
    const auto& t = o.at("terms").as_array()[0];
    const std::string hex(t.at("hash").as_string());
    for (const auto& x : up.xorbs) {
      if (x.hash.hex() == hex) return x.layout.chunks[t.at("range").at("start").to_number<size_t>()].hash;
    }
    ADD_FAILURE() << "no xorb " << hex;
    return xet::ChunkHash{};
  };
  auto a = service_->DedupShard(first_chunk(0), "repo");
  clock_.Advance(10);
  auto b = service_->DedupShard(first_chunk(1), "repo");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(*a, *b);  // the kept answer, creation time included
  ServiceOptions so = Options();
  CasService fresh(*index_, *store_, pool_, so);
  auto computed = fresh.DedupShard(first_chunk(1), "repo");
  ASSERT_TRUE(computed.ok());
  auto kept = xet::ParseShard(*b);
  auto again = xet::ParseShard(*computed);
  ASSERT_TRUE(kept.ok() && again.ok());
  EXPECT_EQ(again->footer->creation_timestamp, kept->footer->creation_timestamp + 10);
  ASSERT_EQ(again->xorbs.size(), kept->xorbs.size());
  for (size_t i = 0; i < kept->xorbs.size(); ++i) {
    EXPECT_EQ(again->xorbs[i].hash, kept->xorbs[i].hash);
    EXPECT_EQ(again->xorbs[i].chunks.size(), kept->xorbs[i].chunks.size());
    EXPECT_EQ(again->xorbs[i].chunks.back().hash, kept->xorbs[i].chunks.back().hash);
  }

  clock_.Advance(8 * 86400);  // past the 7-day window: another key, another answer
  auto c = service_->DedupShard(first_chunk(0), "repo");
  ASSERT_TRUE(c.ok());
  EXPECT_NE(*c, *a);
  EXPECT_GT(xet::ParseShard(*c)->footer->key_expiry, Now());
}

// A shard that lists no xorbs of its own (its file reuses stored ones) offers the xorbs its file uses.
TEST_F(Service, DedupAnswerOffersXorbsTheShardsFilesUse) {
  const auto up = Build({xet::testing::TextLikeBytes(22, 3'000'000)});
  Upload(up, "first");
  auto files_only = xet::ParseShard(up.shard_bytes);
  ASSERT_TRUE(files_only.ok());
  files_only->xorbs.clear();
  const auto body = xet::SerializeShard(*files_only);
  ASSERT_TRUE(service_->PutShard(body, "second").ok());
  auto answer = service_->DedupShard(up.xorbs[0].layout.chunks[0].hash, "second");
  ASSERT_TRUE(answer.ok()) << answer.error().message;
  auto shard = xet::ParseShard(*answer);
  ASSERT_TRUE(shard.ok());
  ASSERT_EQ(shard->xorbs.size(), up.xorbs.size());
  for (size_t i = 0; i < up.xorbs.size(); ++i) EXPECT_EQ(shard->xorbs[i].hash, up.xorbs[i].hash);
  EXPECT_EQ(service_->DedupShard(up.xorbs[0].layout.chunks[0].hash, "third").error().code,
            ErrorCode::kNotFound);
  // Unless dedup across scopes is configured.
  ServiceOptions so = Options();
  so.dedup_across_scopes = true;
  CasService across(*index_, *store_, pool_, so);
  auto any = across.DedupShard(up.xorbs[0].layout.chunks[0].hash, "third");
  ASSERT_TRUE(any.ok()) << any.error().message;
  EXPECT_EQ(xet::ParseShard(*any)->xorbs.size(), up.xorbs.size());
}

TEST_F(Service, BatchReconstruction) {
  const auto up = Build({xet::testing::TextLikeBytes(11, 100000), xet::testing::TextLikeBytes(12, 100000)});
  Upload(up);
  auto answer = service_->ReconstructBatch(up.file_hashes, "repo");
  ASSERT_TRUE(answer.ok());
  const auto o = json::parse(answer->Text()).as_object();
  EXPECT_EQ(o.at("files").as_object().size(), 2u);
}

}  // namespace
}  // namespace cairn::cas
