#include "service/store/sqlite_sweeps.h"

#include "service/store/sqlite_rows.h"

namespace tfslurm::store {
namespace {

constexpr const char* kSweepColumns =
    "id, owner, spec, state, reason, trials, created_at, updated_at";
constexpr const char* kTrialColumns =
    "sweep_id, trial, experiment_id, params, state, end_reason, objective, objective_step, "
    "rungs_passed, node_seconds, note, started_at, ended_at, last_step";

StatusOr<SweepRecord> ReadSweepRow(Statement& s) {
  SweepRecord r;
  r.id = s.Text("id");
  r.owner = s.Text("owner");
  r.spec_json = s.Text("spec");
  TFSLURM_ASSIGN_OR_RETURN(
      r.state, StoredName(kSweepStateNames, s.Text("state"), "sweep state", "sweep " + r.id));
  r.reason = s.Text("reason");
  r.trials = static_cast<int>(s.Int("trials"));
  r.created_at = s.Int("created_at");
  r.updated_at = s.Int("updated_at");
  return r;
}

StatusOr<SweepTrialRecord> ReadTrialRow(Statement& s) {
  SweepTrialRecord t;
  t.sweep_id = s.Text("sweep_id");
  t.index = static_cast<int>(s.Int("trial"));
  t.experiment_id = s.Text("experiment_id");
  t.params_json = s.Text("params");
  const std::string row = "trial " + std::to_string(t.index) + " of sweep " + t.sweep_id;
  TFSLURM_ASSIGN_OR_RETURN(t.state,
                           StoredName(kSweepTrialStateNames, s.Text("state"), "trial state", row));
  // "" while the trial has no end reason.
  if (std::string reason = s.Text("end_reason"); !reason.empty())
    TFSLURM_ASSIGN_OR_RETURN(t.end_reason, StoredName(kEndReasonNames, reason, "end reason", row));
  t.objective = s.OptReal("objective");
  t.objective_step = s.OptInt("objective_step");
  t.rungs_passed = static_cast<int>(s.Int("rungs_passed"));
  t.node_seconds = s.Real("node_seconds");
  t.note = s.Text("note");
  t.started_at = s.Int("started_at");
  t.ended_at = s.Int("ended_at");
  t.last_step = s.OptInt("last_step");
  return t;
}

}  // namespace

Status WriteSweepChanges(StatementCache& sql, const Changes& c) {
  if (c.delete_sweep) {
    // The foreign key cascades to its trials' rows.
    Statement s = sql.Prepare("DELETE FROM sweeps WHERE id=?");
    s.Bind(1, *c.delete_sweep);
    if (s.Step() != SQLITE_DONE) return sql.Error("deleting a sweep");
  }
  if (c.sweep) {
    const SweepRecord& r = *c.sweep;
    std::string text =
        std::string("INSERT INTO sweeps (") + kSweepColumns + ") VALUES (?,?,?,?,?,?,?,?)";
    if (!c.create_sweep)
      text +=
          " ON CONFLICT(id) DO UPDATE SET state=excluded.state, reason=excluded.reason, "
          "updated_at=excluded.updated_at";
    Statement s = sql.Prepare(text);
    s.Bind(1, r.id).Bind(2, r.owner).Bind(3, r.spec_json).Bind(4, SweepStateName(r.state));
    s.Bind(5, r.reason).Bind(6, r.trials).Bind(7, r.created_at).Bind(8, r.updated_at);
    int rc = s.Step();
    if (rc == SQLITE_CONSTRAINT && c.create_sweep)
      return {StatusCode::kAlreadyExists, "a sweep with id '" + r.id + "' exists"};
    if (rc != SQLITE_DONE) return sql.Error("writing a sweep");
  }
  for (const SweepTrialRecord& t : c.sweep_trials) {
    Statement s = sql.Prepare(std::string("INSERT INTO sweep_trials (") + kTrialColumns +
                              ") VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?) ON CONFLICT(sweep_id, trial) "
                              "DO UPDATE SET state=excluded.state, end_reason=excluded.end_reason, "
                              "objective=excluded.objective, "
                              "objective_step=excluded.objective_step, "
                              "rungs_passed=excluded.rungs_passed, "
                              "node_seconds=excluded.node_seconds, note=excluded.note, "
                              "ended_at=excluded.ended_at, last_step=excluded.last_step");
    s.Bind(1, t.sweep_id).Bind(2, t.index).Bind(3, t.experiment_id).Bind(4, t.params_json);
    s.Bind(5, SweepTrialStateName(t.state))
        .Bind(6, t.end_reason ? EndReasonName(*t.end_reason) : "");
    if (t.objective)
      s.Bind(7, *t.objective);
    else
      s.BindNull(7);
    s.Bind(8, t.objective_step).Bind(9, t.rungs_passed).Bind(10, t.node_seconds);
    s.Bind(11, t.note).Bind(12, t.started_at).Bind(13, t.ended_at).Bind(14, t.last_step);
    if (s.Step() != SQLITE_DONE) return sql.Error("writing a sweep's trial");
  }
  return Status::Ok();
}

StatusOr<SweepRecord> ReadSweep(StatementCache& sql, const std::string& id) {
  Statement s = sql.Prepare(std::string("SELECT ") + kSweepColumns + " FROM sweeps WHERE id=?");
  s.Bind(1, id);
  int rc = s.Step();
  if (rc == SQLITE_ROW) return ReadSweepRow(s);
  if (rc == SQLITE_DONE) return NotFound("no sweep with id '" + id + "'");
  return sql.Error("reading a sweep");
}

StatusOr<std::vector<SweepRecord>> ReadSweeps(StatementCache& sql, const SweepQuery& q) {
  Statement s = sql.Prepare(
      std::string("SELECT ") + kSweepColumns +
      " FROM sweeps WHERE (?1 = '' OR owner = ?1) AND (?2 = 0 OR state = 'running' OR id IN "
      "(SELECT sweep_id FROM sweep_trials WHERE state = 'running')) "
      "ORDER BY created_at DESC, id");
  s.Bind(1, q.owner).Bind(2, q.open_only ? 1 : 0);
  std::vector<SweepRecord> out;
  int rc;
  while ((rc = s.Step()) == SQLITE_ROW) {
    auto row = ReadSweepRow(s);
    if (!row.ok()) return row.status();
    out.push_back(std::move(row).value());
  }
  if (rc != SQLITE_DONE) return sql.Error("listing sweeps");
  return out;
}

StatusOr<std::vector<SweepTrialRecord>> ReadSweepTrials(StatementCache& sql,
                                                        const std::string& sweep_id) {
  Statement s = sql.Prepare(std::string("SELECT ") + kTrialColumns +
                            " FROM sweep_trials WHERE sweep_id=? ORDER BY trial");
  s.Bind(1, sweep_id);
  std::vector<SweepTrialRecord> out;
  int rc;
  while ((rc = s.Step()) == SQLITE_ROW) {
    auto row = ReadTrialRow(s);
    if (!row.ok()) return row.status();
    out.push_back(std::move(row).value());
  }
  if (rc != SQLITE_DONE) return sql.Error("listing a sweep's trials");
  return out;
}

StatusOr<std::vector<std::pair<std::string, int64_t>>> CountEndedTrials(StatementCache& sql) {
  Statement s = sql.Prepare(
      "SELECT end_reason, count(*) AS n FROM sweep_trials WHERE state = 'ended' "
      "GROUP BY end_reason ORDER BY end_reason");
  std::vector<std::pair<std::string, int64_t>> out;
  int rc;
  while ((rc = s.Step()) == SQLITE_ROW) out.emplace_back(s.Text("end_reason"), s.Int("n"));
  if (rc != SQLITE_DONE) return sql.Error("counting a sweep's trials");
  return out;
}

}  // namespace tfslurm::store
