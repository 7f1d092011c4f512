// The bytes of a large file while the mirror fetches it, for readers that cannot wait for the whole file (a
// plain download of a cold file: huggingface_hub without hf_xet gives up after 10 seconds without a byte). A
// file of the spool directory, unlinked at once: it goes when the last holder lets go.
//
// Thread-safety: one writer (the fetch), any number of readers, concurrently. Failures: kIo (the file),
// kUnavailable to readers once the fetch failed or when the bytes asked for do not come in time.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <span>

#include "common/error.h"
#include "common/unique_fd.h"

namespace cairn::mirror {

class Spool {
 public:
  static Result<std::shared_ptr<Spool>> Create(const std::filesystem::path& dir);
  explicit Spool(UniqueFd fd) : fd_(std::move(fd)) {}

  // The writer: `bytes` at `offset` (the bytes before it written already); Finish when the fetch ended,
  // `ok` when every byte was written (the first call counts).
  Status Write(uint64_t offset, std::span<const uint8_t> bytes);
  void Finish(bool ok);
  // The writer's own read of bytes it wrote (all of [offset, offset + out.size()) written): no wait, nothing
  // held back, for checks of what arrived before any reader is given it.
  Status ReadWritten(uint64_t offset, std::span<uint8_t> out) const;
  // A descriptor of the file of its own, for bytes already written (ReadWritten's rule): sent from with
  // sendfile(2). kIo when the process has no descriptor left.
  Result<UniqueFd> Duplicate() const;

  // A reader: waits until bytes from `offset` on have arrived (at most `wait`), then copies what is there, up
  // to out.size(); 0 once the fetch ended cleanly with nothing past `offset`. The file's last byte comes only
  // once the whole file was checked (Finish(true)): a reader is never handed all of a file that fails.
  Result<size_t> Read(uint64_t offset, std::span<uint8_t> out, std::chrono::seconds wait) const;

  // Where readers read instead of the file, from now on, while the fetch writes nothing here: the decoded
  // bytes of the relay it stores the file from (Relay::ReadDecoded), so the file is not written twice. It
  // answers as Read does and bounds its own waits. Null: the file again (a relay given up; its readers err
  // and ask again). Finish(false) still fails every read.
  using Source = std::function<Result<size_t>(uint64_t offset, std::span<uint8_t> out)>;
  void ReadThrough(Source source);

 private:
  UniqueFd fd_;
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  uint64_t received_ = 0;  // guarded by mu_
  bool finished_ = false;  // guarded by mu_
  bool ok_ = false;        // guarded by mu_
  Source source_;          // guarded by mu_
};

}  // namespace cairn::mirror
