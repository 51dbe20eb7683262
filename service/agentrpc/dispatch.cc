#include "service/agentrpc/dispatch.h"

#include "service/agentrpc/convert.h"

namespace tfslurm::agentrpc {

Status DispatchReport(Agents& agents, const agent::v1::AgentMessage& m,
                      std::optional<uint32_t> proven_uid, HeldWrites* held) {
  TaskRef ref = FromProto(m.task());
  ref.proven_uid = proven_uid;
  switch (m.body_case()) {
    case agent::v1::AgentMessage::kHeartbeat:
      return agents.OnHeartbeat(ref);
    case agent::v1::AgentMessage::kProgress:
      return agents.OnProgress(ref, m.progress().checkpoint_step(), m.progress().checkpoint_path());
    case agent::v1::AgentMessage::kExited: {
      ExitReport exit;
      if (m.exited().signal() != 0)
        exit.signal = m.exited().signal();
      else
        exit.exit_code = m.exited().exit_code();
      exit.reaped = m.exited().reaped();
      exit.detail = m.exited().detail();
      exit.at_startup = m.exited().at_startup();
      return agents.OnExited(ref, exit, held);
    }
    case agent::v1::AgentMessage::kScalars:
      return agents.OnScalars(ref, FromProto(m.scalars()));
    case agent::v1::AgentMessage::kRegister:
      return Internal("register is not a report");
    case agent::v1::AgentMessage::BODY_NOT_SET:
      break;
  }
  return InvalidArgument(
      "the message has no body: set one of register, heartbeat, progress, scalars, exited");
}

void DispatchRegister(Agents& agents, const agent::v1::AgentMessage& m,
                      std::optional<uint32_t> proven_uid, std::shared_ptr<TaskChannel> channel) {
  TaskRef ref = FromProto(m.task());
  ref.proven_uid = proven_uid;
  agents.OnRegister(ref, FromProto(m.register_()), std::move(channel));
}

}  // namespace tfslurm::agentrpc
