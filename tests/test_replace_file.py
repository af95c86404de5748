"""``nexus._replace_file``: the mode of a new file comes from the umask, read without being changed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from nexus._replace_file import process_umask, replace_file


def test_a_new_file_gets_the_umasks_mode_and_the_umask_is_never_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reading the umask with ``os.umask`` set it to 022 for a moment: a file another thread created
    then got 0644 under a 077 umask (readable by every local user)."""
    old = os.umask(0o027)
    try:
        monkeypatch.setattr(os, "umask", lambda _mask: pytest.fail("the umask was set to be read"))
        assert process_umask() == 0o027
        written = replace_file(tmp_path / "new.txt", "text")
        assert written.read_text() == "text" and written.stat().st_mode & 0o777 == 0o640
    finally:
        monkeypatch.undo()
        os.umask(old)
