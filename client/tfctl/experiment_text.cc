#include "client/tfctl/experiment_text.h"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <set>

#include "client/terminal_text.h"
#include "client/tfctl/table.h"

namespace tfslurm::tfctl {
namespace {

std::string OrDash(const std::string& s) { return s.empty() ? "-" : s; }

// "2026-11-21T23:22:02.123Z" -> "2026-11-21T23:22:02Z": milliseconds only
// widen tables.
std::string ShortTime(const std::string& timestamp) {
  if (timestamp.size() == 24 && timestamp[19] == '.') return timestamp.substr(0, 19) + "Z";
  return OrDash(timestamp);
}

// "running, restarted alone 2x": a TF worker's program restarted inside
// its attempt (restart.max_task_restarts).
std::string StateText(const client::Task& t) {
  if (t.restarts == 0) return t.state;
  return t.state + ", restarted alone " + std::to_string(t.restarts) + "x";
}

std::string ExitText(const client::Task& t) {
  if (t.signal) return "signal " + std::to_string(*t.signal);
  if (t.exit_code) return std::to_string(*t.exit_code);
  return "-";
}

std::string TaskCountText(const client::Experiment& e) {
  if (e.task_counts.empty()) return "-";
  int running = 0, total = 0;
  for (const auto& [role, c] : e.task_counts) {
    running += c.running;
    total += c.total;
  }
  return std::to_string(running) + "/" + std::to_string(total);
}

std::string CheckpointText(const client::Experiment& e) {
  if (!e.checkpoint_step) return "-";
  return "step " + std::to_string(*e.checkpoint_step);
}

int StateGroup(const std::string& state) {
  if (state == "running") return 0;
  if (state == "starting") return 1;
  if (state == "restarting") return 2;
  if (state == "queued") return 3;
  return 4;
}

// At most `max` bytes of `s`, cut at a character boundary, "..." marking a cut.
std::string Shorten(const std::string& s, size_t max) {
  if (s.size() <= max) return s;
  size_t cut = max - 3;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
  return s.substr(0, cut) + "...";
}

// The value holds what users wrote (model_dir, the checkpoint path, reasons):
// escaped for the terminal, on one line.
void Field(std::string& out, const std::string& name, const std::string& value) {
  out += name + std::string(name.size() < 12 ? 12 - name.size() : 1, ' ') +
         client::EscapeForTerminal(value) + "\n";
}

}  // namespace

std::string FormatDuration(double seconds) {
  if (seconds < 0) seconds = 0;
  char buf[32];
  if (seconds < 10) {
    std::snprintf(buf, sizeof buf, "%.1fs", seconds);
    return buf;
  }
  auto s = static_cast<int64_t>(std::llround(seconds));
  if (s < 60) return std::to_string(s) + "s";
  if (s < 3600)
    std::snprintf(buf, sizeof buf, "%lldm%02llds", static_cast<long long>(s / 60),
                  static_cast<long long>(s % 60));
  else if (s < 86400)
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", static_cast<long long>(s / 3600),
                  static_cast<long long>(s % 3600 / 60));
  else
    std::snprintf(buf, sizeof buf, "%lldd%02lldh", static_cast<long long>(s / 86400),
                  static_cast<long long>(s % 86400 / 3600));
  return buf;
}

std::optional<int64_t> ParseTimestamp(const std::string& timestamp) {
  std::tm tm{};
  const char* end = strptime(timestamp.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  if (!end) return std::nullopt;
  return static_cast<int64_t>(timegm(&tm));
}

std::string FormatTaskTable(const std::vector<client::Task>& tasks) {
  // A PyTorch or JAX experiment's tasks are ranks, not roles.
  if (!tasks.empty() && std::all_of(tasks.begin(), tasks.end(),
                                    [](const client::Task& t) { return t.role == "rank"; })) {
    Table table({"RANK", "NODE", "LOCAL RANK", "ADDRESS", "STATE", "EXIT", "HEARTBEAT"});
    for (const client::Task& t : tasks) {
      table.AddRow({std::to_string(t.index), OrDash(t.node), std::to_string(t.local_rank),
                    OrDash(t.address), StateText(t), ExitText(t),
                    t.heartbeat_age_s ? FormatDuration(*t.heartbeat_age_s) + " ago" : "-"});
    }
    return table.Render();
  }
  // Per-role resources: a heterogeneous job, whose tasks run in components.
  if (std::any_of(tasks.begin(), tasks.end(), [](const client::Task& t) { return t.component; })) {
    Table table({"ROLE", "INDEX", "COMPONENT", "NODE", "ADDRESS", "STATE", "EXIT", "HEARTBEAT"});
    for (const client::Task& t : tasks) {
      table.AddRow({t.role, std::to_string(t.index), std::to_string(t.component), OrDash(t.node),
                    OrDash(t.address), StateText(t), ExitText(t),
                    t.heartbeat_age_s ? FormatDuration(*t.heartbeat_age_s) + " ago" : "-"});
    }
    return table.Render();
  }
  Table table({"ROLE", "INDEX", "NODE", "ADDRESS", "STATE", "EXIT", "HEARTBEAT"});
  for (const client::Task& t : tasks) {
    table.AddRow({t.role, std::to_string(t.index), OrDash(t.node), OrDash(t.address), StateText(t),
                  ExitText(t),
                  t.heartbeat_age_s ? FormatDuration(*t.heartbeat_age_s) + " ago" : "-"});
  }
  return table.Render();
}

std::string FormatAttemptTable(const std::vector<client::Attempt>& attempts) {
  Table table(
      {"ATTEMPT", "JOB", "STATE", "SLURM", "NODES", "FROM STEP", "SUBMITTED", "ENDED", "END"});
  for (const client::Attempt& a : attempts) {
    std::string end = a.end_reason;
    if (!a.reason.empty()) end += (end.empty() ? "" : ": ") + a.reason;
    std::string job = a.slurm_job_id ? std::to_string(*a.slurm_job_id) : "-";
    if (a.in_place) job += " (in place)";
    table.AddRow({std::to_string(a.number), job, a.state, OrDash(a.slurm_state), OrDash(a.nodes),
                  a.start_step ? std::to_string(*a.start_step) : "-", ShortTime(a.submitted_at),
                  ShortTime(a.ended_at), OrDash(end)});
  }
  return table.Render();
}

std::string FormatStatus(const client::Experiment& e) {
  std::string out;
  Field(out, "experiment", e.id);
  Field(out, "state", e.state + (e.reason.empty() ? "" : ": " + e.reason));
  Field(out, "attempt",
        std::to_string(e.attempt) + " (" + std::to_string(e.restarts) + " automatic restarts)");
  if (e.slurm_job_id) {
    // The experiment's end is decided by its tasks, at once; Slurm's own end
    // of the job follows a moment later, and the service's next poll sees it.
    const bool ended = e.state == "succeeded" || e.state == "failed" || e.state == "cancelled";
    const bool job_on = e.slurm_state == "RUNNING" || e.slurm_state == "PENDING" ||
                        e.slurm_state == "CONFIGURING" || e.slurm_state == "COMPLETING";
    Field(out, "slurm job",
          std::to_string(*e.slurm_job_id) + " " + OrDash(e.slurm_state) +
              (e.nodes.empty() ? "" : " on " + e.nodes) +
              (ended && job_on ? " (ending: the experiment has ended, Slurm's end follows)" : ""));
  }
  // Spare nodes (resources.spare_nodes) that run no task now.
  const nlohmann::json* spares =
      e.raw.is_object() && e.raw.contains("spares") ? &e.raw["spares"] : nullptr;
  if (spares && spares->is_array() && !spares->empty()) {
    std::string text;
    for (const nlohmann::json& spare : *spares) {
      if (!spare.is_object()) continue;
      const std::string node = spare.value("node", "");
      text += (text.empty() ? "" : ", ") +
              (node.empty() ? std::string("a node not registered yet")
                            : client::EscapeForTerminal(node)) +
              (spare.value("waiting", false) ? " (waiting)" : " (starting)");
    }
    Field(out, "spares", text);
  }
  // The image and runtime of each role (docs/containers.md): one line when
  // every role shares them, else one per role.
  const nlohmann::json* containers =
      e.raw.is_object() && e.raw.contains("containers") ? &e.raw["containers"] : nullptr;
  if (containers && containers->is_array() && !containers->empty()) {
    std::set<std::string> distinct;
    std::string per_role;
    for (const nlohmann::json& c : *containers) {
      if (!c.is_object()) continue;
      const std::string what = client::EscapeForTerminal(c.value("image", "")) + " (" +
                               client::EscapeForTerminal(c.value("runtime", "")) + ")";
      distinct.insert(what);
      per_role += (per_role.empty() ? "" : "; ") + client::EscapeForTerminal(c.value("role", "")) +
                  ": " + what;
    }
    Field(out, "container", distinct.size() == 1 ? *distinct.begin() : per_role);
  }
  Field(out, "checkpoint",
        e.checkpoint_step
            ? "step " + std::to_string(*e.checkpoint_step) + " (" + e.checkpoint_path + ")"
            : "none yet");
  Field(out, "model dir", e.model_dir);
  Field(out, "memory",
        std::to_string(e.mem_per_task_mb) + " MB per task (" + e.mem_explanation + ")");
  Field(out, "created", ShortTime(e.created_at));
  if (!e.attempts.empty()) out += "\n" + FormatAttemptTable(e.attempts);
  if (!e.tasks.empty()) out += "\n" + FormatTaskTable(e.tasks);
  // Why a task ended, in its agent's words: too long for a column.
  for (const client::Task& t : e.tasks) {
    if (t.detail.empty()) continue;
    out += (t.role == "rank" ? "rank " + std::to_string(t.index)
                             : t.role + ":" + std::to_string(t.index)) +
           ": " + client::EscapeForTerminal(t.detail) + "\n";
  }
  return out;
}

std::vector<client::Experiment> RunningFirst(std::vector<client::Experiment> experiments) {
  std::stable_sort(experiments.begin(), experiments.end(),
                   [](const client::Experiment& a, const client::Experiment& b) {
                     return StateGroup(a.state) < StateGroup(b.state);
                   });
  return experiments;
}

std::string FormatExperimentList(const std::vector<client::Experiment>& experiments,
                                 int64_t now_s) {
  Table table({"ID", "STATE", "ATTEMPT", "TASKS", "JOB", "NODES", "CHECKPOINT", "AGE", "REASON"});
  for (const client::Experiment& e : experiments) {
    auto created = ParseTimestamp(e.created_at);
    table.AddRow({e.id, e.state, std::to_string(e.attempt), TaskCountText(e),
                  e.slurm_job_id ? std::to_string(*e.slurm_job_id) : "-", OrDash(e.nodes),
                  CheckpointText(e),
                  created ? FormatDuration(static_cast<double>(now_s - *created)) : "-",
                  OrDash(Shorten(e.reason, 140))});
  }
  return table.Render();
}

std::string FormatExperimentIds(const std::vector<client::Experiment>& experiments) {
  std::string out;
  for (const client::Experiment& e : experiments) out += client::EscapeForTerminal(e.id) + "\n";
  return out;
}

std::string FormatEventTable(const std::vector<client::Event>& events) {
  Table table({"TIME", "ATTEMPT", "WHAT", "WHY"});
  for (const client::Event& e : events)
    table.AddRow({ShortTime(e.at), std::to_string(e.attempt), e.what, e.why});
  return table.Render();
}

std::string FormatEventLine(const client::Event& e) {
  return client::EscapeForTerminal(ShortTime(e.at) + "  attempt " + std::to_string(e.attempt) +
                                   "  " + e.what + ": " + e.why);
}

std::string FormatOutcomeLine(const client::Experiment& e) {
  return client::EscapeForTerminal(e.id + " " + e.state +
                                   (e.reason.empty() ? "" : ": " + e.reason));
}

}  // namespace tfslurm::tfctl
