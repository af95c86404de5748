"""``[routing]`` of ``nexus.toml``: smart routing (``nexus.routing``; docs/routing.md)."""

from __future__ import annotations

from typing import Literal

from nexus.config._record import Record, setting

RoutingModeName = Literal["explicit", "smart", "hybrid"]


class RoutingConfig(Record):
    """How messages sent with routing find their session, and how the index is built."""

    mode: RoutingModeName = "explicit"
    """The routing mode of ``nexus send`` and the messages API when a message names none."""
    agents: dict[str, RoutingModeName] = setting(default_factory=dict)
    """Per-agent routing modes (``[routing.agents] coder = "hybrid"``)."""
    smart_share: float = setting(default=1.0, ge=0.0, le=1.0)
    """A/B: the share of conversations routed smart when the mode is smart or hybrid (the rest explicit)."""
    index: bool = False
    """``nexus serve`` indexes every written turn on a worker thread (else ``nexus route`` catches up)."""
    embedder: Literal["wordllama", "openai", "none"] = "wordllama"
    embedding_base_url: str = ""
    embedding_model: str = ""
    embedding_api_key_env: str = "OPENAI_API_KEY"
    threshold: float | None = setting(default=None, ge=0.0, le=1.0)
    """The confidence an ``existing`` decision needs (default: the fitted model's)."""
    max_task_chars: int = setting(default=4000, ge=100)
    model: str = ""
    """A scoring model fitted for the embedder (a JSON file from ``bench_routing.py --fit --model-out``;
    relative to ``NEXUS_HOME``); empty: the shipped one, fitted with wordllama."""
