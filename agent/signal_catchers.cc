#include "agent/signal_catchers.h"

#include <spdlog/spdlog.h>

#include <charconv>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

namespace tfslurm::agent {
namespace {

std::optional<std::string> ReadSmallFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::optional<pid_t> ParsePid(std::string_view text) {
  pid_t pid = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), pid);
  if (ec != std::errc() || end != text.data() + text.size() || pid <= 0) return std::nullopt;
  return pid;
}

}  // namespace

std::optional<uint64_t> ParseCaughtSignals(std::string_view proc_status) {
  constexpr std::string_view kKey = "SigCgt:";
  size_t at = 0;
  while (at < proc_status.size()) {
    size_t end = proc_status.find('\n', at);
    std::string_view line = proc_status.substr(at, end == std::string_view::npos ? end : end - at);
    if (line.starts_with(kKey)) {
      line.remove_prefix(kKey.size());
      while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
      uint64_t mask = 0;
      auto [stop, ec] = std::from_chars(line.data(), line.data() + line.size(), mask, 16);
      if (ec != std::errc() || stop == line.data()) return std::nullopt;
      return mask;
    }
    if (end == std::string_view::npos) break;
    at = end + 1;
  }
  return std::nullopt;
}

std::optional<pid_t> ParseProcessGroup(std::string_view proc_stat) {
  // "pid (comm) state ppid pgrp ...": comm may hold anything, so the fields
  // are counted from its last ')'.
  size_t paren = proc_stat.rfind(')');
  if (paren == std::string_view::npos) return std::nullopt;
  std::string_view rest = proc_stat.substr(paren + 1);
  for (int field = 0; field < 3; ++field) {  // state, ppid, then pgrp
    size_t start = rest.find_first_not_of(' ');
    if (start == std::string_view::npos) return std::nullopt;
    rest.remove_prefix(start);
    size_t space = rest.find(' ');
    if (field == 2) return ParsePid(rest.substr(0, space));
    if (space == std::string_view::npos) return std::nullopt;
    rest.remove_prefix(space);
  }
  return std::nullopt;
}

SignalCatchers FindSignalCatchers(pid_t pgid, int sig, const std::string& proc_root) {
  SignalCatchers found;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(proc_root, ec)) {
    std::string name = entry.path().filename().string();
    std::optional<pid_t> pid = ParsePid(name);
    if (!pid) continue;
    std::optional<std::string> stat = ReadSmallFile(entry.path().string() + "/stat");
    if (!stat || ParseProcessGroup(*stat) != pgid) continue;
    std::optional<std::string> status = ReadSmallFile(entry.path().string() + "/status");
    std::optional<uint64_t> caught = status ? ParseCaughtSignals(*status) : std::nullopt;
    if (!caught) continue;  // ended meanwhile
    found.members.push_back(*pid);
    if ((*caught >> (sig - 1)) & 1) found.catching.push_back(*pid);
  }
  return found;
}

bool TimeLimitWarning::PassOnNow(pid_t pgid, const std::string& proc_root) {
  SignalCatchers found = FindSignalCatchers(pgid, SIGUSR1, proc_root);
  if (found.members.empty() || !found.catching.empty()) return true;
  held_ = true;
  std::string pids;
  for (pid_t pid : found.members) pids += (pids.empty() ? "" : ", ") + std::to_string(pid);
  spdlog::warn(
      "SIGUSR1 (Slurm's warning before the time limit) not passed on: no process of the program "
      "catches it (SigCgt in /proc/PID/status of {}). The program started with it ignored, so it "
      "trains on until the time limit, when Slurm ends the job and the attempt ends as timeout; "
      "it gets the warning if it installs a handler before then. To save a checkpoint at the "
      "warning, catch SIGUSR1 in the program (tfslurm.task does: docs/python.md); a shell "
      "script cannot trap it, since it started ignored: have the script exec the program.",
      pids);
  return false;
}

bool TimeLimitWarning::HeldOneIsDue(pid_t pgid, const std::string& proc_root) {
  if (!held_ || FindSignalCatchers(pgid, SIGUSR1, proc_root).catching.empty()) return false;
  held_ = false;
  spdlog::info("the program catches SIGUSR1 now: passing on the time-limit warning held for it");
  return true;
}

}  // namespace tfslurm::agent
