"""The tool-call records of one run: started when the loop starts a tool, finished by its result.

A record holds what the ledger stores for a call (arguments, status, timings, the worker session
a ``spawn_agent`` call started); the result lists them in the order the calls started.
"""

from __future__ import annotations

from collections.abc import Mapping

from nexus.engine.execution.ledger_map import spawned_label
from nexus.ledger import ToolCallRecord
from nexus.llm import ToolResultMessage, now_ms


class ToolCallLog:
    """Every tool call of a run so far, by call id."""

    __slots__ = ("_records",)

    def __init__(self) -> None:
        self._records: dict[str, ToolCallRecord] = {}

    def started(self, call_id: str, tool_name: str, args: Mapping[str, object]) -> None:
        """The loop started running a tool: a ``running`` record, numbered in start order."""
        self._records[call_id] = ToolCallRecord(
            call_id=call_id,
            tool_name=tool_name,
            arguments=dict(args),
            status="running",
            started_at=now_ms(),
            sequence=len(self._records),
        )

    def finished(self, result: ToolResultMessage) -> ToolCallRecord:
        """The call's result came: its record, now ``completed`` or ``failed``."""
        record = self._records.get(result.tool_call_id)
        if record is None:  # a result the loop made without a start event (should not happen)
            record = ToolCallRecord(
                call_id=result.tool_call_id,
                tool_name=result.tool_name,
                started_at=now_ms(),
                sequence=len(self._records),
            )
            self._records[result.tool_call_id] = record
        record.status = "failed" if result.is_error else "completed"
        record.completed_at = result.timestamp
        record.result = result
        record.error = result.text if result.is_error else None
        record.spawned_session_label = spawned_label(result)
        return record

    def records(self) -> list[ToolCallRecord]:
        """The records in the order their calls started."""
        return sorted(self._records.values(), key=lambda c: c.sequence)
