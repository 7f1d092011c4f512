// A flat JSON object built a field at a time: the reports commands print with --json (`cairn gc`,
// `cairn compact`). Names are the caller's literals; strings are escaped (control characters dropped).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace cairn {

class JsonReport {
 public:
  JsonReport& Number(std::string_view name, uint64_t v) { return Field(name, std::to_string(v)); }
  JsonReport& Signed(std::string_view name, int64_t v) { return Field(name, std::to_string(v)); }
  JsonReport& Real(std::string_view name, double v) { return Field(name, std::to_string(v)); }
  JsonReport& Bool(std::string_view name, bool v) { return Field(name, v ? "true" : "false"); }
  JsonReport& String(std::string_view name, std::string_view v) {
    std::string quoted = "\"";
    for (char c : v) {
      if (c == '"' || c == '\\') quoted += '\\';
      if (static_cast<unsigned char>(c) >= 0x20) quoted += c;
    }
    return Field(name, quoted + "\"");
  }
  std::string Text() const { return out_ + "}"; }

 private:
  JsonReport& Field(std::string_view name, const std::string& value) {
    if (out_.size() > 1) out_ += ",";
    out_ += "\"";
    out_ += name;
    out_ += "\":" + value;
    return *this;
  }
  std::string out_ = "{";
};

}  // namespace cairn
