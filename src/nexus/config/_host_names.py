"""Host names as ``Host`` headers and ``[server] allowed_hosts`` write them: ``name``, ``name:port``, ``[v6]:port``.

Parsed in one place so the config check and the server's Host check (``nexus.server._hosts``)
agree on what a name is.
"""

from __future__ import annotations

import functools
import re

from nexus._dataclass import dataclass

ANY_HOST = "*"
"""``allowed_hosts = ["*"]``: no Host check (the operator vouches for every name that reaches the port)."""

_NAME = re.compile(r"[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*")


@dataclass(frozen=True, slots=True)
class HostName:
    """A host as a request names it: the lower-case name (IPv6 without brackets) and the port, if given."""

    name: str
    port: int | None = None


@functools.lru_cache(maxsize=256)
def parse_host(value: str) -> HostName | None:
    """``Host``'s value (``name``, ``name:port``, ``[v6]:port``) as a :class:`HostName`; None when malformed.

    Cached: a server sees a handful of Host values, and this runs on every request (a bounded
    cache, so a client sending endless new names only churns it).
    """
    value = value.strip().lower()
    if not value or any(ch in value for ch in "/@?# \t\\"):
        return None
    if value.startswith("["):
        end = value.find("]")
        if end < 0:
            return None
        name, rest = value[1:end], value[end + 1 :]
        if rest and not rest.startswith(":"):
            return None
        port_text = rest[1:] if rest else None
    else:
        name, sep, port_text_or_empty = value.rpartition(":")
        if not sep or ":" in name:
            name, port_text = value, None
        else:
            port_text = port_text_or_empty
    if port_text is not None and not (port_text.isdigit() and 0 < int(port_text) < 65536):
        return None
    name = name.rstrip(".")  # "localhost." names the same host
    if not name:
        return None
    return HostName(name, int(port_text) if port_text is not None else None)


def host_entry_problem(entry: str) -> str | None:
    """Why an ``allowed_hosts`` entry cannot be used (None: it can): a host name, with an optional port."""
    if entry == ANY_HOST:
        return None
    if "://" in entry:
        return f"{entry!r}: a host name (e.g. 'nexus.example.com' or 'nexus.example.com:443'), not a URL"
    host = parse_host(entry)
    if host is None or not (_NAME.fullmatch(host.name) or _is_ip(host.name)):
        return f"{entry!r} is not a host name (letters, digits, '.', '-', or an IP address; an optional ':port')"
    return None


def _is_ip(name: str) -> bool:
    import ipaddress

    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True
