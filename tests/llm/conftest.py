"""Fixtures for the nexus.llm tests: a mock HTTP transport installed per test."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from nexus.llm import _http, aclose_http_client

from ._helpers import MockHTTP


@pytest.fixture
def mock_http() -> Iterator[MockHTTP]:
    """Route provider HTTP through a scripted ``httpx.MockTransport``."""
    mock = MockHTTP()
    mock.install()
    yield mock
    _http.use_transport(None)


@pytest.fixture(autouse=True)
async def close_shared_client() -> AsyncIterator[None]:
    """Close the shared HTTP client on the test's own loop, so no connection outlives it."""
    yield
    await aclose_http_client()
