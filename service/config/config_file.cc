#include "service/config/config_file.h"

#include <algorithm>
#include <map>
#include <regex>
#include <sstream>
#include <vector>

#include "base/nearest_word.h"

namespace tfslurm::config {
namespace {

// The settings a file may hold: the main command's options, by long name,
// but --help and --config themselves.
std::vector<const CLI::Option*> Settings(const CLI::App& app) {
  std::vector<const CLI::Option*> out;
  for (const CLI::Option* opt : app.get_options()) {
    if (opt == app.get_help_ptr() || opt == app.get_help_all_ptr() || opt == app.get_config_ptr() ||
        !opt->get_configurable() || opt->get_lnames().empty())
      continue;
    out.push_back(opt);
  }
  return out;
}

std::vector<CLI::ConfigItem> ItemsOf(const CLI::App& app, const std::string& file) {
  if (file.empty()) return {};
  try {
    return app.get_config_formatter()->from_file(file);
  } catch (const CLI::Error&) {
    return {};  // the parse already said what was wrong with the file
  }
}

bool IsFlag(const CLI::Option& opt) { return opt.get_expected_min() == 0; }

// A value as the file would spell it: numbers and booleans bare, strings
// in double quotes.
std::string Spelled(const std::string& value) {
  static const std::regex kBare("-?[0-9]+(\\.[0-9]+)?|true|false");
  if (std::regex_match(value, kBare)) return value;
  return "\"" + value + "\"";
}

std::string ValueInForce(const CLI::Option& opt) {
  if (IsFlag(opt)) {
    if (opt.count() > 0) return opt.as<bool>() ? "true" : "false";
    return opt.get_default_str().empty() ? "false" : opt.get_default_str();
  }
  if (opt.count() == 0) return Spelled(opt.get_default_str());
  const std::vector<std::string>& results = opt.results();
  if (results.size() == 1) return Spelled(results.front());
  std::string joined = "[";
  for (size_t i = 0; i < results.size(); ++i) joined += (i ? ", " : "") + Spelled(results[i]);
  return joined + "]";
}

}  // namespace

void AddConfigFile(CLI::App& app, const std::string& default_file) {
  app.set_config("--config", default_file,
                 "settings file: each option of this list without its --, `key = value` "
                 "(`tfslurmd --print-config` shows them); options given here win over it. Read "
                 "if it exists; --config '' reads none")
      ->capture_default_str();
  // Unknown keys are checked by CheckFileSettings, which can say more than
  // CLI11's "INI was not able to parse".
  app.allow_config_extras(CLI::config_extras_mode::ignore);
}

std::string FileRead(const CLI::App& app) {
  const CLI::Option* config = app.get_config_ptr();
  if (!config || config->count() == 0) return "";
  return config->as<std::string>();
}

Status CheckFileSettings(const CLI::App& app) {
  std::string file = FileRead(app);
  std::vector<std::string> names;
  for (const CLI::Option* opt : Settings(app)) names.push_back(opt->get_lnames().front());
  std::set<std::string> seen;
  for (const CLI::ConfigItem& item : ItemsOf(app, file)) {
    if (item.name == "++" || item.name == "--") continue;  // a section's start and end
    // CLI11 would keep the first and drop the rest without a word.
    if (!seen.insert(item.fullname()).second) {
      return InvalidArgument(file + ": '" + item.fullname() +
                             "' is set more than once; set it once");
    }
    if (!item.parents.empty()) {
      return InvalidArgument(file + ": setting '" + item.fullname() +
                             "' is in a [section] or dotted; tfslurmd's settings have no sections");
    }
    if (std::find(names.begin(), names.end(), item.name) != names.end()) continue;
    std::string near = NearestWord(item.name, names);
    return InvalidArgument(file + ": '" + item.name + "' is not a setting of tfslurmd" +
                           (near.empty() ? "" : " (did you mean '" + near + "'?)") +
                           "; the settings are tfslurmd's options without their -- "
                           "(`tfslurmd --help`, `tfslurmd --print-config`)");
  }
  return Status::Ok();
}

std::set<std::string> SetOnCommandLine(const std::function<void(CLI::App&)>& define, int argc,
                                       const char* const* argv) {
  CLI::App probe;
  define(probe);
  probe.set_config();  // no file: only what argv says
  probe.add_option("--config");
  std::set<std::string> out;
  try {
    probe.parse(argc, argv);
  } catch (const CLI::Error&) {
    return out;
  }
  for (const CLI::Option* opt : Settings(probe)) {
    if (opt->count() > 0) out.insert(opt->get_lnames().front());
  }
  return out;
}

std::string SettingsReport(const CLI::App& app, const std::set<std::string>& on_command_line) {
  std::string file = FileRead(app);
  std::map<std::string, std::string> in_file;
  for (const CLI::ConfigItem& item : ItemsOf(app, file)) {
    if (!item.parents.empty() || item.inputs.empty()) continue;
    in_file[item.name] = item.inputs.size() == 1 ? item.inputs.front() : "[...]";
  }
  std::ostringstream out;
  out << "# The settings of tfslurmd in force: the command line wins over the file, the file "
         "over the default.\n";
  if (!file.empty())
    out << "# file: " << file << "\n";
  else
    out << "# file: none read\n";
  std::vector<std::pair<std::string, std::string>> lines;
  size_t width = 0;
  for (const CLI::Option* opt : Settings(app)) {
    std::string name = opt->get_lnames().front();
    std::string line = name + " = " + ValueInForce(*opt);
    std::string from = "default";
    if (on_command_line.count(name)) {
      from = "command line";
      if (auto it = in_file.find(name); it != in_file.end())
        from += " (over " + file + "'s " + Spelled(it->second) + ")";
    } else if (in_file.count(name)) {
      from = file;
    }
    width = std::max(width, line.size());
    lines.emplace_back(line, from);
  }
  for (const auto& [line, from] : lines)
    out << line << std::string(width - line.size() + 2, ' ') << "# " << from << "\n";
  return out.str();
}

}  // namespace tfslurm::config
