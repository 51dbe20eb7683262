// schema/agent.proto <-> core/agent_messages.h.
//
// Thread safety: pure functions.
#pragma once

#include <vector>

#include "agent.pb.h"
#include "service/core/agent_messages.h"
#include "service/core/records.h"

namespace tfslurm::agentrpc {

TaskRef FromProto(const agent::v1::TaskRef& ref);
RegisterInfo FromProto(const agent::v1::Register& reg);
// NaN and infinite values become nullopt (records.h, ScalarPoint).
std::vector<ScalarPoint> FromProto(const agent::v1::Scalars& scalars);
// How an Assignment carries TF_CONFIG (schema/tf_config_wire.h): the gRPC
// stream sends the attempt's compressed cluster object, the same bytes for
// every task, with their digest; to a node's relay that already has them on
// the same connection, the digest alone (agent.proto, cluster_by_digest).
// The JSON route sends tf_config whole, for curl and scripts.
enum class TfConfigEncoding { kWhole, kCompressedCluster, kClusterDigestOnly };

agent::v1::ServiceMessage ToProto(const ServiceMsg& message,
                                  TfConfigEncoding encoding = TfConfigEncoding::kWhole);

}  // namespace tfslurm::agentrpc
