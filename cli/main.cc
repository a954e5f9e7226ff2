// commprof: the command-line front end (docs/cli.md).
#include <cstdio>
#include <exception>
#include <map>
#include <string>

#include "cli/commands.h"
#include "core/config.h"

namespace {

int Main(int argc, char** argv) {
  CLI::App app{
      "commprof: a distributed multi-GPU communication profiler.\n"
      "Record a job with `commprof run`, inspect the file with `commprof info`."};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("commprof ") + COMMPROF_VERSION);
  // Handled before parsing (a subcommand is required otherwise); declared here for --help.
  app.add_flag("--help-env")
      ->description("print every environment variable commprof reads, with its default and meaning, and exit");

  std::map<CLI::App*, commprof::cli::Runner> runners;
  auto add = [&](commprof::cli::Runner (*adder)(CLI::App&)) {
    size_t before = app.get_subcommands({}).size();
    commprof::cli::Runner r = adder(app);
    runners[app.get_subcommands({})[before]] = std::move(r);
  };
  add(&commprof::cli::AddRunCommand);
  add(&commprof::cli::AddInfoCommand);
  add(&commprof::cli::AddMergeCommand);
  add(&commprof::cli::AddReportCommand);
  add(&commprof::cli::AddCheckCommand);
  add(&commprof::cli::AddExportCommand);
  add(&commprof::cli::AddImportCommand);
  add(&commprof::cli::AddAggregateCommand);
  add(&commprof::cli::AddRelayCommand);
  add(&commprof::cli::AddHtaCommand);
  add(&commprof::cli::AddStatsCommand);
  add(&commprof::cli::AddDiffCommand);

  if (argc == 2 && std::string(argv[1]) == "--help-env") {
    std::fputs(commprof::EnvironmentHelp().c_str(), stdout);
    return 0;
  }

  int parse_argc = argc;
  if (argc > 1 && std::string(argv[1]) == "run") {
    for (int i = 2; i < argc; ++i) {
      if (std::string(argv[i]) == "--") {
        commprof::cli::SetRunArgsAfterDashDash(std::vector<std::string>(argv + i + 1, argv + argc));
        parse_argc = i;
        break;
      }
    }
  }
  try {
    app.parse(parse_argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;  // usage errors are exit code 2, as documented
  }
  for (auto& [sub, run] : runners) {
    if (sub->parsed()) {
      return run();
    }
  }
  return 2;
}

}  // namespace

// Nothing escapes main: an exception a command did not handle becomes exit code 1 with its message.
int main(int argc, char** argv) {
  try {
    return Main(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "commprof: %s\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "commprof: unexpected error\n");
  }
  return 1;
}
