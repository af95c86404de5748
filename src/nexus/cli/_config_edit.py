"""Editing ``nexus.toml`` from a command (``nexus adapters``, ``nexus mcp``): in place, checked, atomic.

The file is changed with tomlkit (the user's comments and layout kept), the result is validated
by the same strict loader every command uses (a table the edit adds gets one blank line before and
after it: :mod:`nexus.cli._config_layout`), and written through a temporary file and a rename
(:mod:`nexus._replace_file`: the file's mode, owner and symlink kept): a change that would make the
file invalid is refused, naming the problem, and nothing is written.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any


def config_file(args: argparse.Namespace) -> Path:
    """The file the command edits: ``--config``, else ``$NEXUS_CONFIG`` / ``$NEXUS_HOME/nexus.toml``."""
    from nexus.config import config_path

    return Path(args.config).expanduser() if getattr(args, "config", None) else config_path()


def load(args: argparse.Namespace) -> Any:
    """The validated config the command reads (``--config`` honoured)."""
    from nexus.config import load_config

    return load_config(getattr(args, "config", None))


def edit(args: argparse.Namespace, change: Callable[[Any], None]) -> Path:
    """Apply ``change(document)`` to nexus.toml, validate, and write it atomically; returns the path."""
    import tomlkit

    from nexus._replace_file import replace_file
    from nexus.config import parse_config, read_config_text
    from nexus.errors import ConfigError

    path = config_file(args)
    text = read_config_text(path) if path.exists() else ""
    document = tomlkit.parse(text)
    change(document)
    new_text = _tidy(text, tomlkit.dumps(document), document)
    parse_config(new_text, path)  # raises ConfigError naming the problem; nothing written
    path.parent.mkdir(parents=True, exist_ok=True)
    try:  # its mode, owner and symlink kept (a 0600 file holding a key stays 0600); a new one is 0600
        replace_file(path, new_text, new_mode=0o600, into_special=False)
    except OSError as exc:
        raise ConfigError(f"cannot write {path}: {exc.strerror or exc}") from None
    return path


def _tidy(before: str, after: str, document: Any) -> str:
    """``after`` with blank lines set around the tables the edit added, unless that would change a value."""
    import tomlkit

    from nexus.cli._config_layout import tidy_added_tables

    tidied = tidy_added_tables(before, after)
    try:  # it only moves blank and comment lines; should it ever misread the text, the untidied text is written
        same = tomlkit.parse(tidied).unwrap() == document.unwrap()
    except ValueError:  # tomlkit's parse errors are ValueErrors
        same = False
    return tidied if same else after


def first_problem(exc: Exception, key_prefix: str = "") -> str:
    """The first problem of a table's validation error, ``KEY: message`` (``key_prefix`` before the key path, e.g.
    ``--`` for a command-line option; the message alone for the whole table), for a command that checks the table
    it is about to write; another exception: its own text."""
    errors = getattr(exc, "errors", None)
    if not callable(errors) or not errors():
        return str(exc)
    first = errors()[0]
    message = str(first.get("msg", exc)).removeprefix("Value error, ")
    where = ".".join(str(part) for part in first.get("loc", ()))
    return f"{key_prefix}{where}: {message}" if where else message


def table(parent: Any, key: str) -> Any:
    """``parent[key]``, created as a TOML table when missing."""
    import tomlkit

    if key not in parent:
        parent[key] = tomlkit.table()
    return parent[key]
