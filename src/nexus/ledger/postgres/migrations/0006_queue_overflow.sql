-- SQLite schema version 15 (nexus/ledger/_schema_overflow.py): a message the summarize drop policy dropped keeps
-- the cap in force (overflow_cap) until the session's next turn takes it into its [Queue overflow] summary; the
-- turn that takes it names its first message in overflow_to, so a retry of that message takes it again; once
-- that message is finished the mark is cleared. The summary lived only in the memory of the broker that
-- dropped the messages, so another broker running the next turn under leases (or a restart) lost it.
ALTER TABLE queue_items ADD COLUMN overflow_cap BIGINT;
ALTER TABLE queue_items ADD COLUMN overflow_to TEXT;
CREATE INDEX queue_items_overflow ON queue_items(session_label) WHERE overflow_cap IS NOT NULL;
