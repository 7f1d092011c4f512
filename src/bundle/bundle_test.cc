// Export and import against both backend pairs (SQLite + local disk, PostgreSQL + S3 on SeaweedFS), each
// bundle imported into an empty deployment of the same kind: the repository comes back whole (history, refs,
// small and large files byte for byte); a bundle that is not what its manifest says is refused before
// anything is created.
#include "bundle/bundle.h"

#include <gtest/gtest.h>

#include "backup/space.h"
#include "common/test_fifo.h"
#include "gc/test_deployment.h"
#include "hub/file_link.h"
#include "ingest/shard_records.h"
#include "store/local_disk_store.h"
#include "xet/shard.h"
#include "xet/test_support.h"

namespace cairn::bundle {
namespace {

using gc::testing::Backend;
using gc::testing::Bytes;
namespace fs = std::filesystem;

class BundleTest : public gc::testing::DeploymentTest {
 protected:
  // An empty second deployment of the test's backend and its services.
  struct Target {
    std::unique_ptr<index::Index> index;
    std::unique_ptr<store::BlobStore> store;
    std::unique_ptr<cas::CasService> cas;
    std::unique_ptr<files::FileService> files;
    std::unique_ptr<hub::HubService> hub;
  };
  std::unique_ptr<Target> Empty(const std::string& name) {
    auto other = OtherDeployment(name, GetParam());
    auto t = std::make_unique<Target>();
    t->store = std::move(other.store);
    auto ix = index::OpenIndex(other.url, {});
    EXPECT_TRUE(ix.ok()) << ix.error().message;
    if (!ix.ok() || t->store == nullptr) return nullptr;
    t->index = std::move(*ix);
    t->cas = std::make_unique<cas::CasService>(*t->index, *t->store, pool_, cas::ServiceOptions{});
    t->files = std::make_unique<files::FileService>(*t->cas, *t->index, files::FileServiceOptions{});
    t->hub = std::make_unique<hub::HubService>(*t->index, *t->files, hub::HubOptions{});
    return t;
  }

  // alice/model with a small file, two large files (one changed in a second commit) and a tag.
  void Populate() {
    ASSERT_NE(MakeRepo(), 0);
    small_ = Random(300);
    large_ = Random(700 << 10);
    other_ = Random(500 << 10);
    Upload({large_, other_}, "repo-w");
    first_ = Commit({hub::AddInline{"config.json", small_}, hub::AddLfs{"model.bin", Pointer(large_)}});
    changed_ = Random(300 << 10);
    Upload({changed_}, "repo-w");
    second_ = Commit(
        {hub::AddLfs{"weights/other.bin", Pointer(other_)}, hub::AddLfs{"model.bin", Pointer(changed_)}});
    ASSERT_TRUE(
        index_->UpdateRef(AliceModel().record.id, {index::RefKind::kTag, "v1", std::nullopt, first_.key()})
            .ok());
  }

  Result<ExportReport> ExportTo(const fs::path& dest, const std::string& revision = "") {
    ExportOptions o;
    o.revision = revision;
    o.now = clock_.UnixSeconds();
    return Export(*index_, *store_, {index::RepoType::kModel, "alice", "model"}, dest, o);
  }

  // The bytes of `path` at `revision` of alice/model in `t`, read as a client of the Hub would.
  Bytes Read(Target& t, const std::string& revision, const std::string& path) {
    auto repo = t.hub->Open(hub::Caller{}, {index::RepoType::kModel, "alice", "model"}, false);
    EXPECT_TRUE(repo.ok()) << repo.error().message;
    if (!repo.ok()) return {};
    auto commit = t.hub->Resolve(*repo, revision);
    EXPECT_TRUE(commit.ok()) << commit.error().message;
    if (!commit.ok()) return {};
    auto info = t.hub->Stat(*repo, *commit, path);
    EXPECT_TRUE(info.ok()) << info.error().message;
    if (!info.ok()) return {};
    if (!info->xet) {
      auto blob = t.hub->ReadBlob(*repo, info->oid);
      return blob.ok() ? *blob : Bytes{};
    }
    return Download(*info->xet, repo->record.read_scope, t.files.get());
  }

  // Uploads `data` to alice/model's scope with a shard claiming `sha256` for it (nothing checks a claim at
  // upload): a pointer to another file of that SHA-256 and size then links these bytes.
  xet::FileHash UploadClaiming(const Bytes& data, const std::string& sha256) {
    const std::vector<std::span<const uint8_t>> spans{data};
    auto up = ingest::BuildUpload(spans, {});
    for (const auto& x : up.xorbs) EXPECT_TRUE(cas_->PutXorb(x.hash, x.body).ok());
    up.shard.files[0].sha256 = xet::Hash::FromHex(sha256);
    auto put = cas_->PutShard(ingest::ShardUploadForm(up.shard), "repo-w");
    EXPECT_TRUE(put.ok()) << put.error().message;
    return up.file_hashes[0];
  }

  // Every shard of the bundle at `b` rewritten by `change` (each file record), stored under its new hash and
  // named so in the manifest: what a forger can do to a bundle.
  static void RewriteShards(const fs::path& b, const std::function<void(xet::FileRecord&)>& change) {
    auto objects = store::LocalDiskStore::Open(b / "objects");
    ASSERT_TRUE(objects.ok());
    std::string text = *backup::ReadFileBounded(b / "manifest", kMaxManifestBytes);
    auto m = ParseManifest(text);
    ASSERT_TRUE(m.ok());
    for (const auto& s : m->shards) {
      auto body = (*objects)->ReadWhole(store::BlobKind::kShard, s.hash);
      ASSERT_TRUE(body.ok());
      auto shard = xet::ParseShard(*body);
      ASSERT_TRUE(shard.ok());
      for (auto& f : shard->files) change(f);
      const Bytes forged = ingest::ShardUploadForm(*shard);
      const xet::Hash hash = xet::ChunkHashOf(forged);
      ASSERT_TRUE((*objects)->Put(store::BlobKind::kShard, hash, forged).ok());
      ASSERT_TRUE((*objects)->Delete(store::BlobKind::kShard, s.hash).ok());
      const std::string line = "shard " + s.hash.hex() + " " + std::to_string(s.bytes) + "\n";
      const size_t at = text.find(line);
      ASSERT_NE(at, std::string::npos);
      text.replace(at, line.size(), "shard " + hash.hex() + " " + std::to_string(forged.size()) + "\n");
    }
    ASSERT_TRUE(backup::WriteFileDurably(b / "manifest", text).ok());
  }

  // Refused with `code`, and nothing of it in `t`: no repository, no xorb, no shard.
  static void RefusedLeavingNothing(Target& t, const fs::path& bundle, ErrorCode code) {
    auto r = Import(*t.index, *t.cas, *t.files, bundle, {});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, code) << r.error().message;
    EXPECT_EQ(t.index->FindRepo(index::RepoType::kModel, "alice", "model").error().code,
              ErrorCode::kNotFound);
    for (const auto kind : {store::BlobKind::kXorb, store::BlobKind::kShard}) {
      size_t stored = 0;
      ASSERT_TRUE(t.store->List(kind, [&](const xet::Hash&) { ++stored; }).ok());
      EXPECT_EQ(stored, 0u) << store::BlobKindName(kind);
    }
  }

  Bytes small_, large_, other_, changed_;
  hub::ObjectId first_, second_;
};

TEST_P(BundleTest, ARepositoryComesBackWholeInAnEmptyServer) {
  ASSERT_NO_FATAL_FAILURE(Populate());
  const fs::path dest = dir_ / "bundle";
  auto exported = ExportTo(dest);
  ASSERT_TRUE(exported.ok()) << exported.error().message;
  EXPECT_EQ(exported->manifest.refs.size(), 2u);  // main and v1
  EXPECT_EQ(exported->manifest.links.size(), 3u);
  EXPECT_TRUE(fs::exists(dest / "manifest"));

  auto t = Empty("imported");
  ASSERT_NE(t, nullptr);
  ImportOptions io;
  io.now = clock_.UnixSeconds();
  auto imported = Import(*t->index, *t->cas, *t->files, dest, io);
  ASSERT_TRUE(imported.ok()) << imported.error().message;
  EXPECT_EQ(imported->new_xorbs, exported->manifest.xorbs.size());
  EXPECT_EQ(Read(*t, "main", "config.json"), small_);
  EXPECT_EQ(Read(*t, "main", "model.bin"), changed_);
  EXPECT_EQ(Read(*t, "main", "weights/other.bin"), other_);
  EXPECT_EQ(Read(*t, "v1", "model.bin"), large_);
  EXPECT_EQ(Read(*t, first_.hex(), "model.bin"), large_);
  // The same ids: the history is the exporter's.
  auto repo = t->hub->Open(hub::Caller{}, {index::RepoType::kModel, "alice", "model"}, false);
  ASSERT_TRUE(repo.ok());
  EXPECT_EQ(*t->hub->Resolve(*repo, "main"), second_);
  EXPECT_FALSE(hub::IsMirrored(repo->record));

  // Once only: a second import of the same repository is refused, another name is not.
  auto again = Import(*t->index, *t->cas, *t->files, dest, io);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.error().code, ErrorCode::kConflict);
  io.as = hub::RepoId{index::RepoType::kModel, "bob", "copy"};
  auto renamed = Import(*t->index, *t->cas, *t->files, dest, io);
  ASSERT_TRUE(renamed.ok()) << renamed.error().message;
  EXPECT_EQ(renamed->new_xorbs, 0u);  // deduplicated against the first import
  EXPECT_FALSE(renamed->mirrored);
}

TEST_P(BundleTest, OneRevisionCarriesItsHistoryAndOnlyItsRef) {
  ASSERT_NO_FATAL_FAILURE(Populate());
  auto tag = ExportTo(dir_ / "v1", "v1");
  ASSERT_TRUE(tag.ok()) << tag.error().message;
  ASSERT_EQ(tag->manifest.refs.size(), 1u);
  EXPECT_EQ(tag->manifest.refs[0].name, "v1");
  EXPECT_EQ(tag->manifest.refs[0].kind, index::RefKind::kTag);
  EXPECT_EQ(tag->manifest.links.size(), 1u);  // the first commit's one large file

  auto pinned = ExportTo(dir_ / "pinned", first_.hex());
  ASSERT_TRUE(pinned.ok()) << pinned.error().message;
  ASSERT_EQ(pinned->manifest.refs.size(), 1u);
  EXPECT_EQ(pinned->manifest.refs[0].name, "main");
  EXPECT_EQ(pinned->manifest.refs[0].target, first_);
  auto t = Empty("pinned");
  ASSERT_NE(t, nullptr);
  auto imported = Import(*t->index, *t->cas, *t->files, dir_ / "pinned", {});
  ASSERT_TRUE(imported.ok()) << imported.error().message;
  EXPECT_EQ(Read(*t, "main", "model.bin"), large_);

  auto missing = ExportTo(dir_ / "none", "nope");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
  // Into a directory that holds something: refused.
  auto onto = ExportTo(dir_ / "v1");
  ASSERT_FALSE(onto.ok());
  EXPECT_EQ(onto.error().code, ErrorCode::kConflict);
}

TEST_P(BundleTest, ALargeFileNotHeldIsNotExported) {
  ASSERT_NO_FATAL_FAILURE(Populate());
  // As a mirrored repository whose file was never fetched: the link is not there.
  ASSERT_TRUE(
      index_->DeleteRepoObjects(AliceModel().record.id, {hub::FileLink::Key(Pointer(other_).sha256)}).ok());
  auto exported = ExportTo(dir_ / "bundle");
  ASSERT_FALSE(exported.ok());
  EXPECT_EQ(exported.error().code, ErrorCode::kNotFound);
  EXPECT_NE(exported.error().message.find("weights/other.bin"), std::string::npos)
      << exported.error().message;
  // The first revision does not name it.
  EXPECT_TRUE(ExportTo(dir_ / "v1", "v1").ok());
}

TEST_P(BundleTest, ABundleThatIsNotWhatItsManifestSaysIsRefusedAndChangesNothing) {
  ASSERT_NO_FATAL_FAILURE(Populate());
  const fs::path dest = dir_ / "bundle";
  auto exported = ExportTo(dest);
  ASSERT_TRUE(exported.ok()) << exported.error().message;
  auto t = Empty("refusing");
  ASSERT_NE(t, nullptr);
  const auto refused = [&](const fs::path& bundle, ErrorCode code) {
    auto r = Import(*t->index, *t->cas, *t->files, bundle, {});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, code) << r.error().message;
    EXPECT_EQ(t->index->FindRepo(index::RepoType::kModel, "alice", "model").error().code,
              ErrorCode::kNotFound);
  };
  const auto copy = [&](const std::string& name) {
    fs::path to = dir_ / name;
    fs::copy(dest, to, fs::copy_options::recursive);
    return to;
  };
  std::string some_xorb;
  for (const auto& e : fs::recursive_directory_iterator(dest / "objects" / "xorbs")) {
    if (e.is_regular_file()) some_xorb = fs::relative(e.path(), dest).string();
  }
  ASSERT_FALSE(some_xorb.empty());

  {  // a flipped byte in the pack
    const fs::path b = copy("pack");
    ASSERT_TRUE(xet::testing::FlipByte(b / "history.pack", 40));
    refused(b, ErrorCode::kHashMismatch);
  }
  {  // a flipped byte in a xorb: its hash is not its name
    const fs::path b = copy("xorb");
    ASSERT_TRUE(xet::testing::FlipByte(b / some_xorb, fs::file_size(b / some_xorb) / 2));
    auto r = Import(*t->index, *t->cas, *t->files, b, {});
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("xorb"), std::string::npos) << r.error().message;
    EXPECT_EQ(t->index->FindRepo(index::RepoType::kModel, "alice", "model").error().code,
              ErrorCode::kNotFound);
  }
  {  // a xorb missing
    const fs::path b = copy("lacking");
    fs::remove(b / some_xorb);
    refused(b, ErrorCode::kMalformed);
  }
  {  // a manifest that names a link the bundle does not describe
    const fs::path b = copy("link");
    std::string text = *backup::ReadFileBounded(b / "manifest", kMaxManifestBytes);
    const size_t at = text.find("\nlink ");
    ASSERT_NE(at, std::string::npos);
    text[at + 6] = text[at + 6] == 'a' ? 'b' : 'a';  // another SHA-256
    ASSERT_TRUE(backup::WriteFileDurably(b / "manifest", text).ok());
    refused(b, ErrorCode::kMalformed);
  }
  {  // no manifest: an export that did not finish
    const fs::path b = copy("unfinished");
    fs::remove(b / "manifest");
    refused(b, ErrorCode::kNotFound);
  }
  // The intact bundle still imports.
  auto imported = Import(*t->index, *t->cas, *t->files, dest, {});
  ASSERT_TRUE(imported.ok()) << imported.error().message;
  EXPECT_EQ(Read(*t, "main", "model.bin"), changed_);
}

TEST_P(BundleTest, AnotherFilesBytesUnderAPointersSha256AreRefusedAndChangeNothing) {
  ASSERT_NE(MakeRepo(), 0);
  const Bytes wanted = Random(400 << 10);
  const Bytes other = Random(wanted.size());
  // The exporting server was told `other` is `wanted` (a shard's claim): model.bin's pointer links it.
  UploadClaiming(other, Pointer(wanted).sha256);
  Commit({hub::AddLfs{"model.bin", Pointer(wanted)}});
  const fs::path claimed = dir_ / "claimed";
  auto exported = ExportTo(claimed);
  ASSERT_TRUE(exported.ok()) << exported.error().message;
  auto t = Empty("forged");
  ASSERT_NE(t, nullptr);
  ASSERT_NO_FATAL_FAILURE(RefusedLeavingNothing(*t, claimed, ErrorCode::kHashMismatch));

  // The same bundle with a shard that claims no SHA-256 at all.
  const fs::path unclaimed = dir_ / "unclaimed";
  fs::copy(claimed, unclaimed, fs::copy_options::recursive);
  ASSERT_NO_FATAL_FAILURE(RewriteShards(unclaimed, [](xet::FileRecord& f) { f.sha256.reset(); }));
  ASSERT_NO_FATAL_FAILURE(RefusedLeavingNothing(*t, unclaimed, ErrorCode::kHashMismatch));
}

TEST_P(BundleTest, AFifoOrASymbolicLinkInPlaceOfABundlesFileIsRefusedWithoutWaiting) {
  ASSERT_NO_FATAL_FAILURE(Populate());
  const fs::path dest = dir_ / "bundle";
  ASSERT_TRUE(ExportTo(dest).ok());
  std::string some_xorb;
  for (const auto& e : fs::recursive_directory_iterator(dest / "objects" / "xorbs")) {
    if (e.is_regular_file()) some_xorb = fs::relative(e.path(), dest).string();
  }
  ASSERT_FALSE(some_xorb.empty());
  auto t = Empty("special");
  ASSERT_NE(t, nullptr);
  const fs::path outside = dir_ / "outside";
  fs::create_directories(outside);
  int n = 0;
  for (const std::string& name : {std::string("history.pack"), std::string("manifest"), some_xorb}) {
    SCOPED_TRACE(name);
    {  // a FIFO: no writer ever comes
      const fs::path b = dir_ / ("fifo" + std::to_string(++n));
      fs::copy(dest, b, fs::copy_options::recursive);
      const cairn::testing::FifoInPlace fifo(b / name);
      ASSERT_TRUE(fifo.made());
      auto r = Import(*t->index, *t->cas, *t->files, b, {});
      ASSERT_FALSE(r.ok());
      EXPECT_EQ(fifo.released(), 0) << "the import waited on the FIFO";
      // The pack's and the manifest's open refuses it; a xorb's size is not its manifest's.
      EXPECT_NE(r.error().message.find(name == some_xorb ? "size" : "not a regular file"), std::string::npos)
          << r.error().message;
    }
    {  // a symbolic link to the same bytes outside the bundle
      const fs::path b = dir_ / ("link" + std::to_string(++n));
      fs::copy(dest, b, fs::copy_options::recursive);
      const fs::path target = outside / std::to_string(n);
      fs::rename(b / name, target);
      fs::create_symlink(target, b / name);
      auto r = Import(*t->index, *t->cas, *t->files, b, {});
      ASSERT_FALSE(r.ok());
      EXPECT_EQ(r.error().code, ErrorCode::kMalformed) << r.error().message;
      EXPECT_NE(r.error().message.find("symbolic link"), std::string::npos) << r.error().message;
    }
    EXPECT_EQ(t->index->FindRepo(index::RepoType::kModel, "alice", "model").error().code,
              ErrorCode::kNotFound);
  }
  {  // a directory of the objects that is a symbolic link to one outside
    const fs::path b = dir_ / "linked-dir";
    fs::copy(dest, b, fs::copy_options::recursive);
    const fs::path dir = (b / some_xorb).parent_path();
    fs::rename(dir, outside / "dir");
    fs::create_directory_symlink(outside / "dir", dir);
    auto r = Import(*t->index, *t->cas, *t->files, b, {});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, ErrorCode::kMalformed) << r.error().message;
    EXPECT_NE(r.error().message.find("outside the bundle"), std::string::npos) << r.error().message;
  }
  // The bundle as exported imports.
  auto imported = Import(*t->index, *t->cas, *t->files, dest, {});
  ASSERT_TRUE(imported.ok()) << imported.error().message;
}

TEST_P(BundleTest, AShardWithoutSha256ImportsWhenTheBytesAreThePointers) {
  ASSERT_NO_FATAL_FAILURE(Populate());
  const fs::path dest = dir_ / "bundle";
  ASSERT_TRUE(ExportTo(dest).ok());
  ASSERT_NO_FATAL_FAILURE(RewriteShards(dest, [](xet::FileRecord& f) { f.sha256.reset(); }));
  auto t = Empty("unclaimed");
  ASSERT_NE(t, nullptr);
  auto imported = Import(*t->index, *t->cas, *t->files, dest, {});
  ASSERT_TRUE(imported.ok()) << imported.error().message;
  EXPECT_EQ(Read(*t, "main", "model.bin"), changed_);
  EXPECT_EQ(Read(*t, "v1", "model.bin"), large_);
}

INSTANTIATE_TEST_SUITE_P(Backends, BundleTest, ::testing::Values(Backend::kSqliteDisk, Backend::kPostgresS3),
                         gc::testing::BackendName);

TEST(BundleManifestTest, RoundTripsAndRefusesWhatItDidNotWrite) {
  Manifest m;
  m.repo = {index::RepoType::kDataset, "alice", "data"};
  m.mirrored = true;
  m.exported_at = 1'800'000'000;
  m.refs.push_back({index::RefKind::kBranch, "main", *hub::ObjectId::FromHex(std::string(40, 'a'))});
  m.refs.push_back({index::RefKind::kTag, "v1.0", *hub::ObjectId::FromHex(std::string(40, 'b'))});
  m.pack_bytes = 1234;
  m.pack_blake3 = std::string(64, 'c');
  m.objects = 7;
  m.links.push_back({std::string(64, 'd'), *xet::Hash::FromHex(std::string(64, 'e'))});
  m.xorbs.push_back({*xet::Hash::FromHex(std::string(64, 'f')), 99});
  m.shards.push_back({*xet::Hash::FromHex(std::string(64, '1')), 42});
  const std::string text = m.Encode();
  auto back = ParseManifest(text);
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(back->Encode(), text);
  EXPECT_EQ(hub::RepoPath(back->repo), "datasets/alice/data");

  for (const std::string& bad : {
           std::string(""),
           text.substr(0, text.size() - 1),                          // the last line not ended
           "cairn-bundle 2\n" + text.substr(text.find('\n') + 1),    // another version
           text + "ref branch ../x " + std::string(40, 'a') + "\n",  // a ref name git refuses
           text + "repo models a b\n",                               // repeated
           text + "link " + std::string(64, 'D') + " " + std::string(64, 'e') + "\n",  // not lowercase
           text + "xorb " + std::string(64, 'f') + " -1\n",
           text + "unknown line\n",
       }) {
    EXPECT_FALSE(ParseManifest(bad).ok()) << bad;
  }
  std::string no_refs;
  for (size_t at = 0; at < text.size();) {
    const size_t nl = text.find('\n', at);
    const std::string line = text.substr(at, nl + 1 - at);
    if (!line.starts_with("ref ")) no_refs += line;
    at = nl + 1;
  }
  EXPECT_FALSE(ParseManifest(no_refs).ok());
}

}  // namespace
}  // namespace cairn::bundle
