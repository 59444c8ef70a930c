// spmdsim: run and study SPMD partitioning code on virtual device meshes. See README.md for the commands.
#include <cstdio>
#include <exception>

#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "common/error.h"

int main(int argc, char** argv) {
  CLI::App app{"spmdsim: simulate SPMD machine-learning systems (meshes, shardings, shard_map, collectives)"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "spmdsim 0.1.0");
  spmdsim::cli::AddMeshCommand(app);
  spmdsim::cli::AddShardCommand(app);
  spmdsim::cli::AddRulesCommand(app);
  spmdsim::cli::AddResolveCommand(app);
  spmdsim::cli::AddRunCommand(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version print and succeed; every other parse error is a usage error: exit 2.
    int code = app.exit(e);
    return code == 0 ? 0 : 2;
  } catch (const spmdsim::Error& e) {
    const char* command = app.get_subcommands().empty() ? "" : app.get_subcommands()[0]->get_name().c_str();
    std::fprintf(stderr, "spmdsim %s: %s\n", command, e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "spmdsim: internal error: %s\n", e.what());
    return 3;
  }
  return 0;
}
