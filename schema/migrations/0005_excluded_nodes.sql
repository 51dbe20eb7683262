-- Nodes the next automatic attempts leave out (bad-node memory: a node
-- failure, or a stall or lost task on one node), comma-separated; a user's
-- resume clears them.
ALTER TABLE experiments ADD COLUMN excluded_nodes TEXT NOT NULL DEFAULT '';
