-- Experiments, their attempts (one Slurm job each), the tasks of an attempt
-- and the event log. Times are Unix milliseconds.
CREATE TABLE experiments (
  id TEXT PRIMARY KEY,
  owner TEXT NOT NULL,
  spec TEXT NOT NULL,                 -- canonical JSON of the validated spec
  state TEXT NOT NULL,
  reason TEXT NOT NULL DEFAULT '',
  current_attempt INTEGER NOT NULL DEFAULT 0,
  restarts INTEGER NOT NULL DEFAULT 0,
  model_dir TEXT NOT NULL,
  mem_per_task_mb INTEGER NOT NULL,
  mem_explanation TEXT NOT NULL,
  checkpoint_step INTEGER,            -- NULL: no checkpoint seen
  checkpoint_path TEXT NOT NULL DEFAULT '',
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  next_attempt_at INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX experiments_by_created ON experiments(created_at DESC, id);
CREATE INDEX experiments_by_state ON experiments(state, created_at DESC);
CREATE INDEX experiments_by_owner ON experiments(owner, created_at DESC);

CREATE TABLE attempts (
  experiment_id TEXT NOT NULL REFERENCES experiments(id) ON DELETE CASCADE,
  number INTEGER NOT NULL,
  secret_sha256 TEXT NOT NULL,        -- the secret itself is never stored
  job_name TEXT NOT NULL,
  slurm_job_id INTEGER NOT NULL DEFAULT 0,
  state TEXT NOT NULL,                -- submitting | pending | running | ended
  slurm_state TEXT NOT NULL DEFAULT '',
  end_reason TEXT NOT NULL DEFAULT '',
  reason TEXT NOT NULL DEFAULT '',
  nodes TEXT NOT NULL DEFAULT '',
  sbatch_script TEXT NOT NULL,
  start_step INTEGER,
  exit_code INTEGER NOT NULL DEFAULT 0,
  submitted_at INTEGER NOT NULL DEFAULT 0,
  started_at INTEGER NOT NULL DEFAULT 0,
  ended_at INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (experiment_id, number)
);
CREATE INDEX attempts_by_job_name ON attempts(job_name);

CREATE TABLE tasks (
  experiment_id TEXT NOT NULL,
  attempt INTEGER NOT NULL,
  proc_id INTEGER NOT NULL,
  role TEXT NOT NULL,
  role_index INTEGER NOT NULL,
  node TEXT NOT NULL DEFAULT '',
  address TEXT NOT NULL DEFAULT '',
  state TEXT NOT NULL,
  exit_code INTEGER,
  signal INTEGER,
  registered_at INTEGER NOT NULL DEFAULT 0,
  last_heartbeat INTEGER NOT NULL DEFAULT 0,
  ended_at INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (experiment_id, attempt, proc_id),
  FOREIGN KEY (experiment_id, attempt) REFERENCES attempts(experiment_id, number) ON DELETE CASCADE
);

CREATE TABLE events (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  experiment_id TEXT NOT NULL REFERENCES experiments(id) ON DELETE CASCADE,
  attempt INTEGER NOT NULL DEFAULT 0,
  at INTEGER NOT NULL,
  what TEXT NOT NULL,
  why TEXT NOT NULL DEFAULT ''
);
CREATE INDEX events_by_experiment ON events(experiment_id, id);
