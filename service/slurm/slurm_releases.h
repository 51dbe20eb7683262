// What differs in libslurm's API between the Slurm releases tfslurm builds
// against, 22.05 (Debian 12's) through 26.05, each behind SLURM_VERSION_NUMBER
// (slurm/slurm_version.h, written by Slurm's configure) and named with where
// it comes from: slurm.h, or the RELEASE_NOTES (RELEASE_NOTES.md from 25.05)
// of SchedMD's release tag. libslurm_client.cc includes this after slurm.h and
// calls these instead of the functions they wrap; nothing outside
// service/slurm/ knows which release it was built with.
#ifndef TFSLURM_SERVICE_SLURM_SLURM_RELEASES_H_
#define TFSLURM_SERVICE_SLURM_SLURM_RELEASES_H_

#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>
#include <slurm/slurm_version.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#define TFSLURM_SLURM_AT_LEAST(major, minor) \
  (SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(major, minor, 0))

#if !TFSLURM_SLURM_AT_LEAST(22, 5)
#error "tfslurm needs libslurm 22.05 or later (slurm_init is new in 22.05)"
#endif

namespace tfslurm::slurm::releases {

// The release this file was compiled against, "26.05.3".
inline std::string BuiltWith() {
  return std::to_string(SLURM_VERSION_MAJOR(SLURM_VERSION_NUMBER)) + "." +
         (SLURM_VERSION_MINOR(SLURM_VERSION_NUMBER) < 10 ? "0" : "") +
         std::to_string(SLURM_VERSION_MINOR(SLURM_VERSION_NUMBER)) + "." +
         std::to_string(SLURM_VERSION_MICRO(SLURM_VERSION_NUMBER));
}

// The Slurm error of the last failed call. slurm_get_errno() is declared in
// slurm_errno.h up to 24.05 and gone at slurm-24-11-0-1, where every call
// sets errno itself (which is what slurm_get_errno returned all along:
// src/common/slurm_errno.c at slurm-22-05-8-1).
inline int LastError() {
#if TFSLURM_SLURM_AT_LEAST(24, 11)
  return errno;
#else
  return slurm_get_errno();
#endif
}

// Frees what slurm_load_ctl_conf gave. slurm.h renames slurm_free_ctl_conf
// to slurm_free_conf at slurm-26-05-0-1.
inline void FreeConf(slurm_conf_t* conf) {
#if TFSLURM_SLURM_AT_LEAST(26, 5)
  slurm_free_conf(conf);
#else
  slurm_free_ctl_conf(conf);
#endif
}

// Slurm's text for a job's state reason ("Resources", "Priority").
// slurm_job_reason_string (src/common/slurm_protocol_defs.c, never declared
// in slurm.h) becomes slurm_job_state_reason_string, returning const char*,
// at slurm-24-05-0-1 (src/common/job_state_reason.c: "Change
// job_reason_string -> job_state_reason_string to match file"). Both are
// exported by libslurm only.
}  // namespace tfslurm::slurm::releases

#if TFSLURM_SLURM_AT_LEAST(24, 5)
extern "C" const char* slurm_job_state_reason_string(enum job_state_reason inx);
#else
extern "C" char* slurm_job_reason_string(enum job_state_reason inx);
#endif

namespace tfslurm::slurm::releases {

inline std::string JobReason(uint32_t reason) {
#if TFSLURM_SLURM_AT_LEAST(24, 5)
  const char* s = slurm_job_state_reason_string(static_cast<job_state_reason>(reason));
#else
  const char* s = slurm_job_reason_string(static_cast<job_state_reason>(reason));
#endif
  return s ? s : "";
}

// A job (step_id NO_VAL) or one step, as slurm_step_id_t, which slurm.h
// adds to the kill calls at 25.11 (slurm_kill_job_step) and 26.05
// (slurm_kill_job, with sluid: "The Slurm API has been updated to use
// slurm_step_id_t in lieu of a job_id in API calls", RELEASE_NOTES.md at
// slurm-26-05-0-1). Value-initialised first, so 26.05's sluid is 0 ("look
// the job up by its id"), as SLURM_STEP_ID_INITIALIZER sets it.
#if TFSLURM_SLURM_AT_LEAST(25, 11)
inline slurm_step_id_t StepId(uint32_t job_id, uint32_t step_id) {
  slurm_step_id_t id{};
  id.job_id = job_id;
  id.step_het_comp = NO_VAL;
  id.step_id = step_id;
  return id;
}
#endif

// slurm_kill_job(job, signal, flags).
inline int KillJob(uint32_t job_id, uint16_t signal) {
#if TFSLURM_SLURM_AT_LEAST(26, 5)
  return slurm_kill_job(StepId(job_id, NO_VAL), signal, 0);
#else
  return slurm_kill_job(job_id, signal, 0);
#endif
}

// slurm_kill_job_step: (job, step, signal) up to 23.02; a flags argument
// from slurm-23-11-0-1 ('"flags" argument was added to
// slurm_kill_job_step()', RELEASE_NOTES, API CHANGES); a slurm_step_id_t*
// in place of job and step from slurm-25-11-0-1 (slurm.h).
inline int KillStep(uint32_t job_id, uint32_t step_id, uint16_t signal) {
#if TFSLURM_SLURM_AT_LEAST(25, 11)
  slurm_step_id_t id = StepId(job_id, step_id);
  return slurm_kill_job_step(&id, signal, 0);
#elif TFSLURM_SLURM_AT_LEAST(23, 11)
  return slurm_kill_job_step(job_id, step_id, signal, 0);
#else
  return slurm_kill_job_step(job_id, step_id, signal);
#endif
}

// A job description naming job `job_id` (for slurm_update_job): its job_id,
// which is step_id.job_id (a slurm_step_id_t) from slurm-25-11-0-1 (slurm.h).
inline void SetDescJobId(job_desc_msg_t& desc, uint32_t job_id) {
#if TFSLURM_SLURM_AT_LEAST(25, 11)
  desc.step_id.job_id = job_id;
#else
  desc.job_id = job_id;
#endif
}

// The id slurmctld gave a submitted job: submit_response_msg_t's job_id,
// which is step_id.job_id (a slurm_step_id_t) from slurm-25-11-0-1 (slurm.h).
inline uint32_t SubmittedJobId(const submit_response_msg_t& resp) {
#if TFSLURM_SLURM_AT_LEAST(25, 11)
  return resp.step_id.job_id;
#else
  return resp.job_id;
#endif
}

// A list of job descriptions for slurm_submit_batch_het_job, which takes a
// List up to 22.05 and a list_t* from slurm-23-02-0-1 ("The List and
// ListIterator types have been removed in favor of list_t and list_itr_t",
// RELEASE_NOTES, API CHANGES; the List typedef stays until 24.11's slurm.h).
// The list owns nothing: its elements are the caller's.
inline int SubmitHetJob(std::vector<job_desc_msg_t>& descs, submit_response_msg_t** resp) {
#if TFSLURM_SLURM_AT_LEAST(23, 2)
  list_t* list = slurm_list_create(nullptr);
#else
  List list = slurm_list_create(nullptr);
#endif
  for (job_desc_msg_t& desc : descs) slurm_list_append(list, &desc);
  int rc = slurm_submit_batch_het_job(list, resp);
  slurm_list_destroy(list);
  return rc;
}

// Expands a hostlist expression ("node[1-3]") into names. slurm.h's
// hostlist_t is a pointer type up to 23.02 and the struct itself from
// slurm-23-11-0-1, where slurm_hostlist_create returns hostlist_t*.
inline std::vector<std::string> ExpandHostlist(const std::string& expression) {
  std::vector<std::string> out;
  if (expression.empty()) return out;
#if TFSLURM_SLURM_AT_LEAST(23, 11)
  hostlist_t* hl = slurm_hostlist_create(expression.c_str());
#else
  hostlist_t hl = slurm_hostlist_create(expression.c_str());
#endif
  if (!hl) return out;
  while (char* host = slurm_hostlist_shift(hl)) {
    out.emplace_back(host);
    free(host);
  }
  slurm_hostlist_destroy(hl);
  return out;
}

}  // namespace tfslurm::slurm::releases

#endif  // TFSLURM_SERVICE_SLURM_SLURM_RELEASES_H_
