"""Running the tool calls of one assistant response: lookup, validation, hooks, execution, ordering.

Every call gets exactly one result, and every failure (unknown tool, bad or non-JSON
arguments, a blocked call, a tool that raises, an abort) becomes an error result the model
can read and act on; nothing here raises into the loop. Results are reported in call order
even when later calls finish first.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from nexus import telemetry
from nexus.agent._schema import check_arguments
from nexus.agent.config import (
    AfterToolCallContext,
    AgentContext,
    AgentLoopConfig,
    BeforeToolCallContext,
    BeforeToolCallResult,
)
from nexus.agent.events import (
    AgentEvent,
    MessageEndEvent,
    MessageStartEvent,
    ToolExecutionEndEvent,
    ToolExecutionStartEvent,
    ToolExecutionUpdateEvent,
)
from nexus.agent.messages import LoopMessage
from nexus.agent.tool_types import AgentTool, AgentToolResult
from nexus.llm import AbortSignal, AssistantMessage, ToolCall, ToolResultMessage

_RAW_PREVIEW = 2000


class _Call:
    """One tool call on its way to a result."""

    __slots__ = ("args", "call", "done", "result", "tool")

    def __init__(self, call: ToolCall) -> None:
        self.call = call
        self.tool: AgentTool | None = None
        self.args: dict[str, Any] = call.arguments
        self.result: AgentToolResult | None = None
        self.done = False


def _error(text: str) -> AgentToolResult:
    return AgentToolResult.text(text, is_error=True)


def exception_text(exc: BaseException) -> str:
    """A one-line description of ``exc`` for the model or a UI (type added when the message alone is unclear)."""
    text = str(exc)
    if not text or isinstance(exc, (KeyError, AttributeError, TypeError, IndexError, LookupError)):
        return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return text


def _not_found(name: str, tools: dict[str, AgentTool]) -> AgentToolResult:
    available = ", ".join(sorted(tools)) if tools else "none"
    return _error(f'Tool "{name}" not found. Available tools: {available}.')


def _bad_json(call: ToolCall) -> AgentToolResult:
    raw = call.raw_arguments or ""
    if not raw.strip() or _json_object(raw):  # nexus.llm keeps unfinished arguments raw, even when they parse
        return _error(
            f'The call to tool "{call.name}" was cut off before its arguments were complete, so the tool was not run. '
            "Call the tool again with a JSON object that matches its parameters schema."
        )
    if len(raw) > _RAW_PREVIEW:
        raw = raw[:_RAW_PREVIEW] + "…"
    return _error(
        f'The arguments for tool "{call.name}" were not valid JSON, so the tool was not run.\n'
        f"Received:\n{raw}\n\nCall the tool again with a JSON object that matches its parameters schema."
    )


def _json_object(raw: str) -> bool:
    try:
        return isinstance(json.loads(raw), dict)
    except ValueError:
        return False


async def _resolve(value: Any) -> Any:
    if inspect.isawaitable(value):
        return await value
    return value


async def call_tool(
    tool: AgentTool,
    call_id: str,
    args: dict[str, Any],
    signal: AbortSignal,
    on_update: Callable[[AgentToolResult], None],
) -> AgentToolResult:
    """Run one tool; whatever happens (it raises, returns the wrong type, is cancelled) an error result says so."""
    try:
        result = await tool.execute(call_id, args, signal, on_update)
        if not isinstance(result, AgentToolResult):
            result = _error(f'Tool "{tool.name}" returned {type(result).__name__}, not an AgentToolResult.')
    except asyncio.CancelledError:
        # Only the batch cancels these tasks (abort grace ran out, or the run was closed).
        result = _error(f'Tool "{tool.name}" was aborted before it finished.')
    except Exception as exc:
        result = _error(exception_text(exc))
    return result


class ToolBatch:
    """Runs the tool calls of one assistant message and yields their events (see module doc)."""

    __slots__ = ("_append", "_assistant", "_calls", "_config", "_context", "_next", "_signal", "_tools", "results")

    def __init__(
        self,
        assistant: AssistantMessage,
        calls: list[ToolCall],
        context: AgentContext,
        config: AgentLoopConfig,
        signal: AbortSignal,
        tools: dict[str, AgentTool],
        append: Callable[[LoopMessage], None],
    ) -> None:
        self._assistant = assistant
        self._calls = [_Call(c) for c in calls]
        self._context = context
        self._config = config
        self._signal = signal
        self._tools = tools
        self._append = append
        self._next = 0
        self.results: list[ToolResultMessage] = []

    async def run(self) -> AsyncIterator[AgentEvent]:
        """Yield start, update and end events plus the tool-result messages, in call order."""
        if self._config.tool_execution == "sequential":
            for c in self._calls:
                yield ToolExecutionStartEvent(c.call.id, c.call.name, c.call.arguments)
                await self._prepare(c)
                if c.result is None:
                    async for ev in self._run_group([c]):
                        yield ev
                for ev in self._emit_ready():
                    yield ev
            return
        for c in self._calls:
            yield ToolExecutionStartEvent(c.call.id, c.call.name, c.call.arguments)
            await self._prepare(c)
        for group in self._groups():
            async for ev in self._run_group(group):
                yield ev
        for ev in self._emit_ready():
            yield ev

    def _groups(self) -> list[list[_Call]]:
        """Runnable calls split so that a ``sequential`` tool never overlaps another call."""
        groups: list[list[_Call]] = []
        current: list[_Call] = []
        for c in self._calls:
            if c.result is not None or c.tool is None:
                continue
            if c.tool.sequential:
                if current:
                    groups.append(current)
                    current = []
                groups.append([c])
            else:
                current.append(c)
        if current:
            groups.append(current)
        return groups

    async def _prepare(self, c: _Call) -> None:
        """Lookup, argument checks and ``before_tool_call``; sets ``c.result`` when the call must not run."""
        call = c.call
        tool = self._tools.get(call.name)
        if tool is None:
            c.result = _not_found(call.name, self._tools)
            return
        if call.raw_arguments is not None:
            c.result = _bad_json(call)
            return
        try:
            if tool.validate is not None:
                c.args = tool.validate(dict(call.arguments))
            else:
                c.args = check_arguments(tool.name, tool.parameters, call.arguments)
        except ValueError as exc:
            c.result = _error(str(exc))
            return
        except Exception as exc:
            c.result = _error(f'Invalid arguments for tool "{call.name}": {exception_text(exc)}')
            return
        if self._signal.aborted:
            c.result = _error(f'Tool "{call.name}" was not run: the run was aborted.')
            return
        hook = self._config.before_tool_call
        if hook is not None:
            try:
                verdict = await _resolve(
                    hook(BeforeToolCallContext(self._assistant, call, c.args, self._context), self._signal)
                )
            except Exception as exc:
                c.result = _error(f'Tool "{call.name}" was not run: before_tool_call failed: {exception_text(exc)}')
                return
            if isinstance(verdict, BeforeToolCallResult) and verdict.block:
                c.result = _error(verdict.reason or f'Tool "{call.name}" was blocked; the call was not executed.')
                return
        c.tool = tool

    async def _run_group(self, group: list[_Call]) -> AsyncIterator[AgentEvent]:
        """Run ``group`` concurrently, yielding live updates and the in-order results as they become ready."""
        queue: asyncio.Queue[tuple[_Call, AgentToolResult | None]] = asyncio.Queue()
        tasks = [asyncio.create_task(self._execute(c, queue)) for c in group]
        timer: list[asyncio.TimerHandle] = []

        def on_abort() -> None:
            def cancel_all() -> None:
                for t in tasks:
                    t.cancel()

            timer.append(asyncio.get_running_loop().call_later(self._config.abort_grace, cancel_all))

        remove = self._signal.add_listener(on_abort)
        remaining = len(group)
        try:
            while remaining:
                c, update = await queue.get()
                if update is not None:
                    yield ToolExecutionUpdateEvent(c.call.id, c.call.name, c.call.arguments, update)
                    continue
                remaining -= 1
                for ev in self._emit_ready():
                    yield ev
        finally:
            remove()
            for handle in timer:
                handle.cancel()
            for t in tasks:
                if not t.done():
                    t.cancel()

    async def _execute(self, c: _Call, queue: asyncio.Queue[tuple[_Call, AgentToolResult | None]]) -> None:
        tool = c.tool
        assert tool is not None

        def on_update(partial: AgentToolResult) -> None:
            if not c.done:
                queue.put_nowait((c, partial))

        if telemetry.observing():
            from nexus.agent._tool_span import observed_call

            result = await observed_call(call_tool, tool, c.call, c.args, self._signal, on_update)
        else:
            result = await call_tool(tool, c.call.id, c.args, self._signal, on_update)
        if self._config.after_tool_call is not None:
            result = await self._after(c, result)
        c.result = result
        c.done = True
        queue.put_nowait((c, None))

    async def _after(self, c: _Call, result: AgentToolResult) -> AgentToolResult:
        hook = self._config.after_tool_call
        assert hook is not None
        try:
            ctx = AfterToolCallContext(self._assistant, c.call, c.args, result, self._context)
            replaced = await _resolve(hook(ctx, self._signal))
        except Exception as exc:
            return _error(f'after_tool_call failed for tool "{c.call.name}": {exception_text(exc)}')
        return replaced if isinstance(replaced, AgentToolResult) else result

    def abandon(self, reason: str) -> Iterator[AgentEvent]:
        """Give every call that has no reported result yet an error result (the loop is failing)."""
        for c in self._calls[self._next :]:
            if c.result is None or (c.tool is not None and not c.done):
                c.result = _error(f'Tool "{c.call.name}" has no result: {reason}')
            c.done = True
        yield from self._emit_ready()

    def _emit_ready(self) -> Iterator[AgentEvent]:
        """End events and result messages of the finished calls at the front of the batch, in call order."""
        calls = self._calls
        while self._next < len(calls):
            c = calls[self._next]
            result = c.result
            if result is None or (c.tool is not None and not c.done):
                break
            self._next += 1
            call = c.call
            message = ToolResultMessage(call.id, call.name, result.content, result.is_error, result.details)
            self.results.append(message)
            yield ToolExecutionEndEvent(call.id, call.name, result, result.is_error)
            yield MessageStartEvent(message)
            self._append(message)
            yield MessageEndEvent(message)
