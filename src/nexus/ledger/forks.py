"""One rule for making a fork, whichever door asks: ``nexus sessions fork``, chat's ``/fork``, ``POST
/v1/sessions/{label}/fork`` and the MCP ``fork_session`` tool all call :func:`fork_session`.

They were four copies and disagreed: the HTTP endpoint refused a turn outside the named session's history
while ``nexus sessions fork`` took any turn, and a fork without a label was ``main-fork-1`` from the CLI but
``fork-01m8b8…`` (the ledger's made-up label, no name to type again) over HTTP and MCP. The rule now:

- a fork starts at any finished turn of the ledger (turn ids are global, forks share the tree);
- when the caller names the session it forks (the HTTP path, the MCP tool, the chat one is in), the turn
  must be in that session's history: a turn id pasted from elsewhere is refused (``TurnNotInHistory``),
  not silently forked from another conversation;
- without a label the fork is named ``<session>-fork-1``, ``-2``… (the first unused): the session named,
  or else the session that wrote the turn.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from nexus.ledger.errors import LedgerError, SessionExistsError, SessionLabelError, SessionNotFound, TurnNotFound
from nexus.ledger.labels import label_problem
from nexus.ledger.records import NewSession

if TYPE_CHECKING:
    from nexus.ledger.protocols import SessionStore, TurnStore
    from nexus.ledger.records import Session

__all__ = ["TurnNotInHistory", "fork_session"]


class TurnNotInHistory(TurnNotFound):
    """The turn exists but is not in the history of the session the fork was asked of."""

    def __init__(self, turn_id: str, session_label: str) -> None:
        LedgerError.__init__(self, f"turn {turn_id!r} is not in the history of session {session_label!r}")
        self.turn_id = turn_id
        self.session_label = session_label


class _Stores(Protocol):
    """What a fork needs of a ledger (on SQLite or PostgreSQL): its sessions and turns."""

    @property
    def sessions(self) -> SessionStore:
        """The session pointers."""
        ...

    @property
    def turns(self) -> TurnStore:
        """The turn tree."""
        ...


async def fork_session(
    ledger: _Stores,
    turn_id: str,
    *,
    of: str | None = None,
    label: str | None = None,
    routing_key: str | None = None,
    metadata: dict[str, object] | None = None,
) -> Session:
    """A new session whose history ends at ``turn_id`` (see the module docstring for the rule).

    ``of``: the session forked (label or alias); the turn must be in its history. ``label``: the new
    session's (``SessionExistsError`` when taken); ``None`` numbers one after the session. ``routing_key``
    and ``metadata`` go to the new session as given (a fork an agent's key reaches: the server's).
    Raises ``TurnNotFound`` for an unknown turn, ``SessionNotFound`` for an unknown ``of``,
    ``SessionLabelError`` for a ``label`` no door could address (``label_problem``).
    """
    if of is not None:
        source = await ledger.sessions.resolve(of)
        if turn_id not in {turn.id for turn in await ledger.turns.path(source.label)}:
            await ledger.turns.get(turn_id)  # TurnNotFound first: "no such turn" says more than "not in"
            raise TurnNotInHistory(turn_id, source.label)
        base = source.label
    else:
        base = (await ledger.turns.get(turn_id)).session_label
    if label is not None:
        problem = label_problem(label)  # the CLI and HTTP checked it; MCP and the Python API did not
        if problem is not None:
            raise SessionLabelError(problem)
        new = NewSession(label, origin="fork", head_turn_id=turn_id, routing_key=routing_key, metadata=metadata)
        return await ledger.sessions.create(new)
    number = 0
    while True:  # another process may take a label between the look and the create: the next one is tried
        number += 1
        candidate = f"{base}-fork-{number}"
        try:
            await ledger.sessions.resolve(candidate)
            continue
        except SessionNotFound:
            pass
        try:
            new = NewSession(candidate, origin="fork", head_turn_id=turn_id, routing_key=routing_key, metadata=metadata)
            return await ledger.sessions.create(new)
        except SessionExistsError:
            continue
