// commprof: the command-line front end (docs/cli.md).
#include <cstdio>
#include <exception>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cli/analysis_world.h"
#include "cli/commands.h"
#include "cli/help_format.h"
#include "core/config.h"
#include "core/h5/damage_guard.h"

namespace {

int Main(int argc, char** argv) {
  CLI::App app{
      "commprof: a distributed multi-GPU communication profiler.\n"
      "Record a job with `commprof run`, inspect the file with `commprof info`; `commprof help COMMAND` "
      "explains a command.",
      "commprof"};
  // Before the commands are added: each takes its parent's formatter.
  app.formatter(std::make_shared<commprof::cli::HelpFormatter>(
      std::map<std::string, std::string>{{"run", "[OPTIONS] -- LAUNCHER ARGS..."}}));
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
  // `commprof help [COMMAND]`: the same text as --help.
  std::vector<std::string> topic;
  CLI::App* help = app.add_subcommand("help", "Print the help of commprof, or of COMMAND: commprof help [COMMAND...]");
  help->add_option("command", topic, "a command (run, info, report, ...), and its own command (import kineto)");
  runners[help] = [&app, &topic] {
    const CLI::App* at = &app;
    std::string path;
    for (const std::string& word : topic) {
      const CLI::App* next = nullptr;
      for (const CLI::App* sub : at->get_subcommands({})) {
        if (sub->get_name() == word && word != "help") {
          next = sub;
        }
      }
      path += (path.empty() ? "" : " ") + word;
      if (next == nullptr) {
        std::fprintf(stderr, "commprof help: '%s' is not a commprof command (%s)\n", path.c_str(),
                     commprof::cli::CommandList(*at).c_str());
        return 2;
      }
      at = next;
    }
    // (app.help() would give the help of the parsed command: `help`.)
    std::fputs(at->get_formatter()->make_help(at, "commprof", CLI::AppFormatMode::Normal).c_str(), stdout);
    return 0;
  };

  if (argc == 2 && std::string(argv[1]) == "--help-env") {
    std::fputs(commprof::EnvironmentHelp().c_str(), stdout);
    return 0;
  }

  // An unknown command is named, not taken for a missing one.
  if (argc > 1 && argv[1][0] != '-') {
    bool known = false;
    for (const CLI::App* sub : app.get_subcommands({})) {
      known = known || sub->get_name() == argv[1];
    }
    if (!known) {
      std::fprintf(stderr, "commprof: '%s' is not a commprof command (%s; `commprof help` explains them)\n", argv[1],
                   commprof::cli::CommandList(app).c_str());
      return 2;
    }
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
    // `mpirun -np K commprof report|export|stats` with a bad command line: told once, by the
    // launcher's rank 0, which exits 2 while the others exit 0 without a word (as a refused launch:
    // a launcher ending the job at the first failure cannot cut the message off). Other commands
    // may run inside a rank's environment (the relays): they always speak.
    const bool analysis = parse_argc > 1 && (std::string(argv[1]) == "report" || std::string(argv[1]) == "export" ||
                                             std::string(argv[1]) == "stats");
    if (analysis && commprof::cli::AnalysisWorld::QuietBesideItsSpeaker()) {
      return 0;
    }
    if (e.get_exit_code() == 0) {  // --help, --version
      return app.exit(e);
    }
    // Usage errors are exit code 2, as documented, and name the command they are about.
    if (parse_argc > 1 && argv[1][0] != '-') {
      std::fprintf(stderr, "commprof %s: %s (see commprof %s --help)\n", argv[1], e.what(), argv[1]);
      return 2;
    }
    if (parse_argc > 1 && std::string(argv[1]) == "--help-env") {
      std::fprintf(stderr, "commprof: --help-env takes nothing else (commprof --help-env)\n");
    } else if (parse_argc > 1) {
      std::fprintf(stderr, "commprof: %s is not an option of commprof itself (--help, --help-env, --version)\n",
                   argv[1]);
    } else {
      std::fprintf(stderr, "commprof: a command is required (%s; `commprof help` explains them)\n",
                   commprof::cli::CommandList(app).c_str());
    }
    return 2;
  }
  for (auto& [sub, run] : runners) {
    if (sub->parsed()) {
      // The collecting commands keep memory bounded by --queue-mb; they turn this on for their
      // final analysis only (StoreAnalysis).
      const std::string name = sub->get_name();
      // Started by an MPI launcher (or srun) as one of K: a command that does not divide its work
      // runs in the first process alone (docs/scale.md#distributed-analysis). Not run, aggregate
      // or relay: a relay is started by a rank and has that rank's launcher variables.
      if ((name == "info" || name == "check" || name == "diff" || name == "hta" || name == "merge" ||
           name == "import") &&
          commprof::cli::LaterProcessOfALaunch()) {
        return 0;
      }
      if (name != "run" && name != "aggregate" && name != "relay") {
        commprof::cli::KeepFreedMemoryForReuse();
      }
      return run();
    }
  }
  return 2;
}

}  // namespace

// Nothing escapes main: an exception a command did not handle becomes exit code 1 with its message.
int main(int argc, char** argv) {
  commprof::h5::EnableDamageGuards();     // a damaged input file is told as such (core/h5/damage_guard.h)
  commprof::cli::IgnoreFileSizeSignal();  // past `ulimit -f`: an error to report, not a silent death
  try {
    return Main(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "commprof: %s\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "commprof: unexpected error\n");
  }
  return 1;
}
