-- Which nodes of an attempt's Slurm job run its tasks and which wait as
-- spares (resources.spare_nodes; service/core/node_slots.h): empty for a
-- job with no spare, else {"slots":[...],"spares":[...]}. A restarted
-- tfslurmd must know which agents are spares, and which node a spare
-- replaced, to place the agents that register again.
ALTER TABLE attempts ADD COLUMN node_slots TEXT NOT NULL DEFAULT '';
