"""What a start of a run carries: the options of ``Runtime.start``, the request its task gets, and the
result of a start that never ran (aborted while another run of the session held its lock)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from nexus._dataclass import dataclass
from nexus.engine.assembly.context import EventContext
from nexus.engine.types import AgentResult
from nexus.llm import ImageContent, UserMessage

if TYPE_CHECKING:  # StartOptions types ``**options`` only: at run time a TypedDict compiles each of its annotations
    from typing import TypedDict

    from nexus.agent import AgentTool
    from nexus.engine.execution.callbacks import EngineCallbacks
    from nexus.llm import AbortSignal

    class StartOptions(TypedDict, total=False):
        """The options of :meth:`Runtime.start` (and ``begin``, ``run``); see there."""

        consumes: Sequence[str]
        lease_fence: bool
        source: str | None
        tools: Sequence[AgentTool]
        images: Sequence[ImageContent]
        event: EventContext | None
        signal: AbortSignal | None
        callbacks: EngineCallbacks | None


@dataclass(slots=True, frozen=True)
class StartRequest:
    """What :meth:`Runtime.start` hands its task: the message and what the run consumes and may use."""

    message: str | UserMessage
    consumes: tuple[str, ...]
    source: str | None
    tools: tuple[AgentTool, ...]
    images: tuple[ImageContent, ...]
    event: EventContext | None
    lease_fence: bool = True
    """The consumed items may have been claimed under a session lease: the turn write checks they are
    still this run's (``TurnWrite.lease_fence``)."""


def aborted_before_start(message: str | UserMessage) -> AgentResult:
    """The result of a run aborted while it waited for another run of its session: nothing ran or was stored."""
    from nexus.engine.types import AgentError
    from nexus.ledger import StoredMessage

    query = message if isinstance(message, UserMessage) else UserMessage(message)
    text = "aborted while waiting for another run of the session to finish; nothing was sent or stored"
    return AgentResult(
        messages=[StoredMessage(0, "", 0, query.role, query)],
        stop_reason="aborted",
        error=AgentError("unknown", text, retryable=True),
    )
