"""Where Nexus keeps its state: ``$NEXUS_HOME`` (default ``~/.nexus``) and the files in it.

Kept free of heavy imports: the CLI asks for these paths before it knows whether it
needs to parse or validate anything.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

CONFIG_FILE_NAME = "nexus.toml"
DATABASE_FILE_NAME = "agents.db"
WORKSPACE_DIR_NAME = "workspace"


def nexus_home(env: Mapping[str, str] | None = None) -> Path:
    """``$NEXUS_HOME`` if set (``~`` expanded), else ``~/.nexus``; the directory may not exist yet."""
    source = os.environ if env is None else env
    raw = source.get("NEXUS_HOME", "").strip()
    return Path(raw).expanduser() if raw else Path.home() / ".nexus"


def config_path(env: Mapping[str, str] | None = None) -> Path:
    """The config file Nexus reads: ``$NEXUS_CONFIG`` if set, else ``$NEXUS_HOME/nexus.toml``."""
    source = os.environ if env is None else env
    raw = source.get("NEXUS_CONFIG", "").strip()
    return Path(raw).expanduser() if raw else nexus_home(source) / CONFIG_FILE_NAME


def database_dir(database: str | Path) -> Path:
    """The real directory of the ledger file ``database``: where the locks that guard it live.

    Symlinks are resolved (of the file and of every directory on the way), so every name of one
    database - ``h2/agents.db`` a symlink to ``h1/agents.db``, a symlinked or bind-mounted home -
    finds the same ``broker.lock`` and session locks; SQLite resolves symlinks the same way for its
    write-ahead log. A lock beside the name given would let two brokers drain one database.

    For a database server's URL it is a directory of ``$NEXUS_HOME`` named after the URL (user, host, port
    and database; not the password or options): its locks then guard the processes of this machine only.
    """
    if "://" in str(database):  # a server's URL (PostgreSQL): no file to sit beside
        import hashlib
        from urllib.parse import urlsplit

        try:
            parts = urlsplit(str(database))
            where = f"{parts.scheme}://{parts.username or ''}@{parts.hostname or ''}:{parts.port or ''}{parts.path}"
        except ValueError:  # a URL that does not parse: connecting says what is wrong with it
            where = str(database)
        return nexus_home() / "servers" / hashlib.sha256(where.encode("utf-8")).hexdigest()[:16]
    return Path(os.path.realpath(database)).parent


def resolve_path(raw: str, home: Path) -> Path:
    """A path from the config: ``~`` expanded, relative paths taken relative to ``home``."""
    path = Path(raw).expanduser()
    return path if path.is_absolute() else home / path
