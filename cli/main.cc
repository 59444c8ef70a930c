// spmdsim: run and study SPMD partitioning code on virtual device meshes. See README.md for the commands.
#include <exception>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli/cli_util.h"
#include "cli/commands.h"
#include "common/error.h"
#include "common/exit_code.h"
#include "common/user_text.h"
#include "sim/multiprocess.h"

namespace {

using spmdsim::ExitCode;
using spmdsim::ErrorLine;
using spmdsim::ToInt;

}  // namespace

int main(int argc, char** argv) {
  // Under mpirun every rank runs this program; `spmdsim run` then splits the devices over the ranks.
  spmdsim::MpiSession mpi(&argc, &argv);
  ExitCode exit_code = ExitCode::kOk;
  CLI::App app{"spmdsim: simulate SPMD machine-learning systems (meshes, shardings, shard_map, collectives)"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "spmdsim 0.1.0");
  spmdsim::cli::AddMeshCommand(app, exit_code);
  spmdsim::cli::AddShardCommand(app, exit_code);
  spmdsim::cli::AddRulesCommand(app, exit_code);
  spmdsim::cli::AddResolveCommand(app, exit_code);
  spmdsim::cli::AddAnalyzeCommand(app, exit_code);
  spmdsim::cli::AddPlanCommand(app, exit_code);
  spmdsim::cli::AddCalibrateCommand(app, exit_code);
  spmdsim::cli::AddRunCommand(app, exit_code, mpi.world());
  if (std::optional<std::string> bad = spmdsim::cli::NonUtf8Argument(argc, argv)) {
    fmt::print(stderr, "spmdsim: {}\n", *bad);
    return ToInt(ExitCode::kUsage);
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
      fmt::print(stderr, "spmdsim: unknown command '{}'; commands are {} (see spmdsim --help)\n", argv[1], names);
      return ToInt(ExitCode::kUsage);
    }
    fmt::print(stderr, "spmdsim{}{}: {} (see spmdsim {}--help)\n", command.empty() ? "" : " ", command,
               ErrorLine(e.what()), command.empty() ? "" : command + " ");
    return ToInt(ExitCode::kUsage);
  } catch (const spmdsim::Error& e) {
    const std::string command = app.get_subcommands().empty() ? "" : app.get_subcommands()[0]->get_name();
    fmt::print(stderr, "spmdsim {}: {}\n", command, ErrorLine(e.what()));
    return ToInt(spmdsim::ExitCodeFor(e.code()));
  } catch (const std::exception& e) {
    fmt::print(stderr, "spmdsim: internal error: {}\n", ErrorLine(e.what()));
    return ToInt(ExitCode::kInternal);
  }
  return ToInt(exit_code);
}
