-- Whether a task's failure was one that repeats at every start, before its
-- attempt's first step (EndReason startup_error), as judged when its exit
-- came: a restarted tfslurmd judges the attempt's outcome again from its
-- tasks' rows, and by then the steps trained since cannot tell.
ALTER TABLE tasks ADD COLUMN startup_error INTEGER NOT NULL DEFAULT 0;
