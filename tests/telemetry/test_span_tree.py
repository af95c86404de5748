"""The span tree of a broker run: queue item → run → model calls and tool calls, a failover, a sub-agent.

Real parts throughout: the broker and its durable queue on SQLite, the engine, and the provider
over loopback HTTP (the fake server answers 429 to the first auth profile, so failover rotates to
the second). The spans are kept by the OpenTelemetry SDK's in-memory exporter. Also: a run of
`nexus run`, a batch run's links to the messages it consumed, a failed tool call, a priced model's cost.
"""

from __future__ import annotations

import json
from pathlib import Path

from serve_helpers import samples, value
from span_helpers import recorded_spans, span_tree

from nexus import telemetry
from nexus.broker import AgentMessage
from nexus.broker.host import running_broker
from nexus.config import load_config
from nexus.engine import run_agent
from nexus.ledger import Ledger
from nexus.testing import FakeProviderServer
from nexus.testing.steps import http_error, text, tool_call

SECRET = "sk-proj-telemetry0123456789abcdef"


def write_home(home: Path, base_url: str) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "workspace").mkdir(exist_ok=True)
    (home / "workspace" / "notes.txt").write_text("the notes\n", encoding="utf-8")
    (home / "nexus.toml").write_text(
        f"""default_model = "fake/fake-model"

[providers.fake]
api = "openai-completions"
base_url = "{base_url}"
auth_profiles = [{{name = "span-one", api_key = "span-key-one"}}, {{name = "span-two", api_key = "span-key-two"}}]

[agents.lead]
role = "manager"
tools = ["read", "spawn_agent"]
""",
        encoding="utf-8",
    )


SCRIPT = (
    http_error(429, "Rate limit reached"),  # the lead's first call, first key: failover rotates
    tool_call("read", {"path": "notes.txt"}, id="call-read"),
    tool_call("spawn_agent", {"task": "summarise the notes"}, id="call-spawn"),
    text("the worker's summary"),  # the sub-agent's run
    text("all done"),
)


async def run_lead(home: Path, content: str) -> FakeProviderServer:
    async with FakeProviderServer(*SCRIPT) as server:
        write_home(home, server.openai_base_url)
        config = load_config()
        with Ledger.open(config.database_path) as ledger:
            async with running_broker(config, ledger) as host:
                broker = host.broker
                result = await broker.send_and_wait(AgentMessage("m-1", "user", "lead", content), timeout_ms=60_000)
        assert result.success, result.error
        assert result.reply == "all done"
        server.assert_complete()
        return server


async def test_a_run_with_a_tool_call_a_failover_and_a_sub_agent_is_one_trace(isolated_env: Path) -> None:
    with recorded_spans() as exporter:
        server = await run_lead(isolated_env, "read the notes and have them summarised")
        spans = exporter.get_finished_spans()
    keys = [request.headers.get("authorization") for request in server.requests]
    assert keys[:2] == ["Bearer span-key-one", "Bearer span-key-two"]  # the 429, then the other key

    (root,) = span_tree(spans)  # one trace: the sub-agent's spans hang under the lead's
    assert {span.context.trace_id for span in spans} == {root.span.context.trace_id}
    assert root.name == "accept lead" and root.attributes["nexus.queue_mode"] == "steer"  # the default mode
    wait = root.only("queue lead")
    run = wait.only("invoke_agent lead")
    assert root.child_names() == ["queue lead"] and wait.child_names() == ["invoke_agent lead"]
    assert run.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert run.attributes["nexus.session"] == "agent:lead" and run.attributes["nexus.agent"] == "lead"
    assert run.attributes["nexus.turn_id"] and run.attributes["nexus.cost_usd"] == 0  # the fake model has no prices
    assert run.attributes["nexus.stop_reason"] == "end_turn"
    assert run.child_names() == [
        "chat fake-model",  # 429 on span-one
        "chat fake-model",  # span-two: the read call
        "execute_tool read",
        "chat fake-model",  # the spawn call
        "execute_tool spawn_agent",
        "chat fake-model",  # "all done"
    ]
    refused, read_call, read, _, spawn, last = run.children
    assert refused.attributes["error.type"] == "rate_limit"
    assert refused.span.status.status_code.name == "ERROR"
    assert read_call.attributes["gen_ai.response.finish_reasons"] == ("tool_use",)
    assert read_call.attributes["gen_ai.request.model"] == "fake-model"
    assert read_call.attributes["gen_ai.provider.name"] == "fake"
    assert read_call.attributes["gen_ai.usage.output_tokens"] > 0
    assert last.attributes["gen_ai.response.finish_reasons"] == ("stop",)
    assert read.attributes["gen_ai.tool.name"] == "read"
    assert read.attributes["gen_ai.tool.call.id"] == "call-read"
    (retry,) = [event for event in run.span.events if event.name == "nexus.failover.retry"]
    assert (retry.attributes or {})["error.type"] == "rate_limit"
    assert (retry.attributes or {})["nexus.next_auth_profile"] == "span-two"

    worker_accept = spawn.only("accept")  # the sub-agent's task is a durable message, sent inside the tool call
    worker = worker_accept.only("queue").only("invoke_agent")
    assert worker.name.startswith("invoke_agent worker-")
    assert worker.child_names() == ["chat fake-model"]
    assert worker.attributes["gen_ai.usage.output_tokens"] > 0

    contents = [key for node in root.walk() for key in node.attributes if key.endswith(("messages", "arguments"))]
    assert contents == []  # message contents are off by default


async def test_contents_go_on_the_spans_only_when_switched_on_and_redacted(isolated_env: Path) -> None:
    with recorded_spans(capture_content=True) as exporter:
        await run_lead(isolated_env, f"read the notes; my key is {SECRET}")
        spans = exporter.get_finished_spans()
    chats = [span for span in spans if span.name == "chat fake-model" and span.attributes]
    first = json.loads(str(chats[0].attributes["gen_ai.input.messages"]))  # type: ignore[index]
    assert first[-1]["role"] == "user" and "read the notes; my key is [redacted]" in first[-1]["parts"][0]["content"]
    assert all(SECRET not in json.dumps(dict(span.attributes or {})) for span in spans)
    (read,) = [span for span in spans if span.name == "execute_tool read"]
    assert json.loads(str(read.attributes["gen_ai.tool.call.arguments"])) == {"path": "notes.txt"}  # type: ignore[index]
    assert "the notes" in str(read.attributes["gen_ai.tool.call.result"])  # type: ignore[index]


async def test_a_run_of_nexus_run_is_named_by_its_agent_spec_not_its_session(isolated_env: Path) -> None:
    async with FakeProviderServer(text("hello")) as server:
        write_home(isolated_env, server.openai_base_url)
        with recorded_spans() as exporter:
            result = await run_agent("hi", session="notes-2026-11-27")  # as `nexus run` does: the default spec
            spans = exporter.get_finished_spans()
    assert result.stop_reason == "end_turn"
    (run,) = span_tree(spans)
    assert run.name == "invoke_agent main"  # one span name for every session, not one per session label
    assert run.attributes["gen_ai.agent.name"] == "main"
    assert run.attributes["nexus.session"] == "notes-2026-11-27"
    assert run.child_names() == ["chat fake-model"]


async def test_a_batch_run_is_the_child_of_its_first_message_and_links_the_others(isolated_env: Path) -> None:
    async with FakeProviderServer(text("both read")) as server:
        write_home(isolated_env, server.openai_base_url)
        config = load_config()
        with recorded_spans() as exporter, Ledger.open(config.database_path) as ledger:
            async with running_broker(config, ledger) as host:
                broker = host.broker
                await broker.send(AgentMessage("m-1", "user", "lead", "first"), queue_mode="collect")
                await broker.send(AgentMessage("m-2", "ops", "lead", "second"), queue_mode="collect")
                assert await broker.wait_for_idle("lead", timeout_ms=60_000)
            spans = exporter.get_finished_spans()
    first, second = span_tree(spans)  # two messages, two traces, one run
    run = first.only("queue lead").only("invoke_agent lead")
    assert run.attributes["nexus.queue_items"] == 2 and run.attributes["nexus.queue_mode"] == "collect"
    (other_wait,) = second.children
    assert other_wait.name == "queue lead" and other_wait.children == []
    assert [(link.context.trace_id, link.context.span_id) for link in run.span.links] == [
        (other_wait.span.context.trace_id, other_wait.span.context.span_id)
    ]


async def test_a_failed_tool_call_is_an_error_span_and_counted_by_tool(isolated_env: Path) -> None:
    script = (tool_call("read", {"path": "missing.txt"}, id="call-missing"), text("no such file"))
    async with FakeProviderServer(*script) as server:
        write_home(isolated_env, server.openai_base_url)
        recorder = telemetry.enable_metrics()
        with recorded_spans() as exporter:
            result = await run_agent("read missing.txt", session="errors")
            spans = exporter.get_finished_spans()
    assert result.reply == "no such file"
    (tool,) = [span for span in spans if span.name == "execute_tool read"]
    assert tool.status.status_code.name == "ERROR" and (tool.attributes or {})["error.type"] == "tool_error"
    found = samples(recorder.exposition().decode())  # type: ignore[attr-defined]
    assert value(found, "nexus_tool_call_errors_total", tool="read") == 1
    assert value(found, "nexus_tool_call_duration_seconds_count", tool="read") == 1


def write_priced_home(home: Path, base_url: str) -> None:
    """A catalog model with prices (gpt-4o-mini), its provider pointed at the fake server."""
    home.mkdir(parents=True, exist_ok=True)
    (home / "nexus.toml").write_text(
        f'default_model = "openai/gpt-4o-mini"\n[providers.openai]\nbase_url = "{base_url}"\n'
        'api_key = "test-key-0123456789"\n',
        encoding="utf-8",
    )


async def test_a_priced_model_s_cost_is_on_its_spans_and_counted_per_model(isolated_env: Path) -> None:
    async with FakeProviderServer(text("a priced answer")) as server:
        write_priced_home(isolated_env, server.openai_base_url)
        recorder = telemetry.enable_metrics()
        with recorded_spans() as exporter:
            result = await run_agent("hi", session="priced")
            spans = exporter.get_finished_spans()
    assert result.usage.cost.total > 0
    (run,) = span_tree(spans)
    (chat,) = run.children
    assert run.attributes["nexus.cost_usd"] == chat.attributes["nexus.cost_usd"] == result.usage.cost.total
    found = samples(recorder.exposition().decode())  # type: ignore[attr-defined]
    assert value(found, "nexus_model_cost_usd_total", provider="openai", model="gpt-4o-mini") == result.usage.cost.total
    assert value(found, "nexus_model_tokens_total", provider="openai", model="gpt-4o-mini", type="output") > 0
