"""CLI start-up and a whole ``nexus run`` turn, in fresh processes, against pi's CLI timings.

Measures (median of ``--runs`` fresh processes each, after one unmeasured warm-up):

- ``python -c pass``: the interpreter floor on this machine;
- ``nexus --help``: start-up cost of the command (target < 200 ms);
- ``nexus run "hello"``: config, ledger open + ``recover()``, context assembly, one streamed
  reply from a loopback fake provider (a separate ``python -m nexus.testing.fake_server``
  process), the turn written to the SQLite ledger (target < 500 ms). Every run starts a new
  session, like pi's ``-p``.

With ``--peers``, pi (the ``@mariozechner/pi-coding-agent`` CLI, from ``--pi-dir``, default
``/tmp/peerbench/pi``; nothing is installed) runs the same cases in the same rounds: ``pi --help``
and ``pi -p "hello"`` (session file written, like our ledger write) against the same fake server,
with HOME and its agent dir in a temp dir and ``PI_OFFLINE=1``. Ratios are printed only for
what was measured in this run; a missing pi is reported and gets no ratio.

Byte-code caching is on (``PYTHONPYCACHEPREFIX`` in a temp dir, filled by the warm-up), as for
an installed package; ``--no-pyc`` measures with ``PYTHONDONTWRITEBYTECODE=1`` and no cache.
``--importtime`` prints the slowest imports of ``nexus run`` (``python -X importtime``).

    .venv/bin/python bench/bench_cli.py [--runs 10] [--no-pyc] [--importtime] [--peers]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _machine

TARGET_MS = {"help": 200.0, "run": 500.0}
SRC = Path(__file__).resolve().parents[1] / "src"
PI_DIR = "/tmp/peerbench/pi"


def _nexus_cmd() -> list[str]:
    script = Path(sys.executable).parent / "nexus"
    return [str(script)] if script.exists() else [sys.executable, "-m", "nexus.cli"]


Case = tuple[str, list[str] | None, dict[str, str], str | None]  # name, argv (None = `nexus run`), env, cwd


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _run_case(case: Case, base: list[str], i: int) -> tuple[float, float]:
    """(wall ms, CPU ms) of one process of ``case``; CPU = user + system of the process (and its threads)."""
    name, cmd, env, cwd = case
    argv = cmd if cmd is not None else [*base, "run", "-s", f"bench-{os.getpid()}-{i}", "hello"]
    cpu = _children_cpu()
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, check=False, timeout=120)
    elapsed = (time.perf_counter() - started) * 1000
    if done.returncode != 0:
        raise SystemExit(f"{name} failed ({done.returncode}): {done.stderr.decode()[-800:]}")
    return elapsed, (_children_cpu() - cpu) * 1000


def _time_rounds(
    cases: list[Case], base: list[str], runs: int
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """One unmeasured warm-up of each case (it fills the pyc cache), then ``runs`` rounds, one run of each case
    per round, so load drift on a shared machine hits every case alike. Returns wall and CPU ms per case."""
    times: dict[str, list[float]] = {case[0]: [] for case in cases}
    cpu: dict[str, list[float]] = {case[0]: [] for case in cases}
    for i in range(runs + 1):
        for case in cases:
            elapsed, used = _run_case(case, base, i)
            if i > 0:
                times[case[0]].append(elapsed)
                cpu[case[0]].append(used)
    return times, cpu


def _pi_env(work: Path, url: str, pi_dir: str) -> tuple[list[str], dict[str, str], str] | str:
    """pi's command, environment and cwd against the fake server, or why pi cannot run here."""
    pi = Path(pi_dir) / "node_modules" / ".bin" / "pi"
    if not pi.exists():
        return f"{pi} not found"
    if shutil.which("node") is None:
        return "node not found"
    home = work / "pi-home"
    agent = home / ".pi" / "agent"
    agent.mkdir(parents=True)
    (work / "pi-cwd").mkdir()
    provider = {
        "baseUrl": f"{url}/v1",
        "api": "openai-completions",
        "apiKey": "bench",
        "compat": {"supportsDeveloperRole": False, "supportsReasoningEffort": False},
        "models": [{"id": "fake-model", "name": "Fake"}],
    }
    (agent / "models.json").write_text(json.dumps({"providers": {"fake": provider}}), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(HOME=str(home), PI_CODING_AGENT_DIR=str(agent), PI_OFFLINE="1", PI_TELEMETRY="0")
    env["PI_SKIP_VERSION_CHECK"] = "1"
    return [str(pi)], env, str(work / "pi-cwd")


def _pi_version(pi_dir: str) -> str:
    try:
        package = Path(pi_dir) / "node_modules" / "@mariozechner" / "pi-coding-agent" / "package.json"
        return str(json.loads(package.read_text(encoding="utf-8"))["version"])
    except (OSError, ValueError, KeyError):
        return "?"


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


def _row(name: str, times: list[float], key: str | None, pi: list[float] | None) -> str:
    median = statistics.median(times)
    spread = f"{min(times):.0f}-{max(times):.0f}"
    if key is None:
        return f"| {name} | **{median:.0f}** | {spread} | - | - | - |"
    target = TARGET_MS[key]
    verdict = "ok" if median < target else "OVER"
    if pi is None:
        return f"| {name} | **{median:.0f}** | {spread} | < {target:.0f} ({verdict}) | not measured | - |"
    pi_median = statistics.median(pi)
    return (
        f"| {name} | **{median:.0f}** | {spread} | < {target:.0f} ({verdict}) | {pi_median:.0f} "
        f"({min(pi):.0f}-{max(pi):.0f}) | {pi_median / median:.1f}x faster |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=10, help="measured processes per case (default 10)")
    parser.add_argument("--no-pyc", action="store_true", help="no byte-code cache (PYTHONDONTWRITEBYTECODE=1)")
    parser.add_argument("--importtime", action="store_true", help="also list the slowest imports of `nexus run`")
    parser.add_argument("--peers", action="store_true", help="also time pi, if installed (see bench/README.md)")
    parser.add_argument("--pi-dir", default=os.environ.get("PI_DIR", PI_DIR))
    args = parser.parse_args()
    print(_machine.header("bench_cli.py: whole CLI processes"))

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
    pi_problem = "not asked for (--peers)"
    try:
        home = work / "home"
        home.mkdir()
        (home / "nexus.toml").write_text(
            'default_model = "fake/fake-model"\n[providers.fake]\napi = "openai-completions"\n'
            f'base_url = "{url}/v1"\napi_key = "bench"\n',
            encoding="utf-8",
        )
        base = _nexus_cmd()
        cases: list[Case] = [
            ("floor", [sys.executable, "-c", "pass"], env, None),
            ("help", [*base, "--help"], env, None),
            ("run", None, env, None),
        ]
        if args.peers:
            pi = _pi_env(work, url, args.pi_dir)
            if isinstance(pi, str):
                pi_problem = pi
            else:
                pi_problem = ""
                pi_cmd, pi_env, pi_cwd = pi
                model = ["--provider", "fake", "--model", "fake-model"]
                cases += [("pi_help", [*pi_cmd, "--help"], pi_env, pi_cwd)]
                cases += [("pi_run", [*pi_cmd, "-p", "hello", *model], pi_env, pi_cwd)]
        times, cpu = _time_rounds(cases, base, args.runs)
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
    print(f"\nnexus CLI, {args.runs} fresh processes per case (rounds interleaved), {mode}; command: {' '.join(base)}")
    print(f"turns written to the ledger by the run case: {written} (expected {args.runs + 1})")
    if pi_problem:
        print(f"pi not measured, no ratio: {pi_problem}")
    else:
        print(f"pi {_pi_version(args.pi_dir)} measured in the same rounds, against the same fake server")
    print("\n| case | median ms | min-max | target ms | pi ms, same run (min-max) | vs pi |")
    print("|---|---|---|---|---|---|")
    print(_row("`python -c pass` (floor)", times["floor"], None, None))
    print(_row("`nexus --help`", times["help"], "help", times.get("pi_help")))
    print(_row('`nexus run "hello"` (loopback provider, ledger write)', times["run"], "run", times.get("pi_run")))
    print("\nCPU time of the same processes (user + system, ms; moves less with the load than wall time):\n")
    print("| case | nexus CPU ms | pi CPU ms, same run | pi / nexus |")
    print("|---|---|---|---|")
    for key, pi_key, label in (
        ("floor", None, "`python -c pass`"),
        ("help", "pi_help", "`--help`"),
        ("run", "pi_run", "run"),
    ):
        ours = statistics.median(cpu[key])
        theirs = statistics.median(cpu[pi_key]) if pi_key in cpu else None
        cells = ("-", "-") if theirs is None else (f"{theirs:.0f}", f"{theirs / ours:.1f}x")
        print(f"| {label} | {ours:.0f} | {cells[0]} | {cells[1]} |")
    print(_machine.load_line())


if __name__ == "__main__":
    main()
