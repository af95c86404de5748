"""CLI start-up and a whole ``nexus run`` turn, in fresh processes, against pi's CLI timings.

Measures (median of ``--runs`` fresh processes each, after one unmeasured warm-up):

- ``python -c pass``: the interpreter floor on this machine;
- ``nexus --help``: start-up cost of the command (target < 200 ms);
- ``nexus run "hello"``: config, ledger open + ``recover()``, context assembly, one streamed
  reply from a loopback fake provider (a separate ``python -m nexus.testing.fake_server``
  process), the turn written to the SQLite ledger (target < 500 ms). Every run starts a new
  session, like pi's ``-p``.

Baselines: ``reference/peer-baselines.md`` §5, pi-coding-agent 0.73.1 on this machine kind:
``pi --help`` 866 / 928 ms, ``pi -p "hello"`` (session written) 1,041 / 1,167 ms (passes A / B).

Byte-code caching is on (``PYTHONPYCACHEPREFIX`` in a temp dir, filled by the warm-up), as for
an installed package; ``--no-pyc`` measures with ``PYTHONDONTWRITEBYTECODE=1`` and no cache.
``--importtime`` prints the slowest imports of ``nexus run`` (``python -X importtime``).

    .venv/bin/python bench/bench_cli.py [--runs 10] [--no-pyc] [--importtime]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PI = {"help": (866.0, 928.0), "run": (1041.0, 1167.0)}
TARGET_MS = {"help": 200.0, "run": 500.0}
SRC = Path(__file__).resolve().parents[1] / "src"


def _nexus_cmd() -> list[str]:
    script = Path(sys.executable).parent / "nexus"
    return [str(script)] if script.exists() else [sys.executable, "-m", "nexus.cli"]


def _time(cmd: list[str], env: dict[str, str], runs: int, check: bool = True) -> list[float]:
    subprocess.run(cmd, env=env, capture_output=True, check=check, timeout=120)  # warm-up (fills the pyc cache)
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        done = subprocess.run(cmd, env=env, capture_output=True, check=False, timeout=120)
        times.append((time.perf_counter() - started) * 1000)
        if check and done.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)} failed ({done.returncode}): {done.stderr.decode()[-500:]}")
    return times


def _time_runs(base: list[str], env: dict[str, str], runs: int) -> list[float]:
    times = []
    for i in range(runs + 1):
        cmd = [*base, "run", "-s", f"bench-{os.getpid()}-{i}", "hello"]
        started = time.perf_counter()
        done = subprocess.run(cmd, env=env, capture_output=True, check=False, timeout=120)
        elapsed = (time.perf_counter() - started) * 1000
        if done.returncode != 0:
            raise SystemExit(f"nexus run failed ({done.returncode}): {done.stderr.decode()[-800:]}")
        if i > 0:  # the first run is the warm-up
            times.append(elapsed)
    return times


def _start_fake_server(env: dict[str, str]) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "nexus.testing.fake_server"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    if not url.startswith("http://"):
        proc.kill()
        raise SystemExit(f"fake server did not start (printed {url!r})")
    return proc, url


def _importtime(base: list[str], env: dict[str, str], top: int = 15) -> None:
    cmd = [sys.executable, "-X", "importtime", "-m", "nexus.cli", "run", "-s", "importtime", "hello"]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False, timeout=120)
    rows: list[tuple[int, int, int, str]] = []
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        self_us, cumulative, name = line.removeprefix("import time:").split("|", 2)
        depth = (len(name) - len(name.lstrip()) - 1) // 2
        rows.append((int(cumulative), int(self_us), depth, name.strip()))
    total_ms = sum(r[0] for r in rows if r[2] == 0) / 1000
    roots = sorted((r for r in rows if r[2] == 0), reverse=True)[:top]
    print(f"\nslowest top-level imports of `nexus run` (cumulative ms; {total_ms:.0f} ms in all):")
    for cumulative_us, _self_us, _depth, module in roots:
        print(f"  {cumulative_us / 1000:7.1f}  {module}")


def _row(name: str, times: list[float], key: str | None) -> str:
    median = statistics.median(times)
    spread = f"{min(times):.0f}-{max(times):.0f}"
    if key is None:
        return f"| {name} | **{median:.0f}** | {spread} | - | - | - |"
    target = TARGET_MS[key]
    pi_a, pi_b = PI[key]
    verdict = "ok" if median < target else "OVER"
    ratio = f"{pi_a / median:.1f}-{pi_b / median:.1f}x faster"
    return f"| {name} | **{median:.0f}** | {spread} | < {target:.0f} ({verdict}) | {pi_a:.0f} / {pi_b:.0f} | {ratio} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10, help="measured processes per case (default 10)")
    parser.add_argument("--no-pyc", action="store_true", help="no byte-code cache (PYTHONDONTWRITEBYTECODE=1)")
    parser.add_argument("--importtime", action="store_true", help="also list the slowest imports of `nexus run`")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="nexus-bench-cli-"))
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and k != "NEXUS_MODEL"}
    env["PYTHONPATH"] = str(SRC) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["NEXUS_HOME"] = str(work / "home")
    env["NO_COLOR"] = "1"
    if args.no_pyc:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        env.pop("PYTHONPYCACHEPREFIX", None)
    else:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(work / "pycache")

    server, url = _start_fake_server(env)
    try:
        home = work / "home"
        home.mkdir()
        (home / "nexus.toml").write_text(
            'default_model = "fake/fake-model"\n[providers.fake]\napi = "openai-completions"\n'
            f'base_url = "{url}/v1"\napi_key = "bench"\n',
            encoding="utf-8",
        )
        base = _nexus_cmd()
        floor = _time([sys.executable, "-c", "pass"], env, args.runs)
        help_times = _time([*base, "--help"], env, args.runs)
        run_times = _time_runs(base, env, args.runs)
        if args.importtime:
            _importtime(base, env)
    finally:
        server.terminate()
        server.wait(timeout=10)

    from nexus.ledger import Ledger

    with Ledger.open(home / "agents.db") as ledger:
        written = sum(1 for s in ledger.list_sessions() if s.label.startswith("bench-") and s.head_turn_id)
    shutil.rmtree(work, ignore_errors=True)

    mode = "no byte-code cache" if args.no_pyc else "byte-code cached"
    print(f"\nnexus CLI, {args.runs} fresh processes per case, {mode}; command: {' '.join(base)}")
    print(f"turns written to the ledger by the run case: {written} (expected {args.runs + 1})\n")
    print("| case | median ms | min-max | target ms | pi ms (A / B) | vs pi |")
    print("|---|---|---|---|---|---|")
    print(_row("`python -c pass` (floor)", floor, None))
    print(_row("`nexus --help`", help_times, "help"))
    print(_row('`nexus run "hello"` (loopback provider, ledger write)', run_times, "run"))


if __name__ == "__main__":
    main()
