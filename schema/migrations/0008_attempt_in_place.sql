-- An attempt started inside the Slurm job of the attempt before it (a
-- restart in place, restart.in_allocation): 1; a job of its own: 0.
ALTER TABLE attempts ADD COLUMN in_place INTEGER NOT NULL DEFAULT 0;
