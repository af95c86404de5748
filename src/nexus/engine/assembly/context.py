"""Context assembly: the three layers (system prompt, history, current message) plus tools and budget.

The ledger supplies the history; this module builds the rest and packs it all into an
:class:`~nexus.engine.types.AssembledContext`. The current message carries the event
context (time, timezone, channel, sender) as a short header, so the model knows when
and where it is being spoken to without that changing the cached system prompt.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import field
from datetime import UTC, datetime, tzinfo
from pathlib import Path
from typing import TYPE_CHECKING

from nexus._dataclass import dataclass
from nexus.engine.assembly._sessions import SessionCache
from nexus.engine.assembly._window import history_estimates
from nexus.engine.assembly.bootstrap import load_bootstrap_files, scaffold_workspace
from nexus.engine.assembly.budget import compute_budget
from nexus.engine.assembly.system_prompt import RuntimeInfo, build_minimal_system_prompt, build_system_prompt
from nexus.engine.assembly.tool_policy import filter_tools
from nexus.engine.types import AgentRole, AssembledContext, EngineLimits, ThinkingConfig, TokenBudget, new_id
from nexus.errors import ConfigError
from nexus.llm import ImageContent, Message, Model, TextContent, UserContent, UserMessage

if TYPE_CHECKING:
    from nexus.agent import AgentTool
    from nexus.config import PromptProfile
    from nexus.llm import AbortSignal


def resolve_timezone(name: str) -> tzinfo:
    """The IANA zone ``name`` (``Europe/Berlin``, ``UTC``); :class:`ConfigError` if unknown.

    ``UTC``, the default zone, is :data:`datetime.UTC` (same offset, name and ISO text as the database's
    ``UTC``): a run in UTC neither imports :mod:`zoneinfo` (with ``sysconfig``, ~1 % of a ``nexus run``) nor
    reads the time-zone database.
    """
    if name == "UTC":
        return UTC
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ConfigError(f"unknown timezone {name!r}; use an IANA name such as 'UTC' or 'Europe/Berlin'") from exc


def local_timezone() -> str:
    """This machine's IANA zone name (``$TZ``, else ``/etc/localtime``), or ``UTC`` when unknown.

    A terminal user's "now" is local time; the CLI puts it in the event context with this. A name of UTC is
    taken as ``UTC`` without loading it from the time-zone database (see :func:`resolve_timezone`).
    """
    import os

    candidates = [os.environ.get("TZ", "").lstrip(":")]
    try:
        target = os.path.realpath("/etc/localtime")
        if "zoneinfo/" in target:
            candidates.append(target.split("zoneinfo/", 1)[1])
    except OSError:
        pass
    for name in candidates:
        if not name:
            continue
        if name == "UTC" or name in _UTC_ALIASES:
            return "UTC"
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

        try:
            ZoneInfo(name)
        except (ZoneInfoNotFoundError, ValueError, OSError):
            continue
        return name
    return "UTC"


_UTC_ALIASES = frozenset({"Etc/UTC", "Etc/UCT", "Etc/Universal", "Etc/Zulu", "UCT", "Universal", "Zulu", "Etc/GMT"})
"""Names of UTC that a machine's ``/etc/localtime`` may link to (Debian's is ``Etc/UTC``): said ``UTC``, the name a
server's default uses, so one turn does not read "(Etc/UTC)" from ``nexus run`` and "(UTC)" from ``nexus serve``."""


@dataclass(slots=True, frozen=True)
class EventContext:
    """Where and when the current message came from (layer 3 metadata the model sees).

    ``time`` defaults to now; it is shown in ``timezone``. ``extra`` adds more ``key: value`` lines.
    """

    time: datetime | None = None
    timezone: str = "UTC"
    channel: str | None = None
    sender: str | None = None
    extra: Mapping[str, str] = field(default_factory=dict)

    def local_time(self) -> datetime:
        """``time`` (or now) converted to ``timezone``."""
        zone = resolve_timezone(self.timezone)
        moment = self.time or datetime.now(zone)
        if moment.tzinfo is None:
            raise ConfigError("event time must be timezone-aware (e.g. datetime.now(timezone.utc))")
        return moment.astimezone(zone)

    def header(self) -> str:
        """The ``[Event context]`` block placed before the user's text."""
        lines = [HEADER_OPEN, f"Time: {self.local_time().isoformat(timespec='seconds')} ({self.timezone})"]
        if self.channel:
            lines.append(f"Channel: {self.channel}")
        if self.sender:
            lines.append(f"Sender: {self.sender}")
        lines.extend(f"{key}: {value}" for key, value in self.extra.items())
        lines.append(HEADER_CLOSE)
        return "\n".join(lines)


HEADER_OPEN = "[Event context]"
HEADER_CLOSE = "[/Event context]"


def split_event_context(text: str) -> tuple[str | None, str]:
    """``(header, typed)``: a stored user message split into the event-context header
    (:meth:`EventContext.header`, ``None`` when there is none) and the text the user typed.

    The header is for the model; people reading a history (``nexus sessions history``, the web
    UI's bubbles and turn tree) want their own words, and the header belongs in a turn's detail.
    """
    head, marker, rest = text.partition(HEADER_CLOSE)
    if not marker or not head.startswith(HEADER_OPEN):
        return None, text
    return head + marker, rest.strip()


def build_current_message(
    text: str, event: EventContext | None = None, images: Sequence[ImageContent] = ()
) -> UserMessage:
    """Layer 3: the user's text, prefixed with the event context when given, plus any images."""
    body = f"{event.header()}\n\n{text}" if event is not None else text
    if not images:
        return UserMessage(body)
    content: list[UserContent] = [TextContent(body), *images]
    return UserMessage(content)


@dataclass(slots=True, frozen=True)
class PromptOptions:
    """How the system prompt is composed: identity and safety text (``None`` = defaults), bootstrap on/off."""

    identity: str | None = None
    safety: tuple[str, ...] | None = None
    load_bootstrap: bool = True
    scaffold: bool = True
    profile: PromptProfile = "full"
    """``minimal``: the identity only (:func:`build_minimal_system_prompt`), for tiny models."""


def _system_prompt_for(
    root: Path, model: Model, event: EventContext | None, tools: Sequence[AgentTool], prompt: PromptOptions
) -> str:
    """The composed system prompt: identity, bootstrap files, tools, safety and the runtime line (the
    workspace scaffolded first, with a starter ``AGENTS.md``, if ``prompt.scaffold``)."""
    if prompt.scaffold:
        scaffold_workspace(root)
    zone = event.timezone if event is not None else "UTC"
    now = event.local_time() if event is not None else datetime.now(resolve_timezone(zone))
    if prompt.profile == "minimal":
        return build_minimal_system_prompt(now.date(), prompt.identity)
    channel = event.channel if event is not None else None
    files = tuple(load_bootstrap_files(root)) if prompt.load_bootstrap else ()
    key = (str(root), model.ref, zone, channel, now.date(), prompt.identity, prompt.safety, files,
           tuple([(t.name, t.description) for t in tools]))  # fmt: skip
    known = _composed.get(key)
    if known is not None:
        return known
    runtime = RuntimeInfo(time=now, timezone=zone, channel=channel, model=model.ref, workspace=key[0])
    composed = build_system_prompt(
        identity=prompt.identity, bootstrap_files=files, tools=tools, safety=prompt.safety, runtime=runtime
    )
    if len(_composed) >= _COMPOSED_MAX:
        _composed.clear()
    _composed[key] = composed
    return composed


_COMPOSED_MAX = 64
_composed: dict[tuple[object, ...], str] = {}
"""Composed system prompts by everything they are made of (the runtime line shows the date only, and the
bootstrap files come from their own cache, re-read after an edit): the runs of one agent on one day
compose the same text, so it is built once, and every run shares that one copy (1,000 runs at once held
1,000 copies of a ~3 KB prompt before). Bounded: 64 distinct prompts."""


def assemble_context(
    *,
    model: Model,
    workspace: str | Path,
    session_label: str,
    history: Sequence[Message],
    message: str | UserMessage,
    event: EventContext | None = None,
    tools: Sequence[AgentTool] = (),
    allow: Iterable[str] | None = None,
    deny: Iterable[str] | None = None,
    prompt: PromptOptions = PromptOptions(),
    limits: EngineLimits = EngineLimits(),
    parent_turn_id: str | None = None,
    role: AgentRole = "unified",
    toolset_name: str = "default",
    permissions_granted: Sequence[str] = (),
    source_event_id: str | None = None,
    thinking: ThinkingConfig | None = None,
    max_response_tokens: int | None = None,
    temperature: float | None = None,
    abort_signal: AbortSignal | None = None,
    run_id: str | None = None,
    cache: SessionCache | None = None,
) -> AssembledContext:
    """Build an :class:`AssembledContext` from its parts (history comes from the ledger): the ``tools`` that
    ``allow``/``deny`` leave, the system prompt (with the workspace's bootstrap files; a starter ``AGENTS.md``
    first if ``prompt.scaffold``) and the token budget for ``model``."""
    if not session_label:
        raise ConfigError("session_label must not be empty; every run belongs to a session")
    root = Path(workspace).expanduser()
    usable = filter_tools(tools, allow, deny)
    current = message if isinstance(message, UserMessage) else build_current_message(message, event)
    system_prompt = _system_prompt_for(root, model, event, usable, prompt)
    kept = list(history)
    budget, estimates = _budget(model, system_prompt, kept, current, usable, max_response_tokens, limits, cache)
    return AssembledContext(
        system_prompt=system_prompt,
        history=kept,
        current_message=current,
        tools=usable,
        model=model.id,
        provider=model.provider,
        thinking_config=thinking,
        max_response_tokens=max_response_tokens,
        temperature=temperature,
        token_budget=budget,
        timeout_ms=limits.timeout_ms,
        abort_signal=abort_signal,
        run_id=run_id or new_id(),
        session_label=session_label,
        parent_turn_id=parent_turn_id,
        role=role,
        toolset_name=toolset_name,
        permissions_granted=list(permissions_granted),
        source_event_id=source_event_id,
        workspace_path=str(root),
        history_estimates=estimates,  # the run reuses them instead of estimating the history again
    )


def _budget(
    model: Model,
    system_prompt: str,
    history: list[Message],
    current: UserMessage,
    tools: Sequence[AgentTool],
    max_response_tokens: int | None,
    limits: EngineLimits,
    cache: SessionCache | None,
) -> tuple[TokenBudget, list[int | None]]:
    """The run's token budget and the history's per-message estimates (estimated once, reusing the
    session ``cache``: the run keeps them instead of estimating the history again)."""
    history_tokens, estimates = history_estimates(history, cache)
    budget = compute_budget(
        model,
        system_prompt=system_prompt,
        history=(),
        current=current,
        tools=tools,
        max_response_tokens=max_response_tokens,
        reserve_tokens=limits.reserve_tokens,
    )
    return budget.with_conversation(history_tokens, budget.current), estimates
