#include "common/spool_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <utility>

#include "common/posix_io.h"

namespace cairn {

Result<SpoolFile> SpoolFile::Create(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return IoError("cannot create the spool directory " + dir + ": " + ec.message());
  UniqueFd fd(::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600));
  if (!fd.valid() && (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL)) {
    // A file system without O_TMPFILE: a name, gone before anything is written.
    std::string name = dir + "/spool-XXXXXX";
    fd.reset(::mkostemp(name.data(), O_CLOEXEC));
    if (fd.valid()) ::unlink(name.c_str());
  }
  if (!fd.valid()) return IoError("cannot create a spool file in " + dir + ": " + ErrnoText(errno));
  return SpoolFile(std::move(fd));
}

SpoolFile::SpoolFile(SpoolFile&& o) noexcept
    : fd_(std::move(o.fd_)), size_(std::exchange(o.size_, 0)), map_(std::exchange(o.map_, nullptr)) {}

SpoolFile& SpoolFile::operator=(SpoolFile&& o) noexcept {
  if (this != &o) {
    Unmap();
    fd_ = std::move(o.fd_);
    size_ = std::exchange(o.size_, 0);
    map_ = std::exchange(o.map_, nullptr);
  }
  return *this;
}

SpoolFile::~SpoolFile() {
  Unmap();
}

void SpoolFile::Unmap() {
  if (map_ != nullptr) ::munmap(map_, size_);
  map_ = nullptr;
}

Status SpoolFile::Append(std::span<const uint8_t> data) {
  if (map_ != nullptr) return IoError("the spool is mapped already");
  if (const int err = WriteFull(fd_.get(), data); err != 0) return IoError("cannot spool: " + ErrnoText(err));
  size_ += data.size();
  return Ok{};
}

Result<std::string_view> SpoolFile::Map() {
  if (size_ == 0) return std::string_view();
  if (map_ == nullptr) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd_.get(), 0);
    if (p == MAP_FAILED) return IoError("cannot map the spool: " + ErrnoText(errno));
    map_ = p;
  }
  return std::string_view(static_cast<const char*>(map_), size_);
}

}  // namespace cairn
