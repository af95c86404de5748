"""Metric label values that stay few: a Prometheus series per distinct value lives as long as the process."""

from __future__ import annotations

import re

_SPAWNED = re.compile(r"worker-[0-9a-z]{26}")
SPAWNED_WORKERS = "worker-*"
"""The label of every agent ``spawn_agent`` made (``worker-<ulid>``): one each would be a series per task."""


def agent_label(agent_id: str) -> str:
    """``agent_id`` as a metric label: spawned workers together as ``worker-*``, named agents as they are."""
    return SPAWNED_WORKERS if _SPAWNED.fullmatch(agent_id) else agent_id
