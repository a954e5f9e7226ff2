#include "cli/help_format.h"

#include <sstream>
#include <vector>

namespace commprof::cli {

std::string CommandList(const CLI::App& app) {
  std::string out = "commands:";
  const char* sep = " ";
  for (const CLI::App* sub : app.get_subcommands({})) {
    if (sub->get_name() != "help") {
      out += sep + sub->get_name();
      sep = ", ";
    }
  }
  return out;
}

std::string CleanTypeName(const std::string& type_name) {
  const size_t colon = type_name.find(':');
  if (colon == std::string::npos) {
    return type_name;
  }
  const std::string type = type_name.substr(0, colon);
  std::string check = type_name.substr(colon + 1);
  // CLI11 names a set check "{a,b,c}": the value is one of them.
  if (check.size() > 2 && check.front() == '{' && check.back() == '}') {
    std::string members = check.substr(1, check.size() - 2);
    for (char& c : members) {
      c = c == ',' ? '|' : c;
    }
    return members;
  }
  // CLI11 names a range check "TYPE in [LOW - HIGH]".
  const size_t open = check.find(" in [");
  if (open != std::string::npos && check.back() == ']') {
    std::string range = check.substr(open + 5, check.size() - open - 6);
    if (const size_t dash = range.find(" - "); dash != std::string::npos) {
      range = range.substr(0, dash) + "-" + range.substr(dash + 3);
    }
    return type + " (" + range + ")";
  }
  return check == type ? type : type + " (" + check + ")";
}

std::string HelpFormatter::make_subcommand(const CLI::App* sub) const {
  constexpr size_t kWidth = 100;
  std::string text = sub->get_description();
  // The first sentence: up to the first ". " (or the end), newlines read as spaces.
  for (char& c : text) {
    c = c == '\n' ? ' ' : c;
  }
  if (const size_t stop = text.find(". "); stop != std::string::npos) {
    text = text.substr(0, stop + 1);
  }
  const size_t indent = column_width_;  // where CLI11 starts an option's description
  std::string name = "  " + sub->get_display_name(true);
  std::string out =
      name.size() < indent ? name + std::string(indent - name.size(), ' ') : name + "\n" + std::string(indent, ' ');
  size_t col = indent;
  std::istringstream words(text);
  bool first = true;
  for (std::string w; words >> w;) {
    if (!first && col + 1 + w.size() > kWidth) {
      out += "\n" + std::string(indent, ' ');
      col = indent;
      first = true;
    }
    if (!first) {
      out += ' ';
      ++col;
    }
    out += w;
    col += w.size();
    first = false;
  }
  return out + "\n";
}

std::string HelpFormatter::make_usage(const CLI::App* app, std::string name) const {
  // The command's own words, not the path it was started by (build/release/cli/commprof).
  std::vector<std::string> words;
  for (const CLI::App* a = app; a->get_parent() != nullptr; a = a->get_parent()) {
    words.push_back(a->get_name());
  }
  std::string shown = "commprof";
  for (auto w = words.rbegin(); w != words.rend(); ++w) {
    shown.append(" ").append(*w);
  }
  if (auto it = usage_.find(app->get_name()); it != usage_.end() && app->get_parent() != nullptr) {
    return get_label("Usage") + ": " + shown + " " + it->second + "\n";
  }
  std::string line = CLI::Formatter::make_usage(app, std::move(name));
  const std::string prefix = get_label("Usage") + ":";
  // CLI11's line is "Usage: NAME [OPTIONS] ...": replace NAME.
  const size_t options = line.find(" [" + get_label("OPTIONS") + "]");
  const size_t rest = options != std::string::npos ? options : line.find(' ', prefix.size() + 1);
  return prefix + " " + shown + (rest == std::string::npos ? std::string("\n") : line.substr(rest));
}

std::string HelpFormatter::make_option_name(const CLI::Option* opt, bool is_positional) const {
  if (is_positional) {
    return opt->get_name(true, false);
  }
  // Every name ("-q,--quiet"), without CLI11's flag defaults ("--stacks{16}", "--no-x{false}").
  const std::string with_defaults = opt->get_name(false, true);
  std::string names;
  for (size_t i = 0; i < with_defaults.size(); ++i) {
    if (with_defaults[i] == '{') {
      i = with_defaults.find('}', i);
      if (i == std::string::npos) {
        break;
      }
      continue;
    }
    names += with_defaults[i];
  }
  // A flag that takes an optional value (--stacks{16}): --stacks[=VALUE].
  const size_t brace = with_defaults.find('{');
  if (brace != std::string::npos) {
    const std::string value = with_defaults.substr(brace + 1, with_defaults.find('}', brace) - brace - 1);
    if (value != "false" && value != "true") {
      const std::string type = opt->get_type_name().substr(0, opt->get_type_name().find(':'));
      names += "[=" + (type.empty() ? std::string("VALUE") : type) + "]";
    }
  }
  return names;
}

std::string HelpFormatter::make_option_opts(const CLI::Option* opt) const {
  std::ostringstream out;
  if (!opt->get_option_text().empty()) {
    out << " " << opt->get_option_text();
    return out.str();
  }
  const std::string with_defaults = opt->get_name(false, true);
  const bool optional_value = with_defaults.find('{') != std::string::npos;
  if (opt->get_type_size() != 0) {
    const std::string type = CleanTypeName(opt->get_type_name());
    if (!type.empty()) {
      // For --x[=VALUE] the type is named in the option already; its range still helps.
      const size_t range = type.find(" (");
      if (!optional_value) {
        out << " " << type;
      } else if (range != std::string::npos) {
        out << type.substr(range);
      }
    }
    if (!opt->get_default_str().empty()) {
      out << "=" << opt->get_default_str();
    }
    if (opt->get_expected_max() == CLI::detail::expected_max_vector_size) {
      out << " ...";
    } else if (opt->get_expected_min() > 1) {
      out << " x " << opt->get_expected();
    }
    if (opt->get_required()) {
      out << " " << get_label("REQUIRED");
    }
  }
  if (!opt->get_envname().empty()) {
    out << " (" << get_label("Env") << ":" << opt->get_envname() << ")";
  }
  if (!opt->get_needs().empty()) {
    out << " " << get_label("Needs") << ":";
    for (const CLI::Option* op : opt->get_needs()) {
      out << " " << op->get_name();
    }
  }
  if (!opt->get_excludes().empty()) {
    out << " " << get_label("Excludes") << ":";
    for (const CLI::Option* op : opt->get_excludes()) {
      out << " " << op->get_name();
    }
  }
  return out.str();
}

}  // namespace commprof::cli
