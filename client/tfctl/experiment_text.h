// How tfctl shows experiments to people: the status page with its attempt
// and task tables, the list, the events. Pure functions of their arguments
// (the current time is passed in), so tests pin the exact text. Every text
// that came from the service is escaped for the terminal
// (client/terminal_text.h): users and their programs wrote much of it.
//
// Thread safety: functions of their arguments only, called from tfctl's one
// thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "client/experiment_types.h"

namespace tfslurm::tfctl {

// "0.8s", "42s", "3m05s", "2h10m", "3d04h".
std::string FormatDuration(double seconds);
// The service's "2026-11-21T23:22:02.123Z" as Unix seconds.
std::optional<int64_t> ParseTimestamp(const std::string& timestamp);

// ROLE INDEX NODE ADDRESS STATE EXIT HEARTBEAT, one row per task.
std::string FormatTaskTable(const std::vector<client::Task>& tasks);
std::string FormatAttemptTable(const std::vector<client::Attempt>& attempts);
// The experiment, its attempts and the current attempt's tasks.
std::string FormatStatus(const client::Experiment& experiment);

// Open experiments (running, starting, restarting, queued) first, then
// finished ones; the service's order (newest first) within each group.
std::vector<client::Experiment> RunningFirst(std::vector<client::Experiment> experiments);
std::string FormatExperimentList(const std::vector<client::Experiment>& experiments, int64_t now_s);
// One id a line, in the given order: `tfctl list -o name`, for scripts and
// shell completion.
std::string FormatExperimentIds(const std::vector<client::Experiment>& experiments);

std::string FormatEventTable(const std::vector<client::Event>& events);
// One event on one line, as `submit --wait` prints them while following.
std::string FormatEventLine(const client::Event& event);
// "ID STATE: REASON", as `submit --wait` and `resume --wait` end.
std::string FormatOutcomeLine(const client::Experiment& experiment);

}  // namespace tfslurm::tfctl
