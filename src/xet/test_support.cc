#include "xet/test_support.h"

#include <boost/json/parse.hpp>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>

namespace cairn::xet::testing {

std::vector<uint8_t> SplitMix64Bytes(uint64_t seed, size_t n) {
  std::vector<uint8_t> out(n + 8);
  uint64_t state = seed;
  for (size_t i = 0; i < n; i += 8) {
    state += 0x9E3779B97F4A7C15ULL;
    uint64_t z = state;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    z ^= z >> 31;
    for (int b = 0; b < 8; ++b) out[i + static_cast<size_t>(b)] = static_cast<uint8_t>(z >> (8 * b));
  }
  out.resize(n);
  return out;
}

std::vector<uint8_t> TextLikeBytes(uint64_t seed, size_t n) {
  static const char* kWords[] = {"the",    "model",  "weights", "tensor", "layer", "attention", "head",
                                 "config", "return", "value",   "int",    "for",   "struct",    "const",
                                 "data",   "hidden", "size",    "vocab",  "token", "embedding", "norm",
                                 "{",      "}",      "(",       ")",      ";",     "\"name\":", "0.125",
                                 "1024",   "true",   "false",   "null",   "=",     "->",        "if"};
  constexpr size_t kCount = sizeof kWords / sizeof kWords[0];
  std::vector<uint8_t> out;
  out.reserve(n + 16);
  uint64_t state = seed;
  while (out.size() < n) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    if ((state >> 59) < 3) {  // numbers now and then, as in configs and logs
      for (uint64_t v = (state >> 8) & 0xFFFFF; v != 0; v /= 10)
        out.push_back(static_cast<uint8_t>('0' + v % 10));
    } else {
      const char* w = kWords[(state >> 33) % kCount];
      while (*w) out.push_back(static_cast<uint8_t>(*w++));
    }
    const uint64_t sep = (state >> 20) % 16;
    out.push_back(sep == 0 ? '\n' : (sep == 1 ? ',' : ' '));
  }
  out.resize(n);
  return out;
}

bool FlipByte(const std::string& path, uint64_t offset, uint8_t mask) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(offset));
  char c = 0;
  if (!f.read(&c, 1)) return false;
  c = static_cast<char>(c ^ static_cast<char>(mask));
  f.seekp(static_cast<std::streamoff>(offset));
  return static_cast<bool>(f.write(&c, 1));
}

std::string ReadFileOrDie(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::cerr << "cannot read " << path << "\n";
    std::abort();
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const boost::json::value& Vectors() {
  static const boost::json::value v = boost::json::parse(ReadFileOrDie(CAIRN_VECTORS_FILE));
  return v;
}

}  // namespace cairn::xet::testing
