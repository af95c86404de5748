"""``nexus route`` and ``nexus send --route`` as real processes on a real home (the model: a loopback fake)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from nexus.ledger import Ledger, NewSession
from nexus.ledger._sql_db import run_inline
from nexus.ledger.broker_store import BrokerStore
from nexus.testing import FakeProviderServer
from nexus.testing.conformance.support import qa_turn
from nexus.testing.steps import text

from ._ledgers import corpus

SRC = Path(__file__).resolve().parents[2] / "src"


def nexus(home: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NEXUS_HOME": str(home), "PYTHONPATH": str(SRC), **(env or {})}
    return subprocess.run([sys.executable, "-m", "nexus.cli", *args], env=env, capture_output=True, text=True,
                          timeout=120, check=False)  # fmt: skip


@pytest.fixture
def home(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    root = tmp_path / "home"
    root.mkdir()
    with Ledger.open(root / "agents.db") as ledger:
        ids = corpus(ledger, tmp_path / "ws")
        store = BrokerStore(ledger.database)
        for agent, session in (("auth-agent", "auth"), ("ops-agent", "ops"), ("billing-agent", "billing")):
            store.save_agent(agent, role="worker", session_label=session, spec={})
    return root, ids


def test_route_prints_the_decision_and_records_it(home: tuple[Path, dict[str, str]]) -> None:
    root, ids = home
    done = nexus(root, "route", "make the docker image of the API even smaller", "--json")
    assert done.returncode == 0, done.stderr
    decision = json.loads(done.stdout)
    assert decision["mode"] == "existing" and decision["checkpoint"]["turn_id"] == ids["docker"]
    assert decision["checkpoint"]["agent_id"] == "ops-agent" and decision["decision_id"]
    shown = nexus(root, "route", "make the docker image of the API even smaller")
    assert shown.returncode == 0 and shown.stdout.startswith("existing  confidence")
    assert "-> " in shown.stdout and f"turn {ids['docker']}" in shown.stdout
    by = decision["decided_by"]  # which embedder and model made it (a model is fitted for one embedder)
    assert by["embedder"].startswith("wordllama-") and by["model"].startswith("shipped") and by["fitted_on"]
    assert f"decided by: embedder {by['embedder']}, model shipped" in shown.stdout
    stats = nexus(root, "route", "stats", "--json")
    (arm,) = json.loads(stats.stdout)
    assert (arm["arm"], arm["decisions"], arm["settled"]) == ("smart", 2, 0)
    good = nexus(root, "route", "feedback", decision["decision_id"], "good", "--note", "right place")
    assert good.returncode == 0
    rated = json.loads(nexus(root, "route", "stats", "--json").stdout)[0]
    assert rated["good_feedback"]["value"] == 1.0 and rated["good_feedback"]["n"] == 1
    future = nexus(root, "route", "stats", "--since", "2099-01-01")  # it said "no routing decisions recorded yet"
    assert future.returncode == 0 and future.stdout.strip() == "no routing decisions since 2099-01-01 00:00 (UTC)"


@pytest.mark.parametrize(("args", "says"), [
    (("route",), "give the task"),
    (("route", "   "), "give the task"),
    (("route", "fix it", "--agent", "nobody"), "unknown agent 'nobody'"),
    (("route", "login \udcff limiter"), "the task is not valid Unicode"),  # the byte 0xff in argv
    (("route", "fix it", "--limit", "0"), "limit is 0; give 1 to 50"),
    (("route", "stats", "--since", "yesterday"), "--since 'yesterday': give 7d, 12h, 30m or a date"),
    (("route", "feedback", "01NOPE", "good"), "no routing decision '01NOPE'"),
    (("route", "feedback", "x"), "nexus route feedback DECISION_ID good|bad"),
    (("send", "hello"), "give the agent"),
    (("send", "nobody", "--route", "smart", "fix it"), "unknown agent 'nobody'"),  # was "unrecognized arguments"
    (("send", "--route", "smart", " "), 'message is empty: give the text to send, e.g. nexus send --route smart "'),
])  # fmt: skip
def test_bad_requests_exit_2_and_record_nothing(home: tuple[Path, dict[str, str]], args: tuple[str, ...],
                                                says: str) -> None:  # fmt: skip
    root, _ = home
    done = nexus(root, *args)
    assert done.returncode == 2 and says in done.stderr, done.stderr
    with Ledger.open(root / "agents.db") as ledger:
        assert ledger.database.connection.execute("SELECT count(*) FROM route_decisions").fetchone()[0] == 0
        assert ledger.database.connection.execute("SELECT count(*) FROM queue_items").fetchone()[0] == 0


def test_route_reindex_and_the_word_stats_as_a_task(home: tuple[Path, dict[str, str]]) -> None:
    root, ids = home
    rebuilt = nexus(root, "route", "reindex")
    assert rebuilt.returncode == 0 and rebuilt.stdout.startswith(f"indexed {len(ids)} checkpoints")
    literal = nexus(root, "route", "--task", "stats", "--json")
    assert literal.returncode == 0 and json.loads(literal.stdout)["mode"] in ("existing", "new")


def test_send_route_smart_runs_the_task_in_a_fork_of_the_owners_session(home: tuple[Path, dict[str, str]]) -> None:
    root, ids = home
    with FakeProviderServer() as server:
        server.script(text("Dropped the pip cache layer: 210 MB"))
        (root / "nexus.toml").write_text(
            f'default_model = "fake/fake-model"\n\n[providers.fake]\napi = "openai-completions"\n'
            f'base_url = "{server.openai_base_url}"\napi_key = "test"\n', encoding="utf-8")  # fmt: skip
        done = nexus(root, "send", "--route", "smart", "make the docker image of the API even smaller", "--id", "m-9",
                     "--wait")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "routed to a fork of ops at turn 0" in done.stderr and "Dropped the pip cache layer" in done.stdout
    with Ledger.open(root / "agents.db") as ledger:
        turns = run_inline(ledger.turns.path("ops-agent~fork~m-9"))
        assert [t.id for t in turns[:-1]] == [ids["docker"]] and turns[-1].status == "completed"
    said = re.search(r"nexus: decision (\S+) \(nexus route feedback \1 good\|bad\)", done.stderr)
    assert said is not None, done.stderr  # the id to judge the routing by: printed nowhere else for a send
    judged = nexus(root, "route", "feedback", said[1], "good")
    assert judged.returncode == 0, judged.stderr
    unknown = nexus(root, "route", "feedback", "01NOPE", "good")
    assert unknown.returncode == 2 and "printed by `nexus route TASK` and `nexus send --route`" in unknown.stderr


def test_route_with_agent_looks_at_that_agents_past_work_only(home: tuple[Path, dict[str, str]]) -> None:
    root, ids = home
    task = "make the docker image of the API even smaller"
    done = nexus(root, "route", task, "--agent", "auth-agent", "--json")
    assert done.returncode == 0, done.stderr
    decision = json.loads(done.stdout)
    shown = [decision["checkpoint"], *decision["alternatives"]]
    assert {c["agent_id"] for c in shown} == {"auth-agent"} and ids["docker"] not in {c["turn_id"] for c in shown}
    assert decision["mode"] == "new"  # the Docker work is ops-agent's: nothing of auth-agent's continues it
    ops = json.loads(nexus(root, "route", task, "--agent", "ops-agent", "--json").stdout)
    assert ops["mode"] == "existing" and ops["checkpoint"]["turn_id"] == ids["docker"]


def test_route_works_on_a_postgresql_ledger(tmp_path: Path, postgres_url: str) -> None:
    """`nexus route`, `route stats` and `route feedback` on the configured PostgreSQL database (not a file)."""
    from nexus.routing import Router

    async def write() -> str:
        ledger = await Ledger.connect(postgres_url)
        try:
            await ledger.sessions.ensure(NewSession("billing"))
            return await qa_turn(ledger, "billing", "Generate a PDF invoice when an order is paid", "WeasyPrint")
        finally:
            await ledger.aclose()

    invoice = asyncio.run(write())
    root = tmp_path / "home"
    root.mkdir()
    env = {"NEXUS_DATABASE_URL": postgres_url}
    done = nexus(root, "route", "the pdf invoice for paid orders needs a VAT number", "--json", env=env)
    assert done.returncode == 0, done.stderr
    decision = json.loads(done.stdout)
    assert decision["checkpoint"]["turn_id"] == invoice and decision["decision_id"]
    assert nexus(root, "route", "feedback", decision["decision_id"], "good", env=env).returncode == 0
    (arm,) = json.loads(nexus(root, "route", "stats", "--json", env=env).stdout)
    assert (arm["decisions"], arm["good_feedback"]["n"]) == (1, 1)
    assert not (root / "agents.db").exists()  # nothing went to a file
    ledger = asyncio.run(Ledger.connect(postgres_url))
    try:
        with Router(ledger, embedder=None) as router:
            assert [d.id for d in router.decisions.decisions()] == [decision["decision_id"]]
    finally:
        ledger.close()


def test_a_model_fitted_for_another_embedder_is_used_and_a_bad_one_is_exit_2(home: tuple[Path, dict[str, str]]) -> None:
    root, _ids = home
    from importlib import resources

    shipped = json.loads(resources.files("nexus.routing").joinpath("model.json").read_text(encoding="utf-8"))
    (root / "strict.json").write_text(json.dumps({**shipped, "threshold": 0.999}))
    (root / "nexus.toml").write_text('[routing]\nembedder = "none"\nmodel = "strict.json"\n')
    task = "make the docker image of the API even smaller"
    done = nexus(root, "route", task, "--json")
    assert done.returncode == 0, done.stderr
    decision = json.loads(done.stdout)
    assert decision["threshold"] == 0.999 and decision["mode"] == "new"  # the file's threshold, not the shipped one
    for content, said in (
        (None, "No such file"),
        ("{not json", "is not a routing model"),
        (json.dumps({**shipped, "features": ["cos"]}), "is not a routing model"),
        (json.dumps({"weights": []}), "is not a routing model"),
    ):
        model = root / "bad.json"
        model.unlink(missing_ok=True)
        if content is not None:
            model.write_text(content)
        (root / "nexus.toml").write_text('[routing]\nembedder = "none"\nmodel = "bad.json"\n')
        refused = nexus(root, "route", task)
        assert refused.returncode == 2, (content, refused.stdout, refused.stderr)
        assert "[routing] model = " in refused.stderr and said in refused.stderr, refused.stderr
        assert "Traceback" not in refused.stderr
