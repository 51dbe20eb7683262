// The store's rows as SQL column lists and records: each Read* reads the
// current row of a Statement by column name, so a query may select its
// columns in any order (and must name each one it reads). Internal to
// service/store.
//
// Thread safety: functions of their arguments; see sqlite_statement.h.
#pragma once

#include "service/core/records.h"
#include "service/store/sqlite_statement.h"

namespace tfslurm::store {

// The value a stored name stands for. A name that is not in the table is an
// error, not a default: a database of a newer tfslurmd is refused when it is
// opened (migrations.h), so an unknown name here is damage or a bug, and a
// guess (an attempt read as ended, a task as lost) would act on it.
template <typename E, size_t N>
StatusOr<E> StoredName(const EnumName<E> (&table)[N], const std::string& name, const char* column,
                       const std::string& row) {
  if (std::optional<E> value = ValueIn(table, name)) return *value;
  return Internal("the store holds " + std::string(column) + " '" + name + "' for " + row +
                  ", which this tfslurmd does not know");
}

// Returns the status of `expr`, a StatusOr, from the caller when it failed;
// else assigns its value to `lhs`.
#define TFSLURM_ASSIGN_OR_RETURN(lhs, expr)                 \
  do {                                                      \
    auto tfslurm_value = (expr);                            \
    if (!tfslurm_value.ok()) return tfslurm_value.status(); \
    lhs = std::move(tfslurm_value).value();                 \
  } while (false)

inline constexpr const char* kExperimentColumns =
    "id, owner, spec, state, reason, current_attempt, restarts, model_dir, mem_per_task_mb, "
    "mem_explanation, checkpoint_step, checkpoint_path, created_at, updated_at, next_attempt_at, "
    "excluded_nodes, spec_revision";

// The list's columns: an experiment's, from `experiments e`, without its
// spec (a list never shows it), then its current attempt's, from
// `attempts a`, named attempt_* where they would clash with the
// experiment's. Every one is named with AS: SQLite leaves the name of a
// column without one unspecified.
inline constexpr const char* kSummaryColumns =
    "e.id AS id, e.owner AS owner, '' AS spec, e.state AS state, e.reason AS reason, "
    "e.current_attempt AS current_attempt, e.restarts AS restarts, e.model_dir AS model_dir, "
    "e.mem_per_task_mb AS mem_per_task_mb, e.mem_explanation AS mem_explanation, "
    "e.checkpoint_step AS checkpoint_step, e.checkpoint_path AS checkpoint_path, "
    "e.created_at AS created_at, e.updated_at AS updated_at, e.next_attempt_at AS "
    "next_attempt_at, e.excluded_nodes AS excluded_nodes, e.spec_revision AS spec_revision, "
    "a.number AS attempt_number, "
    "a.slurm_job_id AS attempt_slurm_job_id, "
    "a.nodes AS attempt_nodes, a.slurm_state AS attempt_slurm_state";

// A row of kExperimentColumns (or kSummaryColumns).
inline StatusOr<ExperimentRecord> ReadExperiment(Statement& s) {
  ExperimentRecord e;
  e.id = s.Text("id");
  e.owner = s.Text("owner");
  e.spec_json = s.Text("spec");
  TFSLURM_ASSIGN_OR_RETURN(e.state, StoredName(kExperimentStateNames, s.Text("state"),
                                               "experiment state", "experiment " + e.id));
  e.reason = s.Text("reason");
  e.current_attempt = static_cast<int>(s.Int("current_attempt"));
  e.restarts = static_cast<int>(s.Int("restarts"));
  e.model_dir = s.Text("model_dir");
  e.mem_per_task_mb = s.Int("mem_per_task_mb");
  e.mem_explanation = s.Text("mem_explanation");
  e.checkpoint_step = s.OptInt("checkpoint_step");
  e.checkpoint_path = s.Text("checkpoint_path");
  e.created_at = s.Int("created_at");
  e.updated_at = s.Int("updated_at");
  e.next_attempt_at = s.Int("next_attempt_at");
  e.spec_revision = static_cast<int>(s.Int("spec_revision"));
  // Comma-separated: node names never hold a comma.
  std::string excluded = s.Text("excluded_nodes");
  for (size_t start = 0; start < excluded.size();) {
    size_t comma = excluded.find(',', start);
    if (comma == std::string::npos) comma = excluded.size();
    if (comma > start) e.excluded_nodes.push_back(excluded.substr(start, comma - start));
    start = comma + 1;
  }
  return e;
}

// A row of kSummaryColumns: the experiment, and its current attempt's Slurm
// facts when it has one (the LEFT JOIN found a row). No task counts.
inline StatusOr<ExperimentSummary> ReadSummary(Statement& s) {
  ExperimentSummary summary;
  TFSLURM_ASSIGN_OR_RETURN(summary.experiment, ReadExperiment(s));
  summary.has_attempt = s.OptInt("attempt_number").has_value();
  summary.slurm_job_id = s.Int("attempt_slurm_job_id");
  summary.nodes = s.Text("attempt_nodes");
  summary.slurm_state = s.Text("attempt_slurm_state");
  return summary;
}

inline constexpr const char* kAttemptColumns =
    "experiment_id, number, secret_sha256, job_name, slurm_job_id, state, slurm_state, "
    "end_reason, reason, nodes, sbatch_script, start_step, exit_code, submitted_at, started_at, "
    "ended_at, in_place, spec_revision, node_slots";

inline StatusOr<AttemptRecord> ReadAttempt(Statement& s) {
  AttemptRecord a;
  a.experiment_id = s.Text("experiment_id");
  a.number = static_cast<int>(s.Int("number"));
  a.secret_sha256 = s.Text("secret_sha256");
  a.job_name = s.Text("job_name");
  a.slurm_job_id = s.Int("slurm_job_id");
  const std::string row = "attempt " + std::to_string(a.number) + " of " + a.experiment_id;
  TFSLURM_ASSIGN_OR_RETURN(a.state,
                           StoredName(kAttemptStateNames, s.Text("state"), "attempt state", row));
  a.slurm_state = s.Text("slurm_state");
  // "" while the attempt has no end reason.
  if (std::string reason = s.Text("end_reason"); !reason.empty())
    TFSLURM_ASSIGN_OR_RETURN(a.end_reason, StoredName(kEndReasonNames, reason, "end reason", row));
  a.reason = s.Text("reason");
  a.nodes = s.Text("nodes");
  a.sbatch_script = s.Text("sbatch_script");
  a.start_step = s.OptInt("start_step");
  a.in_place = s.Int("in_place") != 0;
  std::optional<NodeSlots> slots = NodeSlots::FromText(s.Text("node_slots"));
  if (!slots)
    return Internal("the store holds node slots '" + s.Text("node_slots") + "' for " + row +
                    ", which this tfslurmd cannot read");
  a.node_slots = *slots;
  a.exit_code = static_cast<int>(s.Int("exit_code"));
  a.submitted_at = s.Int("submitted_at");
  a.started_at = s.Int("started_at");
  a.ended_at = s.Int("ended_at");
  a.spec_revision = static_cast<int>(s.Int("spec_revision"));
  return a;
}

inline constexpr const char* kTaskColumns =
    "experiment_id, attempt, task_index, role, role_index, node, address, state, exit_code, "
    "signal, "
    "registered_at, last_heartbeat, ended_at, local_rank, detail, restarts, startup_error";

inline StatusOr<TaskRecord> ReadTask(Statement& s) {
  TaskRecord t;
  t.experiment_id = s.Text("experiment_id");
  t.attempt = static_cast<int>(s.Int("attempt"));
  t.task = TaskIndex(static_cast<int>(s.Int("task_index")));
  t.role = s.Text("role");
  t.index = static_cast<int>(s.Int("role_index"));
  t.node = s.Text("node");
  t.address = s.Text("address");
  TFSLURM_ASSIGN_OR_RETURN(
      t.state, StoredName(kTaskStateNames, s.Text("state"), "task state",
                          "task " + std::to_string(t.task.value()) + " of " + t.experiment_id));
  if (auto v = s.OptInt("exit_code")) t.exit_code = static_cast<int>(*v);
  if (auto v = s.OptInt("signal")) t.signal = static_cast<int>(*v);
  t.registered_at = s.Int("registered_at");
  t.last_heartbeat = s.Int("last_heartbeat");
  t.ended_at = s.Int("ended_at");
  t.local_rank = static_cast<int>(s.Int("local_rank"));
  t.detail = s.Text("detail");
  t.restarts = static_cast<int>(s.Int("restarts"));
  t.startup_error = s.Int("startup_error") != 0;
  return t;
}

inline constexpr const char* kEventColumns = "id, experiment_id, attempt, at, what, why";

inline StatusOr<EventRecord> ReadEvent(Statement& s) {
  EventRecord ev;
  ev.id = s.Int("id");
  ev.experiment_id = s.Text("experiment_id");
  ev.attempt = static_cast<int>(s.Int("attempt"));
  ev.at = s.Int("at");
  TFSLURM_ASSIGN_OR_RETURN(ev.what, StoredName(kEventCodeNames, s.Text("what"), "event code",
                                               "an event of " + ev.experiment_id));
  ev.why = s.Text("why");
  return ev;
}

inline constexpr const char* kTokenColumns = "sha256, user, admin, created_at";

inline TokenRecord ReadToken(Statement& s) {
  TokenRecord t;
  t.sha256 = s.Text("sha256");
  t.user = s.Text("user");
  t.admin = s.Int("admin") != 0;
  t.created_at = s.Int("created_at");
  return t;
}

// Writers of one row each, inside the caller's transaction.
inline Status WriteTask(StatementCache& sql, const TaskRecord& t) {
  Statement s = sql.Prepare(
      "INSERT OR REPLACE INTO tasks (experiment_id, attempt, task_index, role, role_index, node, "
      "address, state, exit_code, signal, registered_at, last_heartbeat, ended_at, "
      "local_rank, detail, restarts, startup_error) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)");
  s.Bind(1, t.experiment_id).Bind(2, t.attempt).Bind(3, t.task.value()).Bind(4, t.role);
  s.Bind(5, t.index).Bind(6, t.node).Bind(7, t.address).Bind(8, TaskStateName(t.state));
  s.Bind(9, t.exit_code).Bind(10, t.signal);
  s.Bind(11, t.registered_at).Bind(12, t.last_heartbeat).Bind(13, t.ended_at);
  s.Bind(14, t.local_rank).Bind(15, t.detail).Bind(16, t.restarts);
  s.Bind(17, t.startup_error ? 1 : 0);
  if (s.Step() != SQLITE_DONE) return sql.Error("writing task");
  return Status::Ok();
}

inline Status WriteEvent(StatementCache& sql, const EventRecord& ev) {
  Statement s =
      sql.Prepare("INSERT INTO events (experiment_id, attempt, at, what, why) VALUES (?,?,?,?,?)");
  s.Bind(1, ev.experiment_id).Bind(2, ev.attempt).Bind(3, ev.at).Bind(4, EventCodeName(ev.what));
  s.Bind(5, ev.why);
  if (s.Step() != SQLITE_DONE) return sql.Error("writing event");
  return Status::Ok();
}

}  // namespace tfslurm::store
