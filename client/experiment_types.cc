#include "client/experiment_types.h"

namespace tfslurm::client {
namespace {

using nlohmann::json;

// A field that may be absent or null reads as the type's default.
template <typename T>
T Get(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return T{};
  return it->get<T>();
}

template <typename T>
std::optional<T> GetOptional(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  return it->get<T>();
}

Task TaskFromJson(const json& j) {
  Task t;
  t.proc_id = Get<int>(j, "proc_id");
  t.role = Get<std::string>(j, "role");
  t.index = Get<int>(j, "index");
  t.node = Get<std::string>(j, "node");
  t.local_rank = Get<int>(j, "local_rank");
  t.component = Get<int>(j, "component");
  t.address = Get<std::string>(j, "address");
  t.state = Get<std::string>(j, "state");
  t.exit_code = GetOptional<int>(j, "exit_code");
  t.signal = GetOptional<int>(j, "signal");
  t.detail = j.value("detail", "");
  t.restarts = j.value("restarts", 0);
  t.heartbeat_age_s = GetOptional<double>(j, "heartbeat_age_s");
  return t;
}

Attempt AttemptFromJson(const json& j) {
  Attempt a;
  a.number = Get<int>(j, "number");
  a.slurm_job_id = GetOptional<int64_t>(j, "slurm_job_id");
  a.job_name = Get<std::string>(j, "job_name");
  a.state = Get<std::string>(j, "state");
  a.slurm_state = Get<std::string>(j, "slurm_state");
  a.end_reason = Get<std::string>(j, "end_reason");
  a.reason = Get<std::string>(j, "reason");
  a.nodes = Get<std::string>(j, "nodes");
  a.start_step = GetOptional<int64_t>(j, "start_step");
  a.in_place = j.value("in_place", false);
  // A tfslurmd before spec revisions sends none: its one revision.
  a.spec_revision = GetOptional<int>(j, "spec_revision").value_or(1);
  a.submitted_at = Get<std::string>(j, "submitted_at");
  a.started_at = Get<std::string>(j, "started_at");
  a.ended_at = Get<std::string>(j, "ended_at");
  return a;
}

Event EventFromJson(const json& j) {
  return {Get<int64_t>(j, "id"), Get<std::string>(j, "at"), Get<int>(j, "attempt"),
          Get<std::string>(j, "what"), Get<std::string>(j, "why")};
}

}  // namespace

Experiment ExperimentFromJson(const json& j) {
  Experiment e;
  e.id = Get<std::string>(j, "id");
  e.owner = Get<std::string>(j, "owner");
  e.state = Get<std::string>(j, "state");
  e.reason = Get<std::string>(j, "reason");
  e.attempt = Get<int>(j, "attempt");
  e.restarts = Get<int>(j, "restarts");
  e.spec_revision = GetOptional<int>(j, "spec_revision").value_or(1);
  e.model_dir = Get<std::string>(j, "model_dir");
  e.mem_per_task_mb = Get<int64_t>(j, "mem_per_task_mb");
  e.mem_explanation = Get<std::string>(j, "mem_explanation");
  if (auto cp = j.find("checkpoint"); cp != j.end() && cp->is_object()) {
    e.checkpoint_step = GetOptional<int64_t>(*cp, "step");
    e.checkpoint_path = Get<std::string>(*cp, "path");
  }
  e.created_at = Get<std::string>(j, "created_at");
  e.slurm_job_id = GetOptional<int64_t>(j, "slurm_job_id");
  e.nodes = Get<std::string>(j, "nodes");
  e.slurm_state = Get<std::string>(j, "slurm_state");
  if (auto counts = j.find("task_counts"); counts != j.end() && counts->is_object()) {
    for (const auto& [role, c] : counts->items())
      e.task_counts[role] = {Get<int>(c, "total"), Get<int>(c, "registered"),
                             Get<int>(c, "running"), Get<int>(c, "done"), Get<int>(c, "failed")};
  }
  for (const json& a : j.value("attempts", json::array())) e.attempts.push_back(AttemptFromJson(a));
  for (const json& t : j.value("tasks", json::array())) e.tasks.push_back(TaskFromJson(t));
  for (const json& ev : j.value("events", json::array())) e.events.push_back(EventFromJson(ev));
  e.raw = j;
  return e;
}

ExperimentList ExperimentListFromJson(const json& j) {
  ExperimentList list;
  for (const json& e : j.value("experiments", json::array()))
    list.experiments.push_back(ExperimentFromJson(e));
  list.total = Get<int64_t>(j, "total");
  list.raw = j;
  return list;
}

DryRun DryRunFromJson(const json& j) {
  DryRun d;
  d.id = Get<std::string>(j, "id");
  d.mem_per_task_mb = Get<int64_t>(j, "mem_per_task_mb");
  d.mem_per_cpu_mb = Get<int64_t>(j, "mem_per_cpu_mb");
  d.mem_explanation = Get<std::string>(j, "mem_explanation");
  d.job_name = Get<std::string>(j, "job_name");
  d.sbatch = Get<std::string>(j, "sbatch");
  d.raw = j;
  return d;
}

TrainingMetrics TrainingMetricsFromJson(const json& j) {
  TrainingMetrics m;
  for (const json& t : j.value("tags", json::array())) {
    TrainingMetrics::Tag tag;
    tag.tag = Get<std::string>(t, "tag");
    tag.points = Get<int64_t>(t, "points");
    tag.reported = Get<int64_t>(t, "reported");
    if (const json last = t.value("last", json()); last.is_object()) {
      tag.step = GetOptional<int64_t>(last, "step");
      tag.value = GetOptional<double>(last, "value");
      tag.attempt = GetOptional<int>(last, "attempt");
    }
    m.tags.push_back(std::move(tag));
  }
  if (const json rate = j.value("steps_per_second", json()); rate.is_object()) {
    const json values = rate.value("value", json::array());
    if (!values.empty() && values.back().is_number())
      m.steps_per_second = values.back().get<double>();
    m.steps_per_second_tag = Get<std::string>(rate, "tag");
  }
  if (const json tb = j.value("tensorboard", json()); tb.is_object())
    m.tensorboard_command = Get<std::string>(tb, "command");
  m.raw = j;
  return m;
}

}  // namespace tfslurm::client
