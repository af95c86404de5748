"""The sub-agent spawn tool ``spawn_agent``: delegate a task to a worker session (seed 000 "Subagent Spawning").

The parent model calls ``spawn_agent{task, label?}``. The tool creates a worker session
(``is_subagent``, linked to the parent session, turn and tool call, ``task_status``
running → completed | failed), runs the task through the same engine with the worker's own
assembled context one level deeper, and returns the worker's final answer as the tool
result. The result's ``details['spawned_session_label']`` names the worker session; the
engine records it on the parent's tool call (journal and final write).

Runs know who their parent is through :data:`~nexus.engine.execution.scope.CURRENT_RUN`, a
context variable the engine sets in each run's task (a leaf module, so the run and this tool
do not import each other), so the tool itself stays a plain :class:`AgentTool`. The
:class:`Spawner` protocol lives here too: the broker installs its own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, cast

from nexus._dataclass import dataclass
from nexus._lazy import LazyPattern
from nexus.agent import AgentTool, AgentToolResult, ToolUpdateFn
from nexus.engine.execution.scope import CURRENT_RUN, RunScope
from nexus.llm import AbortSignal

if TYPE_CHECKING:
    from nexus.engine.execution.callbacks import EngineCallbacks
    from nexus.engine.execution.execute import Execution
    from nexus.engine.types import AgentSpec
    from nexus.ledger import Ledger
    from nexus.llm import UserMessage

__all__ = [
    "CURRENT_RUN",
    "SPAWN_TOOL_NAME",
    "EngineSpawner",
    "RunScope",
    "Spawner",
    "WorkerHost",
    "create_worker_session",
    "run_worker",
    "spawn_agent_tool",
    "worker_label",
]

SPAWN_TOOL_NAME = "spawn_agent"
"""The tool's model-facing name (also listed in the ``group:agents`` tool group)."""

_LABEL_CHARS = LazyPattern(r"[^a-zA-Z0-9_.-]+")


class Spawner(Protocol):
    """Runs a sub-agent task for a ``spawn_agent`` call; the broker installs one that makes it a broker agent."""

    async def spawn(
        self,
        scope: RunScope,
        call_id: str,
        task: str,
        label: str | None,
        signal: AbortSignal,
        on_update: ToolUpdateFn | None,
    ) -> AgentToolResult:
        """Run ``task`` as a worker of the run ``scope`` describes and return the tool result."""
        ...


class WorkerHost(Protocol):
    """What spawning needs of the process a run was started in (the ``Runtime``).

    A protocol rather than ``Runtime`` itself, so this module does not import the module that
    offers its tool (``wiring/runtime.py``): the import graph stays a tree.
    """

    @property
    def ledger(self) -> Ledger:
        """Where the worker session is created."""
        ...

    @property
    def spawner(self) -> Spawner:
        """Who runs workers (the engine's own :class:`EngineSpawner` unless the broker installed its own)."""
        ...

    async def begin(
        self,
        spec: AgentSpec,
        session: str,
        message: str | UserMessage,
        *,
        signal: AbortSignal | None = None,
        callbacks: EngineCallbacks | None = None,
    ) -> Execution:
        """Start the worker's run (``Runtime.begin``)."""
        ...


@dataclass(slots=True)
class EngineSpawner:
    """The engine's own :class:`Spawner`: a worker session run through the same engine, one level deeper."""

    async def spawn(
        self,
        scope: RunScope,
        call_id: str,
        task: str,
        label: str | None,
        signal: AbortSignal,
        on_update: ToolUpdateFn | None,
    ) -> AgentToolResult:
        """See :func:`run_worker`; the run's host is the ``Runtime`` that started it."""
        assert scope.runtime is not None
        return await run_worker(cast("WorkerHost", scope.runtime), scope, call_id, task, label, signal, on_update)


_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "task": {
            "type": "string",
            "description": "Everything the sub-agent needs to do the task on its own: goal, inputs, expected output.",
        },
        "label": {
            "type": "string",
            "description": "Optional short name for the sub-agent's session (letters, digits, - _ .).",
        },
    },
    "required": ["task"],
    "additionalProperties": False,
}

_DESCRIPTION = (
    "Delegate a self-contained task to a sub-agent that works in its own session with the same tools and "
    "workspace, and get its final answer back. Use it for independent subtasks; the sub-agent does not see "
    "this conversation, so describe the task completely."
)


def _validate(args: dict[str, Any]) -> dict[str, Any]:
    task = args.get("task")
    if not isinstance(task, str) or not task.strip():
        raise ValueError("spawn_agent needs 'task': a non-empty string describing what the sub-agent should do")
    label = args.get("label")
    if label is not None and not isinstance(label, str):
        raise ValueError("spawn_agent 'label' must be a string when given")
    unknown = sorted(set(args) - {"task", "label"})
    if unknown:
        raise ValueError(f"spawn_agent got unknown parameter(s) {unknown}; it takes 'task' and optionally 'label'")
    return {"task": task.strip(), "label": label}


def worker_label(parent_label: str, label: str | None) -> str:
    """A new, unique worker session label: ``<parent>/<label or task>-<ulid>``."""
    from nexus.engine.types import new_id

    name = _LABEL_CHARS.sub("-", label or "task").strip("-")[:40] or "task"
    return f"{parent_label}/{name}-{new_id().lower()}"


async def _execute(call_id: str, args: dict[str, Any], signal: AbortSignal, on_update: ToolUpdateFn) -> AgentToolResult:
    scope = CURRENT_RUN.get()
    if scope is None or scope.runtime is None:
        return AgentToolResult.text(
            "spawn_agent can only run inside an engine run started by Runtime.start() or run_agent(); "
            "no engine runtime is available here.",
            is_error=True,
        )
    runtime = cast("WorkerHost", scope.runtime)  # the engine's runs carry the Runtime that started them
    limit = scope.limits.subagent_max_depth
    if scope.depth + 1 > limit:
        return AgentToolResult.text(
            f"Cannot spawn a sub-agent: this agent is already at depth {scope.depth} and the limit is "
            f"subagent_max_depth={limit}. Do the task yourself instead.",
            is_error=True,
        )
    # the engine's own spawner runs the worker inline; the broker's makes it a broker agent
    return await runtime.spawner.spawn(scope, call_id, args["task"], args.get("label"), signal, on_update)


async def create_worker_session(ledger: Ledger, scope: RunScope, call_id: str, task: str, label: str | None) -> str:
    """The worker's new session, linked to the spawning run (parent session and turn, tool call, task)."""
    from nexus.ledger import NewSession

    session = worker_label(scope.session_label, label)
    new = NewSession(
        session,
        origin="subagent",
        is_subagent=True,
        parent_session_label=scope.session_label,
        parent_turn_id=scope.turn_id,
        spawn_tool_call_id=call_id,
        task_description=task,
        task_status="running",
    )
    await ledger.sessions.create(new)
    return session


async def run_worker(
    runtime: WorkerHost,
    scope: RunScope,
    call_id: str,
    task: str,
    label: str | None,
    signal: AbortSignal,
    on_update: ToolUpdateFn | None = None,
) -> AgentToolResult:
    """Create the worker session, run ``task`` in it and turn its result into the tool result.

    The worker's tool activity is reported as progress of the spawn call (``on_update``), so a
    UI watching the parent sees what the worker is doing.
    """
    from nexus.engine.types import AgentSpec

    ledger = runtime.ledger
    session = await create_worker_session(ledger, scope, call_id, task, label)
    details: dict[str, Any] = {"spawned_session_label": session, "depth": scope.depth + 1}
    spec = AgentSpec(id="worker", role="worker", model=scope.model, limits=scope.limits, depth=scope.depth + 1)
    try:
        execution = await runtime.begin(spec, session, task, signal=signal, callbacks=_progress(session, on_update))
        result = await execution.result
    except Exception as exc:
        await ledger.sessions.update(session, task_status="failed")
        details["error"] = str(exc)
        return AgentToolResult.text(f"The sub-agent could not run: {exc}", details=details, is_error=True)
    ok = result.error is None and result.stop_reason in ("end_turn", "max_tokens", "tool_use")
    await ledger.sessions.update(session, task_status="completed" if ok else "failed")
    answer = result.reply
    details.update(stop_reason=result.stop_reason, input_tokens=result.usage.input)
    details["output_tokens"] = result.usage.output
    if ok:
        return AgentToolResult.text(answer or "(the sub-agent finished without a text answer)", details=details)
    why = result.error.message if result.error is not None else f"it stopped ({result.stop_reason})"
    partial = f"\nPartial answer:\n{answer}" if answer else ""
    return AgentToolResult.text(f"The sub-agent did not finish: {why}{partial}", details=details, is_error=True)


def _progress(session: str, on_update: ToolUpdateFn | None) -> EngineCallbacks | None:
    """Callbacks that turn the worker's tool starts and ends into progress lines of the spawn call."""
    if on_update is None:
        return None
    from nexus.engine.execution.callbacks import EngineCallbacks

    def tool_status(call_id: str, name: str, status: str, summary: str | None) -> None:
        on_update(AgentToolResult.text(f"[{session}] {name}: {status}", details={"spawned_session_label": session}))

    return EngineCallbacks(on_tool_result=tool_status)


def spawn_agent_tool() -> AgentTool:
    """The ``spawn_agent`` tool (offered by ``Runtime.tools_for`` while the depth is under the limit)."""
    return AgentTool(
        name=SPAWN_TOOL_NAME,
        description=_DESCRIPTION,
        parameters=_PARAMETERS,
        execute=_execute,
        label="Spawn sub-agent",
        validate=_validate,
    )
