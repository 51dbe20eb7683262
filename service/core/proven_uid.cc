#include "service/core/proven_uid.h"

#include <spdlog/spdlog.h>

namespace tfslurm {

Status CheckProvenUid(const TaskRef& ref, uint32_t job_uid, const std::string& owner) {
  const std::string task = "'" + ref.experiment_id + "' attempt " + std::to_string(ref.attempt) +
                           " task " + std::to_string(ref.proc_id.value());
  if (!ref.proven_uid)
    return Status(StatusCode::kPermissionDenied,
                  "site mode: an agent proves its uid with a MUNGE credential, and this "
                  "message for " +
                      task + " carries none");
  if (*ref.proven_uid == job_uid) return Status::Ok();
  // The right secret in the wrong account's hands: the owner's secret has
  // leaked (a copied environment, a file). Said in the service's log for
  // the admin; the sender learns only the refusal.
  spdlog::warn(
      "refused {}: its secret is right, but munged says the sender runs as uid {}, and "
      "the job runs as {}'s uid {}",
      task, *ref.proven_uid, owner, job_uid);
  return Status(StatusCode::kPermissionDenied,
                "site mode: only uid " + std::to_string(job_uid) + " may act for " + task +
                    "; this agent runs as uid " + std::to_string(*ref.proven_uid));
}

}  // namespace tfslurm
