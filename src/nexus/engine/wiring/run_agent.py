"""``run_agent``: one message through a :class:`~nexus.engine.wiring.runtime.Runtime` in one call, opening (and
closing) the config and the ledger it is not given."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from nexus.engine.types import AgentResult, AgentSpec
from nexus.engine.wiring.runtime import Runtime
from nexus.ledger import DEFAULT_SESSION
from nexus.llm import ImageContent, Model, StreamFn, UserMessage

if TYPE_CHECKING:
    from nexus.config import NexusConfig
    from nexus.engine.assembly.context import EventContext
    from nexus.engine.execution.callbacks import EngineCallbacks
    from nexus.ledger import Ledger
    from nexus.llm import AbortSignal


async def run_agent(
    message: str | UserMessage,
    *,
    session: str | None = None,
    model: str | Model | None = None,
    config: NexusConfig | None = None,
    ledger: Ledger | None = None,
    callbacks: EngineCallbacks | None = None,
    signal: AbortSignal | None = None,
    stream_fn: StreamFn | None = None,
    images: Sequence[ImageContent] = (),
    event: EventContext | None = None,
) -> AgentResult:
    """Send ``message`` to ``session`` (default ``main``) and return the run's :class:`AgentResult`.

    Opens ``$NEXUS_HOME/nexus.toml`` and the ledger when not given (closing the ledger it
    opened), closes turns a crashed process left open (``ledger.recover()``), and runs the
    message through :meth:`Runtime.start`. ``signal`` aborts the run (its partial output is kept).
    """
    if ledger is None:
        runtime = await Runtime.open(config, stream_fn=stream_fn)
    else:
        from nexus.config import load_config

        await ledger.turns.recover()
        runtime = Runtime(config or load_config(), ledger, stream_fn)
    try:
        spec = AgentSpec(model=model)
        return await runtime.run(spec, session or DEFAULT_SESSION, message, signal=signal, callbacks=callbacks,
                                 images=images, event=event)  # fmt: skip
    finally:
        await runtime.aclose()
