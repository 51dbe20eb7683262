-- The last step a sweep's trial reported (its objective's tag), kept when it
-- ends: a trial stopped early at a rung runs on for the moment its programs
-- take to stop, and the step it reached is what its checkpoint and logs
-- show, not the rung's. NULL: it reported nothing, or ended before this
-- column existed.
ALTER TABLE sweep_trials ADD COLUMN last_step INTEGER;
