// Tests' means to ask git itself (Debian's git, which the bootstrap installs): a bare repository in a
// temporary folder, packs fed to `git index-pack`, commands whose output is compared.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

namespace cairn::git::testing {

// `in` as a gzip stream, as git's HTTP client sends a large request.
inline std::string Gzip(std::string_view in) {
  z_stream z{};
  deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
  std::string out(deflateBound(&z, in.size()) + 32, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  deflate(&z, Z_FINISH);
  out.resize(out.size() - z.avail_out);
  deflateEnd(&z);
  return out;
}

class TempGitDir {
 public:
  explicit TempGitDir(const std::string& name, bool bare = true)
      : dir_(std::filesystem::temp_directory_path() /
             ("cairn-git-" + name + "-" + std::to_string(::getpid()) + "-" +
              ::testing::UnitTest::GetInstance()->current_test_info()->name())) {
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    Run(bare ? "init -q --bare ." : "init -q .");
  }
  ~TempGitDir() { std::filesystem::remove_all(dir_); }
  TempGitDir(const TempGitDir&) = delete;
  TempGitDir& operator=(const TempGitDir&) = delete;

  const std::filesystem::path& path() const { return dir_; }

  // `git ARGS` in the repository: its standard output (empty when it failed).
  std::string Run(const std::string& args) const {
    const std::string cmd = "git -C '" + dir_.string() + "' " + args + " 2>/dev/null";
    std::string out;
    FILE* p = ::popen(cmd.c_str(), "r");
    if (p == nullptr) return out;
    std::array<char, 4096> buf{};
    size_t n = 0;
    while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
    return ::pclose(p) == 0 ? out : std::string();
  }

  // Writes `content` to `path` in the work tree and commits it (a repository made with bare = false).
  bool CommitFile(const std::string& path, const std::string& content, const std::string& message) const {
    std::ofstream(dir_ / path, std::ios::binary)
        .write(content.data(), static_cast<std::streamsize>(content.size()));
    return Succeeds("add '" + path + "'") &&
           Succeeds("-c user.name=t -c user.email=t@example.com commit -q -m '" + message + "'");
  }

  // Whether `git ARGS` exits 0.
  bool Succeeds(const std::string& args) const {
    const std::string cmd = "git -C '" + dir_.string() + "' " + args + " >/dev/null 2>&1";
    return std::system(cmd.c_str()) == 0;  // NOLINT(concurrency-mt-unsafe,cert-env33-c): a test's own tool
  }

  // Whether `git index-pack` accepts the pack (and stores it in the repository).
  bool IndexPack(const std::string& pack) const {
    const auto file = dir_ / "incoming.pack";
    std::ofstream(file, std::ios::binary).write(pack.data(), static_cast<std::streamsize>(pack.size()));
    return Succeeds("index-pack --stdin < '" + file.string() + "'");
  }

 private:
  std::filesystem::path dir_;
};

}  // namespace cairn::git::testing
