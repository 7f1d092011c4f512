// Loopback ports for the servers that tests and benchmarks start themselves (PostgreSQL, SeaweedFS, cairn).
#pragma once

#include <cstdint>
#include <optional>

namespace cairn {

// A loopback port nobody listens on now, chosen by the kernel (the caller's server binds it a moment later,
// so a caller retries a lost race).
std::optional<uint16_t> FreeLoopbackPort();

// Whether `port` on 127.0.0.1 can be bound now.
bool LoopbackPortFree(uint16_t port);

}  // namespace cairn
