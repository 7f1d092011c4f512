// cairn: a self-hosted storage server for the Xet protocol. One binary, many subcommands.
#include <iostream>

#include "cli/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"cairn: a self-hosted Xet storage server"};
  app.require_subcommand(1);
  app.add_subcommand("version", "Print the version")->callback([] {
    std::cout << "cairn " CAIRN_VERSION "\n";
  });
  cairn::cli::RegisterHash(app);
  cairn::cli::RegisterXorb(app);
  cairn::cli::RegisterShard(app);
  cairn::cli::RegisterServe(app);
  cairn::cli::RegisterToken(app);
  CLI11_PARSE(app, argc, argv);
  return 0;
}
