// Job state names and predicates: plain logic, usable without libslurm.
#include "service/core/ports/slurm.h"

#include <algorithm>
#include <map>
#include <optional>

namespace tfslurm {

bool IsFinished(JobState state) {
  return state != JobState::kPending && state != JobState::kRunning &&
         state != JobState::kSuspended && state != JobState::kUnknown;
}

std::vector<JobInfo> GroupHetJobs(std::vector<JobInfo> jobs) {
  std::vector<JobInfo> out;
  std::map<int64_t, std::vector<JobInfo>> het;  // by leader id
  for (JobInfo& j : jobs) {
    if (j.het_job_id == 0)
      out.push_back(std::move(j));
    else
      het[j.het_job_id].push_back(std::move(j));
  }
  for (auto& [leader_id, parts] : het) {
    std::sort(parts.begin(), parts.end(), [](const JobInfo& a, const JobInfo& b) {
      return a.het_job_offset < b.het_job_offset;
    });
    // The leader's record (offset 0) carries the name, the batch script's
    // exit and the times; should it be gone already, the first one left.
    JobInfo job = parts.front();
    job.job_id = leader_id;
    job.nodes.clear();
    job.node_names.clear();
    bool all_finished = true;
    std::optional<JobState> abnormal;
    for (const JobInfo& p : parts) {
      job.components.push_back({p.job_id, p.state, p.nodes, p.node_names, p.completing});
      if (!p.nodes.empty()) job.nodes += (job.nodes.empty() ? "" : ",") + p.nodes;
      job.node_names.insert(job.node_names.end(), p.node_names.begin(), p.node_names.end());
      job.completing = job.completing || p.completing;
      all_finished = all_finished && IsFinished(p.state);
      switch (p.state) {
        case JobState::kNodeFail:
        case JobState::kBootFail:
        case JobState::kPreempted:
        case JobState::kTimeout:
        case JobState::kDeadline:
        case JobState::kOutOfMemory:
          if (!abnormal) abnormal = p.state;
          break;
        default:
          break;
      }
    }
    if (abnormal) job.state = *abnormal;
    // Not over while a component still runs.
    if (IsFinished(job.state) && !all_finished) job.completing = true;
    out.push_back(std::move(job));
  }
  return out;
}

}  // namespace tfslurm
