-- The task's index on its node (SLURM_LOCALID), from its registration:
-- PyTorch's LOCAL_RANK, shown with each task.
ALTER TABLE tasks ADD COLUMN local_rank INTEGER NOT NULL DEFAULT 0;
