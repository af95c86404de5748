"""Schema version 15 (and PostgreSQL's ``0006_queue_overflow``): the ``[Queue overflow]`` summary a session owes.

Kept beside ``_schema`` (which holds versions 1-14 and is at its size limit): migrations are append-only, so
later ones go here, each with why it exists.
"""

from __future__ import annotations

QUEUE_OVERFLOW = """
ALTER TABLE queue_items ADD COLUMN overflow_cap INTEGER;
ALTER TABLE queue_items ADD COLUMN overflow_to TEXT;
CREATE INDEX queue_items_overflow ON queue_items(session_label) WHERE overflow_cap IS NOT NULL;
"""
"""Version 15: a message the ``summarize`` drop policy dropped is marked with the cap in force
(``overflow_cap``) until the session's next turn has told it in its ``[Queue overflow]`` summary. The turn
that takes it names its first message as the carrier (``overflow_to``): a retry of that message (its turn was
cut by a crash, or handed back) takes the summary again; once the carrier is finished, the next look clears
the mark (a delivered message never runs again, so the summary is told once). The summary lived only in
the memory of the broker that dropped the messages: a restart, or another broker running the session's next
turn under leases, lost it. The partial index holds only the marked rows, so the look a session's turn makes
for them costs one probe of an (almost always) empty index."""
