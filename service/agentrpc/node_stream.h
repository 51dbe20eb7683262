// AgentService.ConnectNode: a node's relay carries its agents' streams as
// lanes of one stream (agent.proto). Each lane is a task's stream as a
// Connect stream is (task_stream.h); what the node stream adds is the
// framing, one write at a time carrying every frame ready, and the TF
// cluster's bytes once per node stream.
//
// Why: gRPC's cost is per stream far more than per message. 16,384 tasks'
// Register -> Assignment took 3.2-3.4x less time as 2,048 node streams than
// as 16,384 task streams on as many connections (bench/RESULTS.md, issue
// 49).
//
// Thread safety: the reactor is gRPC's; core sends to its lanes from any
// thread.
#pragma once

#include <grpcpp/grpcpp.h>

#include "agent.grpc.pb.h"
#include "service/agentrpc/uid_proof.h"
#include "service/core/agents.h"

namespace tfslurm::agentrpc {

// The reactor of one ConnectNode stream. `agents` null: the stream arrived
// before the server served core, and ends at once as UNAVAILABLE.
grpc::ServerBidiReactor<agent::v1::NodeUp, agent::v1::NodeDown>* NewNodeStream(Agents* agents,
                                                                               UidProof* uid_proof);

}  // namespace tfslurm::agentrpc
