#include "service/store/sqlite_spec_revisions.h"

namespace tfslurm::store {

Status InsertSpecRevision(StatementCache& sql, const SpecRevisionRecord& r) {
  Statement s = sql.Prepare(
      "INSERT INTO spec_revisions (experiment_id, revision, spec, created_at, changes) "
      "VALUES (?,?,?,?,?)");
  s.Bind(1, r.experiment_id).Bind(2, r.revision).Bind(3, r.spec_json).Bind(4, r.created_at);
  s.Bind(5, r.changes);
  int rc = s.Step();
  if (rc == SQLITE_CONSTRAINT)
    return {StatusCode::kAlreadyExists, "experiment '" + r.experiment_id + "' has spec revision " +
                                            std::to_string(r.revision) + " already"};
  if (rc != SQLITE_DONE) return sql.Error("writing a spec revision");
  return Status::Ok();
}

StatusOr<std::vector<SpecRevisionRecord>> ReadSpecRevisions(StatementCache& sql,
                                                            const std::string& experiment_id) {
  Statement s = sql.Prepare(
      "SELECT experiment_id, revision, spec, created_at, changes FROM spec_revisions "
      "WHERE experiment_id=? ORDER BY revision");
  s.Bind(1, experiment_id);
  std::vector<SpecRevisionRecord> out;
  int rc;
  while ((rc = s.Step()) == SQLITE_ROW)
    out.push_back({s.Text("experiment_id"), static_cast<int>(s.Int("revision")), s.Text("spec"),
                   s.Int("created_at"), s.Text("changes")});
  if (rc != SQLITE_DONE) return sql.Error("listing spec revisions");
  return out;
}

}  // namespace tfslurm::store
