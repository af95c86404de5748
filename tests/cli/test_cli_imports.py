"""What the ``nexus`` process imports for ``--help`` and for one ``run``: only what the command uses.

Each command runs as the real process would (``main()`` without arguments, ``sys.argv`` set) and
reports, at exit, every module it imported beyond a bare interpreter. The top-level names must be
in the sets recorded here: a new package on the path (the broker, the server, pydantic, an SDK, a
heavy stdlib module) fails the test, which says what came in and who to ask. The test checks the
structure, not the time: when a change really needs a new module on the path, add it here, with
the reason in the commit. (``docs/benchmarks.md`` gives the times these sets cost.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from nexus.testing import FakeProviderServer
from nexus.testing.steps import text

from .cli_process import SRC

HELP_ALLOWED = {"nexus", "nexus.cli", "nexus.cli._help"}
"""``nexus --help`` at 80 columns: the help is laid out without argparse (``nexus.cli._help``)."""

RUN_NEXUS_PACKAGES = {
    "nexus",
    "nexus._dataclass",
    "nexus._lazy",
    "nexus._per_loop",  # one object per event loop (the writer's hand-over, the snapshot clock)
    "nexus._settled",  # the shielded wait for a submitted write (the writer thread's, the group commit's)
    "nexus.agent",
    "nexus.cli",
    "nexus.config",
    "nexus.engine",
    "nexus.errors",
    "nexus.ledger",
    "nexus.llm",
    "nexus.telemetry",
    "nexus.tools",
}
"""The nexus packages one ``nexus run`` may import: no broker, server, adapters, streaming bridge or testing.
``nexus.telemetry`` is its switch and no-op span/recorder (stdlib only, ~1.5 ms): OpenTelemetry and
prometheus_client come in only when ``[telemetry]`` turns them on (neither is in the sets below)."""

RUN_THIRD_PARTY = {"anyio", "certifi", "h11", "httpcore", "httpx", "idna", "sniffio", "typing_extensions"}
"""httpx and what it needs on asyncio (certifi is imported, its certificates are not loaded for plain http)."""

RUN_STDLIB = {
    *("__future__", "_ast", "_asyncio", "_bisect", "_blake2", "_bz2", "_compression", "_contextvars", "_datetime"),
    *("_hashlib", "_heapq", "_locale", "_lzma", "_opcode", "_posixsubprocess", "_queue", "_random", "_sha512"),
    *("_socket", "_sqlite3", "_ssl", "_string", "_struct", "_typing", "_weakrefset"),
    *("array", "ast", "asyncio", "atexit", "base64", "binascii", "bisect", "bz2", "calendar", "collections"),
    *("concurrent", "contextlib", "contextvars", "copy", "dataclasses", "datetime", "dis", "email", "errno", "fcntl"),
    *("fnmatch", "hashlib", "heapq", "http", "importlib", "inspect", "ipaddress", "linecache", "locale"),
    *("logging", "lzma", "math", "mimetypes", "ntpath", "opcode", "pathlib", "queue", "quopri", "random"),
    *("select", "selectors", "shutil", "signal", "socket", "sqlite3", "ssl", "string", "struct", "subprocess"),
    *("tempfile", "textwrap", "threading", "token", "tokenize", "tomllib", "traceback", "typing"),
    *("unicodedata", "urllib", "warnings", "weakref", "zlib"),
}
"""Standard-library modules of one ``nexus run``: asyncio's and httpx's, sqlite3, tomllib. Absent on purpose: platform,
importlib.metadata (email parsing, zipfile), difflib, uuid, argparse with gettext (a plain ``nexus run`` line is read
without them: ``nexus.cli._run_line``), and zoneinfo with sysconfig in UTC (the run's ``TZ`` here): the prompt's UTC
is ``datetime.UTC``, other zones load zoneinfo."""

BROKER_STORES = {
    *("nexus.ledger._queue_store", "nexus.ledger._queue_rows", "nexus.ledger._queue_reads", "nexus.ledger._claims"),
    *("nexus.ledger._lease_store", "nexus.ledger._leases", "nexus.ledger._small_stores"),
    *("nexus.ledger._agent_registry", "nexus.ledger.deliveries"),
}
"""The ledger's broker stores (queue, leases, agent registry, deliveries) and pi's files: not a one-shot run's."""

_REPORT = """
import atexit, gc, sys
out = sys.argv[1]
def report():
    import json
    with open(out, "w", encoding="utf-8") as f:
        json.dump({"modules": sorted(m for m, v in sys.modules.items() if v is not None), "gc": gc.isenabled()}, f)
atexit.register(report)
sys.argv = ["nexus", *sys.argv[2:]]
from nexus.cli import main
raise SystemExit(main())
"""


def _imports(tmp_path: Path, *argv: str) -> tuple[set[str], bool]:
    """Modules the ``nexus`` process imported for ``argv`` beyond a bare interpreter, and whether gc was on."""
    env = {**os.environ, "PYTHONPATH": str(SRC), "COLUMNS": "80", "TZ": "UTC"}
    bare = subprocess.run(
        [sys.executable, "-c", "import atexit, gc, json, sys; print(json.dumps(sorted(sys.modules)))"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    report = tmp_path / "imports.json"
    done = subprocess.run(
        [sys.executable, "-c", _REPORT, str(report), *argv], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    data = json.loads(report.read_text(encoding="utf-8"))
    return set(data["modules"]) - set(json.loads(bare.stdout)), data["gc"]


def _unexpected(modules: set[str], allowed: set[str], nexus_allowed: set[str]) -> list[str]:
    outside = []
    for name in sorted(modules):
        top = name.split(".")[0]
        if top == "nexus":
            if ".".join(name.split(".")[:2]) not in nexus_allowed:
                outside.append(name)
        elif top not in allowed and not top.startswith("_sysconfigdata"):
            outside.append(name)
    return outside


def test_help_imports_only_its_text(tmp_path: Path) -> None:
    modules, _ = _imports(tmp_path, "--help")
    assert modules - {"__future__"} == HELP_ALLOWED


def test_run_imports_only_what_a_turn_uses(tmp_path: Path, home: Path, server: FakeProviderServer) -> None:
    server.script(text("hello"))
    modules, collector_on = _imports(tmp_path, "run", "-s", "imports", "hello")
    outside = _unexpected(modules, RUN_THIRD_PARTY | RUN_STDLIB, RUN_NEXUS_PACKAGES)
    assert outside == [], f"nexus run imported modules outside the recorded sets: {outside}"
    assert {"nexus.tools.bash", "nexus.broker", "nexus.server", "pydantic", "nexus.config._load"} & modules == {
        "nexus.config._load"
    }
    assert BROKER_STORES & modules == set()  # the ledger makes these stores on first use; a run uses none
    assert {name for name in modules if name.startswith("nexus.ledger.postgres")} == set()  # an SQLite file's run
    assert "nexus.engine.wiring.mcp_tools" not in modules  # a config without MCP servers: nothing of MCP at all
    assert "importlib.util" not in modules  # looked for only when the model is the local one
    assert "nexus.llm.providers._llama_progress" not in modules  # a local model's progress line: on a terminal only
    assert {"nexus.telemetry.logs", "nexus.telemetry._settings"} & modules == set()  # log formats, a typing Protocol
    assert not collector_on  # a one-shot command: no cyclic collector (see nexus.cli.main)


@pytest.mark.parametrize(("argv", "collector_on"), [(("agents", "list"), True), (("models",), False)])
def test_long_running_commands_get_the_collector_back(
    tmp_path: Path, home: Path, argv: tuple[str, ...], collector_on: bool
) -> None:
    assert _imports(tmp_path, *argv)[1] is collector_on
