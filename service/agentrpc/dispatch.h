// The transport-independent part of the agent protocol: what each message
// means to core. Both transports call this, so their behaviour cannot drift.
//
// Thread safety: may be called from any thread (Agents is thread-safe).
#pragma once

#include <memory>

#include "agent.pb.h"
#include "service/core/agents.h"

namespace tfslurm::agentrpc {

// Heartbeat, Progress, Exited. Register needs a channel: see DispatchRegister.
Status DispatchReport(Agents& agents, const agent::v1::AgentMessage& message);
void DispatchRegister(Agents& agents, const agent::v1::AgentMessage& message,
                      std::shared_ptr<TaskChannel> channel);

}  // namespace tfslurm::agentrpc
