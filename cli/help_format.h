// How `commprof --help`, `commprof COMMAND --help` and `commprof help [COMMAND]` print (docs/cli.md):
// CLI11's layout without its parser notation. An option's value reads TYPE (LOW-HIGH)=DEFAULT
// instead of TYPE:TYPE in [LOW - HIGH]=DEFAULT; a flag with an optional value reads --name[=VALUE]
// instead of --name{16}; a negating flag reads --no-x instead of --no-x{false}; a command whose
// arguments CLI11 does not parse (run's job after "--") shows its own usage line.
#pragma once

#include <CLI/CLI.hpp>
#include <map>
#include <memory>
#include <string>

namespace commprof::cli {

class HelpFormatter : public CLI::Formatter {
 public:
  // `usage`: subcommand name -> what follows "Usage: commprof NAME " (e.g. "[OPTIONS] -- LAUNCHER ARGS...").
  explicit HelpFormatter(std::map<std::string, std::string> usage) : usage_(std::move(usage)) {}

  std::string make_usage(const CLI::App* app, std::string name) const override;
  std::string make_option_name(const CLI::Option* opt, bool is_positional) const override;
  std::string make_option_opts(const CLI::Option* opt) const override;
  // A command in its parent's list: the first sentence of its description, wrapped to 100
  // columns (`commprof help COMMAND` prints the whole of it).
  std::string make_subcommand(const CLI::App* sub) const override;

 private:
  std::map<std::string, std::string> usage_;
};

// "commands: run, info, ..." in the order they were added, `help` left out.
std::string CommandList(const CLI::App& app);

// "INT:INT in [0 - 9]" -> "INT (0-9)", "CODEC:CODEC" -> "CODEC", "TEXT" -> "TEXT".
std::string CleanTypeName(const std::string& type_name);

}  // namespace commprof::cli
