"""The peer children of ``bench_engine_http.py``: the sources written into each peer venv's child process.

A child source = one driver (defines ``async def setup(args) -> (turn, versions)``) + HARNESS, prefixed with
CONSTANTS, so every framework answers the same prompt with the same tool and checks the same answer.
"""

from __future__ import annotations

SYSTEM = "You are a test agent."
PROMPT = "What is 1 + 2?"
ANSWER = "The sum is 3."
ARGS = {"a": 1, "b": 2}


HARNESS = r"""
import asyncio as _asyncio, json as _json, sys as _sys, time as _time


def _main():
    args = _json.loads(_sys.argv[1])

    async def go():
        turn, versions = await setup(args)
        for _ in range(args["warmup"]):
            await turn()
        wall, cpu = _time.perf_counter(), _time.process_time()
        for _ in range(args["turns"]):
            await turn()
        return _time.perf_counter() - wall, _time.process_time() - cpu, versions

    wall, cpu, versions = _asyncio.run(go())
    n = args["turns"]
    print(_json.dumps({"us": wall / n * 1e6, "cpu_us": cpu / n * 1e6, "versions": versions}))


_main()
"""

FLOOR = r"""
import importlib, importlib.metadata, json

TOOLS = [{"type": "function", "function": {
    "name": "add", "description": "Add two integers.",
    "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                   "required": ["a", "b"]}}}]


async def add(a, b):
    return a + b


async def setup(args):
    lib = args["lib"]
    http = importlib.import_module(lib)
    client = http.AsyncClient(base_url=args["base_url"], headers={"authorization": "Bearer test"}, timeout=30.0)
    streamed = args["wire"] == "sse"

    async def call_sse(messages):
        body = {"model": "fake-model", "messages": messages, "tools": TOOLS, "stream": True,
                "stream_options": {"include_usage": True}}
        text, calls, buffer = [], {}, b""
        async with client.stream("POST", "/chat/completions", json=body) as response:
            response.raise_for_status()
            async for chunk in response.aiter_bytes():  # read to the end: leaving early drops the connection
                buffer += chunk
                *events, buffer = buffer.split(b"\n\n")
                for event in events:
                    if not event.startswith(b"data: ") or event == b"data: [DONE]":
                        continue
                    for choice in json.loads(event[6:]).get("choices") or ():
                        delta = choice["delta"]
                        if delta.get("content"):
                            text.append(delta["content"])
                        for piece in delta.get("tool_calls") or ():
                            slot = calls.setdefault(piece["index"], {"id": "", "name": "", "arguments": ""})
                            fn = piece.get("function") or {}
                            slot["id"] = piece.get("id") or slot["id"]
                            slot["name"] = fn.get("name") or slot["name"]
                            slot["arguments"] += fn.get("arguments") or ""
        return "".join(text), [calls[i] for i in sorted(calls)]

    async def call_json(messages):
        body = {"model": "fake-model", "messages": messages, "tools": TOOLS, "stream": False}
        response = await client.post("/chat/completions", json=body)
        response.raise_for_status()
        message = response.json()["choices"][0]["message"]
        calls = [{"id": c["id"], "name": c["function"]["name"], "arguments": c["function"]["arguments"]}
                 for c in message.get("tool_calls") or ()]
        return message.get("content") or "", calls

    call = call_sse if streamed else call_json

    async def turn():
        messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": PROMPT}]
        text, calls = await call(messages)
        messages.append({"role": "assistant", "content": text or None, "tool_calls": [
            {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
            for c in calls]})
        for c in calls:
            result = await add(**json.loads(c["arguments"]))
            messages.append({"role": "tool", "tool_call_id": c["id"], "content": str(result)})
        text, calls = await call(messages)
        assert text == ANSWER and not calls, (text, calls)

    return turn, {lib: importlib.metadata.version(lib)}
"""

PYAI = r"""
import importlib.metadata
from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider


async def setup(args):
    provider = OpenAIProvider(base_url=args["base_url"], api_key="test")
    agent = Agent(OpenAIChatModel("fake-model", provider=provider), instructions=SYSTEM)

    @agent.tool_plain
    async def add(a: int, b: int) -> int:
        "Add two integers."
        return a + b

    async def drain(ctx, events):
        async for _ in events:
            pass

    handler = drain if args["wire"] == "sse" else None

    async def turn():
        result = await agent.run(PROMPT, event_stream_handler=handler)
        assert result.output == ANSWER, result.output

    names = ("pydantic-ai-slim", "openai", "httpx2")
    return turn, {n: importlib.metadata.version(n) for n in names}
"""

OAI = r"""
import importlib.metadata
from agents import Agent, OpenAIChatCompletionsModel, Runner, function_tool, set_tracing_disabled
from openai import AsyncOpenAI


async def setup(args):
    set_tracing_disabled(True)
    client = AsyncOpenAI(base_url=args["base_url"], api_key="test")

    @function_tool
    async def add(a: int, b: int) -> int:
        "Add two integers."
        return a + b

    model = OpenAIChatCompletionsModel("fake-model", openai_client=client)
    agent = Agent(name="bench", instructions=SYSTEM, tools=[add], model=model)
    streamed = args["wire"] == "sse"

    async def turn():
        if streamed:
            result = Runner.run_streamed(agent, PROMPT)
            async for _ in result.stream_events():
                pass
        else:
            result = await Runner.run(agent, PROMPT)
        assert result.final_output == ANSWER, result.final_output

    names = ("openai-agents", "openai", "httpx2")
    return turn, {n: importlib.metadata.version(n) for n in names}
"""

CONSTANTS = f"SYSTEM = {SYSTEM!r}\nPROMPT = {PROMPT!r}\nANSWER = {ANSWER!r}\n"
