"""The engine's input and output: ``AssembledContext`` in, ``AgentResult`` out (seed 000, snake_case).

Context assembly produces an :class:`AssembledContext`; the engine runs it and returns an
:class:`AgentResult`, which the ledger writes as one turn. Everything here is plain data so
the broker, the ledger and tests can build and inspect these objects without the engine.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, field, replace
from typing import TYPE_CHECKING, Literal, TypeAlias

from nexus._dataclass import dataclass
from nexus.ledger import CompactionRecord, StoredMessage, ToolCallRecord, TurnStatus, new_ulid
from nexus.llm import THINKING_LEVELS, AssistantMessage, ErrorKind, Message, Model, ThinkingLevel, Usage, UserMessage

if TYPE_CHECKING:
    from nexus.agent import AgentTool, SteerReceipt
    from nexus.llm import AbortSignal

AgentRole: TypeAlias = Literal["manager", "worker", "unified"]
"""What an agent is for: a manager delegates, a worker executes, unified does both."""

RunStopReason: TypeAlias = Literal["end_turn", "max_tokens", "tool_use", "timeout", "aborted", "error"]
"""Why a run ended (seed 000's ``AgentResult.stop_reason``).

Not a second :data:`nexus.llm.StopReason`: that one says why one *message* ended
(``stop|length|tool_use|error|aborted``); this one says why the whole run did, and adds
``timeout`` and ``end_turn`` (the run's last message stopped normally)."""

RUN_STATUS: dict[RunStopReason, TurnStatus] = {
    "end_turn": "completed",
    "max_tokens": "completed",
    "tool_use": "completed",
    "timeout": "aborted",
    "aborted": "aborted",
    "error": "failed",
}
"""The one mapping from the engine's stop vocabulary to the ledger's turn status (``AgentResult.status``)."""

AgentErrorKind: TypeAlias = Literal[
    "context_overflow",
    "auth_failure",
    "rate_limit",
    "overloaded",
    "model_error",
    "timeout",
    "network",
    "compaction_failure",
    "unknown",
]
"""Why a run failed, coarse enough for the broker to decide whether to retry."""

CompactionTrigger: TypeAlias = Literal["context_limit", "overflow_recovery", "manual"]
"""Why a compaction ran: the prompt neared the window, a call overflowed it, or a user asked for it."""


@dataclass(slots=True)
class ThinkingConfig:
    """Extended-thinking settings: a provider-neutral level and an optional explicit token budget."""

    level: ThinkingLevel = "off"
    budget_tokens: int | None = None


@dataclass(slots=True)
class TokenBudget:
    """How the model's context window is spent, by layer, so the engine knows when to compact.

    ``available`` is what the prompt may use: the window minus the reserve for the reply
    (``reserve_output``) and the reserve that keeps room for compaction
    (``reserve_compaction``). ``remaining`` below zero means: compact before calling.
    """

    context_window: int
    reserve_output: int = 0
    reserve_compaction: int = 0
    system: int = 0
    history: int = 0
    current: int = 0
    tools: int = 0

    @property
    def used(self) -> int:
        """Estimated prompt tokens over all four layers."""
        return self.system + self.history + self.current + self.tools

    @property
    def available(self) -> int:
        """Prompt tokens the window allows once both reserves are set aside."""
        return max(0, self.context_window - self.reserve_output - self.reserve_compaction)

    @property
    def remaining(self) -> int:
        """``available - used``; negative when the prompt is over budget."""
        return self.available - self.used

    @property
    def fits(self) -> bool:
        """True when the prompt plus the reply reserve fits the window at all (no compaction reserve)."""
        return self.used + self.reserve_output <= self.context_window

    def with_conversation(self, history: int, current: int) -> TokenBudget:
        """The same budget with the history and current-message layers re-estimated (built directly: every
        run and every model call makes one, and ``dataclasses.replace`` walks the fields by name)."""
        return TokenBudget(
            self.context_window, self.reserve_output, self.reserve_compaction, self.system, history, current, self.tools
        )

    def for_model(
        self, model: Model, max_response_tokens: int | None = None, reserve_tokens: int = 16_384
    ) -> TokenBudget:
        """The same layer usage budgeted for another model (model fallback changes the window)."""
        output, compaction = budget_reserves(
            model.context_window, max_response_tokens or model.max_tokens, reserve_tokens
        )
        return replace(self, context_window=model.context_window, reserve_output=output, reserve_compaction=compaction)


def budget_reserves(context_window: int, max_output: int, reserve_tokens: int) -> tuple[int, int]:
    """Reply and compaction reserves, each capped at a quarter of the window.

    Without the cap a small local model (8k window, 8k max output, 16k reserve) would have
    a negative budget and compact on every call.
    """
    quarter = max(0, context_window // 4)
    return min(max(0, max_output), quarter), min(max(0, reserve_tokens), quarter)


@dataclass(slots=True, kw_only=True)
class AssembledContext:
    """Everything the engine needs for one run: the three prompt layers, tools, model and metadata.

    ``history`` and ``current_message`` are ``nexus.llm`` messages; ``tools`` are already
    IAM-filtered. The metadata block is for the ledger and is never sent to the model.
    """

    system_prompt: str
    history: list[Message]
    current_message: UserMessage
    tools: list[AgentTool] = field(default_factory=list)
    model: str
    provider: str
    thinking_config: ThinkingConfig | None = None
    max_response_tokens: int | None = None
    temperature: float | None = None
    token_budget: TokenBudget
    timeout_ms: int = 600_000
    abort_signal: AbortSignal | None = None
    run_id: str
    session_label: str
    parent_turn_id: str | None = None
    role: AgentRole = "unified"
    toolset_name: str = "default"
    permissions_granted: list[str] = field(default_factory=list)
    source_event_id: str | None = None
    workspace_path: str = ""
    history_estimates: list[int | None] | None = field(default=None, repr=False)
    """Assembly's per-message token estimates of ``history`` (None = not known), reused by the run: its context
    window takes the list (None here once the run is built)."""
    source: str | None = None
    """Where the current message came from (``cli``, ``telegram``, ``agent:<id>`` …): its stored ``source``."""
    queue_item_ids: tuple[str, ...] = ()
    """Broker queue items this run consumes: marked delivered in the transaction that writes its turn."""
    lease_fence: bool = True
    """False when the broker claimed ``queue_item_ids`` without a session lease: the turn write skips the
    lease fence (``TurnWrite.lease_fence``)."""


def new_id() -> str:
    """A new ULID string (sortable by creation time, the ledger's id format; the ledger's own generator:
    monotonic within a millisecond)."""
    return new_ulid()


@dataclass(slots=True)
class AgentError:
    """Why a run failed, and whether the broker may simply try again."""

    kind: AgentErrorKind
    message: str
    retryable: bool = False


_ERROR_KIND_MAP: dict[str, tuple[AgentErrorKind, bool]] = {
    "auth": ("auth_failure", False),
    "auth_permanent": ("auth_failure", False),
    "billing": ("auth_failure", False),
    "rate_limit": ("rate_limit", True),
    "overloaded": ("overloaded", True),
    "timeout": ("timeout", True),
    "network": ("network", True),
    "context_overflow": ("context_overflow", False),
    "format": ("model_error", False),
}


def agent_error_from_message(message: AssistantMessage) -> AgentError:
    """Map a failed provider response (``stop_reason='error'``) to the engine's :class:`AgentError`."""
    kind: ErrorKind = message.error_kind or "unknown"
    mapped, retryable = _ERROR_KIND_MAP.get(kind, ("model_error", False))
    text = message.error_message or f"the model call failed ({kind})"
    return AgentError(mapped, text, retryable)


@dataclass(slots=True, kw_only=True)
class AgentResult:
    """What one run produced: messages, tool calls, usage, why it stopped, error and compactions.

    One type per concept: ``messages`` are the ledger's :class:`StoredMessage` rows of the
    turn (query first; ``id`` equal to the ledger's message id — without a ledger, the
    ordinal), ``tool_calls`` its :class:`ToolCallRecord` rows, ``compactions`` every
    :class:`CompactionRecord` the run made, in order, with its turn ids.
    ``usage`` is the run's total in the one ``nexus.llm`` :class:`Usage` (with its cost; cache
    counts are the last call's, see :func:`~nexus.llm.types.add_call_usage`);
    ``last_call_usage`` (addition, seed 001) is the last LLM call's usage: the accurate
    measure of how full the context is. ``returned_steers`` are the steering messages the run
    accepted but could not inject (it ended first): the caller owns them again.
    ``turn_id`` is the ledger turn (None without a ledger).
    """

    messages: list[StoredMessage] = field(default_factory=list)
    tool_calls: list[ToolCallRecord] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    stop_reason: RunStopReason = "end_turn"
    duration_ms: int = 0
    error: AgentError | None = None
    compactions: list[CompactionRecord] = field(default_factory=list)
    last_call_usage: Usage | None = None
    returned_steers: list[SteerReceipt] = field(default_factory=list)
    turn_id: str | None = None

    @property
    def compaction(self) -> CompactionRecord | None:
        """The run's last compaction (seed 000's single field), or None."""
        return self.compactions[-1] if self.compactions else None

    @property
    def status(self) -> TurnStatus:
        """``completed | failed | aborted``: the status its turn is written with (from ``stop_reason``)."""
        return RUN_STATUS[self.stop_reason]

    @property
    def reply(self) -> str:
        """The reply: the text of the run's last assistant message that has text ("" when none has)."""
        for stored in reversed(self.messages):
            if isinstance(stored.message, AssistantMessage) and stored.text:
                return stored.text
        return ""


@dataclass(slots=True, frozen=True)
class EngineLimits:
    """The engine's knobs (seed 001 defaults); one object so config maps onto it in one place."""

    max_iterations: int = 25
    max_retries: int = 3
    max_tool_result_chars: int = 60_000
    timeout_ms: int = 600_000
    subagent_max_depth: int = 3
    reserve_tokens: int = 16_384
    keep_recent_tokens: int = 20_000
    overflow_tool_result_chars: int = 20_000
    cooldown_initial_s: float = 1.0
    cooldown_max_s: float = 60.0
    max_wait_s: float = 60.0

    def __post_init__(self) -> None:
        from nexus.errors import ConfigError

        for name in ("max_iterations", "max_tool_result_chars", "timeout_ms", "keep_recent_tokens"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"engine limit {name} must be positive, got {getattr(self, name)}")
        for name in ("max_retries", "subagent_max_depth", "reserve_tokens", "overflow_tool_result_chars"):
            if getattr(self, name) < 0:
                raise ConfigError(f"engine limit {name} must be zero or more, got {getattr(self, name)}")
        if not 0 < self.cooldown_initial_s <= self.cooldown_max_s:
            raise ConfigError("engine cooldowns need 0 < cooldown_initial_s <= cooldown_max_s")
        if not self.max_wait_s >= 0:  # also rejects NaN
            raise ConfigError(f"engine limit max_wait_s must be zero or more, got {self.max_wait_s}")


@dataclass(slots=True, frozen=True)
class AgentSpec:
    """One agent: who it is and how it runs (what a process has once is the ``Runtime``'s).

    ``model`` is ``provider/model`` or a :class:`Model` used as is (None = the config's default);
    ``fallbacks`` replaces the config's chain when given; ``tools`` narrows the tools the policy
    allows to these names, globs or groups (None = all the policy allows, ``()`` = none);
    ``system_prompt`` is appended to the assembled prompt as the agent's instructions; ``limits``
    replaces the config's; ``thinking`` the config's thinking level; ``depth`` is how deep the agent
    sits in a tree of ``spawn_agent`` workers (0 for a top-level agent); ``max_tokens`` caps each model
    call's reply (at most the model's own limit).
    """

    id: str = "main"
    role: AgentRole = "unified"
    model: str | Model | None = None
    fallbacks: tuple[str, ...] | None = None
    tools: tuple[str, ...] | None = None
    system_prompt: str = ""
    limits: EngineLimits | None = None
    thinking: ThinkingLevel | None = None
    depth: int = 0
    max_tokens: int | None = None

    def to_json(self) -> dict[str, object]:
        """What a registry stores of the spec (``id`` and ``role`` are its own columns): only what is set."""
        out: dict[str, object] = {}
        if self.model is not None:
            out["model"] = self.model if isinstance(self.model, str) else self.model.ref
        if self.fallbacks is not None:
            out["fallbacks"] = list(self.fallbacks)
        if self.tools is not None:
            out["tools"] = list(self.tools)
        if self.system_prompt:
            out["system_prompt"] = self.system_prompt
        if self.limits is not None:
            out["limits"] = asdict(self.limits)
        if self.thinking is not None:
            out["thinking"] = self.thinking
        if self.depth:
            out["depth"] = self.depth
        if self.max_tokens is not None:
            out["max_tokens"] = self.max_tokens
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, object], *, agent_id: str, role: AgentRole) -> AgentSpec:
        """The spec :meth:`to_json` stored (a field of the wrong type is left at its default, never raised:
        a stored registry row must stay loadable)."""
        model, prompt, thinking = data.get("model"), data.get("system_prompt"), data.get("thinking")
        limits, depth, max_tokens = data.get("limits"), data.get("depth"), data.get("max_tokens")
        return cls(
            id=agent_id,
            role=role,
            model=model if isinstance(model, str) and model else None,
            fallbacks=_names(data.get("fallbacks")),
            tools=_names(data.get("tools")),
            system_prompt=prompt if isinstance(prompt, str) else "",
            limits=EngineLimits(**limits) if isinstance(limits, dict) else None,
            thinking=thinking if thinking in THINKING_LEVELS else None,
            depth=depth if isinstance(depth, int) and depth >= 0 else 0,
            max_tokens=max_tokens
            if isinstance(max_tokens, int) and not isinstance(max_tokens, bool) and max_tokens > 0
            else None,
        )


def _names(value: object) -> tuple[str, ...] | None:
    return tuple(str(item) for item in value) if isinstance(value, list) else None


# --------------------------------------------------------------------------- engine events


@dataclass(slots=True, frozen=True)
class RetryEvent:
    """A model call failed before any output and will be tried again (maybe with ``next_profile``).

    Emitted only when another attempt really follows. ``delay_s`` is how long it waits (0 when
    another profile is ready); ``next_profile`` is the profile it uses (``None``: the
    provider's only, unnamed key).
    """

    attempt: int
    profile: str | None
    model: str
    error_kind: str
    delay_s: float
    message: str
    next_profile: str | None = None
    type: Literal["retry"] = "retry"


@dataclass(slots=True, frozen=True)
class WaitEvent:
    """Every auth profile of ``provider`` is cooling down; the engine waits ``delay_s`` for ``profile``.

    Only for a cooldown left by an earlier call: a wait caused by this call's failure is the
    ``RetryEvent``'s ``delay_s`` and is not announced again. ``keys`` is how many auth
    profiles the provider has (1: a single key, so there is no "other key" to try).
    """

    provider: str
    profile: str | None
    model: str
    delay_s: float
    keys: int = 1
    type: Literal["wait"] = "wait"


@dataclass(slots=True, frozen=True)
class FallbackEvent:
    """The engine moves from ``from_model`` to ``to_model`` (``skipped`` when the prompt cannot fit it).

    ``budget`` is the token budget recomputed for ``to_model`` when a budget callback was given.
    """

    from_model: str
    to_model: str
    reason: str
    budget: TokenBudget | None = None
    skipped: bool = False
    type: Literal["fallback"] = "fallback"


@dataclass(slots=True, frozen=True)
class CompactionStartEvent:
    """Compaction begins; ``reason`` is the trigger (``context_limit``, ``overflow_recovery`` or ``manual``)."""

    reason: CompactionTrigger
    message_count: int
    tokens_before: int
    type: Literal["compaction_start"] = "compaction_start"


@dataclass(slots=True, frozen=True)
class CompactionEndEvent:
    """Compaction ended: ``result`` on success, ``error`` otherwise; ``will_retry`` if the call is retried.

    ``result`` is the ``compactions`` record as it will be stored, but for the turn ids (set when its turn is written).
    """

    result: CompactionRecord | None
    error: str | None = None
    will_retry: bool = False
    type: Literal["compaction_end"] = "compaction_end"


EngineEvent: TypeAlias = RetryEvent | WaitEvent | FallbackEvent | CompactionStartEvent | CompactionEndEvent
"""Engine lifecycle events beyond the agent loop's own (retries, failover, compaction)."""
