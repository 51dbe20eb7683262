// Site mode: a MUNGE credential that proves the agent's uid to the service
// (libmunge's munge_encode through the node's munged; Debian's libmunge).
// The payload binds it to one task of one attempt
// (service/agentrpc/uid_proof.h checks it); munged lets it be decoded once.
//
// Thread safety: MakeUidCredential may be called from any thread.
#ifndef TFSLURM_AGENT_UID_CREDENTIAL_H_
#define TFSLURM_AGENT_UID_CREDENTIAL_H_

#include <string>

#include "base/status.h"

namespace tfslurm::agent {

// `socket` empty: libmunge's default (/run/munge/munge.socket.2).
StatusOr<std::string> MakeUidCredential(const std::string& payload, const std::string& socket);

}  // namespace tfslurm::agent

#endif  // TFSLURM_AGENT_UID_CREDENTIAL_H_
