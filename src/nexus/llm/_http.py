"""The one shared async HTTP client every provider speaks through.

One ``httpx.AsyncClient`` per event loop (created on first use) keeps connections and
TLS sessions warm across calls; httpx itself is imported here lazily so that
``import nexus.llm`` stays cheap. Tests inject a transport (``httpx.MockTransport`` or
any other) with :func:`use_transport`.

The client's own transport is :class:`nexus.llm._transport.SchemeTransport`: a TLS context
(loading the certificate store costs 20-40 ms) is made on the first ``https://`` request,
so a provider on a plain-http loopback URL (a local server, the tests' fake) never pays for it.
"""

from __future__ import annotations

import asyncio
import weakref
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import httpx

_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, httpx.AsyncClient] = weakref.WeakKeyDictionary()
_transport: httpx.AsyncBaseTransport | None = None


def use_transport(transport: httpx.AsyncBaseTransport | None) -> None:
    """Route every provider request through ``transport`` (``None`` restores the network).

    Meant for tests: existing clients are dropped so the next call builds one with it.
    """
    global _transport
    _transport = transport
    _clients.clear()


def get_client() -> httpx.AsyncClient:
    """The client of the running event loop, created lazily."""
    loop = asyncio.get_running_loop()
    client = _clients.get(loop)
    if client is None or client.is_closed:
        import httpx

        from nexus.llm._capture import CapturingClient  # an AsyncClient that records when NEXUS_CAPTURE_DIR is set
        from nexus.llm._transport import SchemeTransport

        limits = httpx.Limits(max_connections=200, max_keepalive_connections=50, keepalive_expiry=30.0)
        transport = _transport if _transport is not None else SchemeTransport(limits)
        client = CapturingClient(transport=transport, limits=limits, follow_redirects=True)
        _clients[loop] = client
    return client


def make_timeout(seconds: float | None) -> httpx.Timeout:
    """``seconds`` without progress (connect, read between chunks, write, pool) before failing."""
    import httpx

    return httpx.Timeout(seconds)


async def aclose_client() -> None:
    """Close the running loop's client (call before closing a loop you keep for long)."""
    client = _clients.pop(asyncio.get_running_loop(), None)
    if client is not None:
        await client.aclose()
