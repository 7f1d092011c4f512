// The relay's promises: the file's bytes come out of upstream's xorb ranges exactly (a cut range asked again
// from where it stopped), a relayed range is read as its bytes arrive and never before, an answer for a
// range of the file names the terms that cover it, and a failed or lying upstream fails every reader.
#include "mirror/relay.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "common/posix_io.h"
#include "ingest/upload_builder.h"
#include "store/local_disk_store.h"
#include "xet/hashing.h"

namespace cairn::mirror {
namespace {

// The first out.size() bytes of a relayed range, as the transfer route sends them: from the file AwaitBytes
// gives, once it gives one.
Status ReadRange(const cas::RelayedRange& range, std::span<uint8_t> out) {
  auto bytes = range.AwaitBytes();
  if (!bytes.ok()) return bytes.error();
  if (out.size() > range.length()) return Malformed("a read past the range");
  if (const int err = PreadFull(bytes->fd.get(), bytes->offset, out); err != 0)
    return IoError("reading a relayed range: " + OpenErrorText(err));
  return Ok{};
}

// A file of several xorbs as upstream would hold it, and its reconstruction as upstream answers it.
struct Upstreamed {
  std::vector<uint8_t> file;
  ingest::BuiltUpload upload;
  xet::ParsedReconstruction plan;
  std::map<std::string, const ingest::BuiltXorb*> xorbs;  // by hex
};

Upstreamed MakeFile(size_t bytes) {
  Upstreamed u;
  std::mt19937_64 rng(7);
  u.file.resize(bytes);
  for (size_t i = 0; i < bytes; i += 8) {
    const uint64_t v = rng() & 0x0f0f0f0f0f0f0f0fULL;  // compressible: chunks are stored compressed
    std::memcpy(u.file.data() + i, &v, std::min<size_t>(8, bytes - i));
  }
  const std::span<const uint8_t> files[] = {u.file};
  u.upload = ingest::BuildUpload(files, {.max_xorb_bytes = 2 << 20});
  for (const auto& x : u.upload.xorbs) u.xorbs[x.hash.hex()] = &x;
  for (const auto& t : u.upload.shard.files.at(0).terms) {
    const auto& layout = u.xorbs.at(t.xorb.hex())->layout;
    u.plan.fetches.push_back({.xorb = t.xorb.hex(),
                              .url = "upstream://" + t.xorb.hex(),
                              .cs = t.chunk_start,
                              .ce = t.chunk_end,
                              .first = layout.begin_offset(t.chunk_start),
                              .last = layout.begin_offset(t.chunk_end) - 1u});
    u.plan.terms.push_back({.xorb = t.xorb.hex(),
                            .cs = t.chunk_start,
                            .ce = t.chunk_end,
                            .length = t.unpacked_bytes,
                            .fetch = u.plan.fetches.size() - 1});
  }
  return u;
}

// Upstream's answer for file bytes [first, last], as its CAS gives one: the terms cut to the chunks the part
// needs, each with the bytes of just those chunks.
xet::ParsedReconstruction PartAnswer(const Upstreamed& u, uint64_t first, uint64_t last) {
  xet::ParsedReconstruction a;
  uint64_t at = 0;
  for (const auto& t : u.plan.terms) {
    uint64_t pos = at;
    at += t.length;
    if (at <= first || pos > last) continue;
    const auto& layout = u.xorbs.at(t.xorb)->layout;
    uint32_t cs = t.cs;
    for (; pos + layout.chunks[cs].unpacked_size <= first; ++cs) pos += layout.chunks[cs].unpacked_size;
    if (a.terms.empty()) a.offset_into_first = first > pos ? first - pos : 0;
    uint64_t length = 0;
    uint32_t ce = cs;
    for (; ce < t.ce && pos <= last; ++ce) {
      pos += layout.chunks[ce].unpacked_size;
      length += layout.chunks[ce].unpacked_size;
    }
    a.fetches.push_back({.xorb = t.xorb,
                         .url = "upstream://" + t.xorb,
                         .cs = cs,
                         .ce = ce,
                         .first = layout.begin_offset(cs),
                         .last = layout.begin_offset(ce) - 1u});
    a.terms.push_back({.xorb = t.xorb, .cs = cs, .ce = ce, .length = length, .fetch = a.fetches.size() - 1});
  }
  return a;
}

class RelayTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("cairn-relay-test-" + std::to_string(::getpid()));
    up_ = MakeFile(5'000'000);
    ASSERT_GE(up_.plan.terms.size(), 3u);
    auto made = Relay::Create(dir_, up_.upload.file_hashes[0], up_.plan, {"scope-a"});
    ASSERT_TRUE(made.ok()) << made.error().message;
    relay_ = *made;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Upstream's transfer: bytes of the xorb in blocks of 4 KiB, each after the gate lets one more through
  // (unlimited when gate_ < 0); cut once after `cut_after` bytes of the first range asked.
  Relay::Fetcher Fetcher() {
    return [this](const Relay::Fetch& f, uint64_t from, const net::HttpClient::Sink& sink) -> Status {
      ++asked_;
      const auto& body = up_.xorbs.at(f.xorb)->body;
      for (uint64_t at = f.first + from; at <= f.last; at += 4096) {
        {
          std::unique_lock lock(mu_);
          cv_.wait(lock, [&] { return gate_ != 0; });
          if (gate_ > 0) --gate_;
        }
        if (fail_) return NotFound("gone");
        if (cut_after_ > 0 && at - f.first >= cut_after_) {
          cut_after_ = 0;
          return Unavailable("cut");
        }
        const uint64_t n = std::min<uint64_t>(4096, f.last + 1 - at);
        std::vector<uint8_t> block(body.begin() + static_cast<ptrdiff_t>(at),
                                   body.begin() + static_cast<ptrdiff_t>(at + n));
        if (flip_ && f.xorb == up_.plan.fetches[0].xorb && at <= f.first + 5000 && f.first + 5000 < at + n) {
          block[f.first + 5000 - at] ^= 0x01;  // one bit of the first range, altered on the way
        }
        if (!sink(block)) return IoError("refused");
      }
      return Ok{};
    };
  }
  // A relay of the file that asks `ask` for a part's answer, every range received.
  std::shared_ptr<Relay> ReceivedWith(const std::string& name, Relay::RangeAsker ask) {
    auto made = Relay::Create(dir_ / name, up_.upload.file_hashes[0], up_.plan, {"scope-a"}, std::move(ask));
    EXPECT_TRUE(made.ok());
    if (!made.ok()) return nullptr;
    EXPECT_TRUE((*made)->Receive(Fetcher(), [] { return false; }).ok());
    return *made;
  }
  // A part inside the second term, as hf_xet asks for one.
  cas::ByteRange Part() const {
    const uint64_t t0 = up_.plan.terms[0].length;
    return {t0 + 100'000, t0 + 300'000};
  }
  void Let(int blocks) {
    std::lock_guard lock(mu_);
    gate_ = blocks;
    cv_.notify_all();
  }

  std::filesystem::path dir_;
  Upstreamed up_;
  std::shared_ptr<Relay> relay_;
  std::mutex mu_;
  std::condition_variable cv_;
  int gate_ = -1;
  bool fail_ = false;
  bool flip_ = false;
  uint64_t cut_after_ = 0;
  int asked_ = 0;
};

// Each chunk comes out once, in the file's order, hashed from its bytes, with its record exactly as
// upstream's xorb holds it, and the xorb it comes from where its range starts at that xorb's first byte.
TEST_F(RelayTest, ProducesTheFilesChunksFromUpstreamsRangesResumingACutOne) {
  cut_after_ = 10000;
  std::thread receiver([&] { EXPECT_TRUE(relay_->Receive(Fetcher(), [] { return false; }).ok()); });
  std::vector<uint8_t> got;
  size_t chunks = 0;
  size_t records_as_upstream = 0;
  ASSERT_TRUE(relay_
                  ->Produce([&](const Relay::Chunk& c) {
                    got.insert(got.end(), c.decoded.begin(), c.decoded.end());
                    EXPECT_EQ(c.hash, xet::ChunkHashOf(c.decoded));
                    EXPECT_TRUE(c.from.has_value());  // every range of this file is a whole xorb
                    if (!c.from) return true;
                    const auto& body = up_.xorbs.at(c.from->hex())->body;
                    records_as_upstream +=
                        std::search(body.begin(), body.end(), c.record.begin(), c.record.end()) != body.end();
                    ++chunks;
                    return true;
                  })
                  .ok());
  receiver.join();
  EXPECT_EQ(got, up_.file);
  EXPECT_EQ(relay_->size(), up_.file.size());
  EXPECT_EQ(records_as_upstream, chunks);
  EXPECT_EQ(asked_, static_cast<int>(up_.plan.fetches.size()) + 1);  // one range asked twice
}

TEST_F(RelayTest, ARelayedRangeIsServedOnceItsWholeXorbArrivedAndVerified) {
  Let(0);
  std::thread receiver([&] { EXPECT_TRUE(relay_->Receive(Fetcher(), [] { return false; }).ok()); });
  const auto& f = up_.plan.fetches[0];
  const auto xorb = *xet::Hash::FromHex(f.xorb);
  EXPECT_EQ(relay_->Open(xorb, f.first, f.last + 1), nullptr);  // past what is relayed
  EXPECT_EQ(relay_->Open(xet::Hash{}, f.first, f.last), nullptr);
  auto range = relay_->Open(xorb, f.first + 100, f.first + 9000);
  ASSERT_NE(range, nullptr);
  ASSERT_EQ(range->length(), 8901u);
  std::vector<uint8_t> out(8901);
  std::atomic<bool> read{false};
  std::thread reader([&] {
    EXPECT_TRUE(ReadRange(*range, out).ok());
    read = true;
  });
  Let(4);  // 16 KiB, past the range's end: still not served, since its xorb is not verified yet
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(read);
  Let(-1);
  reader.join();
  receiver.join();
  const auto& body = up_.xorbs.at(f.xorb)->body;
  EXPECT_TRUE(std::equal(out.begin(), out.end(), body.begin() + static_cast<ptrdiff_t>(f.first + 100)));
}

TEST_F(RelayTest, TheFilesBytesComeChunkByChunkBeforeTheirRangeIsComplete) {
  ASSERT_GT(up_.plan.fetches[0].last - up_.plan.fetches[0].first, 400'000u);
  Let(0);
  std::thread receiver([&] { EXPECT_TRUE(relay_->Receive(Fetcher(), [] { return false; }).ok()); });
  std::atomic<uint64_t> produced{0};
  std::thread producer([&] {
    EXPECT_TRUE(relay_
                    ->Produce([&](const Relay::Chunk& c) {
                      produced += c.decoded.size();
                      return true;
                    })
                    .ok());
  });
  Let(100);  // 400 KiB of the first range: a spool block (256 KiB), a few chunks
  for (int i = 0; i < 200 && produced == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_GT(produced.load(), 0u);
  EXPECT_LT(produced.load(), 400'000u);
  Let(-1);
  producer.join();
  receiver.join();
  EXPECT_EQ(produced.load(), up_.file.size());
}

// A range altered on the way (one bit) is never served: its chunks do not give its xorb's hash, so it waits
// for the file's check, and fails with it (the reader asks again). The others, verified, are served at once.
// Issue 45 item 6.
TEST_F(RelayTest, AnAlteredRangeIsNeverServed) {
  flip_ = true;
  Let(-1);
  ASSERT_TRUE(relay_->Receive(Fetcher(), [] { return false; }).ok());
  const auto open = [&](size_t i) {
    const auto& f = up_.plan.fetches[i];
    return relay_->Open(*xet::Hash::FromHex(f.xorb), f.first, f.last);
  };
  std::vector<uint8_t> out(64);
  for (size_t i = 1; i < up_.plan.fetches.size(); ++i) EXPECT_TRUE(ReadRange(*open(i), out).ok()) << i;
  auto altered = open(0);
  std::atomic<bool> done{false};
  Status got = Ok{};
  std::thread reader([&] {
    got = ReadRange(*altered, out);
    done = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(done) << "an unverified range waits for the file's check";
  relay_->FileChecked(false);
  reader.join();
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.error().code, ErrorCode::kUnavailable);
  relay_->FileChecked(true);  // the first verdict stands
  EXPECT_FALSE(ReadRange(*altered, out).ok());
}

// A range its own hash cannot check is served once the whole file passed (the verdict a part of a xorb
// waits for).
TEST_F(RelayTest, ARangeNoHashOfItsOwnChecksIsServedOnceTheFilePassed) {
  flip_ = true;  // unverifiable by its xorb's hash, like a part of a xorb
  Let(-1);
  ASSERT_TRUE(relay_->Receive(Fetcher(), [] { return false; }).ok());
  const auto& f = up_.plan.fetches[0];
  auto range = relay_->Open(*xet::Hash::FromHex(f.xorb), f.first, f.last);
  std::vector<uint8_t> out(64);
  std::atomic<bool> done{false};
  std::thread reader([&] {
    EXPECT_TRUE(ReadRange(*range, out).ok());
    done = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(done);
  relay_->FileChecked(true);
  reader.join();
}

TEST_F(RelayTest, AnAnswerForARangeNamesTheTermsThatCoverIt) {
  EXPECT_TRUE(relay_->Readable("scope-a"));
  EXPECT_FALSE(relay_->Readable("scope-b"));
  const auto whole = relay_->Plan(std::nullopt);
  ASSERT_EQ(whole.status, cas::ReconstructionStatus::kOk);
  EXPECT_EQ(whole.terms.size(), up_.plan.terms.size());
  EXPECT_EQ(whole.offset_into_first, 0u);
  const uint64_t t0 = up_.plan.terms[0].length;
  const auto part = relay_->Plan(cas::ByteRange{t0 + 5, t0 + 6});
  ASSERT_EQ(part.status, cas::ReconstructionStatus::kOk);
  ASSERT_EQ(part.terms.size(), 1u);
  EXPECT_EQ(part.offset_into_first, 5u);
  ASSERT_EQ(part.xorbs.size(), 1u);
  EXPECT_EQ(part.xorbs[0].hash.hex(), up_.plan.terms[1].xorb);
  ASSERT_EQ(part.xorbs[0].spans.size(), 1u);
  EXPECT_EQ(part.xorbs[0].spans[0].first_byte, up_.plan.fetches[1].first);
  EXPECT_EQ(part.xorbs[0].spans[0].end_byte, up_.plan.fetches[1].last + 1);
  // Past the end: 416; an end past it is clamped.
  EXPECT_EQ(relay_->Plan(cas::ByteRange{relay_->size(), relay_->size() + 9}).status,
            cas::ReconstructionStatus::kRangeNotSatisfiable);
  EXPECT_EQ(relay_->Plan(cas::ByteRange{0, UINT64_MAX - 1}).terms.size(), up_.plan.terms.size());
}

// hf_xet asks for a file in parts; a part's answer fetches the bytes of the chunks it needs, as upstream's
// own answer for it does, not the whole ranges the file's answer gives (which sent a xorb straddling two
// parts twice: issue 46).
TEST_F(RelayTest, AnAnswerForAPartFetchesOnlyTheChunksItNeeds) {
  int asked = 0;
  auto relay = ReceivedWith("narrow", [&](uint64_t first, uint64_t last) {
    ++asked;
    return Result<xet::ParsedReconstruction>(PartAnswer(up_, first, last));
  });
  ASSERT_NE(relay, nullptr);
  const cas::ByteRange part = Part();
  const auto plan = relay->Plan(part);
  ASSERT_EQ(plan.status, cas::ReconstructionStatus::kOk);
  ASSERT_EQ(plan.terms.size(), 1u);
  ASSERT_EQ(plan.xorbs.size(), 1u);
  ASSERT_EQ(plan.xorbs[0].spans.size(), 1u);
  const auto want = PartAnswer(up_, part.start, part.end);
  const auto& span = plan.xorbs[0].spans[0];
  EXPECT_EQ(span.first_byte, want.fetches[0].first);
  EXPECT_EQ(span.end_byte, want.fetches[0].last + 1);
  EXPECT_LT(span.end_byte - span.first_byte, (up_.plan.fetches[1].last - up_.plan.fetches[1].first + 1) / 4);
  EXPECT_EQ(plan.offset_into_first, want.offset_into_first);
  EXPECT_EQ(plan.terms[0].bytes, want.terms[0].length);
  // Served, and the bytes upstream's xorb holds there.
  const auto xorb = plan.xorbs[0].hash;
  auto range = relay->Open(xorb, span.first_byte, span.end_byte - 1u);
  ASSERT_NE(range, nullptr);
  std::vector<uint8_t> out(range->length());
  ASSERT_TRUE(ReadRange(*range, out).ok());
  const auto& body = up_.xorbs.at(xorb.hex())->body;
  EXPECT_TRUE(std::equal(out.begin(), out.end(), body.begin() + span.first_byte));
  // Clients asking the same part are answered from the first answer; the whole file's answer is unchanged.
  EXPECT_EQ(relay->Plan(part).xorbs[0].spans[0].end_byte, span.end_byte);
  EXPECT_EQ(asked, 1);
  EXPECT_EQ(relay->Plan(std::nullopt).xorbs[0].spans[0].end_byte, up_.plan.fetches[0].last + 1);
}

// A part's answer whose ranges or terms are not what the bytes hold is never served: the range fails once its
// bytes arrived and show it (the reader asks again), and the relay answers with whole ranges from then on.
TEST_F(RelayTest, APartAnswerTheBytesBelieIsNeverServed) {
  for (const int lie : {0, 1}) {
    SCOPED_TRACE(lie);
    auto relay = ReceivedWith("lie-" + std::to_string(lie), [&](uint64_t first, uint64_t last) {
      auto a = PartAnswer(up_, first, last);
      if (lie == 0) a.fetches[0].first += 8;  // inside a chunk
      if (lie == 1) a.terms[0].length -= 1;   // one byte short
      return Result<xet::ParsedReconstruction>(a);
    });
    ASSERT_NE(relay, nullptr);
    const cas::ByteRange part = Part();
    const auto plan = relay->Plan(part);
    ASSERT_EQ(plan.xorbs.size(), 1u);
    const auto& span = plan.xorbs[0].spans[0];
    auto range = relay->Open(plan.xorbs[0].hash, span.first_byte, span.end_byte - 1u);
    ASSERT_NE(range, nullptr);
    std::vector<uint8_t> out(range->length());
    const auto st = ReadRange(*range, out);
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.error().code, ErrorCode::kUnavailable);
    const auto again = relay->Plan(part);
    EXPECT_EQ(again.xorbs[0].spans[0].first_byte, up_.plan.fetches[1].first);
    EXPECT_EQ(again.xorbs[0].spans[0].end_byte, up_.plan.fetches[1].last + 1);
  }
}

// A range's index is the same however its bytes are cut into blocks (a record, or its header, split between
// two), and a record that runs past the range or does not decode breaks it there.
TEST_F(RelayTest, ARangesIndexDoesNotDependOnHowItsBytesArrive) {
  const auto& f = up_.plan.fetches[0];
  const auto& x = *up_.xorbs.at(f.xorb);
  const auto range = std::span(x.body).subspan(f.first, f.last - f.first + 1);
  const auto index = [&](size_t cut, size_t tail) {
    xet::ChunkDecoder decoder;
    Relay::RangeIndexer indexer(f.first, range.size(), decoder);
    std::vector<Relay::Indexed> all;
    for (size_t at = 0; at < range.size();) {
      const size_t n = std::min(at < cut ? cut - at : tail, range.size() - at);
      const auto found = indexer.Feed(range.subspan(at, n));
      all.insert(all.end(), found.begin(), found.end());
      at += n;
    }
    EXPECT_FALSE(indexer.broken);
    EXPECT_TRUE(indexer.carry.empty());
    EXPECT_EQ(indexer.next, range.size());
    return all;
  };
  const auto whole = index(range.size(), 1);
  ASSERT_EQ(whole.size(), f.ce - f.cs);
  for (size_t k = 0; k < whole.size(); ++k) {
    EXPECT_EQ(whole[k].hash, x.layout.chunks[f.cs + k].hash);
    EXPECT_EQ(whole[k].start + whole[k].length, x.layout.chunks[f.cs + k].end_offset);
  }
  const size_t second = whole[1].start - f.first;  // where the second record starts
  for (size_t cut = second - 9; cut <= second + 9; ++cut) {
    const auto split = index(cut, 4096);
    ASSERT_EQ(split.size(), whole.size()) << cut;
    for (size_t k = 0; k < whole.size(); ++k) EXPECT_EQ(split[k].hash, whole[k].hash) << cut << " " << k;
  }
  // A range that ends inside a record: that record is never indexed.
  xet::ChunkDecoder decoder;
  Relay::RangeIndexer short_range(f.first, second + 100, decoder);
  EXPECT_EQ(short_range.Feed(range.first(second + 100)).size(), 1u);
  EXPECT_TRUE(short_range.broken);
  // A record altered on the way: it fails to decode (the index breaks there) or its hash is not the chunk's.
  std::vector<uint8_t> bad(range.begin(), range.end());
  bad[second + xet::kChunkHeaderSize + 1] ^= 0xff;
  Relay::RangeIndexer altered(f.first, bad.size(), decoder);
  const auto found = altered.Feed(bad);
  ASSERT_GE(found.size(), 1u);
  EXPECT_EQ(found[0].hash, whole[0].hash);
  EXPECT_TRUE(altered.broken ? found.size() == 1 : found[1].hash != whole[1].hash);
}

// A plain download of the file while it is relayed reads the file's own bytes decoded from the ranges, from
// any offset, as they arrive; the last byte only once the file passed its check, and nothing more once it
// failed.
TEST_F(RelayTest, APlainReaderReadsTheFileDecodedFromTheRangesAsTheyArrive) {
  Let(0);
  std::thread receiver([&] { EXPECT_TRUE(relay_->Receive(Fetcher(), [] { return false; }).ok()); });
  std::vector<uint8_t> first(1000);
  std::atomic<bool> read{false};
  std::thread early([&] {
    auto n = relay_->ReadDecoded(0, first);
    EXPECT_TRUE(n.ok() && *n == first.size());
    read = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(read) << "nothing arrived yet";
  Let(-1);
  early.join();
  EXPECT_TRUE(std::equal(first.begin(), first.end(), up_.file.begin()));
  // Across every term's boundary, in pieces that start inside chunks: the file exactly, but its last byte.
  const uint64_t size = up_.file.size();
  std::vector<uint8_t> got;
  std::vector<uint8_t> piece(77'777);
  while (got.size() < size - 1) {
    auto n = relay_->ReadDecoded(got.size(), piece);
    ASSERT_TRUE(n.ok()) << n.error().message;
    ASSERT_GT(*n, 0u);
    got.insert(got.end(), piece.begin(), piece.begin() + static_cast<ptrdiff_t>(*n));
  }
  receiver.join();
  ASSERT_EQ(got.size(), size - 1);
  EXPECT_TRUE(std::equal(got.begin(), got.end(), up_.file.begin()));
  std::vector<uint8_t> last(10);
  std::atomic<bool> done{false};
  std::thread waiting([&] {
    auto n = relay_->ReadDecoded(size - 1, last);
    EXPECT_TRUE(n.ok() && *n == 1 && last[0] == up_.file.back());
    done = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(done) << "the last byte waits for the file's check";
  relay_->FileChecked(true);
  waiting.join();
  auto end = relay_->ReadDecoded(size, last);
  ASSERT_TRUE(end.ok());
  EXPECT_EQ(*end, 0u);
  const uint64_t t1 = up_.plan.terms[0].length;  // the second term's first byte, from the middle of it
  std::vector<uint8_t> across(3000);
  ASSERT_TRUE(relay_->ReadDecoded(t1 - 1500, across).ok());
  EXPECT_TRUE(std::equal(across.begin(), across.end(), up_.file.begin() + static_cast<ptrdiff_t>(t1 - 1500)));
}

TEST_F(RelayTest, APlainReaderOfAFileThatFailsItsCheckGetsNoMore) {
  Let(-1);
  ASSERT_TRUE(relay_->Receive(Fetcher(), [] { return false; }).ok());
  std::vector<uint8_t> out(100);
  ASSERT_TRUE(relay_->ReadDecoded(0, out).ok());
  relay_->FileChecked(false);
  auto n = relay_->ReadDecoded(100, out);
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.error().code, ErrorCode::kUnavailable);
}

// Ranges that start a xorb go straight into puts of the store (a local disk's), not the spool: they are
// served and produced from there, cut ones resumed in order, and each put, once its range has arrived, is
// handed over once, holding the range, to be committed as the xorb itself.
TEST_F(RelayTest, RangesThatStartAXorbAreWrittenIntoAPutOfTheStore) {
  auto store = store::LocalDiskStore::Open(dir_ / "store");
  ASSERT_TRUE(store.ok()) << store.error().message;
  int puts = 0;
  auto made = Relay::Create(dir_ / "filled", up_.upload.file_hashes[0], up_.plan, {"scope-a"}, nullptr,
                            [&](const xet::XorbHash& xorb) -> std::unique_ptr<cas::FilledXorb> {
                              ++puts;
                              auto w = (*store)->BeginPut(store::BlobKind::kXorb, xorb);
                              return w.ok() ? std::make_unique<cas::FilledXorb>(std::move(*w)) : nullptr;
                            });
  ASSERT_TRUE(made.ok());
  auto relay = *made;
  size_t starting = 0;
  for (const auto& f : up_.plan.fetches) starting += f.first == 0 && f.cs == 0 ? 1 : 0;
  ASSERT_GE(starting, 2u);
  EXPECT_EQ(puts, 0);  // each opened as its range begins
  const auto xorb0 = *xet::Hash::FromHex(up_.plan.fetches[0].xorb);
  EXPECT_EQ(relay->TakeFilled(xorb0), nullptr);  // not arrived yet
  cut_after_ = 300'000;                          // the first range is cut once, and resumed
  ASSERT_TRUE(relay->Receive(Fetcher(), [] { return false; }).ok());
  EXPECT_EQ(puts, static_cast<int>(starting));
  std::vector<uint8_t> produced;
  ASSERT_TRUE(relay
                  ->Produce([&](const Relay::Chunk& c) {
                    produced.insert(produced.end(), c.decoded.begin(), c.decoded.end());
                    return true;
                  })
                  .ok());
  EXPECT_EQ(produced, up_.file);
  for (const auto& f : up_.plan.fetches) {
    const auto& body = up_.xorbs.at(f.xorb)->body;
    auto range = relay->Open(*xet::Hash::FromHex(f.xorb), f.first, f.last);
    ASSERT_NE(range, nullptr);
    std::vector<uint8_t> out(range->length());
    ASSERT_TRUE(ReadRange(*range, out).ok());
    EXPECT_TRUE(std::equal(out.begin(), out.end(), body.begin() + static_cast<ptrdiff_t>(f.first)));
    if (f.first != 0 || f.cs != 0) continue;
    auto put = relay->TakeFilled(*xet::Hash::FromHex(f.xorb));
    ASSERT_NE(put, nullptr) << f.xorb;
    EXPECT_EQ(put->size(), f.last + 1);
    EXPECT_EQ(relay->TakeFilled(*xet::Hash::FromHex(f.xorb)), nullptr);  // handed over once
    std::vector<uint8_t> put_bytes(put->size());
    ASSERT_EQ(PreadFull(put->fd(), 0, put_bytes), 0);
    EXPECT_TRUE(std::equal(put_bytes.begin(), put_bytes.end(), body.begin()));
    put.reset();  // dropped (or committed): still served from its file
    ASSERT_TRUE(ReadRange(*range, out).ok());
    EXPECT_TRUE(std::equal(out.begin(), out.end(), body.begin()));
  }
}

TEST_F(RelayTest, AFailedUpstreamFailsEveryReader) {
  fail_ = true;
  EXPECT_FALSE(relay_->Receive(Fetcher(), [] { return false; }).ok());
  const auto& f = up_.plan.fetches[0];
  auto range = relay_->Open(*xet::Hash::FromHex(f.xorb), f.first, f.last);
  ASSERT_NE(range, nullptr);
  std::vector<uint8_t> out(10);
  EXPECT_EQ(ReadRange(*range, out).error().code, ErrorCode::kUnavailable);
  EXPECT_FALSE(relay_->Produce([](const Relay::Chunk&) { return true; }).ok());
}

TEST_F(RelayTest, ATermThatLiesAboutItsLengthIsRefused) {
  auto plan = up_.plan;
  plan.terms[0].length += 1;
  auto lying = Relay::Create(dir_, up_.upload.file_hashes[0], plan, {"scope-a"});
  ASSERT_TRUE(lying.ok());
  EXPECT_TRUE((*lying)->Receive(Fetcher(), [] { return false; }).ok());
  const auto st = (*lying)->Produce([](const Relay::Chunk&) { return true; });
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code, ErrorCode::kMalformed);
  std::vector<uint8_t> out(up_.file.size());  // a plain reader reaching past the first term is refused too
  const auto read = (*lying)->ReadDecoded(0, out);
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.error().code, ErrorCode::kMalformed);
  plan = up_.plan;
  plan.offset_into_first = 3;
  EXPECT_FALSE(Relay::Create(dir_, up_.upload.file_hashes[0], plan, {}).ok());
}

}  // namespace
}  // namespace cairn::mirror
