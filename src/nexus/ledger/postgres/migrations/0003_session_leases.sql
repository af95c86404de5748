-- SQLite's version 14: one run per session across processes. A session's lease names the broker that may
-- run it until expires_at, with an epoch that grows at every new tenure (the fencing token); a claim made
-- under a lease stamps its items with that epoch (nexus/ledger/_leases.py, docs/scaling.md).
CREATE TABLE session_leases (
  session_label TEXT COLLATE "C" PRIMARY KEY,
  holder TEXT,
  epoch BIGINT NOT NULL,
  expires_at BIGINT NOT NULL,
  acquired_at BIGINT NOT NULL
);
CREATE INDEX session_leases_held ON session_leases(expires_at) WHERE holder IS NOT NULL;
ALTER TABLE queue_items ADD COLUMN claim_epoch BIGINT;
