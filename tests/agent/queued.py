"""A conversation driven through ``agent_loop`` with steering and follow-up queues: what the engine's run
hands the loop (``get_steering_messages`` / ``get_follow_up_messages``), kept small for the loop's tests."""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Literal

from nexus.agent import (
    AgentContext,
    AgentEndEvent,
    AgentEvent,
    AgentLoopConfig,
    AgentTool,
    LoopMessage,
    agent_loop,
    agent_loop_continue,
)
from nexus.llm.abort import AbortSignal
from nexus.llm.types import Model, UserMessage

Mode = Literal["one-at-a-time", "all"]


@dataclass
class Queued:
    """One conversation: ``prompt``/``continue_`` run the loop; ``steer``/``follow_up`` queue messages."""

    model: Model
    stream_fn: object
    tools: Sequence[AgentTool] = ()
    steering_mode: Mode = "one-at-a-time"
    follow_up_mode: Mode = "one-at-a-time"
    max_iterations: int | None = 200
    messages: list[LoopMessage] = field(default_factory=list)
    events: list[AgentEvent] = field(default_factory=list)
    listeners: list[object] = field(default_factory=list)
    error: str | None = None
    signal: AbortSignal | None = None
    _steering: deque[LoopMessage] = field(default_factory=deque)
    _follow_ups: deque[LoopMessage] = field(default_factory=deque)

    def steer(self, text: str) -> None:
        self._steering.append(UserMessage(text))

    def follow_up(self, text: str) -> None:
        self._follow_ups.append(UserMessage(text))

    def has_queued_messages(self) -> bool:
        return bool(self._steering or self._follow_ups)

    def user_texts(self) -> list[str]:
        return [m.content for m in self.messages if isinstance(m, UserMessage) and isinstance(m.content, str)]

    async def prompt(self, text: str) -> None:
        await self._run(agent_loop(UserMessage(text), *self._loop()))

    async def continue_(self) -> None:
        await self._run(agent_loop_continue(*self._loop()))

    def _loop(self) -> tuple[AgentContext, AgentLoopConfig, AbortSignal]:
        config = AgentLoopConfig(
            self.model,
            stream_fn=self.stream_fn,  # type: ignore[arg-type]
            get_steering_messages=lambda: _take(self._steering, self.steering_mode),
            get_follow_up_messages=lambda: _take(self._follow_ups, self.follow_up_mode),
            max_iterations=self.max_iterations,
        )
        self.signal = AbortSignal()
        return AgentContext(messages=self.messages, tools=list(self.tools)), config, self.signal

    async def _run(self, events: AsyncIterator[AgentEvent]) -> None:
        self.error = None
        async for event in events:
            self.events.append(event)
            if isinstance(event, AgentEndEvent):
                self.error = event.error
            for listener in self.listeners:
                listener(event)  # type: ignore[operator]


def _take(queue: deque[LoopMessage], mode: Mode) -> list[LoopMessage]:
    if not queue:
        return []
    if mode == "all":
        taken = list(queue)
        queue.clear()
        return taken
    return [queue.popleft()]
