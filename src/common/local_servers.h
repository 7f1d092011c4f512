// What tests and benchmarks need to run servers of their own (PostgreSQL, SeaweedFS, cairn): free loopback
// ports and fresh temporary directories.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <system_error>

namespace cairn {

// A loopback port nobody listens on now, chosen by the kernel (the caller's server binds it a moment later,
// so a caller retries a lost race).
std::optional<uint16_t> FreeLoopbackPort();

// Whether `port` on 127.0.0.1 can be bound now.
bool LoopbackPortFree(uint16_t port);

// A new empty directory <temp>/<prefix>-<name>-<pid>-<n>: `name` (a test's, say) with every character but
// [A-Za-z0-9-] made '_', cut at 60; n counts the calls of this process. Sets `ec` when it cannot be made.
std::filesystem::path FreshTempDir(const std::string& prefix, const std::string& name, std::error_code& ec);

}  // namespace cairn
