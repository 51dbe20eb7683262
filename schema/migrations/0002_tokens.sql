-- API tokens: only a SHA-256 of each token is kept; the token itself is
-- shown once, when it is created.
CREATE TABLE tokens (
  sha256 TEXT PRIMARY KEY,
  user TEXT NOT NULL,
  admin INTEGER NOT NULL DEFAULT 0,
  created_at INTEGER NOT NULL,
  last_used_at INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX tokens_by_user ON tokens(user);
