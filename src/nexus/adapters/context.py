"""What an adapter process is started with: its own context, and an environment without Nexus's secrets.

The context is ``{version, platform, account_id, config, credential{kind, value}}`` as JSON,
read from the path in ``NEXUS_ADAPTER_CONTEXT_PATH``. It is handed to its one process only:

- on Linux it lives in an anonymous memory file (``memfd``) that no directory lists; the
  process inherits a descriptor to it and the path is ``/dev/fd/<n>``, which it can open and
  read as often as it likes. No other process is given the descriptor (it is close-on-exec
  everywhere else), so no glob finds another adapter's credential;
- elsewhere it is a 0600 file in a fresh 0700 directory of its own, removed with the
  directory when the process ends.

Secrets never go on the command line (``ps`` shows argv to every user) nor into the
environment (inherited by every child the adapter starts): the environment is Nexus's own
minus variables named like a credential, minus every value that is a known secret or shaped
like a key (:mod:`nexus.llm.redact`), minus Nexus's own paths (``NEXUS_HOME``: its config,
ledger and ``server.json``). A process running as the same user can still look into the
others through ``/proc``; docs/adapters.md says how to run an adapter as another user.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CONTEXT_ENV = "NEXUS_ADAPTER_CONTEXT_PATH"
"""The environment variable naming the context."""

CONTEXT_VERSION = 1
_SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL)", re.IGNORECASE)
_BROKER_PATHS = frozenset({"NEXUS_HOME", "NEXUS_CONFIG", "NEXUS_CAPTURE_DIR"})


@dataclass(slots=True)
class AdapterLaunch:
    """How to start one adapter process: its environment and the descriptor it inherits.

    Call :meth:`release` when the process has ended (or could not start): it closes our copy
    of the descriptor and removes the fallback directory.
    """

    env: dict[str, str]
    pass_fds: tuple[int, ...] = ()
    directory: Path | None = None

    @property
    def context_path(self) -> str | None:
        """Where the process reads its context (``None`` for a command given none)."""
        return self.env.get(CONTEXT_ENV)

    def started(self) -> None:
        """The process has its own copy of the descriptor: close ours (the context lives on in the child only)."""
        for fd in self.pass_fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.pass_fds = ()

    def release(self) -> None:
        """The process ended (or never started): close what is still open, remove the fallback directory."""
        self.started()
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)
            self.directory = None


def context_payload(
    *, platform: str, account_id: str, config: Mapping[str, Any], credential: str | None, credential_kind: str = "token"
) -> bytes:
    """The context as the adapter reads it (UTF-8 JSON)."""
    payload: dict[str, Any] = {
        "version": CONTEXT_VERSION,
        "platform": platform,
        "account_id": account_id,
        "config": dict(config),
        "credential": None if credential is None else {"kind": credential_kind, "value": credential},
    }
    return json.dumps(payload).encode("utf-8")


def launch_with_context(
    payload: bytes | None, base: Mapping[str, str] | None = None, *, fallback_dir: Path | None = None
) -> AdapterLaunch:
    """An :class:`AdapterLaunch` carrying ``payload`` (no context when ``None``)."""
    if payload is None:
        return AdapterLaunch(adapter_env(None, base))
    if hasattr(os, "memfd_create"):
        fd = _memory_file(payload)
        return AdapterLaunch(adapter_env(f"/dev/fd/{fd}", base), (fd,))
    if fallback_dir is not None:
        fallback_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    directory = Path(tempfile.mkdtemp(prefix="nexus-adapter-", dir=fallback_dir))  # 0700, this process only
    path = directory / "context.json"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(payload)
    return AdapterLaunch(adapter_env(str(path), base), (), directory)


def _memory_file(payload: bytes) -> int:
    """An anonymous 0600 file holding ``payload``, close-on-exec (only ``pass_fds`` hands it on)."""
    fd = os.memfd_create("nexus-adapter-context", os.MFD_CLOEXEC)
    try:
        os.fchmod(fd, 0o600)
        view = memoryview(payload)
        while view:
            view = view[os.write(fd, view) :]
        os.lseek(fd, 0, os.SEEK_SET)
    except OSError:
        os.close(fd)
        raise
    return fd


def adapter_env(context_path: str | None, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for an adapter: the parent's without secrets or Nexus's paths, plus the context path."""
    from nexus.llm import key_shaped, known_secrets

    source = os.environ if base is None else base
    secrets = known_secrets()
    env = {
        name: value
        for name, value in source.items()
        if not _SECRET_NAME.search(name)
        and name not in _BROKER_PATHS
        and not any(secret in value for secret in secrets)
        and not key_shaped(value)
    }
    env.pop(CONTEXT_ENV, None)
    if context_path is not None:
        env[CONTEXT_ENV] = context_path
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def read_context(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """For adapters written in Python: load the context named by ``NEXUS_ADAPTER_CONTEXT_PATH``.

    Returns an empty context (no credential) when the variable is unset, so ``info`` works
    without one.
    """
    env = os.environ if environ is None else environ
    path = env.get(CONTEXT_ENV)
    if not path:
        return {"version": CONTEXT_VERSION, "platform": "", "account_id": "", "config": {}, "credential": None}
    with open(path, encoding="utf-8") as handle:
        data = json.load(handle)
    if not isinstance(data, dict):
        raise ValueError(f"{path}: the adapter context must be a JSON object")
    return data
