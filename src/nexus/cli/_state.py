"""The workspace and the ledger file, checked before a command writes anything.

A path that is a file where a directory belongs (``workspace = "/etc/passwd"``) or a
database that cannot be written (``chattr +i agents.db``, a read-only mount) would
otherwise surface as a Python traceback halfway through a run, possibly after a session
was created. ``nexus run``/``chat`` call :func:`prepare_state` first; ``nexus doctor``
reports the same problems with :func:`path_problem` and :func:`database_write_problem`.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING

from nexus.errors import ConfigError, NexusError
from nexus.ledger import full_disk

if TYPE_CHECKING:
    from nexus.config import NexusConfig

__all__ = ["checked_config", "database_write_problem", "path_problem", "prepare_state"]


def checked_config(path: str | None) -> NexusConfig:
    """The config, its ``[agents]`` tables checked before a broker command opens the ledger: a bad
    one is a ConfigError naming each problem, and creates nothing (no empty ``agents.db``)."""
    from nexus.config import load_config

    config = load_config(path)
    if config.agents:
        from nexus.broker import checked_agents

        checked_agents(config)
    return config


def path_problem(path: Path, *, directory: bool) -> str | None:
    """Why ``path`` cannot be (or become) a directory/regular file, or None.

    A missing path is fine when its nearest existing ancestor is a directory (it is created
    on first use); a path below a regular file never can be.
    """
    if path.exists():
        if directory and not path.is_dir():
            return f"{path} is not a directory (it is a file)"
        if not directory and path.is_dir():
            return f"{path} is a directory, not a file (the ledger is one SQLite file)"
        return None
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        return f"{path} cannot be created: {parent} is not a directory (it is a file)"
    return None


def database_write_problem(path: Path) -> str | None:
    """Why the ledger at ``path`` cannot be written and what to do about it, or None (a missing file needs a
    writable directory). The advice depends on the cause: a file that is not a database is not made usable by
    making it writable.

    Opening is not enough: SQLite opens a read-only file read-only without complaint and
    fails only at the first write. So this starts a write transaction, rewrites the header's
    ``user_version`` with its own value and rolls back: nothing changes, but a read-only file,
    directory or mount (also for root, e.g. ``chattr +i``) is found. A database that another
    process is writing right now counts as writable.
    """
    if not path.exists():
        parent = path.parent
        while not parent.exists() and parent != parent.parent:
            parent = parent.parent
        if os.access(parent, os.W_OK):
            return None
        return f"{parent} is not writable, so {path} cannot be created; {WRITABLE_ADVICE}"
    try:
        conn = sqlite3.connect(path, isolation_level=None, timeout=0.5)
    except sqlite3.Error as exc:
        return f"{path} does not open: {exc}; {WRITABLE_ADVICE}"
    try:
        conn.execute("BEGIN IMMEDIATE")
        version = int(conn.execute("PRAGMA user_version").fetchone()[0])
        conn.execute(f"PRAGMA user_version = {version}")
        conn.execute("ROLLBACK")
    except sqlite3.OperationalError as exc:
        if "locked" in str(exc) or "busy" in str(exc):
            return None
        return f"{path} is not writable ({exc}); {WRITABLE_ADVICE}"
    except sqlite3.Error as exc:  # not a database at all: making it writable would not help
        return f"{path} is not a usable database ({exc}); {UNUSABLE_ADVICE}"
    finally:
        conn.close()
    return None


WRITABLE_ADVICE = "make it writable (check `lsattr`, the mount and the permissions)"
UNUSABLE_ADVICE = "move it aside and run again to start a new one, or point NEXUS_HOME elsewhere"


def prepare_state(config: NexusConfig) -> None:
    """Check the workspace and database paths, create their directories, check the database is writable.

    ConfigError (exit 2) when a configured path is of the wrong kind, naming ``file:line``;
    NexusError (exit 1) when the database cannot be written. Nothing is created on error.
    """
    target, workspace = config.database_target, config.workspace_path
    paths = [("workspace", workspace, True)]
    if not isinstance(target, str):  # a file: a PostgreSQL database (a URL) is checked when it is connected to
        paths.append(("database", target, False))
    for key, path, directory in paths:
        problem = path_problem(path, directory=directory)
        if problem is not None:
            where = f"{config.where(key)}: {key}" if getattr(config, key) else f"the default {key}"
            kind = "a directory" if directory else "a file path"
            raise ConfigError(f"{where}: {problem}; set {key} in nexus.toml to {kind} nexus can use")
    problem = None if isinstance(target, str) else database_write_problem(target)
    full = full_disk(target) if problem is not None and not isinstance(target, str) else None
    if full is not None:
        raise NexusError(f"cannot write the ledger: {full}; free some space (what the ledger holds is unchanged)")
    if problem is not None:
        raise NexusError(f"cannot write the ledger: {problem}; or set database in nexus.toml to another file")
    try:
        if not isinstance(target, str):
            target.parent.mkdir(parents=True, exist_ok=True)
            workspace.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise NexusError(f"cannot create {exc.filename or workspace}: {exc.strerror or exc}") from None


def make_workspace(config: NexusConfig) -> None:
    """Create the workspace once a PostgreSQL ledger is connected (:func:`prepare_state` makes it beside an SQLite
    file): a server that could not be reached is exit 2 with nothing written, and it left ``workspace`` behind."""
    workspace = config.workspace_path
    try:
        workspace.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise NexusError(f"cannot create {exc.filename or workspace}: {exc.strerror or exc}") from None
