"""The turn lifecycle of the :class:`~nexus.ledger.Ledger`: open a turn, journal it, close it, recover it.

A run opens its turn before calling the model (status ``streaming``, the query stored, the
session pointer not moved), journals each finished message and tool call while it runs, and
closes the turn with :meth:`TurnLifecycle.write_turn` in one transaction. A process that dies
in between leaves an open turn that :meth:`TurnLifecycle.recover` closes as ``aborted``. The
SQL of each step is in ``_turns`` and ``_write``; here each is one transaction on the database.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from nexus.ledger import _crash, _prompts, _rescue, _turns
from nexus.ledger._sqlite import Database, wait_bound
from nexus.ledger._write import HEAD, TurnFields, TurnOutcome
from nexus.ledger.errors import LedgerBusyError, LedgerFullError, TurnStateError
from nexus.ledger.records import CLOSED_STATUSES, CompactionRecord, IfHeadMoved, ToolCallRecord, Turn
from nexus.llm.serde import message_to_dict
from nexus.llm.types import AssistantMessage, Message, ToolCall, ToolResultMessage, Usage

JOURNAL_WAIT_S = 1.0
"""The longest a crash-journal write waits for a database held by another process: the journal is
best effort (the run goes on without it), the final write waits the full ``NEXUS_DB_WAIT_S``."""


def _journal_wait() -> float:
    """:data:`JOURNAL_WAIT_S`, or less if ``NEXUS_DB_WAIT_S`` asks for a shorter wait."""
    return min(JOURNAL_WAIT_S, wait_bound())


class TurnLifecycle:
    """The turn-lifecycle methods of :class:`~nexus.ledger.Ledger` (which inherits them); needs ``_db``."""

    _db: Database

    def open_turn(
        self,
        session_label: str,
        *,
        query_messages: Sequence[Message],
        model: str | None = None,
        provider: str | None = None,
        role: str = "unified",
        run_id: str | None = None,
        parent_turn_id: Any = HEAD,
        source: str | None = None,
        context: dict[str, object] | None = None,
        system_prompt: str | None = None,
        **fields: Any,
    ) -> str:
        """Start a turn (``status='streaming'``) and store its query; the session pointer does not move.

        ``parent_turn_id`` defaults to the current head; an explicit one that is no longer the
        head raises ``HeadMovedError``. Extra keywords are :class:`TurnFields` names
        (toolset_name, tools_available, source_event_id, workspace_path, persona_id, …).
        ``system_prompt`` is stored once by its hash (``turn.system_prompt_hash``, read back with
        :meth:`system_prompt`); ``source`` and ``context`` (assembly metadata) go on the query messages.
        """
        tf = TurnFields(model=model, provider=provider, role=role, run_id=run_id, **fields)

        def write(c: Any) -> str:
            if system_prompt is not None:
                tf.system_prompt_hash = _prompts.store_prompt(c, system_prompt)
            return _turns.open_turn(
                c, session_label, parent_turn_id, query_messages, tf, _crash.owner(), source=source, context=context
            )

        return self._db.write(write)

    def system_prompt(self, prompt_hash: str) -> str | None:
        """The system prompt a turn was sent, by its ``system_prompt_hash`` (None if unknown)."""
        return self._db.read(lambda c: _prompts.read_prompt(c, prompt_hash))

    def journal_message(self, turn_id: str, message: Message) -> None:
        """Journal a finished message (e.g. an assistant response) of an open turn, for crash recovery."""
        body = message_to_dict(message)
        self._db.write(lambda c: _turns.journal(c, turn_id, "message", body), wait_s=_journal_wait())

    def journal_partial(self, turn_id: str, slot: int, message: AssistantMessage, *, complete: bool = False) -> None:
        """Journal assistant message ``slot`` of an open turn as it is now, replacing its earlier entry.

        Call it while the message streams (``complete=False``: text and thinking so far, only
        the tool calls that are complete) and once when it ends (``complete=True``). One entry
        per slot, kept at the position of its first write, so ``recover()`` places it before the
        results of its tool calls; an unfinished one is recovered as ``stop_reason="aborted"``.
        ``slot`` numbers the assistant messages of the turn (0, 1, ...).
        """
        _crash.check_partial(message, slot)
        body = _turns.partial_entry(message, complete)
        self._db.write(lambda c: _turns.journal_partial(c, turn_id, slot, body), wait_s=_journal_wait())

    def journal_partials(self, entries: Sequence[tuple[str, int, AssistantMessage]]) -> None:
        """Several :meth:`journal_partial` snapshots (``(turn_id, slot, message)``, unfinished) in one transaction.

        The engine's writer thread batches the snapshots of many streaming runs this way: one
        commit instead of one per snapshot. An entry that cannot be written (its turn is no
        longer open) fails the whole batch, so the caller can retry them one by one.
        """
        bodies = []
        for turn_id, slot, message in entries:
            _crash.check_partial(message, slot)
            bodies.append((turn_id, slot, _turns.partial_entry(message, False)))

        def write(c: Any) -> None:
            for turn_id, slot, body in bodies:
                _turns.journal_partial(c, turn_id, slot, body)

        self._db.write(write, wait_s=_journal_wait())

    def journal_tool_call(
        self,
        turn_id: str,
        call: ToolCall,
        result: ToolResultMessage,
        started_at: int,
        completed_at: int,
        spawned_session_label: str | None = None,
    ) -> None:
        """Journal one finished tool call (the call and its result) of an open turn."""
        body = _turns.tool_call_entry(call, result, started_at, completed_at, spawned_session_label)
        self._db.write(lambda c: _turns.journal(c, turn_id, "tool_call", body), wait_s=_journal_wait())

    def write_turn(
        self,
        turn_id: str | None,
        session_label: str,
        *,
        query_messages: Sequence[Message] = (),
        response_messages: Sequence[Message] = (),
        status: str = "completed",
        usage: Usage | None = None,
        model: str | None = None,
        provider: str | None = None,
        stop_reason: str | None = None,
        error: dict[str, object] | str | None = None,
        compaction: CompactionRecord | None = None,
        tool_calls: Sequence[ToolCallRecord] | None = None,
        turn_type: str | None = None,
        parent_turn_id: Any = HEAD,
        if_head_moved: IfHeadMoved = "raise",
        completed_at: int | None = None,
        source: str | None = None,
        context: dict[str, object] | None = None,
        consumed_queue_items: Sequence[str] = (),
        response_sources: Sequence[str | None] = (),
        **fields: Any,
    ) -> str:
        """Write a finished turn in one transaction and move the session pointer to it; returns its id.

        ``consumed_queue_items`` are broker queue items this turn consumed: they are marked
        ``delivered`` with the turn in the same transaction (items already finished are left as
        they are — the turn is never refused because of its queue bookkeeping).

        ``turn_id`` is the id from :meth:`open_turn` (then only ``response_messages`` are
        given) or ``None`` for a turn written in one go. Usage defaults to the sum of the
        response's assistant messages; tool-call rows are derived from the response (pass
        ``tool_calls`` to add timings or ``spawned_session_label``); ``response_sources[i]`` is the
        ``source`` of response message ``i`` when it is a user message (a steer). If the session head is no
        longer the turn's parent, raises ``HeadMovedError`` - or with ``if_head_moved="branch"``
        keeps the turn as a side branch without moving the pointer.
        """
        _check_closing(status, if_head_moved, turn_type)
        tf = TurnFields(model=model, provider=provider, **fields)
        outcome = TurnOutcome(status, response_messages, usage, stop_reason, error, compaction, tool_calls, turn_type)
        outcome.completed_at, outcome.response_sources = completed_at, response_sources

        def write(c: Any) -> str:
            where = (session_label, turn_id, parent_turn_id, query_messages, tf, outcome)
            written = _turns.write_turn(c, *where, if_head_moved=if_head_moved, source=source, context=context)
            _deliver_consumed(c, consumed_queue_items, written)
            return written

        try:
            return self._db.write(write)
        except (LedgerFullError, LedgerBusyError) as exc:
            if turn_id is None:
                raise
            saved = _rescue.RescuedTurn(
                turn_id, session_label, status, list(response_messages), stop_reason, error, tuple(consumed_queue_items)
            )
            raise _rescue.not_saved(self._db.path, saved, exc) from exc

    def recover(
        self, *, force: bool = False, session: str | None = None, turn_ids: Sequence[str] | None = None
    ) -> list[str]:
        """Close turns left open by dead processes as ``aborted`` with what they journaled.

        A turn whose final write failed and was saved to a rescue file (see
        :class:`~nexus.ledger.errors.TurnNotSavedError`) is closed from that file instead,
        with the status it really ended with. A recovered turn becomes its session's head if
        the head is still its parent; otherwise it is kept as a side branch. Turns of live
        processes on this host (and of other hosts, unless ``force``) are left alone.
        ``session`` limits it to one session's turns. ``turn_ids`` closes exactly those open
        turns, whoever owns them: for a caller that knows they are orphans (its own run whose
        final write failed). Returns the recovered turn ids.
        """
        return _crash.recover(self._db, force=force, session=session, turn_ids=turn_ids)

    def open_turns(self, session: str | None = None) -> list[Turn]:
        """Turns still open (being run, or left by a dead process until :meth:`recover`); of ``session`` if given."""
        return _crash.open_turns(self._db, session)

    def open_turn_owners(self, session: str) -> list[str]:
        """The ``host:pid`` owners of ``session``'s open turns (who is, or was, running them)."""
        return _crash.open_owners(self._db, session)


def _check_closing(status: str, if_head_moved: str, turn_type: str | None) -> None:
    """Refuse a :meth:`TurnLifecycle.write_turn` whose status, head policy or turn type is not one the ledger knows."""
    if status not in CLOSED_STATUSES:
        raise TurnStateError(f"status must be one of {', '.join(CLOSED_STATUSES)} for a finished turn, not {status!r}")
    if if_head_moved not in ("raise", "branch"):
        raise TurnStateError(f"if_head_moved must be 'raise' or 'branch', not {if_head_moved!r}")
    if turn_type not in (None, "normal", "compaction"):
        raise TurnStateError(f"turn_type must be 'normal' or 'compaction', not {turn_type!r}")


def _deliver_consumed(conn: Any, queue_items: Sequence[str], turn_id: str) -> None:
    """Mark the broker queue items the turn consumed ``delivered``, in the turn's own transaction."""
    if queue_items:
        from nexus.ledger.broker_store import deliver_pending_in

        deliver_pending_in(conn, queue_items, turn_id)
