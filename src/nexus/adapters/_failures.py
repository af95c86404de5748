"""Monitors and ``stream`` processes that gave up, remembered beside the config so that any later
``nexus adapters health`` says so.

A monitor's supervisor gives up after its restarts; that state lived in the process that gave up
only, so ``nexus adapters health`` (a new process, which the give-up line tells the user to run)
asked the adapter's ``health`` — a crashing monitor's adapter often answers it — and said ``ok``.
The give-up is written to ``$NEXUS_HOME/adapters-failed.json`` (``{"NAME/ACCOUNT": {"error", "at"}}``);
``health`` reports a recorded account as failed, and ``nexus adapters enable`` or the next start of
that account's monitor clears it. Best effort: a file that cannot be read or written is ignored (the
log line of the give-up stands).
"""

from __future__ import annotations

import contextlib
import json
import os
import time
import warnings
from collections.abc import Callable
from pathlib import Path

FILE_NAME = "adapters-failed.json"


def _path(home: Path) -> Path:
    return home / FILE_NAME


def recorded(home: Path | None) -> dict[str, dict[str, object]]:
    """The recorded give-ups, by ``NAME/ACCOUNT`` (empty when none, or the file is unreadable)."""
    if home is None:
        return {}
    try:
        found = json.loads(_path(home).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {k: v for k, v in found.items() if isinstance(v, dict)} if isinstance(found, dict) else {}


def record(home: Path | None, name: str, account_id: str, error: str, process: str = "monitor") -> None:
    """Remember that the ``process`` (``monitor`` or ``stream``) of ``name/account_id`` gave up, and why."""
    entry = {"error": error, "at": int(time.time()), "process": process}
    _change(home, lambda held: held.__setitem__(f"{name}/{account_id}", entry))


def clear_adapter_failure(home: Path | None, name: str, account_id: str) -> None:
    """Forget a give-up of ``name/account_id``, its monitor's or a ``stream`` process's (the account enabled
    again, its monitor or a stream process started again)."""
    _change(home, lambda held: held.pop(f"{name}/{account_id}", None))


def clear_monitor_failure(home: Path | None, name: str, account_id: str) -> None:
    """Deprecated: :func:`clear_adapter_failure` (the old name, from when only a monitor's give-up was kept).

    It still works, and warns with a ``DeprecationWarning``."""
    warnings.warn(
        "nexus.adapters.clear_monitor_failure is deprecated (it clears a stream's give-up too): "
        "use clear_adapter_failure",
        DeprecationWarning,
        stacklevel=2,
    )
    clear_adapter_failure(home, name, account_id)


class StreamGiveUp:
    """One ``stream`` process's give-up, kept in the file: ``nexus adapters health`` in another shell sees it, and
    ``nexus adapters enable`` (which clears the file's entry) reaches a running ``nexus serve``: the supervisor
    asks :meth:`cleared` before it refuses a use, and starts the process again once the entry is gone.

    Without it the give-up lived in the server's memory only: after the fix and ``enable`` (what the give-up
    line says to do) every delivery still failed "gave up" until the server was restarted, while ``health``
    said ``ok`` (an outside trial). One per supervisor, so that each of an account's stream processes starts
    again; a give-up that could not be written is never taken as cleared (no restarts without a bound).
    """

    def __init__(self, home: Path | None, name: str, account_id: str) -> None:
        self.home, self.name, self.account_id = home, name, account_id
        self.key = f"{name}/{account_id}"
        self._noted = False

    def note(self, error: str) -> None:
        """The process gave up with ``error``: write it down."""
        record(self.home, self.name, self.account_id, error, process="stream")
        self._noted = self.key in recorded(self.home)

    def started(self) -> None:
        """A stream process of the account started: an old give-up of the account (another process's, or one
        before a restart of the server) no longer holds."""
        clear_adapter_failure(self.home, self.name, self.account_id)  # writes nothing when there is none

    def cleared(self) -> bool:
        """Whether the give-up written by :meth:`note` has been cleared since (``nexus adapters enable``)."""
        if not self._noted or self.key in recorded(self.home):
            return False
        self._noted = False
        return True


def _change(home: Path | None, change: Callable[[dict[str, dict[str, object]]], object]) -> None:
    """Apply ``change`` to the recorded give-ups and write them back (not at all when it changed nothing)."""
    if home is None:
        return
    before = recorded(home)
    held = dict(before)
    change(held)
    if held == before:
        return
    path = _path(home)
    tmp = path.with_name(f".{FILE_NAME}.{os.getpid()}")
    with contextlib.suppress(OSError):
        if held:
            tmp.write_text(json.dumps(held, indent=1), encoding="utf-8")
            os.replace(tmp, path)
        else:
            path.unlink(missing_ok=True)
