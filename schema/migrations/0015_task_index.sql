-- A task's row is keyed by its index in the experiment (0 .. tasks-1, as
-- placement.h numbers them), which the column's old name, proc_id, did not
-- say: a spare node that takes a failed node's place runs the task under
-- another SLURM_PROCID (node_slots.h), and the API shows that one as
-- proc_id. The values do not change. SQLite (>= 3.25) renames the column in
-- the primary key and the indexes with it.
ALTER TABLE tasks RENAME COLUMN proc_id TO task_index;
