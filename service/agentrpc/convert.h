// schema/agent.proto <-> core/agent_messages.h.
#pragma once

#include "agent.pb.h"
#include "service/core/agent_messages.h"

namespace tfslurm::agentrpc {

TaskRef FromProto(const agent::v1::TaskRef& ref);
RegisterInfo FromProto(const agent::v1::Register& reg);
agent::v1::ServiceMessage ToProto(const ServiceMsg& message);

}  // namespace tfslurm::agentrpc
