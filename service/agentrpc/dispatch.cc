#include "service/agentrpc/dispatch.h"

#include "service/agentrpc/convert.h"

namespace tfslurm::agentrpc {

Status DispatchReport(Experiments& experiments, const agent::v1::AgentMessage& m) {
  TaskRef ref = FromProto(m.task());
  switch (m.body_case()) {
    case agent::v1::AgentMessage::kHeartbeat:
      return experiments.OnHeartbeat(ref);
    case agent::v1::AgentMessage::kProgress:
      return experiments.OnProgress(ref, m.progress().checkpoint_step(),
                                    m.progress().checkpoint_path());
    case agent::v1::AgentMessage::kExited: {
      std::optional<int> code, signal;
      if (m.exited().signal() != 0)
        signal = m.exited().signal();
      else
        code = m.exited().exit_code();
      return experiments.OnExited(ref, code, signal, m.exited().reaped(), m.exited().detail());
    }
    case agent::v1::AgentMessage::kScalars:
      return experiments.OnScalars(ref, FromProto(m.scalars()));
    case agent::v1::AgentMessage::kRegister:
      return Internal("register is not a report");
    case agent::v1::AgentMessage::BODY_NOT_SET:
      break;
  }
  return InvalidArgument(
      "the message has no body: set one of register, heartbeat, progress, scalars, exited");
}

void DispatchRegister(Experiments& experiments, const agent::v1::AgentMessage& m,
                      std::shared_ptr<TaskChannel> channel) {
  experiments.OnRegister(FromProto(m.task()), FromProto(m.register_()), std::move(channel));
}

}  // namespace tfslurm::agentrpc
