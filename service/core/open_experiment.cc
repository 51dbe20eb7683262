#include "service/core/open_experiment.h"

#include <algorithm>

namespace tfslurm {

LiveAttempt::LiveAttempt(const ExperimentSpec& spec, AttemptRecord attempt)
    : record(std::move(attempt)), run(std::make_unique<AttemptRun>(spec, record.number)) {
  for (int i = 0; i < run->size(); ++i) {
    TaskRecord t;
    t.experiment_id = record.experiment_id;
    t.attempt = record.number;
    t.proc_id = i;
    t.role = run->task(i).role.role;
    t.index = run->task(i).role.index;
    tasks.push_back(std::move(t));
  }
}

bool OpenExperiment::MayRestartInPlace() const {
  const LiveAttempt& at = attempt;
  return spec.restart.in_allocation && !user_cancelled && !at.record.end_reason &&
         at.record.state != AttemptState::kEnded && at.run->outcome().kind != Outcome::kSucceeded &&
         !at.job_cancel_sent && !at.step_killed && at.in_place_given_up.empty();
}

bool OpenExperiment::Over() const {
  return IsTerminal(record.state) && attempt.record.state == AttemptState::kEnded;
}

bool OpenExperiment::NoAgentRegistered() const {
  return std::all_of(attempt.tasks.begin(), attempt.tasks.end(),
                     [](const TaskRecord& t) { return t.state == TaskState::kPending; });
}

bool NodeLeftJob(const LiveAttempt& attempt, const std::string& node) {
  const std::vector<std::string>& names = attempt.job_node_names;
  return !names.empty() && !node.empty() &&
         std::find(names.begin(), names.end(), node) == names.end();
}

}  // namespace tfslurm
