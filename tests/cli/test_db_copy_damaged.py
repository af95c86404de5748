"""``nexus db copy`` of a damaged SQLite ledger: the rescue ``nexus db check`` points at (a stranger's trial).

It died with a traceback at the first unreadable page, copied nothing and left the target holding an empty
schema. Real processes on real files whose pages were overwritten: the copy keeps every row that still reads
(the references to what was lost made whole, so the copy checks ``ok``), says what it could not read in one
line, exits 1; a whole file copies as before (exit 0); a copy that fails leaves no target behind.
"""

from __future__ import annotations

import asyncio
import os
import random
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import psycopg

from nexus.ledger import Ledger, NewSession
from nexus.ledger._copy import TABLES
from nexus.testing.conformance.support import qa_turn

SRC = Path(__file__).resolve().parents[2] / "src"
PAGE = 4096


def _nexus(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NEXUS_HOME": str(home), "PYTHONPATH": str(SRC)}
    return subprocess.run([sys.executable, "-m", "nexus.cli", *args], env=env, capture_output=True, text=True,
                          timeout=120, check=False)  # fmt: skip


def _ledger(path: Path, *, sessions: int = 4, turns: int = 50, size: int = 400) -> None:
    async def fill() -> None:
        with Ledger.open(path) as ledger:
            for s in range(sessions):
                await ledger.sessions.ensure(NewSession(f"s{s}"))
                for n in range(turns):
                    await qa_turn(ledger, f"s{s}", f"question {n} " + "x" * size, f"answer {n} " + "y" * size)

    asyncio.run(fill())
    with sqlite3.connect(path) as conn:  # everything in the file itself, as a copied-away agents.db would be
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def _leaf(path: Path, table: str, nth: int) -> tuple[int, int]:
    """The ``nth`` leaf page of ``table`` (counted from the middle) and the rows on it."""
    with sqlite3.connect(path) as conn:
        leaves = conn.execute(
            "SELECT pageno, ncell FROM dbstat WHERE name = ? AND pagetype = 'leaf' ORDER BY pageno", (table,)
        ).fetchall()
    page, rows = leaves[len(leaves) // 2 + nth]
    return int(page), int(rows)


def _overwrite(path: Path, page: int) -> None:
    with path.open("r+b") as file:
        file.seek(PAGE * (page - 1))
        file.write(b"\xde\xad" * 2000)


def _counts(path: Path) -> dict[str, int]:
    with sqlite3.connect(path) as conn:
        return {table: conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0] for table, _ in TABLES}


def test_a_damaged_file_copies_what_still_reads_and_says_what_was_lost(tmp_path: Path) -> None:
    source = tmp_path / "corrupt.db"
    _ledger(source)
    whole = _counts(source)
    turns_page, turns_lost = _leaf(source, "turns", 0)
    messages_page, _ = _leaf(source, "messages", 1)
    _overwrite(source, turns_page)
    _overwrite(source, messages_page)
    rescued = tmp_path / "rescued.db"
    done = _nexus(tmp_path, "db", "copy", str(source), str(rescued))
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    assert f"{source} is damaged: copied what still reads; not read: turns: {turns_lost} rows" in done.stderr
    assert "messages: 1 unreadable range" in done.stderr, done.stderr
    kept = _counts(rescued)
    assert kept["turns"] == whole["turns"] - turns_lost and kept["sessions"] == whole["sessions"]
    assert f"copied {sum(kept.values())} rows ({kept['turns']} turns, 4 sessions)" in done.stdout
    check = _nexus(tmp_path, "db", "check", "--database", str(rescued))
    assert check.returncode == 0 and ": ok (integrity_check and foreign_key_check)" in check.stdout, check.stdout

    async def newest(label: str) -> str:
        async with await Ledger.connect(rescued) as ledger:
            return repr((await ledger.turns.history(label))[-1])

    for label in ("s0", "s1", "s2", "s3"):  # one of them lost turns in the middle: what follows still reads
        assert "answer 49 " in asyncio.run(newest(label)), label


def test_a_damaged_root_page_keeps_the_sessions_and_names_the_lost_turns(tmp_path: Path) -> None:
    """The trial's own damage: 4 KB overwritten at offset 12288 (the turns table's root page)."""
    source = tmp_path / "corrupt.db"
    _ledger(source)
    _overwrite(source, 4)
    rescued = tmp_path / "rescued.db"
    done = _nexus(tmp_path, "db", "copy", str(source), str(rescued))
    assert "Traceback" not in done.stderr and done.returncode == 1, done.stderr
    assert "not read: turns: 200 rows" in done.stderr, done.stderr
    assert _counts(rescued)["sessions"] == 4
    check = _nexus(tmp_path, "db", "check", "--database", str(rescued))
    assert check.returncode == 0, check.stdout + check.stderr


def test_a_whole_file_copies_every_row_as_before(tmp_path: Path) -> None:
    source = tmp_path / "agents.db"
    _ledger(source, sessions=2, turns=5)
    copy = tmp_path / "copy.db"
    done = _nexus(tmp_path, "db", "copy", str(source), str(copy))
    assert done.returncode == 0 and done.stderr == "", done.stderr
    with sqlite3.connect(source) as a, sqlite3.connect(copy) as b:
        for table, columns in TABLES:
            query = f"SELECT {columns} FROM {table} ORDER BY 1"
            assert a.execute(query).fetchall() == b.execute(query).fetchall(), table


def test_a_copy_that_fails_leaves_no_target_behind(tmp_path: Path, tmpfs: Callable[[str], Path]) -> None:
    source = tmp_path / "agents.db"
    _ledger(source, sessions=1, turns=40, size=20_000)  # about 2 MB: more than the disk below holds
    disk = tmpfs("1m")
    target = disk / "new" / "rescued.db"
    done = _nexus(tmp_path, "db", "copy", str(source), str(target))
    assert "Traceback" not in done.stderr and done.returncode != 0, done.stderr
    assert done.stderr.startswith("nexus: error: ") and done.stderr.count("\n") == 1, done.stderr
    assert list(disk.iterdir()) == [], "no half-made ledger (nor the folder made for it)"


def test_a_damaged_file_copies_into_postgresql(tmp_path: Path, postgres_url: str) -> None:
    source = tmp_path / "corrupt.db"
    _ledger(source, sessions=2, turns=60)
    page, lost = _leaf(source, "turns", 0)
    _overwrite(source, page)
    done = _nexus(tmp_path, "db", "copy", str(source), postgres_url)
    assert "Traceback" not in done.stderr and done.returncode == 1, done.stderr
    assert f"not read: turns: {lost} rows" in done.stderr, done.stderr
    with psycopg.connect(postgres_url) as conn:
        assert conn.execute("SELECT count(*) FROM turns").fetchone() == (120 - lost,)
        assert conn.execute("SELECT count(*) FROM sessions").fetchone() == (2,)


def test_damage_inside_rows_loses_only_those_rows(tmp_path: Path) -> None:
    """Bytes overwritten inside a page's rows (the page still parses): keys out of place, text that is no longer
    UTF-8, a row whose key reads but not its body. Only that page's rows may be lost, never the table's rest."""
    source = tmp_path / "corrupt.db"
    _ledger(source)
    whole = _counts(source)
    pages = [_leaf(source, "messages", n) for n in (-3, 0, 3)]
    rng = random.Random(9)
    with source.open("r+b") as file:
        for (page, _), at in zip(pages, (100, 2000, 100), strict=True):
            file.seek(PAGE * (page - 1) + at)
            file.write(bytes(rng.getrandbits(8) for _ in range(200)))
    rescued = tmp_path / "rescued.db"
    done = _nexus(tmp_path, "db", "copy", str(source), str(rescued))
    assert "Traceback" not in done.stderr and done.returncode == 1, done.stderr
    assert "not read: messages: " in done.stderr, done.stderr
    kept = _counts(rescued)
    assert kept["messages"] >= whole["messages"] - sum(rows for _, rows in pages), (kept, whole)
    assert kept["turns"] == whole["turns"]
    check = _nexus(tmp_path, "db", "check", "--database", str(rescued))
    assert check.returncode == 0, check.stdout + check.stderr
