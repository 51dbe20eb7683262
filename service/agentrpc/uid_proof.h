// Site mode: an agent proves its Unix uid with a MUNGE credential in its
// TaskRef (schema/agent.proto, TaskRef.uid_credential), and the transport
// decodes it before core sees the message; core then refuses any uid but
// the job's (CoreConfig::agents_prove_uid, AgentProtocol::CheckProvenUid).
// A secret that leaked to another account on the node is not enough.
//
// A credential is accepted when munged decodes it (MAC, its TTL, not
// rewound, not replayed), its payload is UidCredentialPayload of the
// message's own task, it was made at most max_age_s ago, and it was not
// seen before (api::ReplayCache). Anything else is Unauthenticated, naming
// why.
//
// Thread safety: Prove may be called from any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "agent.pb.h"
#include "base/status.h"
#include "service/api/munge_auth.h"

namespace tfslurm::agentrpc {

// "tfslurm-agent/1 EXPERIMENT ATTEMPT PROC": agent/uid_credential.cc makes
// the same string.
std::string UidCredentialPayload(const agent::v1::TaskRef& task);

class UidProof {
 public:
  virtual ~UidProof() = default;
  // nullopt when uids are not proven (personal mode); else the uid munged
  // vouched for, or why not.
  virtual StatusOr<std::optional<uint32_t>> Prove(const agent::v1::TaskRef& task) = 0;
};

// Personal mode: the secret alone.
std::unique_ptr<UidProof> NoUidProof();
std::unique_ptr<UidProof> MungeUidProof(api::MungeDecoder decoder, std::function<int64_t()> now_s,
                                        int64_t max_age_s);

}  // namespace tfslurm::agentrpc
