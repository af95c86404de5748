"""Off means free: nothing of OpenTelemetry or prometheus_client is imported, and layer 0 imports nothing of ours.

Each check runs in a fresh interpreter, where ``sys.modules`` tells what an import or a run
really loaded.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

from nexus import telemetry
from nexus.testing import FakeProviderServer
from nexus.testing.steps import text, tool_call

SRC = Path(__file__).resolve().parents[2] / "src"
PACKAGE = SRC / "nexus" / "telemetry"


def _fresh(code: str, home: Path) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={"PYTHONPATH": str(SRC), "NEXUS_HOME": str(home), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_layer_zero_imports_nothing_of_ours() -> None:
    for module in PACKAGE.glob("*.py"):
        tree = ast.parse(module.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            ours = [n for n in names if n.startswith("nexus") and not n.startswith("nexus.telemetry")]
            # `from nexus import __version__`; the face's lazy names through nexus._lazy (a root module: no package)
            assert ours in ([], ["nexus"], ["nexus._lazy"]), f"{module.name} imports {ours}"


def test_importing_it_and_recording_while_off_loads_neither_library(tmp_path: Path) -> None:
    found = _fresh(
        "import sys, json\n"
        "from nexus import telemetry\n"
        "span = telemetry.start_span('x', attributes={'a': 1})\n"
        "span.set_attribute('b', 2); span.add_event('e'); span.fail('kind'); span.end()\n"
        "telemetry.metrics().tool_call('read', 0.1, failed=False)\n"
        "with telemetry.use_span(span), telemetry.continue_trace('00-' + '1' * 32 + '-' + '2' * 16 + '-01'):\n"
        "    pass\n"
        "print(json.dumps({'loaded': sorted(m for m in sys.modules if m.split('.')[0] in "
        "('opentelemetry', 'prometheus_client')), 'traceparent': span.traceparent()}))",
        tmp_path,
    )
    assert found == {"loaded": [], "traceparent": None}


def test_a_run_with_a_tool_call_loads_neither_library_while_off(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "workspace").mkdir(parents=True)
    with FakeProviderServer(tool_call("ls", {}), text("done")) as server:
        (home / "nexus.toml").write_text(
            f'default_model = "fake/fake-model"\n[providers.fake]\napi = "openai-completions"\n'
            f'base_url = "{server.openai_base_url}"\napi_key = "test"\n',
            encoding="utf-8",
        )
        found = _fresh(
            "import sys, json, asyncio\n"
            "from nexus.engine import run_agent\n"
            "result = asyncio.run(run_agent('list the files'))\n"
            "print(json.dumps({'reply': result.reply, 'loaded': sorted(m for m in sys.modules "
            "if m.split('.')[0] in ('opentelemetry', 'prometheus_client'))}))",
            home,
        )
    assert found == {"reply": "done", "loaded": []}


def test_the_no_op_span_is_one_object_and_says_it_records_nothing() -> None:
    first = telemetry.start_span("a")
    assert first is telemetry.start_span("b", kind="client", links=["00-" + "1" * 32 + "-" + "2" * 16 + "-01"])
    assert first is telemetry.NOOP_SPAN and not first.recording and not telemetry.observing()
    assert telemetry.current_traceparent() is None and telemetry.log_ids() is None
