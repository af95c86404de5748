"""The benchmark scripts keep their reporting rules: machine header, and no ratio without both sides.

A ratio in docs/benchmarks.md must come from one run that measured both sides, and every result
must say on which CPU and under what load it ran. These run the scripts small (loopback only,
no peers installed on purpose) and check what they print, never how fast anything was.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"


def run_bench(*args: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=240, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def assert_machine_lines(out: str) -> None:
    assert "\ncpu: " in out and " cores), python " in out
    assert "load at start (1/5/15 min): " in out
    assert "load at end (1/5/15 min): " in out


def test_stream_bench_without_peers_prints_no_sdk_ratio(tmp_path: Path) -> None:
    missing = str(tmp_path / "no-venv" / "bin" / "python")
    out = run_bench(
        str(BENCH / "bench_stream.py"),
        *("--tokens", "300", "--repeats", "1", "--rounds", "1", "--no-import-time"),
        *("--peers", "--peer-python", missing),
    )
    assert_machine_lines(out)
    assert "floor: httpx async aiter_lines + json.loads" in out
    assert "floor: httpx sync iter_lines + json.loads" in out
    assert f"not measured: {missing} does not exist" in out
    assert "same run" not in out  # the SDK / nexus ratio line
    nexus_rows = [line for line in out.splitlines() if line.startswith("| nexus.llm.stream (events")]
    assert len(nexus_rows) == 2 and all("x |" in row for row in nexus_rows)  # both formats, ratio to the floors


def test_loop_bench_names_a_missing_peer_and_gives_it_no_ratio(tmp_path: Path) -> None:
    out = run_bench(
        str(BENCH / "bench_loop.py"),
        *("--turns", "120", "--reps", "1", "--peers", "--peer-venvs", str(tmp_path)),
    )
    assert_machine_lines(out)
    assert out.count("peer not measured, no ratio: ") == 5
    assert "| fresh_loop |" in out
    assert "ratio = peer / nexus" not in out
    assert "no peer measured: no ratios" in out


def test_concurrent_bench_reports_lag_memory_and_collections() -> None:
    out = run_bench(str(BENCH / "bench_engine_concurrent.py"), *("--executions", "20", "--tps", "200"))
    assert_machine_lines(out)
    assert "failed runs: 0;" in out and " running together 0.5 s later" in out
    assert "event-loop lag while the 20 runs start (" in out
    for line in ("event-loop lag while streaming: p50 ", "loop CPU only: p50 ", "loop thread CPU while streaming: ",
                 "garbage collections while streaming: gen0 ", "RSS per idle loaded session: "):  # fmt: skip
        assert line in out


def test_concurrent_bench_says_what_the_long_loop_iterations_ran() -> None:
    """``--slow-iterations MS``: the loop's iterations over MS of loop CPU, and the callbacks that ran in them."""
    args = ("--executions", "20", "--tps", "20", "--slow-iterations", "0")  # runs of ~2 s: they stream when timed
    out = run_bench(str(BENCH / "bench_engine_concurrent.py"), *args)
    line = next(x for x in out.splitlines() if x.startswith("loop iterations over 0 ms of loop CPU while streaming: "))
    assert " held a garbage collection (" in line
    callbacks = line.split("their callbacks by CPU: ")[1]
    assert "task Execution._to_the_end " in callbacks  # the runs' steps, under their coroutine's name


def test_broker_queue_bench_prints_every_row_and_no_peer_ratio_without_the_peer() -> None:
    out = run_bench(
        str(BENCH / "bench_broker_queue.py"),
        *("--messages", "300", "--paced-messages", "300", "--floor-messages", "300", "--rounds", "1"),
    )
    assert_machine_lines(out)
    assert "# gc: tuned" in out
    rows = [line for line in out.splitlines() if line.startswith("nexus AgentBroker, 100 agents, ")]
    assert [row.split(", ", 1)[1].rsplit("  ", 1)[0].split("  ")[0] for row in rows] == [
        "100 agents, burst, checkpoints on loop",
        "100 agents, burst, checkpoint thread",
        "100 agents, burst, checkpoint thread, cap 100",
        "100 agents, paced 13,000/s, checkpoint thread",
        "100 agents, paced 13,000/s, checkpoint thread, cap 100",
    ]
    floors = [line for line in out.splitlines() if line.startswith("floor: stdlib sqlite3, ")]
    assert [line.split("  ")[0] for line in floors] == [
        "floor: stdlib sqlite3, one per step",
        "floor: stdlib sqlite3, batches of 32",
    ]
    assert all(len(row.split()) > 8 for row in rows)  # msg/s, p99, CPU, and the ratios to both floors
    assert "persist-queue" not in out.split("(peers not requested")[0].split("store ")[-1]
    assert "(peers not requested: run with --peers" in out


def test_broker_e2e_bench_prints_the_target_the_floors_and_another_tree() -> None:
    out = run_bench(
        str(BENCH / "bench_broker_e2e.py"),
        *("--agents", "10", "--messages", "60", "--floor-messages", "300", "--rounds", "1"),
        *("--also-src", f"again={ROOT / 'src'}"),
    )
    assert_machine_lines(out)
    assert "floor: stdlib sqlite3, one per step" in out and "floor: stdlib sqlite3, batches of 32" in out
    assert out.count("turns per second (all sent at once)") == 2 and ">= 650" in out
    assert "turns/s over the floors (one per step, 32)" in out
    assert "CPU per turn, again / this tree (same rounds): " in out
    assert "# gc: tuned" in out  # the collector as `nexus serve` sets it, unless --gc default


def test_routing_bench_prints_the_router_beside_its_baselines_and_the_speed() -> None:
    out = run_bench(str(BENCH / "bench_routing.py"), "--sizes", "300")
    assert_machine_lines(out)
    assert "## Evaluation set: 54 sessions, 4 forks, 119 turns, 209 tasks" in out
    for split in ("### test split", "### dev split"):
        table = out.split(split, 1)[1].split("###", 1)[0]
        rows = [line.split(" | ")[0].strip("| ") for line in table.splitlines() if line.startswith("| ")][1:]
        assert rows == ["router", "recency only", "BM25 only", "embeddings only"]  # one run, all four
    assert "| confidence | tasks | mean confidence | best checkpoint right |" in out
    assert "expected calibration error: " in out
    scoped = out.split("### Within one agent's work (router)", 1)[1].split("###", 1)[0]
    assert [line.split(" | ")[0].strip("| ") for line in scoped.splitlines() if line.startswith("| ")][1:] == [
        "test",
        "dev",
    ]
    assert "### 300 checkpoints" in out and "CPU time of the deciding thread p50" in out


def test_cli_bench_prints_the_targets_the_floors_and_another_tree(tmp_path: Path) -> None:
    out = run_bench(
        str(BENCH / "bench_cli.py"),
        *("--runs", "1", "--peers", "--pi-dir", str(tmp_path / "no-pi")),
        *("--also-src", f"again={ROOT / 'src'}"),
    )
    assert_machine_lines(out)
    assert f"pi not measured, no ratio: {tmp_path / 'no-pi'}/node_modules/.bin/pi not found" in out
    assert "turns written to the ledger by the run case (this tree): 2 (expected 2)" in out
    assert "turns written to the ledger by the run case (again): 2 (expected 2)" in out
    rows = {line.split(" | ")[0][2:]: line for line in out.splitlines() if line.startswith("| ")}
    assert "libraries' floor (asyncio, httpx, sqlite3; same reply)" in rows
    run = '`nexus run "hello"` (loopback provider, ledger write)'
    for name, target in (("`nexus --help`", "< 30"), (run, "< 250")):
        for tree in ("", " (again)"):
            cells = rows[f"{name}{tree}"].split(" | ")
            assert cells[4] == target and "x (" in cells[5] and cells[6] == "-"  # no pi column without pi
    assert "`import nexus.llm`, over the floor" in rows


def test_mcp_bench_prints_the_sdk_baseline_beside_nexus_in_one_run() -> None:
    out = run_bench(str(BENCH / "bench_mcp.py"), *("--calls", "20", "--rounds", "1", "--servers", "2"))
    assert_machine_lines(out)
    for row in ("| in process |", "| SDK Client |", "| Nexus MCP tool |", "| added by Nexus (p50 Nexus - p50 SDK) |"):
        assert row in out
    assert "| per connected server, in the Nexus process (2 servers) |" in out
    assert out.count("| 100 / 1 |") == 1 and "| Nexus MCP tool | " in out.split("100 / 1")[1]


def test_ledger_backends_bench_measures_both_backends_in_one_run(postgres_url: str) -> None:
    out = run_bench(
        str(BENCH / "bench_ledger_backends.py"),
        *("--messages", "200", "--senders", "4", "--rounds", "1", "--postgres", postgres_url),
    )
    assert_machine_lines(out)
    rows = [line.split()[0] for line in out.splitlines() if line.startswith(("sqlite ", "postgresql "))]
    assert rows == ["sqlite", "postgresql"]


def test_telemetry_bench_prints_the_modes_the_floor_and_another_tree() -> None:
    out = run_bench(
        str(BENCH / "bench_telemetry.py"),
        *("--model", "scripted", "--turns", "2", "--blocks", "1", "--rounds", "1"),
        *("--also-src", f"again={ROOT / 'src'}"),
    )
    assert_machine_lines(out)
    rows = {line.split(" | ")[0][2:]: line for line in out.splitlines() if line.startswith("| ")}
    assert {"off", "metrics", "tracing", "both", "this tree", "again"} <= set(rows)
    assert {"4 spans, OpenTelemetry SDK", "a turn's observations, prometheus_client"} <= set(rows)


def test_engine_http_bench_runs_the_engine_beside_its_floor_without_peers() -> None:
    out = run_bench(str(BENCH / "bench_engine_http.py"), *("--turns", "3", "--warmup", "1", "--reps", "1"))
    assert_machine_lines(out)
    assert "peers not measured, no ratios against them" in out
    rows = {line.split("  ")[0] for line in out.splitlines() if line.startswith(("floor ", "nexus ")) and "  " in line}
    assert rows == {"floor httpx, SSE", "nexus engine (SSE)", "nexus agent_loop (SSE)"}, rows


def test_engine_bench_runs_every_row_and_the_long_session() -> None:
    out = run_bench(str(BENCH / "bench_engine.py"), *("--turns", "20", "--reps", "1", "--history-turns", "40"))
    assert_machine_lines(out)
    for row in ("loop", "execute, no ledger", "execute + ledger", "assemble + execute"):
        assert any(line.startswith(row + " ") for line in out.splitlines()), row
    assert "µs per history message per turn" in out


def test_ledger_bench_quick_prints_every_table_and_no_peer_ratio() -> None:
    out = run_bench(str(BENCH / "bench_ledger.py"), "--quick")
    assert_machine_lines(out)
    for title in ("## write_turn", "## history()", "## The engine's cold start", "## Same history from the peers"):
        assert title in out, title
    assert "openai-agents SQLiteSession not measured, no ratios against it" in out
    assert "x as fast" not in out  # no ratio against a peer that did not run


SMALL_RUNS = {
    "bench_broker_restart.py": ("--agents", "5", "--items", "50"),
    "bench_events.py": ("--samples", "50", "--burst", "200"),
    "bench_partial_journal.py": ("--quick",),
    "bench_server.py": ("--requests", "200", "--connections", "4", "--turns", "10", "--rounds", "1"),
    "bench_sse_fanout.py": ("--subscribers", "20", "--events", "50", "--rounds", "1", "--procs", "1"),
    "bench_streaming.py": ("2000",),
    "bench_tools.py": (),
    "bench_wake.py": ("--samples", "20", "--rounds", "1"),
}
"""Every other bench script, run small: a script that no longer runs against the tree fails here, not in a
reader's hands (three did after the run redesign changed ``Runtime.start``)."""


@pytest.mark.parametrize("script", sorted(SMALL_RUNS))
def test_every_other_bench_script_runs_small_and_says_where_it_ran(script: str) -> None:
    out = run_bench(str(BENCH / script), *SMALL_RUNS[script])
    assert_machine_lines(out)
