-- How many times a task's program was restarted alone inside its attempt
-- (restart.max_task_restarts: a TF worker or evaluator under parameter
-- servers), so that the cap holds across a restart of tfslurmd.
ALTER TABLE tasks ADD COLUMN restarts INTEGER NOT NULL DEFAULT 0;
