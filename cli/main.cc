// spmdsim: run and study SPMD partitioning code on virtual device meshes. See README.md for the commands.
#include <cstdio>
#include <exception>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "cli/cli_util.h"
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
  spmdsim::cli::AddAnalyzeCommand(app);
  spmdsim::cli::AddRunCommand(app);
  if (std::optional<std::string> bad = spmdsim::cli::NonUtf8Argument(argc, argv)) {
    std::fprintf(stderr, "spmdsim: %s\n", bad->c_str());
    return 2;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version print and succeed; every other parse error is a usage error: one line, exit 2.
    if (e.get_exit_code() == 0) return app.exit(e);
    const std::string command = app.get_subcommands().empty() ? "" : app.get_subcommands()[0]->get_name();
    if (command.empty() && argc > 1 && argv[1][0] != '-') {
      std::string names;
      for (const CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
        if (!names.empty()) names += ", ";
        names += sub->get_name();
      }
      std::fprintf(stderr, "spmdsim: unknown command '%s'; commands are %s (see spmdsim --help)\n", argv[1],
                   names.c_str());
      return 2;
    }
    std::fprintf(stderr, "spmdsim%s%s: %s (see spmdsim %s--help)\n", command.empty() ? "" : " ", command.c_str(),
                 e.what(), command.empty() ? "" : (command + " ").c_str());
    return 2;
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
