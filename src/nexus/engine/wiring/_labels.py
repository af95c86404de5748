"""The session reads of a run's start: its label before the lock, its head and history window under it.

A broker starts run after run in the same few sessions, and each start looked its session up (a read
transaction) only to learn the name was the session's label, as it was the last time: a session is
never deleted or renamed (``DELETE /v1/sessions`` archives it), so a name once found to be a label stays
one. Assembly then reads the label, the head and the history window in one transaction
(``turns.head_history``) instead of the session row and then the window.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from nexus.ledger import NewSession, SessionLabelError, SessionNotFound

if TYPE_CHECKING:
    from nexus.ledger import Ledger
    from nexus.llm import Message

KNOWN_LABELS = 10_000
"""Labels a runtime remembers (more than a broker's sessions; past it they are forgotten and looked up)."""


def new_name_problem(name: str) -> str | None:
    """Why no door could name a new session ``name`` again (control characters, edge spaces), or ``None``.

    The Python API took them where the CLI, HTTP and MCP refuse them (``label_problem``): a newline in a label then
    forged a row of ``nexus sessions list``. ``/`` and the length stay allowed here: a sub-agent's session is
    ``<parent>/<task>-<id>``, nested as deep as its spawns. An existing session of such a name keeps working.
    """
    if name != name.strip() or any(ord(char) < 32 or ord(char) == 127 for char in name):
        from nexus.ledger import label_problem

        return label_problem(name) or f"a session label cannot hold {name!r}"
    return None


async def refuse_new(ledger: Ledger, name: str, problem: str) -> str:
    """The label of the existing session ``name`` names; :class:`SessionLabelError` (``problem``) when there is none."""
    try:
        return (await ledger.sessions.resolve(name)).label
    except SessionNotFound:
        raise SessionLabelError(problem) from None


def label_now(ledger: Ledger, name: str) -> str:
    """:meth:`SessionLabels.label` on this thread, without the memory (``Runtime.start``, which cannot await)."""
    problem = new_name_problem(name)
    if problem is not None:
        return ledger.run_here(lambda here: refuse_new(here, name, problem))
    return ledger.run_here(lambda here: here.sessions.ensure(NewSession(name))).label


class SessionLabels:
    """Names a runtime has seen to be session labels (bounded: :data:`KNOWN_LABELS`)."""

    __slots__ = ("_known",)

    def __init__(self) -> None:
        self._known: set[str] = set()

    async def label(self, ledger: Ledger, name: str) -> str:
        """The label of the session ``name`` names (an alias resolves; a new name creates the session)."""
        if name in self._known:
            return name
        problem = new_name_problem(name)
        if problem is not None:
            label = await refuse_new(ledger, name, problem)
        else:
            label = (await ledger.sessions.ensure(NewSession(name))).label
        self._remember(label)
        return label

    async def head_history(self, ledger: Ledger, name: str, window: int) -> tuple[str, str | None, list[Message]]:
        """The session's label, head and history window, in one read; a session that is missing is created."""
        try:
            label, head_id, history = await ledger.turns.head_history(name, max_chars=window)
        except SessionNotFound:
            found = await ledger.sessions.ensure(NewSession(name))
            label, head_id = found.label, found.thread_id  # None when just created; one made meanwhile may have one
            history = await ledger.turns.history_at(head_id, max_chars=window) if head_id is not None else []
        self._remember(label)
        return label, head_id, history

    def _remember(self, label: str) -> None:
        if len(self._known) >= KNOWN_LABELS:
            self._known.clear()
        self._known.add(label)
