// The transport-independent part of the agent protocol: what each message
// means to core. Both transports call this, so their behaviour cannot drift.
//
// Thread safety: may be called from any thread (Agents is thread-safe).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "agent.pb.h"
#include "service/core/agents.h"

namespace tfslurm::agentrpc {

// Heartbeat, Progress, Exited. Register needs a channel: see DispatchRegister.
// `proven_uid`: the sender's uid as its transport proved it (uid_proof.h).
// `held`: an exit report's store write may wait for Agents::WriteHeld
// (null: it is in the store on return).
Status DispatchReport(Agents& agents, const agent::v1::AgentMessage& message,
                      std::optional<uint32_t> proven_uid, HeldWrites* held = nullptr);
void DispatchRegister(Agents& agents, const agent::v1::AgentMessage& message,
                      std::optional<uint32_t> proven_uid, std::shared_ptr<TaskChannel> channel);

}  // namespace tfslurm::agentrpc
