"""Agents Ledger benchmark: write_turn throughput, history() latency, the engine's window, bytes per message, peers.

Run:  .venv/bin/python bench/bench_ledger.py [--quick] [--peers] [--oai-python PYTHON]

Baselines measured in the same run: a naive recursive CTE over the same rows, the stored
JSON-ancestry design of the original spec (rebuilt here), and pi's JSONL session format (the
same history exported with ``export_pi`` and read back the way pi does: parse every line, walk
leaf -> root). With ``--peers``, openai-agents ``SQLiteSession`` stores and loads the same content
in the python of its venv (default ``/tmp/peerbench/venv-oaiagents/bin/python``); nothing is
installed, and without it no ratio against it is printed.
"""

from __future__ import annotations

import argparse
import functools
import gc
import json
import sqlite3
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import _machine
from _ledger_data import (
    COMPACT_AT,
    COMPACT_EVERY,
    COMPACT_KEEP,
    build,
    build_compacted,
    db_bytes,
    fresh,
    json_ancestry_bytes,
    median,
    peer_turn,
    two_call_turn,
    write_turn,
)
from _ledger_peers import OAI_PYTHON, peer_oai, time_pi_jsonl

from nexus.ledger import Ledger, NewSession, TurnWrite, _decode, _read
from nexus.ledger._sql_db import run_inline
from nexus.ledger.pi_jsonl import export_pi_session


def bench_write(tmp: Path, turns: int, runs: int, synchronous: str) -> tuple[float, float]:
    """Median turns/s over ``runs`` fresh databases: by wall time, and by this process's CPU time."""
    rates: list[float] = []
    cpu_rates: list[float] = []
    data = [two_call_turn(i) for i in range(turns)]
    for _ in range(runs):
        db = tmp / f"write-{synchronous}.db"
        fresh(db)
        ledger = Ledger.open(db, synchronous=synchronous)
        run_inline(ledger.sessions.create(NewSession("s")))
        start, cpu = time.perf_counter(), time.process_time()
        for q, r in data:
            write_turn(ledger, q, r)
        rates.append(turns / (time.perf_counter() - start))
        cpu_rates.append(turns / max(time.process_time() - cpu, 1e-9))
        ledger.close()
    return median(rates), median(cpu_rates)


# --------------------------------------------------------------------------- history


@dataclass(slots=True)
class HistoryTimes:
    """Medians, ms: cold history() (default cache, cache off), its SQL part, opening, and the decode stages."""

    full: float
    uncached: float
    sql: float
    count: int
    open_ms: float
    json_ms: float
    build_ms: float


def _timed(fn: Callable[[], object]) -> tuple[float, object]:
    gc.collect()
    start = time.perf_counter()
    result = fn()  # kept alive until the clock stops: freeing the caller's list is not part of the call
    elapsed = (time.perf_counter() - start) * 1000
    return elapsed, result


def time_history(db: Path, reps: int) -> HistoryTimes:
    """history() on a fresh connection (a process's first call), plus where the time goes."""
    full: list[float] = []
    uncached: list[float] = []
    sql: list[float] = []
    opens: list[float] = []
    count = 0
    for _ in range(reps):
        start = time.perf_counter()
        ledger = Ledger.open(db)
        opens.append((time.perf_counter() - start) * 1000)
        elapsed, result = _timed(lambda: run_inline(ledger.turns.history("s")))  # noqa: B023
        full.append(elapsed)
        count = len(result)  # type: ignore[arg-type]
        del result
        ledger.close()
        ledger = Ledger.open(db, message_cache=0)
        uncached.append(_timed(lambda: run_inline(ledger.turns.history("s")))[0])  # noqa: B023
        head = run_inline(ledger.sessions.head("s"))
        assert head is not None
        sql.append(_timed(lambda: ledger.database.read(functools.partial(_read.history_bodies, head_id=head.id)))[0])  # noqa: B023
        ledger.close()
    json_ms, build_ms = _decode_stages(db, reps)
    return HistoryTimes(median(full), median(uncached), median(sql), count, median(opens), json_ms, build_ms)


def _decode_stages(db: Path, reps: int) -> tuple[float, float]:
    """Median ms of the two decode stages alone: one json.loads over all bodies; building the message objects."""
    ledger = Ledger.open(db, message_cache=0)
    head = run_inline(ledger.sessions.head("s"))
    assert head is not None
    _summary, bodies = ledger.database.read(functools.partial(_read.history_bodies, head_id=head.id))
    # (runs against the schema-2 code too, which had no origins and decoded one dict at a time)
    decode_all: Any = getattr(_decode, "_decode_all", None)
    origins = ledger.database.read(_decode.load_origins) if decode_all is not None else None
    old_decode_one: Any = _decode.decode_one
    ledger.close()
    joined = "[" + ",".join(bodies) + "]"
    loads: list[float] = []
    builds: list[float] = []
    with _decode.gc_paused():
        for _ in range(reps):
            elapsed, parsed = _timed(lambda: json.loads(joined))
            loads.append(elapsed)
            rows: list[Any] = parsed  # type: ignore[assignment]
            if decode_all is not None:
                builds.append(_timed(lambda: decode_all(rows, origins))[0])  # noqa: B023
            else:
                builds.append(_timed(lambda: [old_decode_one(d) for d in rows])[0])  # noqa: B023
    return median(loads), median(builds)


def time_history_warm(db: Path, reps: int) -> float:
    """history() with ``message_cache`` on, right after one more turn was written: an engine's next turn."""
    ledger = Ledger.open(db, message_cache=50_000)  # the default since schema 3 (explicit: the old code had 0)
    writer = Ledger.open(db, message_cache=0)
    run_inline(ledger.turns.history("s"))
    times = []
    for i in range(reps):
        q, r = peer_turn(100_000 + i)
        run_inline(writer.turns.write(TurnWrite("s", None, query_messages=q, response_messages=r)))
        times.append(_timed(lambda: run_inline(ledger.turns.history("s")))[0])
    ledger.close()
    writer.close()
    return median(times)


def time_naive_cte(db: Path, reps: int) -> float:
    """SQL only, the plain design: recursive CTE leaf->root over parent_turn_id, then each turn's messages."""
    conn = sqlite3.connect(db)
    head = conn.execute("SELECT thread_id FROM sessions WHERE label = 's'").fetchone()[0]
    sql = (
        "WITH RECURSIVE anc(id, parent, seg, seq) AS ("
        " SELECT id, parent_turn_id, segment_id, seq FROM turns WHERE id = ?"
        " UNION ALL SELECT t.id, t.parent_turn_id, t.segment_id, t.seq FROM turns t JOIN anc ON t.id = anc.parent)"
        " SELECT m.body FROM anc JOIN messages m ON m.key BETWEEN (anc.seg << 36) | (anc.seq << 14)"
        " AND (anc.seg << 36) | (anc.seq << 14) | 16383 ORDER BY anc.seq, m.key"
    )
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        conn.execute(sql, (head,)).fetchall()
        times.append((time.perf_counter() - start) * 1000)
    conn.close()
    return median(times)


# --------------------------------------------------------------------------- report


def _row(*cells: object) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smaller runs (smoke test)")
    parser.add_argument("--peers", action="store_true", help="also measure openai-agents SQLiteSession, if installed")
    parser.add_argument("--oai-python", default=OAI_PYTHON, help="python of a venv with openai-agents")
    args = parser.parse_args()
    print(_machine.header("bench_ledger.py: the SQLite ledger"))
    depths = [100, 1_000] if args.quick else [100, 1_000, 10_000]
    reps = 3 if args.quick else 7
    with tempfile.TemporaryDirectory(prefix="bench-ledger-") as name:
        tmp = Path(name)
        counts = [100, 1_000] if args.quick else [100, 1_000, 10_000]
        oai = peer_oai(tmp, args, counts)
        _report_writes(tmp, 1_000 if args.quick else 5_000, 3, oai)
        _report_history(tmp, depths, reps)
        _report_window(tmp, depths, reps)
        _report_peers(tmp, oai, counts, reps=reps)
    print(_machine.load_line())


def _report_writes(tmp: Path, turns: int, runs: int, oai: dict[str, dict[str, float]] | None) -> None:
    normal = bench_write(tmp, turns, runs, "NORMAL")
    full = bench_write(tmp, max(turns // 5, 200), runs, "FULL")
    # SQLiteSession's median 4-item add over its 1,000-item store, and its mean CPU per add, in this run
    add_us = oai["1000"]["add_ms"] * 1000 if oai and "1000" in oai else None
    add_cpu_us = oai["1000"]["add_cpu_ms"] * 1000 if oai and "1000" in oai else None
    print("\n## write_turn: 4 messages + 2 tool calls, one durable transaction per turn\n")
    header = ("synchronous", "turns/s", "µs/turn", "turns/s by CPU time", "SQLiteSession 4-item add, same run, µs")
    print(_row(*header, "ratio", "SQLiteSession add, CPU µs", "ratio by CPU"))
    print(_row(*["---"] * 8))
    for mode, (rate, cpu_rate) in (
        ("NORMAL (default; WAL, survives process crash)", normal),
        ("FULL (fsync per commit)", full),
    ):
        us = 1e6 / rate
        peer = "not measured" if add_us is None else f"{add_us:.0f}"
        ratio = "-" if add_us is None else f"{add_us / us:.2f}x as fast"
        cpu_us = 1e6 / cpu_rate
        peer_cpu = "not measured" if add_cpu_us is None else f"{add_cpu_us:.0f}"
        ratio_cpu = "-" if add_cpu_us is None else f"{add_cpu_us / cpu_us:.2f}x as fast"
        print(_row(mode, f"{rate:,.0f}", f"{us:.0f}", f"{cpu_rate:,.0f}", peer, ratio, peer_cpu, ratio_cpu))


TARGETS = {100: None, 1_000: 2.0, 10_000: 10.0}
"""Cold history() targets from the performance issue, ms."""


def _print_history_header() -> None:
    print("\n## history(): fresh connection, peer content (4 messages/turn)\n")
    print(
        _row(
            "depth (turns)",
            "messages",
            "history() ms",
            "target ms",
            "cache off ms",
            "SQL ms",
            "µs/message: SQL + json.loads + build = total",
            "open ms",
            "next turn (cache) ms",
            "naive recursive CTE, SQL ms",
            "DB bytes/message, net of empty schema",
            "JSON-ancestry threads bytes/turn",
        )
    )
    print(_row(*["---"] * 12))


def _ancestry_note(tmp: Path, depth: int) -> str:
    """Bytes per turn of JSON-ancestry threads at ``depth`` (measured up to 3,000 turns, extrapolated beyond)."""
    anc_depth = min(depth, 3_000)
    anc = json_ancestry_bytes(tmp, anc_depth)
    if anc_depth < depth:  # quadratic: per-turn bytes grow linearly with depth
        return f"{anc / anc_depth:,.0f} at 3,000 -> ~{anc / anc_depth * depth / anc_depth:,.0f} (extrapolated)"
    return f"{anc / anc_depth:,.0f}"


def _report_history(tmp: Path, depths: list[int], reps: int) -> None:
    _print_history_header()
    empty = tmp / "empty.db"
    fresh(empty)
    Ledger.open(empty).close()
    empty_size = db_bytes(empty)
    for depth in depths:
        db = tmp / f"h{depth}.db"
        build(db, depth)
        t = time_history(db, reps)
        naive = time_naive_cte(db, reps)
        warm = time_history_warm(db, reps)
        size = db_bytes(db)
        anc_note = _ancestry_note(tmp, depth)
        target = TARGETS.get(depth)
        print(
            _row(
                f"{depth:,}",
                f"{t.count:,}",
                f"{t.full:.2f}",
                "" if target is None else f"< {target:g} ({'met' if t.full < target else 'missed'})",
                f"{t.uncached:.2f}",
                f"{t.sql:.2f}",
                _stages(t),
                f"{t.open_ms:.2f}",
                f"{warm:.2f}",
                f"{naive:.2f}",
                f"{(size - empty_size) / t.count:.0f} (gross {size / t.count:.0f})",
                anc_note,
            )
        )
    forked = tmp / "forked.db"
    depth = depths[-1]
    build(forked, depth, fork_every=100)
    t = time_history(forked, reps)
    cells = [f"{t.full:.2f}", "", f"{t.uncached:.2f}", f"{t.sql:.2f}", _stages(t), f"{t.open_ms:.2f}"]
    print(_row(f"{depth:,}, a fork every 100 turns on the path", f"{t.count:,}", *cells, "", "", "", ""))


WINDOW_TOKENS = (128_000, 32_000)
"""Context windows of the engine's load: ``history_window_chars`` = 2 windows x 4 chars per token."""


def _cold(db: Path, reps: int, max_chars: int | None) -> tuple[float, float, int]:
    """Median wall and CPU ms of a fresh connection's first ``history()`` (bounded by ``max_chars``), messages."""
    walls: list[float] = []
    cpus: list[float] = []
    count = 0
    for _ in range(reps):
        ledger = Ledger.open(db)
        gc.collect()
        start, cpu = time.perf_counter(), time.process_time()
        result = run_inline(ledger.turns.history("s", max_chars=max_chars))
        walls.append((time.perf_counter() - start) * 1000)
        cpus.append((time.process_time() - cpu) * 1000)
        count = len(result)
        del result
        ledger.close()
    return median(walls), median(cpus), count


def _report_window(tmp: Path, depths: list[int], reps: int) -> None:
    """The engine's cold start: the whole history against the window the engine loads, and a compacted session."""
    print("\n## The engine's cold start: history() on a fresh connection, whole vs the engine's window\n")
    print("(window = `history(max_chars=)` with `history_window_chars`: 2 context windows x 4 chars/token;")
    print(
        f" compacted = a compaction every {COMPACT_EVERY} turns keeping {COMPACT_KEEP}, the last {COMPACT_AT} back)\n"
    )
    windows = [(f"window {w // 1000}k: messages, ms (CPU ms)", 2 * w * 4) for w in WINDOW_TOKENS]
    print(_row("depth (turns)", "whole history: messages, ms (CPU ms)", *(w[0] for w in windows), "compacted session"))
    print(_row(*["---"] * (3 + len(windows))))
    for depth in depths:
        db = tmp / f"w{depth}.db"
        build(db, depth)  # its own copy: the history table's warm column added turns to h{depth}.db
        cells = []
        for max_chars in [None, *(w[1] for w in windows)]:
            wall, cpu, count = _cold(db, reps, max_chars)
            cells.append(f"{count:,}: {wall:.2f} ({cpu:.2f})")
        compacted = tmp / f"c{depth}.db"
        build_compacted(compacted, depth)
        wall, cpu, count = _cold(compacted, reps, 2 * WINDOW_TOKENS[0] * 4)
        target = TARGETS.get(depth)
        mark = "" if target is None else f", target < {target:g}: {'met' if wall < target else 'missed'}"
        print(_row(f"{depth:,}", *cells, f"{count:,}: {wall:.2f} ({cpu:.2f}){mark}"))


def _stages(t: HistoryTimes) -> str:
    per = 1000 / t.count
    return (
        f"{t.sql * per:.2f} + {t.json_ms * per:.2f} + {t.build_ms * per:.2f} = "
        f"{(t.sql + t.json_ms + t.build_ms) * per:.2f} (measured whole: {t.uncached * per:.2f})"
    )


def _report_peers(tmp: Path, oai: dict[str, dict[str, float]] | None, counts: list[int], *, reps: int) -> None:
    print("\n## Same history from the peers' stores, equal content (messages = items = entries)\n")
    print(
        _row(
            "messages",
            "nexus history() ms",
            "pi JSONL parse+walk ms",
            "SQLiteSession get_items ms",
            "nexus bytes/msg",
            "SQLiteSession bytes/item",
            "SQLiteSession add 4 items ms",
        )
    )
    print(_row(*["---"] * 7))
    for n in counts:
        db = tmp / f"p{n}.db"
        build(db, n // 4)
        th = time_history(db, reps)
        full, count = th.full, th.count
        ledger = Ledger.open(db)
        pi_file = export_pi_session(ledger, "s", tmp / f"p{n}.jsonl")
        ledger.close()
        pi_ms, pi_count = time_pi_jsonl(pi_file, reps)
        assert pi_count == count, (pi_count, count)
        o = (oai or {}).get(str(n))
        oai_cells = (
            (f"{o['get_ms']:.2f}", f"{o['bytes'] / o['items']:.0f}", f"{o['add_ms']:.2f}")
            if o
            else ("not measured",) * 3
        )
        print(
            _row(f"{n:,}", f"{full:.2f}", f"{pi_ms:.2f}", oai_cells[0], f"{db_bytes(db) / count:.0f}", *oai_cells[1:])
        )


if __name__ == "__main__":
    main()
