// Subcommands of the `cairn` binary. Each registers its options on the CLI11 app and runs when selected.
#pragma once

#include <CLI/CLI.hpp>

namespace cairn::cli {

// `cairn hash`: chunk files as the stock client does and print their chunk, xorb, file and verification
// hashes.
void RegisterHash(CLI::App& app);
// `cairn xorb verify`: validate a xorb object (footer-less upload or stored with a footer).
void RegisterXorb(CLI::App& app);
// `cairn shard verify|dump`: parse a shard and check its files against a directory of xorbs.
void RegisterShard(CLI::App& app);
// `cairn serve`: run the HTTP server (flags, CAIRN_* environment and TOML configuration).
void RegisterServe(CLI::App& app);
// `cairn token`: mint a bearer token with the server's signing key.
void RegisterToken(CLI::App& app);

}  // namespace cairn::cli
