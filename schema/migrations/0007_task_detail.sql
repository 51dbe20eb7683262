-- Why a task's program ended, as its agent said (Exited.detail), e.g.
-- "cannot run 'trian.py': No such file or directory"; empty when it said
-- nothing more than the exit status.
ALTER TABLE tasks ADD COLUMN detail TEXT NOT NULL DEFAULT '';
