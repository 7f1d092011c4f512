#include "mirror/spool.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "common/posix_io.h"

namespace cairn::mirror {

Result<std::shared_ptr<Spool>> Spool::Create(const std::filesystem::path& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  std::string path = (dir / "spool-XXXXXX").string();
  const int fd = ::mkstemp(path.data());
  if (fd < 0) return IoError("a spool file in " + dir.string() + ": " + ErrnoText(errno));
  ::unlink(path.c_str());  // nameless: it goes with its last descriptor
  return std::make_shared<Spool>(UniqueFd(fd));
}

Status Spool::Write(uint64_t offset, std::span<const uint8_t> bytes) {
  if (const int err = PwriteFull(fd_.get(), offset, bytes); err != 0)
    return IoError(std::string("writing the spool: ") + ErrnoText(err));
  {
    std::lock_guard lock(mu_);
    received_ = std::max(received_, offset + bytes.size());
  }
  cv_.notify_all();
  return Ok{};
}

Result<UniqueFd> Spool::Duplicate() const {
  UniqueFd fd = fd_.Duplicate();
  if (!fd.valid()) return IoError(std::string("a descriptor of the spool: ") + ErrnoText(errno));
  return fd;
}

void Spool::ReadThrough(Source source) {
  {
    std::lock_guard lock(mu_);
    source_ = std::move(source);
  }
  cv_.notify_all();
}

void Spool::Finish(bool ok) {
  {
    std::lock_guard lock(mu_);
    if (finished_) return;  // the first word stands
    finished_ = true;
    ok_ = ok;
  }
  cv_.notify_all();
}

Status Spool::ReadWritten(uint64_t offset, std::span<uint8_t> out) const {
  {
    std::lock_guard lock(mu_);
    if (offset > received_ || out.size() > received_ - offset) return Malformed("a read past what came");
  }
  if (const int err = PreadFull(fd_.get(), offset, out); err != 0)
    return IoError("reading the spool: " + OpenErrorText(err));
  return Ok{};
}

Result<size_t> Spool::Read(uint64_t offset, std::span<uint8_t> out, std::chrono::seconds wait) const {
  uint64_t available = 0;
  Source source;
  {
    // The last byte that came is held back until the fetch has checked the whole file against its SHA-256:
    // a reader of bytes that turn out wrong is cut short, never handed a complete file.
    std::unique_lock lock(mu_);
    if (!cv_.wait_for(lock, wait, [&] { return received_ > offset + 1 || finished_ || source_; })) {
      return Unavailable("the file's bytes did not come from upstream in time");
    }
    if (finished_ && !ok_) return Unavailable("the transfer from upstream failed");
    source = source_;
    if (!source) {
      const uint64_t limit = finished_ ? received_ : received_ - 1;
      if (limit <= offset) return size_t{0};  // finished, and nothing past `offset`
      available = limit - offset;
    }
  }
  if (source) return source(offset, out);
  const size_t want = static_cast<size_t>(std::min<uint64_t>(available, out.size()));
  size_t done = 0;
  while (done < want) {
    const ssize_t n = ::pread(fd_.get(), out.data() + done, want - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return IoError(std::string("reading the spool: ") + ErrnoText(n < 0 ? errno : EIO));
    done += static_cast<size_t>(n);
  }
  return done;
}

}  // namespace cairn::mirror
