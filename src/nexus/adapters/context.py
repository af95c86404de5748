"""Credentials for adapter processes: a 0600 JSON file whose path is in ``NEXUS_ADAPTER_CONTEXT_PATH``.

Secrets never go on the command line (``ps`` shows argv to every user) nor in environment
variables (inherited by every child the adapter starts). The file holds
``{version, platform, account_id, config, credential{kind, value}}``; it is created with
``O_EXCL`` and mode 0600 inside a 0700 directory, and removed when the process is done with it.
The environment handed to an adapter also drops the parent's own secrets (API keys, tokens).
"""

from __future__ import annotations

import json
import os
import re
import secrets
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

CONTEXT_ENV = "NEXUS_ADAPTER_CONTEXT_PATH"
"""The environment variable naming the context file."""

CONTEXT_VERSION = 1
_SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL)", re.IGNORECASE)


def private_dir(base: Path | None = None) -> Path:
    """A 0700 directory for context files (under ``base``, else a fresh temporary one)."""
    if base is None:
        return Path(tempfile.mkdtemp(prefix="nexus-adapters-"))
    base.mkdir(parents=True, exist_ok=True)
    os.chmod(base, 0o700)
    return base


def write_context(
    directory: Path,
    *,
    platform: str,
    account_id: str,
    config: Mapping[str, Any],
    credential: str | None,
    credential_kind: str = "token",
) -> Path:
    """Write one context file (mode 0600, never overwriting) and return its path."""
    payload: dict[str, Any] = {
        "version": CONTEXT_VERSION,
        "platform": platform,
        "account_id": account_id,
        "config": dict(config),
        "credential": None if credential is None else {"kind": credential_kind, "value": credential},
    }
    path = directory / f"ctx-{account_id[:32]}-{secrets.token_hex(8)}.json"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(payload, handle)
    return path


def adapter_env(context_path: Path | None, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for an adapter: the parent's minus anything that looks like a secret, plus the context path."""
    source = os.environ if base is None else base
    env = {name: value for name, value in source.items() if not _SECRET_NAME.search(name)}
    env.pop(CONTEXT_ENV, None)
    if context_path is not None:
        env[CONTEXT_ENV] = str(context_path)
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def read_context(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """For adapters written in Python: load the context file named by ``NEXUS_ADAPTER_CONTEXT_PATH``.

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
