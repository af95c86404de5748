"""``None`` is bound as NULL through a registered sqlite3 adapter: no failed ``__adapt__`` lookup per NULL."""

from __future__ import annotations

import sqlite3
import types
from pathlib import Path

from nexus.ledger import Ledger
from nexus.ledger._sqlite import bind_none_directly

_KEY = (type(None), sqlite3.PrepareProtocol)


def test_none_has_a_c_adapter_and_is_still_stored_as_null(tmp_path: Path) -> None:
    with Ledger.open(tmp_path / "agents.db"):
        adapter = sqlite3.adapters[_KEY]  # base13 had none: every NULL bound raised and dropped an AttributeError
        assert adapter(None) is None
        assert not isinstance(adapter, types.FunctionType)  # C: no Python frame per NULL either
        conn = sqlite3.connect(tmp_path / "agents.db")
        try:
            conn.execute("CREATE TABLE t (a TEXT, b BLOB)")
            conn.execute("INSERT INTO t VALUES (?, ?)", (None, None))
            assert conn.execute("SELECT typeof(a), typeof(b), a IS NULL FROM t").fetchone() == ("null", "null", 1)
        finally:
            conn.close()


def test_an_adapter_for_none_registered_before_is_kept() -> None:
    ours = sqlite3.adapters.pop(_KEY, None)

    def theirs(value: None) -> str:
        return "nothing"

    sqlite3.register_adapter(type(None), theirs)
    try:
        bind_none_directly()
        assert sqlite3.adapters[_KEY] is theirs
    finally:
        sqlite3.adapters.pop(_KEY, None)
        if ours is not None:
            sqlite3.adapters[_KEY] = ours
