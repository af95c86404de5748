"""What ``nexus sessions history`` shows of a compaction turn: its summary.

A compaction turn (``nexus sessions compact``, ``/compact``, a run that neared the window) may hold no
message at all: what it stored is its ``compactions`` row, whose summary is what every later run of the
session gets instead of the older turns (as a user message, ``[Previous conversation summary]`` first).
The history showed such a turn as a bare header. Now: the summary in short (the full text with ``--raw``,
as it is sent to the model), and with ``--json`` one ``{"turn_id", "compaction"}`` object of the stored row.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nexus.ledger import CompactionRecord


def compaction_lines(record: CompactionRecord, *, raw: bool, short: Callable[[str], str]) -> list[str]:
    """The lines under a compaction turn's header: what it summarised and the summary (``short``-ened unless
    ``raw``: then as the model gets it)."""
    from nexus.ledger import SUMMARY_PREFIX

    turns = f"{record.turns_summarized} turn{'s' if record.turns_summarized != 1 else ''}"
    kept = f"; kept from turn {record.first_kept_turn_id}" if record.first_kept_turn_id else ""
    head = f"  compaction ({record.trigger}): {turns} summarised through turn {record.summarized_through_turn_id}{kept}"
    if record.tokens_before:
        head += f", ~{record.tokens_before} → ~{record.tokens_after} tokens"
    summary = f"{SUMMARY_PREFIX}{record.summary}" if raw else short(record.summary)
    return [head, f"  summary: {summary}"]


def compaction_json(turn_id: str, record: CompactionRecord) -> dict[str, object]:
    """The ``--json`` line of a compaction turn: the stored ``compactions`` row."""
    return {
        "turn_id": turn_id,
        "compaction": {
            "summary": record.summary,
            "summarized_through_turn_id": record.summarized_through_turn_id,
            "first_kept_turn_id": record.first_kept_turn_id,
            "turns_summarized": record.turns_summarized,
            "trigger": record.trigger,
            "model": record.model,
            "provider": record.provider,
            "tokens_before": record.tokens_before,
            "tokens_after": record.tokens_after,
        },
    }
