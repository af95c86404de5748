"""CLI start-up and a whole ``nexus run`` turn, in fresh processes, against the targets and pi's CLI.

Measures (median of ``--runs`` fresh processes each, after one unmeasured warm-up):

- ``python -c pass``: the interpreter floor on this machine;
- ``import nexus.llm``: the provider layer's import (target: < 50 ms over the interpreter floor);
- ``nexus --help``: start-up cost of the command (target < 30 ms, the interpreter included);
- ``nexus run "hello"``: config, ledger open + ``recover()``, context assembly, one streamed
  reply from a loopback fake provider (a separate ``python -m nexus.testing.fake_server``
  process), the turn written to the SQLite ledger (target < 250 ms). Every run starts a new
  session, like pi's ``-p``;
- the libraries' floor: a script that imports what any asyncio + httpx + sqlite3 client must
  (asyncio, httpx, its pool and anyio backend, sqlite3, json, tomllib), streams the same reply
  from the same fake server and commits one row: the part of ``nexus run`` nexus cannot cut.

Every target is given with the margin the project aims at (``MARGIN``: the median should be
1.3x under it, so the target holds on a slower machine or a busier minute); the table prints
target / median. With ``--also-src LABEL=DIR`` the nexus cases also run from another source tree
(an older commit's ``src/``), in the same rounds, each tree with its own ``NEXUS_HOME``.

With ``--peers``, pi (the ``@mariozechner/pi-coding-agent`` CLI, from ``--pi-dir``, default
``$NEXUS_PI_DIR``, ``$PI_DIR`` or ``/tmp/peerbench/pi``; nothing is installed) runs the same cases in
the same rounds: ``pi --help`` and ``pi -p "hello"`` (session file written, like our ledger write)
against the same fake server, with HOME and its agent dir in a temp dir and ``PI_OFFLINE=1``. Ratios
are printed only for what was measured in this run; a missing pi is reported and gets no ratio.

Byte-code caching is on (``PYTHONPYCACHEPREFIX`` in a temp dir, filled by the warm-up), as for
an installed package; ``--no-pyc`` measures with ``PYTHONDONTWRITEBYTECODE=1`` and no cache.
``--importtime`` prints the slowest imports of ``nexus run`` (``python -X importtime``).

    .venv/bin/python bench/bench_cli.py [--runs 10] [--no-pyc] [--importtime] [--peers] [--also-src L=DIR]
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

TARGET_MS = {"help": 30.0, "run": 250.0, "import": 50.0}
"""Issue 25's targets: ``nexus --help`` (whole process), ``nexus run "hello"`` (whole process),
``import nexus.llm`` (over the interpreter floor)."""
MARGIN = 1.3
"""How far under its target a median should be: target / median >= MARGIN."""
SRC = Path(__file__).resolve().parents[1] / "src"
PI_DIR = "/tmp/peerbench/pi"
LIBS_FLOOR = """
import asyncio, json, pathlib, sqlite3, ssl, sys, tomllib
import httpx
async def main(url):
    transport = httpx.AsyncHTTPTransport(verify=ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT))
    async with httpx.AsyncClient(transport=transport) as client:
        body = {"model": "fake-model", "stream": True, "messages": [{"role": "user", "content": "hello"}]}
        async with client.stream("POST", url + "/v1/chat/completions", json=body) as response:
            async for line in response.aiter_lines():
                json.loads(line[6:]) if line.startswith("data: {") else None
asyncio.run(main(sys.argv[1]))
db = sqlite3.connect(pathlib.Path(sys.argv[2]) / "floor.db")
db.execute("PRAGMA journal_mode=WAL")
db.execute("CREATE TABLE IF NOT EXISTS t (x TEXT)")
with db:
    db.execute("INSERT INTO t VALUES (?)", (json.dumps({"reply": "hello"}),))
"""
"""The libraries' floor: what any asyncio + httpx + sqlite3 client pays for the same reply (httpx's
command-line tool and httpcore's trio probe skipped, as the nexus process skips them)."""
SKIP_OPTIONAL = "import sys; sys.modules['trio'] = None; sys.modules['httpx._main'] = None\n"


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


def _row(name: str, times: list[float], cpu: list[float], key: str | None, pi: list[float] | None) -> str:
    """One table row: median and spread, CPU, the target with its margin (target / median), and pi beside it."""
    median = statistics.median(times)
    cells = [name, f"**{median:.0f}**", f"{min(times):.0f}-{max(times):.0f}", f"{statistics.median(cpu):.0f}"]
    if key is None:
        return "| " + " | ".join([*cells, "-", "-", "-", "-"]) + " |"
    target = TARGET_MS[key]
    margin = target / median if median > 0 else float("inf")
    verdict = "ok" if margin >= MARGIN else "under target, margin short" if median < target else "OVER"
    cells += [f"< {target:.0f}", f"{margin:.2f}x ({verdict})"]
    if pi is None:
        return "| " + " | ".join([*cells, "-", "-"]) + " |"
    pi_median = statistics.median(pi)
    cells += [f"{pi_median:.0f} ({min(pi):.0f}-{max(pi):.0f})", f"{pi_median / median:.1f}x"]
    return "| " + " | ".join(cells) + " |"


def _config(home: Path, url: str) -> None:
    home.mkdir(parents=True)
    (home / "nexus.toml").write_text(
        'default_model = "fake/fake-model"\n[providers.fake]\napi = "openai-completions"\n'
        f'base_url = "{url}/v1"\napi_key = "bench"\n',
        encoding="utf-8",
    )


def _tree_env(env: dict[str, str], src: str, home: Path) -> dict[str, str]:
    tree = dict(env)
    tree["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    tree["NEXUS_HOME"] = str(home)
    return tree


def _written(home: Path, src: str) -> int:
    """Turns the run case wrote to ``home``'s ledger, read by the tree that wrote them."""
    code = (
        "import asyncio, sys\nfrom nexus.ledger import Ledger\n"
        "with Ledger.open(sys.argv[1]) as ledger:\n"
        "    sessions = asyncio.run(ledger.sessions.list())\n"
        "    print(sum(1 for s in sessions if s.label.startswith('bench-') and s.head_turn_id))\n"
    )
    env = {**os.environ, "PYTHONPATH": src}
    argv = [sys.executable, "-c", code, str(home / "agents.db")]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    return int(done.stdout.strip() or -1)


def _over_floor(times: dict[str, list[float]], key: str) -> list[float]:
    """Per round, the case minus the interpreter floor of the same round."""
    return [case - floor for case, floor in zip(times[key], times["floor"], strict=True)]


def _tables(times: dict[str, list[float]], cpu: dict[str, list[float]], labels: list[str]) -> None:
    head = "| case | median ms | min-max | CPU ms | target ms | target / median (aim 1.3x) | pi ms, same run | vs pi |"
    print(f"\n{head}")
    print("|---|---|---|---|---|---|---|---|")
    print(_row("`python -c pass` (interpreter floor)", times["floor"], cpu["floor"], None, None))
    print(_row("libraries' floor (asyncio, httpx, sqlite3; same reply)", times["libs"], cpu["libs"], None, None))
    for label in labels:
        at = f"@{label}" if label else ""
        tree = f" ({label})" if label else ""
        imported = _over_floor(times, f"import{at}")
        imported_cpu = [c - f for c, f in zip(cpu[f"import{at}"], cpu["floor"], strict=True)]
        print(_row(f"`import nexus.llm`, over the floor{tree}", imported, imported_cpu, "import", None))
        pi_help = None if label else times.get("pi_help")
        print(_row(f"`nexus --help`{tree}", times[f"help{at}"], cpu[f"help{at}"], "help", pi_help))
        pi_run = None if label else times.get("pi_run")
        run_name = f'`nexus run "hello"` (loopback provider, ledger write){tree}'
        print(_row(run_name, times[f"run{at}"], cpu[f"run{at}"], "run", pi_run))
    if "pi_help" in times:
        print("\nCPU time of pi in the same rounds (user + system, ms; moves less with the load than wall time):\n")
        print("| case | nexus CPU ms | pi CPU ms | pi / nexus |")
        print("|---|---|---|---|")
        for key, label in (("help", "`--help`"), ("run", "run")):
            ours, theirs = statistics.median(cpu[key]), statistics.median(cpu[f"pi_{key}"])
            print(f"| {label} | {ours:.0f} | {theirs:.0f} | {theirs / ours:.1f}x |")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=10, help="measured processes per case (default 10)")
    parser.add_argument("--no-pyc", action="store_true", help="no byte-code cache (PYTHONDONTWRITEBYTECODE=1)")
    parser.add_argument("--importtime", action="store_true", help="also list the slowest imports of `nexus run`")
    parser.add_argument("--peers", action="store_true", help="also time pi, if installed (see bench/README.md)")
    parser.add_argument(
        "--pi-dir", default=os.environ.get("NEXUS_PI_DIR") or os.environ.get("PI_DIR") or PI_DIR, help="pi's npm prefix"
    )
    parser.add_argument(
        "--also-src",
        action="append",
        default=[],
        metavar="LABEL=DIR",
        help="also run the nexus cases from another source tree (e.g. an older commit's src/), in the same rounds",
    )
    return parser


def _base_env(work: Path, no_pyc: bool) -> dict[str, str]:
    """The processes' environment: no API keys or model override, no colour, the byte-code cache as asked."""
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and k != "NEXUS_MODEL"}
    env["NO_COLOR"] = "1"
    if no_pyc:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        env.pop("PYTHONPYCACHEPREFIX", None)
    else:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(work / "pycache")
    return env


def _cases(trees: list[tuple[str, str]], env: dict[str, str], work: Path, url: str, base: list[str]) -> list[Case]:
    """The floors, then each tree's import, ``--help`` and run cases (each tree with a home of its own)."""
    cases: list[Case] = [
        ("floor", [sys.executable, "-c", "pass"], env, None),
        ("libs", [sys.executable, "-c", SKIP_OPTIONAL + LIBS_FLOOR, url, str(work)], env, None),
    ]
    for index, (label, src) in enumerate(trees):
        home = work / f"home-{index}"
        _config(home, url)
        tree_env = _tree_env(env, src, home)
        at = f"@{label}" if label else ""
        cases += [
            (f"import{at}", [sys.executable, "-c", "import nexus.llm"], tree_env, None),
            (f"help{at}", [*base, "--help"], tree_env, None),
            (f"run{at}", None, tree_env, None),
        ]
    return cases


def _pi_cases(work: Path, url: str, pi_dir: str) -> tuple[list[Case], str]:
    """pi's ``--help`` and run cases, or why pi cannot be measured."""
    pi = _pi_env(work, url, pi_dir)
    if isinstance(pi, str):
        return [], pi
    pi_cmd, pi_env, pi_cwd = pi
    model = ["--provider", "fake", "--model", "fake-model"]
    return [
        ("pi_help", [*pi_cmd, "--help"], pi_env, pi_cwd),
        ("pi_run", [*pi_cmd, "-p", "hello", *model], pi_env, pi_cwd),
    ], ""


def main() -> None:
    args = _parser().parse_args()
    print(_machine.header("bench_cli.py: whole CLI processes"))
    trees = [("", str(SRC)), *(tuple(item.split("=", 1)) for item in args.also_src)]

    work = Path(tempfile.mkdtemp(prefix="nexus-bench-cli-"))
    env = _base_env(work, args.no_pyc)
    server, url = _start_fake_server(_tree_env(env, str(SRC), work / "server-home"))
    pi_problem = "not asked for (--peers)"
    base = _nexus_cmd()
    written: list[tuple[str, int]] = []
    try:
        cases = _cases(trees, env, work, url, base)
        if args.peers:
            pi_cases, pi_problem = _pi_cases(work, url, args.pi_dir)
            cases += pi_cases
        times, cpu = _time_rounds(cases, base, args.runs)
        if args.importtime:
            _importtime(base, _tree_env(env, str(SRC), work / "home-0"))
        written = [(label or "this tree", _written(work / f"home-{i}", src)) for i, (label, src) in enumerate(trees)]
    finally:
        server.terminate()
        server.wait(timeout=10)
    shutil.rmtree(work, ignore_errors=True)

    mode = "no byte-code cache" if args.no_pyc else "byte-code cached"
    print(f"\nnexus CLI, {args.runs} fresh processes per case (rounds interleaved), {mode}; command: {' '.join(base)}")
    for label, count in written:
        print(f"turns written to the ledger by the run case ({label}): {count} (expected {args.runs + 1})")
    if pi_problem:
        print(f"pi not measured, no ratio: {pi_problem}")
    else:
        print(f"pi {_pi_version(args.pi_dir)} measured in the same rounds, against the same fake server")
    _tables(times, cpu, [label for label, _ in trees])
    print(_machine.load_line())


if __name__ == "__main__":
    main()
