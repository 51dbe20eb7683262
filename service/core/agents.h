// Agents: core's face to the agent endpoint (agentrpc/): every message an
// agent sends, as core/agent_messages.h shapes it. Replies (Assignment,
// Shutdown, Refused, NextAttempt, Release, Spare) go back through the
// TaskChannel an agent registers with. agent_protocol.h does the work.
//
// Thread safety: every method may be called from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "service/core/agent_messages.h"
#include "service/core/records.h"

namespace tfslurm {

class Agents {
 public:
  virtual ~Agents() = default;

  // Attaches `channel` for the task; the reply (Assignment or Refused)
  // arrives through it, now or when the barrier completes.
  virtual void OnRegister(const TaskRef& ref, const RegisterInfo& info,
                          std::shared_ptr<TaskChannel> channel) = 0;
  virtual Status OnHeartbeat(const TaskRef& ref) = 0;
  virtual Status OnProgress(const TaskRef& ref, int64_t step, const std::string& path) = 0;
  virtual Status OnScalars(const TaskRef& ref, std::vector<ScalarPoint> points) = 0;
  // What the report changed is in the store when this returns; with
  // `held`, by the caller's WriteHeld(*held) instead, before which the
  // caller acknowledges nothing.
  virtual Status OnExited(const TaskRef& ref, const ExitReport& exit, HeldWrites* held) = 0;
  Status OnExited(const TaskRef& ref, const ExitReport& exit) {
    return OnExited(ref, exit, nullptr);
  }
  // `detail`: the agent's own word on why the program ended (Exited.detail).
  Status OnExited(const TaskRef& ref, std::optional<int> exit_code, std::optional<int> signal,
                  bool reaped, const std::string& detail = "") {
    return OnExited(ref, ExitReport{exit_code, signal, reaped, detail});
  }
  // Writes what OnExited held in `held`, and returns once it is in the
  // store. Nothing if nothing is pending.
  virtual void WriteHeld(HeldWrites& held) = 0;
  // The stream of `channel` broke; the agent may reconnect.
  virtual void OnDisconnect(const TaskRef& ref, const TaskChannel* channel) = 0;
};

}  // namespace tfslurm
