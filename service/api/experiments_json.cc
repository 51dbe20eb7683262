#include "service/api/experiments_json.h"

#include <ctime>
#include <map>

namespace tfslurm::api {

using nlohmann::json;

json Timestamp(int64_t ms) {
  if (ms <= 0) return nullptr;
  std::time_t secs = ms / 1000;
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[40];
  size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  std::snprintf(buf + n, sizeof buf - n, ".%03dZ", static_cast<int>(ms % 1000));
  return buf;
}

static json AttemptJson(const AttemptRecord& a) {
  return {{"number", a.number},
          {"slurm_job_id", a.slurm_job_id ? json(a.slurm_job_id) : json(nullptr)},
          {"job_name", a.job_name},
          {"state", a.state},
          {"slurm_state", a.slurm_state},
          {"end_reason", a.end_reason},
          {"reason", a.reason},
          {"nodes", a.nodes},
          {"start_step", a.start_step ? json(*a.start_step) : json(nullptr)},
          {"exit_code", a.exit_code},
          {"submitted_at", Timestamp(a.submitted_at)},
          {"started_at", Timestamp(a.started_at)},
          {"ended_at", Timestamp(a.ended_at)}};
}

json ExperimentSummaryJson(const ExperimentRecord& e, const AttemptRecord* current) {
  json j = {{"id", e.id},
            {"owner", e.owner},
            {"state", ExperimentStateName(e.state)},
            {"reason", e.reason},
            {"attempt", e.current_attempt},
            {"restarts", e.restarts},
            {"model_dir", e.model_dir},
            {"mem_per_task_mb", e.mem_per_task_mb},
            {"mem_explanation", e.mem_explanation},
            {"checkpoint", e.checkpoint_step
                               ? json{{"step", *e.checkpoint_step}, {"path", e.checkpoint_path}}
                               : json(nullptr)},
            {"created_at", Timestamp(e.created_at)},
            {"updated_at", Timestamp(e.updated_at)},
            {"next_attempt_at", Timestamp(e.next_attempt_at)},
            {"slurm_job_id", nullptr},
            {"nodes", ""}};
  if (current) {
    j["slurm_job_id"] = current->slurm_job_id ? json(current->slurm_job_id) : json(nullptr);
    j["nodes"] = current->nodes;
    j["slurm_state"] = current->slurm_state;
  }
  return j;
}

json TaskCountsJson(const std::vector<TaskRecord>& tasks) {
  std::map<std::string, std::map<std::string, int>> counts;
  for (const TaskRecord& t : tasks) {
    auto& c = counts[t.role];
    c["total"]++;
    if (t.state != "pending") c["registered"]++;
    if (t.state == "running") c["running"]++;
    if (t.state == "succeeded" || t.state == "failed" || t.state == "reaped" || t.state == "lost")
      c["done"]++;
    if (t.state == "failed" || t.state == "lost") c["failed"]++;
  }
  json out = json::object();
  for (auto& [role, c] : counts)
    out[role] = {{"total", c["total"]},
                 {"registered", c["registered"]},
                 {"running", c["running"]},
                 {"done", c["done"]},
                 {"failed", c["failed"]}};
  return out;
}

json ExperimentViewJson(const ExperimentView& v, int64_t now_ms) {
  const AttemptRecord* current = v.attempts.empty() ? nullptr : &v.attempts.back();
  json j = ExperimentSummaryJson(v.experiment, current);
  j["spec"] = json::parse(v.experiment.spec_json, nullptr, false);
  json attempts = json::array();
  for (const AttemptRecord& a : v.attempts) attempts.push_back(AttemptJson(a));
  j["attempts"] = attempts;
  json tasks = json::array();
  for (const TaskRecord& t : v.tasks) {
    tasks.push_back({{"proc_id", t.proc_id},
                     {"role", t.role},
                     {"index", t.index},
                     {"node", t.node},
                     {"address", t.address},
                     {"state", t.state},
                     {"exit_code", t.exit_code ? json(*t.exit_code) : json(nullptr)},
                     {"signal", t.signal ? json(*t.signal) : json(nullptr)},
                     {"registered_at", Timestamp(t.registered_at)},
                     {"ended_at", Timestamp(t.ended_at)},
                     {"heartbeat_age_s", t.last_heartbeat && t.state == "running"
                                             ? json((now_ms - t.last_heartbeat) / 1000.0)
                                             : json(nullptr)}});
  }
  j["tasks"] = tasks;
  j["task_counts"] = TaskCountsJson(v.tasks);
  json events = json::array();
  for (const EventRecord& e : v.events)
    events.push_back({{"id", e.id},
                      {"at", Timestamp(e.at)},
                      {"attempt", e.attempt},
                      {"what", e.what},
                      {"why", e.why}});
  j["events"] = events;
  return j;
}

}  // namespace tfslurm::api
