-- Training scalars (docs/metrics.md, "Training scalars"): the tags of an
-- experiment, and their points across attempts, downsampled to a bound per
-- tag by store/sqlite_scalars.cc. Deleting an experiment deletes them.
CREATE TABLE scalar_tags (
  id INTEGER PRIMARY KEY,
  experiment_id TEXT NOT NULL REFERENCES experiments(id) ON DELETE CASCADE,
  tag TEXT NOT NULL,
  reported INTEGER NOT NULL DEFAULT 0,  -- points ever reported, before downsampling
  UNIQUE (experiment_id, tag)
);

CREATE TABLE scalars (
  tag_id INTEGER NOT NULL REFERENCES scalar_tags(id) ON DELETE CASCADE,
  attempt INTEGER NOT NULL,
  step INTEGER NOT NULL,
  wall_time REAL NOT NULL,              -- seconds since the Unix epoch
  value REAL,                           -- NULL: NaN or an infinity was reported
  PRIMARY KEY (tag_id, attempt, step)
) WITHOUT ROWID;
