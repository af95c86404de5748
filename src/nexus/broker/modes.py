"""Queue modes and their settings, resolved message → session → agent → global.

The mode table of DESIGN §4.6 is the contract; the aliases are the ones OpenClaw accepts
(reference/openclaw.md §1) plus ``steer+backlog``, so configurations written for either
system load here unchanged.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TypeVar, get_args

from nexus.broker.types import BrokerError
from nexus.config import QUEUE_MODE_ALIASES as _MODE_ALIASES
from nexus.config import DropPolicy as DropPolicy
from nexus.config import QueueMode as QueueMode

QUEUE_MODES: tuple[QueueMode, ...] = get_args(QueueMode)
DROP_POLICIES: tuple[DropPolicy, ...] = get_args(DropPolicy)

DEFAULT_DEBOUNCE_MS = 1000
DEFAULT_CAP = 20
DEFAULT_DROP_POLICY: DropPolicy = "summarize"
DEFAULT_MODE: QueueMode = "steer"

_T = TypeVar("_T")


class QueueSettingsError(BrokerError, ValueError):
    """A queue mode, drop policy, cap or debounce that is not valid; the message names it."""


def parse_mode(value: str) -> QueueMode:
    """The canonical mode for ``value`` (an alias is accepted); raises naming the valid ones."""
    canonical = _CANONICAL.get(value)
    if canonical is not None:  # as stored and as most callers give it: every queued message is parsed
        return canonical
    name = value.strip().lower()
    for mode in QUEUE_MODES:
        if mode == name:
            return mode
    if name in _MODE_ALIASES:
        return _MODE_ALIASES[name]
    raise QueueSettingsError(f"unknown queue mode {value!r}: use one of {', '.join(QUEUE_MODES)}")


_CANONICAL: dict[str, QueueMode] = {mode: mode for mode in QUEUE_MODES}


def parse_drop_policy(value: str) -> DropPolicy:
    """The drop policy named ``value``; raises naming the valid ones."""
    name = value.strip().lower()
    for policy in DROP_POLICIES:
        if policy == name:
            return policy
    raise QueueSettingsError(f"unknown drop policy {value!r}: use one of {', '.join(DROP_POLICIES)}")


@dataclass(frozen=True, slots=True)
class QueueSettings:
    """The effective settings of one queue decision (every field resolved)."""

    mode: QueueMode = DEFAULT_MODE
    debounce_ms: int = DEFAULT_DEBOUNCE_MS
    cap: int = DEFAULT_CAP
    drop_policy: DropPolicy = DEFAULT_DROP_POLICY

    def __post_init__(self) -> None:
        if self.mode not in QUEUE_MODES:
            raise QueueSettingsError(f"unknown queue mode {self.mode!r}: use one of {', '.join(QUEUE_MODES)}")
        if self.drop_policy not in DROP_POLICIES:
            raise QueueSettingsError(f"unknown drop policy {self.drop_policy!r}: use one of {', '.join(DROP_POLICIES)}")
        if self.cap < 1:
            raise QueueSettingsError(f"queue cap must be at least 1, not {self.cap}")
        if self.debounce_ms < 0:
            raise QueueSettingsError(f"queue debounce_ms must be 0 or more, not {self.debounce_ms}")


@dataclass(frozen=True, slots=True)
class QueueOverrides:
    """Settings given at one level (message, session, agent or global); ``None`` = inherit."""

    mode: QueueMode | None = None
    debounce_ms: int | None = None
    cap: int | None = None
    drop_policy: DropPolicy | None = None


def resolve_settings(*levels: QueueOverrides | None, default: QueueSettings | None = None) -> QueueSettings:
    """Merge override levels, most specific first (message, session, agent, global), over ``default``.

    Each field is taken from the first level that sets it, so a session's ``cap`` applies even
    when the message chose its own mode.
    """
    base = default or QueueSettings()
    present = [level for level in levels if level is not None and level is not NO_OVERRIDES and level != NO_OVERRIDES]
    if not present:  # the common send: nothing overridden (no new settings built, ~5 us a message)
        return base
    return QueueSettings(
        mode=_first((level.mode for level in present), base.mode),
        debounce_ms=_first((level.debounce_ms for level in present), base.debounce_ms),
        cap=_first((level.cap for level in present), base.cap),
        drop_policy=_first((level.drop_policy for level in present), base.drop_policy),
    )


NO_OVERRIDES = QueueOverrides()
"""A level that sets nothing (what most agents and messages carry): an agent's default, so the common send
passes it by identity, without comparing fields."""


def _first(values: Iterable[_T | None], fallback: _T) -> _T:
    for value in values:
        if value is not None:
            return value
    return fallback


def send_settings(queue_mode: str | None, agent_level: QueueOverrides, default: QueueSettings) -> QueueSettings:
    """The queue settings of one ``send``: its mode (if given) over the agent's overrides over ``default``. The usual
    send (no mode, an agent that overrides nothing) is ``default`` itself, with no level to merge."""
    if queue_mode is None and agent_level is NO_OVERRIDES:
        return default
    message_level = QueueOverrides(mode=parse_mode(queue_mode)) if queue_mode is not None else None
    return resolve_settings(message_level, agent_level, default=default)
