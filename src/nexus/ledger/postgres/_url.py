"""Database URLs: which ones name PostgreSQL, and how to show one without its password."""

from __future__ import annotations

from urllib.parse import unquote, urlsplit, urlunsplit

SCHEMES = ("postgresql", "postgres")


def is_postgres_url(target: object) -> bool:
    """Whether ``target`` is a ``postgresql://`` (or ``postgres://``) URL rather than a file path."""
    return isinstance(target, str) and target.split("://", 1)[0].lower() in SCHEMES and "://" in target


def location_problem(target: str) -> str | None:
    """Why ``target`` is neither an SQLite file's path nor a PostgreSQL URL (any other URL, or ``postgresql:``
    without ``//``: either would become a file path named after the scheme), or None."""
    scheme = target.split(":", 1)[0].lower()
    if scheme in SCHEMES and not is_postgres_url(target):
        return "a PostgreSQL URL needs '://' (postgresql://user@host:5432/db)"
    if "://" in target and not is_postgres_url(target):
        return f"a {scheme}:// URL is not a ledger: give an SQLite file's path or a postgresql:// URL"
    return None


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


def scrubbed(text: str, url: str) -> str:
    """``text`` (a driver's error) without ``url`` or its password. libpq quotes the URL, or the password
    token, when it cannot parse them, and ``redacted`` alone cannot help there: such a URL does not split."""
    text = text.replace(url, redacted(url))
    userinfo = url.split("://", 1)[-1].rpartition("@")[0]
    password = userinfo.partition(":")[2]
    for secret in {password, unquote(password)} - {""}:
        text = text.replace(secret, "…")
    return text
