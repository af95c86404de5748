"""Block pipeline settings: defaults, the seed's per-channel table, config overrides, the text limit.

Resolution order: built-in defaults (800 / 1200 chars, idle 1000 ms, human delay 800-2500 ms,
tool status inline) ← the channel's row in :data:`CHANNEL_DEFAULTS` (seed 004: imessage,
whatsapp, sms) ← ``[adapters.<name>.blocks]`` in ``nexus.toml``. ``max_chars`` is then
clamped to the platform's text limit and ``min_chars`` to ``max_chars``, as OpenClaw does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal, TypeAlias

ToolStatusMode: TypeAlias = Literal["inline", "off"]


@dataclass(slots=True, frozen=True)
class BlockSettings:
    """How one channel gets its blocks.

    ``human_delay_ms`` is a ``(min, max)`` range for the random pause *between* blocks
    (never before the first); ``None`` or ``(0, 0)`` turns it off. ``tool_status`` ``inline``
    writes ``[Reading package.json...]`` into the text, ``off`` drops tool activity.
    ``reasoning`` forwards thinking text (most chat users do not want it).
    """

    min_chars: int = 800
    max_chars: int = 1200
    idle_ms: int = 1000
    human_delay_ms: tuple[int, int] | None = (800, 2500)
    tool_status: ToolStatusMode = "inline"
    reasoning: bool = False

    def clamped(self, text_limit: int | None) -> BlockSettings:
        """These settings with ``max_chars`` within ``text_limit`` and ``min_chars`` within ``max_chars``."""
        max_chars = self.max_chars if text_limit is None else min(self.max_chars, text_limit)
        max_chars = max(16, max_chars)
        return replace(self, max_chars=max_chars, min_chars=max(1, min(self.min_chars, max_chars)))


CHANNEL_DEFAULTS: Mapping[str, Mapping[str, Any]] = {
    "imessage": {"min_chars": 600, "max_chars": 1000, "human_delay_ms": (1000, 3000)},
    "whatsapp": {"min_chars": 600, "max_chars": 1000, "human_delay_ms": (800, 2500)},
    "sms": {"min_chars": 140, "max_chars": 160, "human_delay_ms": (500, 1500)},
}
"""Per-platform defaults from seed 004's table (other platforms use the built-in defaults)."""

TEXT_LIMITS: Mapping[str, int] = {
    "discord": 2000,
    "telegram": 4096,
    "slack": 4000,
    "whatsapp": 4000,
    "imessage": 4000,
    "signal": 4000,
    "line": 5000,
    "sms": 160,
}
"""Known platform text limits (reference/nexus-specs.md §4), used when ``info`` gives none."""


def block_settings(
    platform: str,
    overrides: Mapping[str, Any] | None = None,
    *,
    text_limit: int | None = None,
) -> BlockSettings:
    """The settings for a channel on ``platform`` with config ``overrides`` (keys of :class:`BlockSettings`)."""
    values: dict[str, Any] = dict(CHANNEL_DEFAULTS.get(platform.lower(), {}))
    for key, value in (overrides or {}).items():
        if value is not None:
            values[key] = tuple(value) if key == "human_delay_ms" else value
    settings = BlockSettings(**values)
    limit = text_limit if text_limit is not None else TEXT_LIMITS.get(platform.lower())
    return settings.clamped(limit)
