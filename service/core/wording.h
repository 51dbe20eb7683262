// How events and messages name a task and a duration, the same everywhere.
//
// Thread safety: pure functions.
#pragma once

#include <csignal>
#include <cstdint>
#include <optional>
#include <string>

#include "base/unsafe_text.h"
#include "service/core/attempt_run.h"

namespace tfslurm {

// "worker:1 (task 3 on node2)", by its task index; a PyTorch task, whose
// rank is its task index: "rank 3 (on node2)".
inline std::string TaskName(const TaskSlot& t, TaskIndex task) {
  if (t.role.role == kRankRole)
    return "rank " + std::to_string(t.role.index) + (t.node.empty() ? "" : " (on " + t.node + ")");
  return t.role.role + ":" + std::to_string(t.role.index) + " (task " +
         std::to_string(task.value()) + (t.node.empty() ? "" : " on " + t.node) + ")";
}

// An agent's Exited.detail as it is kept and shown: valid UTF-8 (a byte
// that is not becomes \xNN), every unsafe character (base/unsafe_text.h:
// controls, bidi controls, invisible characters, line separators) a space,
// every run of spaces one space, surrounding spaces trimmed, then at most
// 300 bytes (cut at a character boundary, "..." added). It comes from the
// task's side, so it is bounded before it reaches events, reasons and the
// store, and cannot pad a line with spaces to show a row of its own.
inline std::string ExitDetail(const std::string& detail) {
  constexpr size_t kMax = 300;
  const std::string text = EscapeInvalidUtf8(std::string_view(detail).substr(0, 4 * kMax));
  std::string out;
  for (size_t i = 0; i < text.size() && out.size() <= kMax;) {
    uint32_t c = 0;
    bool truncated = false;
    size_t length = DecodeUtf8(text, i, c, truncated);
    if (length == 0) length = 1;  // cannot happen: EscapeInvalidUtf8 made it valid
    const bool space = c == ' ' || IsUnsafeCodePoint(c);
    if (!space)
      out.append(text, i, length);
    else if (!out.empty() && out.back() != ' ')
      out += ' ';
    i += length;
  }
  if (out.size() > kMax) {
    size_t cut = kMax;
    while (cut > 0 && (static_cast<unsigned char>(out[cut]) & 0xC0) == 0x80) --cut;
    out = out.substr(0, cut) + "...";
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

// How a program ended, after its task's name: "was killed by signal 9",
// "exited with code 1: <detail>".
inline std::string HowItEnded(std::optional<int> exit_code, std::optional<int> signal,
                              const std::string& detail) {
  std::string how = signal.value_or(0)
                        ? "was killed by signal " + std::to_string(*signal)
                        : "exited with code " + std::to_string(exit_code.value_or(-1));
  if (!detail.empty()) how += ": " + detail;
  return how;
}

// A program killed by SIGUSR1, Slurm's warning before the time limit
// (checkpoint.signal_grace_s > 0): the agent starts programs with it ignored
// and passes it on only to one that catches it (agent/README.md), so such a
// death means the program set it back to its default action, death.
inline bool KilledByTimeLimitWarning(std::optional<int> signal, int signal_grace_s) {
  return signal_grace_s > 0 && signal.value_or(0) == SIGUSR1;
}

// HowItEnded, where a death by the time-limit warning says so and what to do.
inline std::string HowItEnded(std::optional<int> exit_code, std::optional<int> signal,
                              const std::string& detail, int signal_grace_s) {
  if (!KilledByTimeLimitWarning(signal, signal_grace_s))
    return HowItEnded(exit_code, signal, detail);
  return "was killed by SIGUSR1 (signal " + std::to_string(SIGUSR1) + "), Slurm's warning " +
         std::to_string(signal_grace_s) +
         " s before the time limit (checkpoint.signal_grace_s), which it does not catch: catch "
         "it to save a checkpoint (tfslurm.task does, docs/python.md), or set "
         "checkpoint.signal_grace_s: 0 for no warning" +
         (detail.empty() ? "" : "; " + detail);
}

// "5 s", rounded to the nearest second.
inline std::string Seconds(int64_t ms) { return std::to_string((ms + 500) / 1000) + " s"; }

}  // namespace tfslurm
