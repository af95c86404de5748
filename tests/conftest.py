"""Shared fixtures: every test gets its own NEXUS_HOME and no provider keys from the environment."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

_PROVIDER_ENV = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "GEMINI_API_KEY")


@pytest.fixture(autouse=True)
def isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Point NEXUS_HOME at a temp dir and hide real API keys, so tests never touch the user's state."""
    home = tmp_path / "nexus-home"
    monkeypatch.setenv("NEXUS_HOME", str(home))
    for name in _PROVIDER_ENV:
        monkeypatch.delenv(name, raising=False)
    yield home


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Callable[[str], Path]]:
    """``tmpfs("1m")`` mounts a tmpfs of that size for a real full-disk test and returns its directory.

    Skipped where mounting is not permitted (not root, no mount(8)); unmounted after the test.
    """
    mounted: list[Path] = []

    def mount(size: str) -> Path:
        if shutil.which("mount") is None or not hasattr(os, "geteuid") or os.geteuid() != 0:
            pytest.skip("mounting a tmpfs needs root and mount(8)")
        disk = tmp_path / f"tmpfs-{len(mounted)}"
        disk.mkdir()
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(disk)], capture_output=True, text=True
        )
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
        mounted.append(disk)
        return disk

    yield mount
    for disk in reversed(mounted):
        subprocess.run(["umount", str(disk)], capture_output=True, check=False)
