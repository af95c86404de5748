"""Endpoint URLs in the config (``base_url``, an MCP server's ``url``): what makes one unusable.

Its own module because both the main schema and the ``[mcp]`` tables check URLs, and the main
schema imports the ``[mcp]`` one.
"""

from __future__ import annotations

from urllib.parse import urlsplit


def base_url_problem(value: str) -> str | None:
    """Why ``value`` is no usable endpoint (``http(s)://host[:port][/path]``), or None.

    Parts written as ``${VAR}`` are checked when the value is used; only the literal text
    is checked here, so ``${BASE}`` and ``https://${HOST}/v1`` pass.
    """
    if value.startswith("${"):
        return None
    scheme, sep, rest = value.partition("://")
    if not sep or scheme.lower() not in ("http", "https"):
        return f"{value!r} is not an http:// or https:// URL (e.g. https://api.example.com/v1)"
    if "${" in rest:
        return None
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018  (raises ValueError for a port that is not a number)
    except ValueError as exc:
        return f"{value!r} is not a valid URL: {exc}"
    if not parts.hostname or any(char.isspace() for char in value):
        return f"{value!r} is not a valid URL: it needs a host name (e.g. http://127.0.0.1:8080/v1)"
    return None
