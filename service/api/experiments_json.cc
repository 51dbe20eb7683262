#include "service/api/experiments_json.h"

#include <ctime>
#include <map>

namespace tfslurm::api {

void WriteTimestamp(JsonWriter& w, int64_t ms) {
  if (ms <= 0) {
    w.Null();
    return;
  }
  std::time_t secs = ms / 1000;
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[40];
  size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  std::snprintf(buf + n, sizeof buf - n, ".%03dZ", static_cast<int>(ms % 1000));
  w.String(buf);
}

namespace {

void WriteTimestampField(JsonWriter& w, std::string_view key, int64_t ms) {
  w.Key(key);
  WriteTimestamp(w, ms);
}

void WriteJobIdField(JsonWriter& w, int64_t slurm_job_id) {
  w.Key("slurm_job_id");
  if (slurm_job_id)
    w.Int(slurm_job_id);
  else
    w.Null();
}

// Per role: total, registered, running, done, failed.
void WriteTaskCounts(JsonWriter& w, const std::vector<TaskStateCount>& counted) {
  struct Counts {
    int total = 0, registered = 0, running = 0, done = 0, failed = 0;
  };
  std::map<std::string, Counts> by_role;
  for (const TaskStateCount& t : counted) {
    Counts& c = by_role[t.role];
    c.total += t.count;
    if (t.state != TaskState::kPending) c.registered += t.count;
    if (t.state == TaskState::kRunning) c.running += t.count;
    if (HasExited(t.state) || t.state == TaskState::kLost) c.done += t.count;
    if (t.state == TaskState::kFailed || t.state == TaskState::kLost) c.failed += t.count;
  }
  w.Key("task_counts").BeginObject();
  for (const auto& [role, c] : by_role) {
    w.Key(role).BeginObject();
    w.Field("total", c.total).Field("registered", c.registered).Field("running", c.running);
    w.Field("done", c.done).Field("failed", c.failed);
    w.EndObject();
  }
  w.EndObject();
}

// The members a list item and the full view share, with the current
// attempt's Slurm facts when there is an attempt.
void WriteSummaryFields(JsonWriter& w, const ExperimentRecord& e, const int64_t* slurm_job_id,
                        const std::string* nodes, const std::string* slurm_state) {
  w.Field("id", e.id).Field("owner", e.owner);
  w.Field("state", std::string_view(ExperimentStateName(e.state)));
  w.Field("reason", e.reason).Field("attempt", e.current_attempt).Field("restarts", e.restarts);
  w.Field("model_dir", e.model_dir).Field("mem_per_task_mb", e.mem_per_task_mb);
  w.Field("mem_explanation", e.mem_explanation);
  w.Key("checkpoint");
  if (e.checkpoint_step) {
    w.BeginObject().Field("step", *e.checkpoint_step).Field("path", e.checkpoint_path);
    w.EndObject();
  } else {
    w.Null();
  }
  WriteTimestampField(w, "created_at", e.created_at);
  WriteTimestampField(w, "updated_at", e.updated_at);
  WriteTimestampField(w, "next_attempt_at", e.next_attempt_at);
  WriteJobIdField(w, slurm_job_id ? *slurm_job_id : 0);
  w.Field("nodes", nodes ? *nodes : std::string());
  if (slurm_state) w.Field("slurm_state", *slurm_state);
}

void WriteAttempt(JsonWriter& w, const AttemptRecord& a) {
  w.BeginObject().Field("number", a.number);
  WriteJobIdField(w, a.slurm_job_id);
  w.Field("job_name", a.job_name)
      .Field("state", AttemptStateName(a.state))
      .Field("slurm_state", a.slurm_state);
  w.Field("end_reason", a.end_reason ? EndReasonName(*a.end_reason) : "")
      .Field("reason", a.reason)
      .Field("nodes", a.nodes);
  w.Field("start_step", a.start_step).Field("exit_code", a.exit_code);
  w.Field("in_place", a.in_place);
  w.Field("spec_revision", a.spec_revision);
  WriteTimestampField(w, "submitted_at", a.submitted_at);
  WriteTimestampField(w, "started_at", a.started_at);
  WriteTimestampField(w, "ended_at", a.ended_at);
  w.EndObject();
}

void WriteTask(JsonWriter& w, const TaskView& t, int64_t now_ms) {
  w.BeginObject().Field("proc_id", t.proc_id.value()).Field("role", t.role).Field("index", t.index);
  w.Field("node", t.node).Field("local_rank", t.local_rank).Field("address", t.address);
  w.Field("component", t.component);
  w.Field("state", TaskStateName(t.state));
  w.Field("exit_code", t.exit_code).Field("signal", t.signal).Field("detail", t.detail);
  w.Field("restarts", t.restarts);
  WriteTimestampField(w, "registered_at", t.registered_at);
  WriteTimestampField(w, "ended_at", t.ended_at);
  w.Key("heartbeat_age_s");
  if (t.last_heartbeat && t.state == TaskState::kRunning)
    w.Double(static_cast<double>(now_ms - t.last_heartbeat) / 1000.0);
  else
    w.Null();
  w.EndObject();
}

// The image and the runtime per role (docs/containers.md); [] without a container.
void WriteContainers(JsonWriter& w, const std::vector<RoleContainer>& containers) {
  w.Key("containers").BeginArray();
  for (const RoleContainer& c : containers)
    w.BeginObject()
        .Field("role", c.role)
        .Field("image", c.image)
        .Field("runtime", c.runtime)
        .EndObject();
  w.EndArray();
}

}  // namespace

std::string ExperimentSummaryJson(const ExperimentSummary& s) {
  JsonWriter w;
  w.Reserve(700);  // about what an item takes
  w.BeginObject();
  WriteSummaryFields(w, s.experiment, s.has_attempt ? &s.slurm_job_id : nullptr,
                     s.has_attempt ? &s.nodes : nullptr, s.has_attempt ? &s.slurm_state : nullptr);
  if (!IsTerminal(s.experiment.state)) WriteTaskCounts(w, s.task_counts);
  w.EndObject();
  return w.Take();
}

std::string ExperimentListJson(const std::vector<std::shared_ptr<const std::string>>& items,
                               int64_t total, int limit, int offset) {
  size_t size = 100;
  for (const auto& item : items) size += item->size() + 1;
  JsonWriter w;
  w.Reserve(size);
  w.BeginObject().Key("experiments").BeginArray();
  for (const auto& item : items) w.Raw(*item);
  w.EndArray().Field("total", total).Field("limit", limit).Field("offset", offset).EndObject();
  return w.Take();
}

std::string ExperimentViewJson(const ExperimentView& v, int64_t now_ms, const TaskPage& page) {
  JsonWriter w;
  w.BeginObject();
  const AttemptRecord* current = v.attempts.empty() ? nullptr : &v.attempts.back();
  WriteSummaryFields(w, v.experiment, current ? &current->slurm_job_id : nullptr,
                     current ? &current->nodes : nullptr,
                     current ? &current->slurm_state : nullptr);
  w.Key("excluded_nodes").BeginArray();
  for (const std::string& node : v.experiment.excluded_nodes) w.String(node);
  w.EndArray();
  // The stored spec is the canonical JSON the service wrote itself.
  w.Key("spec").Raw(v.experiment.spec_json.empty() ? "null" : v.experiment.spec_json);
  w.Field("spec_revision", v.experiment.spec_revision);
  w.Key("spec_revisions").BeginArray();
  for (const SpecRevisionRecord& r : v.spec_revisions) {
    w.BeginObject().Field("revision", r.revision);
    WriteTimestampField(w, "created_at", r.created_at);
    w.Field("changes", r.changes).EndObject();
  }
  w.EndArray();
  w.Key("attempts").BeginArray();
  for (const AttemptRecord& a : v.attempts) WriteAttempt(w, a);
  w.EndArray();
  w.Key("tasks").BeginArray();
  const bool paged = v.tasks_total >= 0;  // by the store already
  int64_t matching = 0;
  for (const TaskView& t : v.tasks) {
    if (!paged && page.state && t.state != *page.state) continue;
    const int64_t at = matching++;
    if (paged || (at >= page.offset && (page.limit < 0 || at < page.offset + page.limit)))
      WriteTask(w, t, now_ms);
  }
  w.EndArray();
  w.Field("tasks_total", paged ? v.tasks_total : matching);
  w.Key("spares").BeginArray();
  for (const ExperimentView::Spare& s : v.spares)
    w.BeginObject().Field("node", s.node).Field("waiting", s.waiting).EndObject();
  w.EndArray();
  WriteContainers(w, v.containers);
  std::vector<TaskStateCount> counted = v.task_counts;
  if (!paged)
    for (const TaskRecord& t : v.tasks) counted.push_back({t.role, t.state, 1});
  WriteTaskCounts(w, counted);
  w.Key("events").BeginArray();
  for (const EventRecord& e : v.events) {
    w.BeginObject().Field("id", e.id);
    WriteTimestampField(w, "at", e.at);
    w.Field("attempt", e.attempt)
        .Field("what", EventCodeName(e.what))
        .Field("why", e.why)
        .EndObject();
  }
  w.EndArray();
  w.EndObject();
  return w.Take();
}

}  // namespace tfslurm::api
