-- An experiment's spec may change when it is resumed (POST
-- /experiments/{id}/resume with changes): every revision is kept, and each
-- attempt records the revision it ran. Existing experiments have one
-- revision, their spec as submitted.
ALTER TABLE experiments ADD COLUMN spec_revision INTEGER NOT NULL DEFAULT 1;
ALTER TABLE attempts ADD COLUMN spec_revision INTEGER NOT NULL DEFAULT 1;
CREATE TABLE spec_revisions (
  experiment_id TEXT NOT NULL REFERENCES experiments(id) ON DELETE CASCADE,
  revision INTEGER NOT NULL,
  spec TEXT NOT NULL,                 -- canonical JSON of the validated spec
  created_at INTEGER NOT NULL,
  changes TEXT NOT NULL DEFAULT '',   -- for people: what changed from the revision before
  PRIMARY KEY (experiment_id, revision)
);
INSERT INTO spec_revisions (experiment_id, revision, spec, created_at)
  SELECT id, 1, spec, created_at FROM experiments;
