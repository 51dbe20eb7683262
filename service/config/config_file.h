// tfslurmd's configuration file, /etc/tfslurm/tfslurmd.conf: every option
// of the command line is a setting of the file, by the same name without
// its "--" (`--output-root DIR` is `output-root = "DIR"`), read through
// CLI11's own config support (TOML-like: `key = value`, `#` comments,
// strings in double quotes, `flag = true`). Nothing here lists the options:
// an option added to tfslurmd's command line is a setting of the file at
// once, and appears in --print-config.
//
// Precedence: the command line, then the file, then tfslurmd's default.
//
// Thread safety: not thread-safe; main's thread uses it before anything
// else runs.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <set>
#include <string>

#include "base/status.h"

namespace tfslurm::config {

// The file tfslurmd reads when it exists and no --config names another.
inline constexpr char kDefaultConfigFile[] = "/etc/tfslurm/tfslurmd.conf";

// Adds `--config FILE` to app: FILE is read if given (and must then exist);
// default_file is read when it exists; `--config ''` reads none.
void AddConfigFile(CLI::App& app, const std::string& default_file);

// After app.parse: the file app read, or "" when none.
std::string FileRead(const CLI::App& app);

// After app.parse: every setting in the file app read must be one of app's
// options, outside any [section], and set once: a misspelt key would
// otherwise be ignored, the setting silently left at its default, and of a
// key set twice CLI11 keeps the first. InvalidArgument naming the file, the
// key, the closest setting, and where the settings are listed.
Status CheckFileSettings(const CLI::App& app);

// The long names (without "--") of the options the command line itself
// set, found by parsing argv again with a second App that `define` sets up
// as the first, reading no file. Parse errors are the first parse's to
// report: here they give an empty set.
std::set<std::string> SetOnCommandLine(const std::function<void(CLI::App&)>& define, int argc,
                                       const char* const* argv);

// What --print-config prints: every setting of app's main command (not its
// subcommands') with the value in force and where it came from (the command
// line, the file, or the default), as a file tfslurmd could read back.
std::string SettingsReport(const CLI::App& app, const std::set<std::string>& on_command_line);

}  // namespace tfslurm::config
