// How the agent reaches the service safely, from the job's environment
// (tfslurmd puts these in every job it submits):
//   TFSLURM_CA           the CA certificates (PEM) the service's TLS
//                        certificate must verify against, or "system" for
//                        the node's trust store. Unset: plaintext gRPC (a
//                        service on loopback, or run --insecure-plaintext).
//   TFSLURM_PROVE_UID    "munge" (site mode): every Register carries a fresh
//                        MUNGE credential, so the service can check that the
//                        agent runs as the job's owner (uid_credential.h).
//   TFSLURM_MUNGE_SOCKET munged's socket; default libmunge's.
// The environment of a job is readable only by its owner and root
// (/proc/PID/environ), like the attempt secret beside it.
//
// An agent that cannot verify the service does not register (nothing is
// sent to a peer whose certificate does not check out: gRPC ends the
// handshake), and while it has no program running it exits
// kExitUnverifiedService with the reason, which the service reports as the
// attempt's startup_error (schema/agent_exit.h).
//
// Thread safety: pure functions of their arguments and the network.
#ifndef TFSLURM_AGENT_SERVICE_ACCESS_H_
#define TFSLURM_AGENT_SERVICE_ACCESS_H_

#include <optional>
#include <string>

#include "agent/session.h"
#include "agent/slurm_env.h"
#include "base/status.h"

namespace tfslurm::agent {

// Fills in `options`' TLS and uid proof from `env`. An error (a TFSLURM_CA
// that holds no certificate, "system" with no readable trust store, an
// unknown TFSLURM_PROVE_UID) is the agent's exit 2.
Status ConfigureServiceAccess(const EnvLookup& env, SessionOptions& options);

// The CA certificates (PEM) TFSLURM_CA in `env` gives, nullopt when it is
// unset (plaintext); an error as ConfigureServiceAccess's.
StatusOr<std::optional<std::string>> ServiceCaFromEnv(const EnvLookup& env);

// After a stream failed before it opened: the reason when the service at
// `target` (HOST:PORT) did answer, but not with a certificate that verifies
// against `ca_pem` (or not in TLS at all); nullopt when it may only be down
// (no connection), to be retried.
std::optional<std::string> WhyServiceUnverified(const std::string& target,
                                                const std::string& ca_pem);

}  // namespace tfslurm::agent

#endif  // TFSLURM_AGENT_SERVICE_ACCESS_H_
