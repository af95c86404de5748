"""Errors the Agents Ledger raises on purpose; every message says what is wrong and what to do."""

from __future__ import annotations

import json

from nexus.errors import NexusError


class LedgerError(NexusError):
    """Base class of every error raised by ``nexus.ledger``."""


class SessionNotFound(LedgerError, LookupError):
    """No session (and no alias) has the given label."""

    def __init__(self, label: str) -> None:
        super().__init__(
            f"no session or alias named {label!r}; list sessions with ledger.sessions.list() "
            "or create it with ledger.sessions.create(NewSession(...))"
        )
        self.label = label


class SessionLabelError(LedgerError, ValueError):
    """A new session's label no door could address again (``/``, control characters, edge spaces, too long):
    the rule of :func:`nexus.ledger.labels.label_problem`, which every door that names a session applies."""


class SessionExistsError(LedgerError, ValueError):
    """A session (or alias) with that label already exists; labels are unique."""

    def __init__(self, label: str) -> None:
        super().__init__(f"a session or alias named {label!r} already exists; pick another label")
        self.label = label


class QueueItemsFinishedError(LedgerError):
    """A move of queue items found some already finished (or unknown): ``finished`` maps their ids to that status."""

    def __init__(self, status: str, finished: dict[str, str]) -> None:
        super().__init__(f"queue items already finished or unknown, not moved to {status}: {json.dumps(finished)}")
        self.finished = finished


class QueueItemsHeldError(QueueItemsFinishedError):
    """A claim found items another live broker is running: ``held`` maps their ids to its ``host:pid``.

    ``finished`` holds them too (with the finished ones of the same claim): this broker drops them
    all from its queue, as it does items finished elsewhere; the holder settles them.
    """

    def __init__(self, held: dict[str, str], finished: dict[str, str]) -> None:
        owners = ", ".join(sorted(set(held.values())))
        LedgerError.__init__(
            self,
            f"queue items held by another running broker ({owners}), not claimed: {json.dumps(held)}; two brokers "
            "drain this database (stop one: each NEXUS_HOME needs its own agents.db)",
        )
        self.held = held
        self.finished = {**finished, **{item: f"processing by {holder}" for item, holder in held.items()}}


class LeaseLostError(LedgerError):
    """A write carried a session lease that is no longer valid (expired, or taken over with a newer epoch).

    Nothing of the write was stored: the session belongs to another run now (docs/scaling.md). A broker
    that gets it drops its claim on the batch and writes nothing more for it.
    """

    def __init__(self, session_label: str, epoch: int, why: str) -> None:
        super().__init__(
            f"the lease of session {session_label!r} at epoch {epoch} was lost ({why}); nothing was written"
        )
        self.session_label = session_label
        self.epoch = epoch


class AgentSessionTakenError(LedgerError, ValueError):
    """Another agent already talks in that session: each agent has its own (two would share one history).

    ``pending``: the session is not the other agent's any more, but that many of its messages still wait or
    run there (they would interleave with this agent's turns).
    """

    def __init__(self, label: str, owner: str, *, pending: int = 0) -> None:
        if pending:  # the agent left the session, its messages there have not: they still run in it
            why = (
                f"session {label!r} still has {pending} unfinished message(s) of agent {owner!r}: each agent talks "
                f"in its own session; pick another label, or wait for them (or clear {owner!r}'s queue) first"
            )
        else:
            why = (
                f"session {label!r} belongs to agent {owner!r}: each agent talks in its own session; "
                f"pick another label, or remove {owner!r} first"
            )
        super().__init__(why)
        self.label, self.owner, self.pending = label, owner, pending


class AgentHasWaitingMessagesError(LedgerError, ValueError):
    """An agent with messages still waiting in its queue is not removed (nothing changed).

    Removed, it could no longer be listed or cleared by its id while those messages ran; so the user
    clears them first (or lets them run). A run that already holds its messages is not waited for.
    """

    def __init__(self, agent_id: str, waiting: int) -> None:
        super().__init__(
            f"agent {agent_id!r} still has {waiting} waiting message(s): clear its queue first "
            f"(nexus queue clear {agent_id}, or DELETE /v1/agents/{agent_id}/queue), or let them run"
        )
        self.agent_id, self.waiting = agent_id, waiting


class AgentRemovedError(LedgerError, LookupError):
    """A message for an agent that was removed is not accepted (nothing stored).

    Checked in the accept's own transaction: a sender that saw the agent a moment before its removal
    does not leave a message no queue of the agent's can reach. A resend of a message accepted before
    the removal still answers its first acceptance; an agent registered again takes messages again.
    """

    def __init__(self, agent_id: str) -> None:
        super().__init__(
            f"agent {agent_id!r} was removed; the message was not accepted (register the agent again to send to it)"
        )
        self.agent_id = agent_id


class TurnNotFound(LedgerError, LookupError):
    """No turn (or message, or tool call) has the given id."""

    def __init__(self, turn_id: str, what: str = "turn") -> None:
        super().__init__(f"no {what} with id {turn_id!r} in this ledger")
        self.turn_id = turn_id


class TurnStateError(LedgerError):
    """The turn is not in a state that allows the operation (e.g. writing a turn that is already closed)."""


class HeadMovedError(LedgerError):
    """The session head moved since the turn was started, so writing it would silently fork the session.

    Raised by ``write_turn`` to keep the serial invariant (one run per session). The caller
    re-reads the history and runs again, or passes ``if_head_moved="branch"`` to keep the
    turn as a side branch that no session points at.
    """

    def __init__(self, session_label: str, expected: str | None, actual: str | None) -> None:
        super().__init__(
            f"session {session_label!r} moved to head {actual!r} while this turn was built on {expected!r}; "
            "another run wrote to the session first. Re-read the history and run again, or write this "
            'turn with if_head_moved="branch" to keep it as a side branch'
        )
        self.session_label = session_label
        self.expected = expected
        self.actual = actual


class SchemaVersionError(LedgerError):
    """The database was written by a newer Nexus (its schema version is higher than this code knows), or its
    applied migrations are not the ones this code ships (PostgreSQL: another name or checksum)."""


class LedgerBusyError(LedgerError):
    """The database stayed locked by another process longer than the wait bound (``NEXUS_DB_WAIT_S``)."""


class LedgerUnavailableError(LedgerBusyError):
    """A database server (PostgreSQL) could not be reached, or stayed unreachable longer than the wait bound.

    A kind of :class:`LedgerBusyError`: whatever a caller does for a database held too long (a 503, a
    rescue file for a turn's final write) it does for a server that is away.
    """


class LedgerFullError(LedgerError):
    """SQLite could not write the database file: the disk is full (or failing); nothing of that write was kept."""


class LedgerReadOnlyError(LedgerError):
    """The SQLite ledger cannot be opened the usual way because its directory is read-only (a read-only mount,
    a directory this user cannot write): SQLite needs to make its ``-shm`` file there even to read it. A reader
    can still read the database file alone (``Ledger.open_file_only``)."""


class LedgerRefusedError(LedgerError):
    """The database server refused a statement this code sent (PostgreSQL: a missing table, a value its types
    cannot hold): the database is not what the code expects. The server's fault, never the request's: HTTP
    answers it 500, where other ledger errors about what a caller asked are 4xx."""


class TurnNotSavedError(LedgerError):
    """The final write of an open turn failed; its outcome was saved to a rescue file (or nowhere, if that failed too).

    ``rescue_path`` names the file (``None`` when no place could take it); the next
    ``Ledger.recover()`` after the writer's process has ended puts the turn into the ledger
    from that file. ``cause`` is the :class:`LedgerBusyError` or :class:`LedgerFullError`.
    """

    def __init__(self, message: str, rescue_path: str | None, cause: LedgerError) -> None:
        super().__init__(message)
        self.rescue_path = rescue_path
        self.cause = cause


class PiFormatError(LedgerError, ValueError):
    """A pi session file cannot be imported; the message names the line and what is wrong with it."""

    def __init__(self, path: str, line: int, problem: str) -> None:
        super().__init__(f"{path}:{line}: {problem}; nothing was imported")
        self.path = path
        self.line = line
