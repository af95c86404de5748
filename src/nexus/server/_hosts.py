"""Which ``Host`` and ``Origin`` a request may carry: the server's defence against web pages.

A web page can make a browser send requests to ``127.0.0.1``, two ways:

- **DNS rebinding**: the page's own name (``attacker.example``) is re-pointed at 127.0.0.1, so the
  browser takes the server for the page's origin and lets the page read every answer. Such a
  request still says ``Host: attacker.example``: only names of this server are accepted — the
  loopback names, the bound address, the address the connection arrived on, and
  ``[server] allowed_hosts`` (a reverse proxy's public name). The port is not compared: a rebound
  name cannot choose it, and a proxy or a container's port mapping changes it legitimately.
- **Cross-site requests**: any page may POST a "simple" request (``text/plain``, no custom header)
  to any address; the browser sends it without asking and only hides the answer. Every such
  request carries ``Origin``; a state-changing request is accepted only when its ``Origin`` is the
  server's own (the origin the request addressed) or one of ``[server] cors_origins``.
"""

from __future__ import annotations

import functools
import ipaddress
from urllib.parse import urlsplit

from nexus.config import ANY_HOST, HostName, parse_host

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
"""Names every server answers to: a page can never rebind these (the browser resolves them itself)."""
_DEFAULT_PORTS = {"http": 80, "https": 443}


class HostRules:
    """The Host names one server answers to, and the Origins it accepts state changes from."""

    __slots__ = ("_any", "_cors", "_named_ports", "_names")

    def __init__(self, *, bound_host: str, allowed_hosts: list[str], cors_origins: list[str]) -> None:
        self._any = ANY_HOST in allowed_hosts
        bound = parse_host(bound_host)
        self._names = set(LOOPBACK_NAMES) | ({bound.name} if bound is not None else set())
        self._named_ports: set[HostName] = set()
        for entry in allowed_hosts:
            host = parse_host(entry) if entry != ANY_HOST else None
            if host is not None and host.port is None:
                self._names.add(host.name)
            elif host is not None:
                self._named_ports.add(host)
        self._cors = {origin.rstrip("/").lower() for origin in cors_origins}

    def host_allowed(self, host: HostName | None, local_address: str | None) -> bool:
        """True when ``host`` names this server (``local_address``: the address the connection arrived on)."""
        if self._any:
            return True
        if host is None:
            return False
        if host.name in self._names or host in self._named_ports:
            return True
        if local_address is not None and host.name == local_address.lower():
            return True
        return _is_loopback_ip(host.name)

    def origin_allowed(self, origin: str, host: HostName | None, scheme: str) -> bool:
        """True when a page of ``origin`` may change state: this server's own origin, or a CORS origin."""
        origin = origin.strip().lower().rstrip("/")
        if origin in self._cors:
            return True
        from_page = _origin_host(origin)
        if from_page is None or host is None:
            return False  # "null" (a sandboxed frame, a file), or no Host to compare with
        # The scheme is not compared: behind a TLS proxy the page is https and the request plain http.
        return from_page == HostName(host.name, _port(host.port, scheme))


@functools.lru_cache(maxsize=256)
def _origin_host(origin: str) -> HostName | None:
    """The host an ``Origin`` names, its port None when it is the scheme's default; None: not http(s)."""
    parts = urlsplit(origin)
    if parts.scheme not in _DEFAULT_PORTS:
        return None
    page = parse_host(parts.netloc)
    return None if page is None else HostName(page.name, _port(page.port, parts.scheme))


def _port(port: int | None, scheme: str) -> int | None:
    return None if port in (None, _DEFAULT_PORTS.get(scheme)) else port


def _is_loopback_ip(name: str) -> bool:
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False
