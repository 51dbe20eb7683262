// Site mode's second check of an agent (CoreConfig::agents_prove_uid): the
// uid munged vouched for (TaskRef::proven_uid, decoded by the transport:
// agentrpc/uid_proof.h) must be the uid the job runs as, whatever secret
// the message holds, so that a secret leaked to another account on a node
// is not enough.
//
// Thread safety: a pure function; it logs a refusal with spdlog.
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"
#include "service/core/agent_messages.h"

namespace tfslurm {

// OK when `ref` proved uid `job_uid` (that of `owner`'s account);
// PermissionDenied otherwise, saying which uid may act. A right secret from
// the wrong uid is logged for the admin (the owner's secret has leaked).
Status CheckProvenUid(const TaskRef& ref, uint32_t job_uid, const std::string& owner);

}  // namespace tfslurm
