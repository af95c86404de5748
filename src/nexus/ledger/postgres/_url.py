"""Database URLs: which ones name PostgreSQL, and how to show one without its password."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

SCHEMES = ("postgresql", "postgres")


def is_postgres_url(target: object) -> bool:
    """Whether ``target`` is a ``postgresql://`` (or ``postgres://``) URL rather than a file path."""
    return isinstance(target, str) and target.split("://", 1)[0].lower() in SCHEMES and "://" in target


def redacted(url: str) -> str:
    """``url`` with its password (and query) left out, for messages and logs."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        if parts.port is not None:
            host = f"{host}:{parts.port}"
        user = f"{parts.username}@" if parts.username else ""
        return urlunsplit((parts.scheme, user + host, parts.path, "", ""))
    except ValueError:
        return url.split("://", 1)[0] + "://…"
