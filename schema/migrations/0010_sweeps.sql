-- Sweeps (core/sweep_spec.h): trials of one base experiment over a
-- parameter space. Each trial is an ordinary experiment <sweep>-<n>; its row
-- in sweep_trials is written in the transaction that creates the
-- experiment, so a trial exists exactly when its row does, and a restarted
-- tfslurmd neither loses nor repeats one. No foreign key to experiments:
-- a trial's row outlives its experiment's deletion, and records a trial
-- whose submission was refused (not_started) with no experiment at all.
CREATE TABLE sweeps (
  id TEXT PRIMARY KEY,
  owner TEXT NOT NULL,
  spec TEXT NOT NULL,                  -- canonical JSON of the validated sweep spec
  state TEXT NOT NULL,                 -- running | completed | cancelled
  reason TEXT NOT NULL DEFAULT '',
  trials INTEGER NOT NULL,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL
);
CREATE INDEX sweeps_by_owner ON sweeps(owner, created_at);
CREATE TABLE sweep_trials (
  sweep_id TEXT NOT NULL REFERENCES sweeps(id) ON DELETE CASCADE,
  trial INTEGER NOT NULL,
  experiment_id TEXT NOT NULL,
  params TEXT NOT NULL,                -- {"env.LR": 0.001, ...}
  state TEXT NOT NULL,                 -- running | ended | not_started
  end_reason TEXT NOT NULL DEFAULT '',
  objective REAL,
  objective_step INTEGER,
  rungs_passed INTEGER NOT NULL DEFAULT 0,
  node_seconds REAL NOT NULL DEFAULT 0,
  note TEXT NOT NULL DEFAULT '',
  started_at INTEGER NOT NULL DEFAULT 0,
  ended_at INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (sweep_id, trial)
);
CREATE INDEX sweep_trials_by_state ON sweep_trials(state);
