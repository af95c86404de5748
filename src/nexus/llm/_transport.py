"""The providers' HTTP transport: plain http without TLS set-up, https with a TLS context made on first use.

``httpx.AsyncHTTPTransport`` builds its ``ssl.SSLContext`` when it is created, and loading the
certificate store into it is 20-40 ms of CPU: a third of a whole ``nexus run`` against a local
server, which never speaks TLS. :class:`SchemeTransport` keeps one pool per scheme: ``http://``
requests go through a pool whose context can verify nothing (so it can never carry TLS by mistake),
every other request through a standard, verifying pool created on the first ``https://`` request.
"""

from __future__ import annotations

import ssl

import httpx


class SchemeTransport(httpx.AsyncBaseTransport):
    """Route ``http://`` to a TLS-less pool and everything else to a verifying pool made on first use.

    Each pool gets the same ``limits``; environment proxies are the client's business (httpx mounts
    them in front of this transport), as they were for the transport this replaces.
    """

    def __init__(self, limits: httpx.Limits) -> None:
        self._limits = limits
        self._plain: httpx.AsyncHTTPTransport | None = None
        self._tls: httpx.AsyncHTTPTransport | None = None

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        return await self._pool(request.url.scheme).handle_async_request(request)

    def _pool(self, scheme: str) -> httpx.AsyncHTTPTransport:
        if scheme == "http":
            if self._plain is None:
                refuse_tls = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # no CA, verification on: no handshake passes
                self._plain = httpx.AsyncHTTPTransport(verify=refuse_tls, limits=self._limits)
            return self._plain
        if self._tls is None:
            self._tls = httpx.AsyncHTTPTransport(limits=self._limits)
        return self._tls

    async def aclose(self) -> None:
        for pool in (self._plain, self._tls):
            if pool is not None:
                await pool.aclose()
