"""``Ledger.open`` is the SQLite door: a database URL given to it is refused, not turned into a file path."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from nexus.ledger import Ledger


@pytest.mark.parametrize("url", ["postgresql://nexus:s3cret@db.internal:5432/agents", "postgres://localhost/agents"])
def test_a_database_url_is_refused_naming_connect_and_nothing_is_created(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match=r"Ledger.open opens an SQLite file.*Ledger.connect") as raised:
        Ledger.open(url)
    assert "s3cret" not in str(raised.value)  # the password is not echoed
    assert os.listdir(tmp_path) == []  # before, a directory "postgresql:" held a new SQLite ledger


async def test_any_other_url_is_refused_by_open_and_by_connect(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for url in ("mysql://app:pw@db/agents", "sqlite:///tmp/agents.db"):
        with pytest.raises(ValueError, match="is not a ledger: give an SQLite file's path or a postgresql:// URL"):
            Ledger.open(url)
        with pytest.raises(ValueError, match="is not a ledger"):
            await Ledger.connect(url)
    assert os.listdir(tmp_path) == []
