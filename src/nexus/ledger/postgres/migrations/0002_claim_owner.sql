-- SQLite's version 12: a claimed queue item names the broker running it (host:pid and its start time); a
-- claim takes a 'processing' item only from a broker that is gone (nexus/ledger/_claims.py).
ALTER TABLE queue_items ADD COLUMN claimed_by TEXT;
