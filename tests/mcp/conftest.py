"""Fixtures of the MCP tests: a ``McpServers`` that is always closed (no server process outlives a test)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from nexus.config import NexusConfig
from nexus.mcp import McpServers, RestartPolicy


@pytest.fixture
async def open_servers() -> AsyncIterator[Callable[..., McpServers]]:
    """``open_servers(config, **kw)`` makes a ``McpServers``; every one made is closed after the test."""
    made: list[McpServers] = []

    def make(config: NexusConfig, **kwargs: Any) -> McpServers:
        kwargs.setdefault("policy", RestartPolicy(base_s=0.2, cap_s=1.0))
        servers = McpServers(config, **kwargs)
        made.append(servers)
        return servers

    yield make
    for servers in made:
        await servers.close()
