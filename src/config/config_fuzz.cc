// Fuzzes the configuration loader (config::LoadConfig): the TOML document, the CAIRN_* environment and the
// flags, with the same setters behind all three. The input is a TOML document; its comment lines
// "#env NAME=VALUE" and "#flag name=value" (still TOML comments) also become environment variables and
// flags, so that one input exercises every source. Checks: what loads is a configuration the server can
// start from (a listen address that parses, an http(s) public URL, an index and a store named, threads).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/fuzz_check.h"
#include "config/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view doc(reinterpret_cast<const char*>(data), size);
  cairn::config::ConfigSources sources;
  sources.toml = std::string(doc);
  for (std::string_view rest = doc; !rest.empty();) {
    const size_t nl = rest.find('\n');
    const std::string_view line = rest.substr(0, nl);
    rest.remove_prefix(nl == std::string_view::npos ? rest.size() : nl + 1);
    const bool env = line.starts_with("#env ");
    if (!env && !line.starts_with("#flag ")) continue;
    const std::string_view kv = line.substr(env ? 5 : 6);
    const size_t eq = kv.find('=');
    if (eq == std::string_view::npos) continue;
    (env ? sources.env : sources.flags)[std::string(kv.substr(0, eq))] = std::string(kv.substr(eq + 1));
  }
  sources.env.erase("CAIRN_CONFIG");  // a path to read: not the fuzzer's to name

  const auto config = cairn::config::LoadConfig(sources);
  if (!config) {
    FUZZ_CHECK(!config.error().message.empty());
    return 0;
  }
  FUZZ_CHECK(cairn::config::ParseListen(config->listen).ok());
  FUZZ_CHECK(config->public_url.starts_with("http://") || config->public_url.starts_with("https://"));
  FUZZ_CHECK(!config->index.empty() && !config->store.empty() && !config->data_dir.empty());
  FUZZ_CHECK(config->io_threads > 0 && config->worker_threads > 0 && config->request_threads > 0);
  FUZZ_CHECK(config->transfer_url_ttl.count() > 0 && config->shutdown_grace.count() > 0);
  return 0;
}
