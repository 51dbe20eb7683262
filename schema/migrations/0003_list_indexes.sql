-- GET /experiments reads the listed experiments' current tasks by role and
-- state; a covering index answers that without reading the task rows.
CREATE INDEX tasks_by_role_state ON tasks(experiment_id, attempt, role, state);
-- The list's order (newest first, ties by id, both descending) without a sort.
DROP INDEX experiments_by_created;
CREATE INDEX experiments_by_created ON experiments(created_at DESC, id DESC);
